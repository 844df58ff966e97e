package openstack

import (
	"context"
)

// ListedNetwork is a network the project can see, with what puts Manila on it.
type ListedNetwork struct {
	Network
	// Manila is the discovery's candidate for the network when Manila itself shows it exports
	// on it or places share servers on it (Candidate.HasEvidence); nil otherwise.
	Manila *Candidate
}

// NetworkList is every network the project can see, marked with the discovery.
type NetworkList struct {
	Networks []ListedNetwork
	// Unmarked says why no network is marked: Manila is not in the catalog (KindNoEndpoint),
	// so the networks are listed without the discovery. Nil when the discovery ran.
	Unmarked error
}

// ListNetworks lists the networks the project can see and marks those Manila exports on, or
// places share servers on, with the discovery; without Manila in the catalog it lists them
// unmarked and says why in Unmarked. When listing them then fails, the list holds Unmarked
// beside the error.
func (c *Client) ListNetworks(ctx context.Context) (*NetworkList, error) {
	var nets []Network
	list := &NetworkList{}
	marks := map[string]*Candidate{}
	d, err := c.Discover(ctx, DiscoverOptions{})
	switch {
	case err == nil:
		nets = d.Networks
		for i := range d.Candidates {
			if cand := &d.Candidates[i]; cand.HasEvidence() {
				marks[cand.Network.ID] = cand
			}
		}
	case KindOf(err) == KindNoEndpoint:
		list.Unmarked = err
		if nets, err = c.Networks(ctx); err != nil {
			return list, err
		}
	default:
		return nil, err
	}
	list.Networks = make([]ListedNetwork, 0, len(nets))
	for _, n := range nets {
		list.Networks = append(list.Networks, ListedNetwork{Network: n, Manila: marks[n.ID]})
	}
	return list, nil
}
