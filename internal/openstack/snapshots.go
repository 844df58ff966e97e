package openstack

import "context"

// Snapshot is a Manila share snapshot, as far as a VolumeSnapshot's checks care.
type Snapshot struct {
	ID      string `json:"id"`
	ShareID string `json:"shareID"`
	Status  string `json:"status"`
	Size    int    `json:"size"`
}

// Snapshot reads one share snapshot. One request. A snapshot Manila does not know is an error
// of KindNotFound.
func (c *Client) Snapshot(ctx context.Context, id string) (Snapshot, error) {
	m, err := c.manilaConn(ctx)
	if err != nil {
		return Snapshot{}, err
	}
	var body struct {
		Snapshot struct {
			ID      string `json:"id"`
			ShareID string `json:"share_id"`
			Status  string `json:"status"`
			Size    int    `json:"size"`
		} `json:"snapshot"`
	}
	// No id in the call: its 404 sentence would name an openstack command for the ID that is
	// not the one for share snapshots ("openstack share snapshot show").
	if _, err := m.sc.Get(ctx, m.sc.ServiceURL("snapshots", id), &body, nil); err != nil {
		return Snapshot{}, c.explain(call{service: "Manila", what: "reading share snapshot " + id}, err)
	}
	s := body.Snapshot
	return Snapshot{ID: s.ID, ShareID: s.ShareID, Status: s.Status, Size: s.Size}, nil
}
