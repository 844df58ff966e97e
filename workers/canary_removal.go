package workers

import (
	"context"
	"fmt"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// checkRemovedPorts is the canary of a removal, the inverse of the attachment's: the new
// Machine's server has no port on the networks taken off its set. The Machine's providerSpec is
// its template's copy and tells nothing; Neutron says what the server really got.
func (c *Canary) checkRemovedPorts(ctx context.Context, v rollout.Verdict, f rollout.Facts) (rollout.Verdict, error) {
	switch {
	case len(f.RemovedNetworks) == 0:
		return v, nil
	case f.ServerID == "":
		v.Checked = append(v.Checked, "no port on the removed networks not checked (the Machine has no providerID)")
		return v, nil
	}
	ports, err := c.Cloud.ServerPorts(ctx, f.ServerID)
	if err != nil {
		return v, fmt.Errorf("reading the ports of server %s: %w", f.ServerID, err)
	}
	var left []string
	for _, p := range ports {
		if attach.ContainsID(f.RemovedNetworks, p.NetworkID) {
			left = append(left, fmt.Sprintf("port %s on network %s", p.ID, p.NetworkID))
		}
	}
	if len(left) > 0 {
		v.Problems = append(v.Problems, fmt.Sprintf("Machine %s, made after the removal, still has %s: its template still gives it a port there (another entry on that network?)", f.Machine, strings.Join(left, ", ")))
		return v, nil
	}
	v.Checked = append(v.Checked, "no port on the removed networks")
	return v, nil
}
