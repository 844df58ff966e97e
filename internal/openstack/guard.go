package openstack

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// NetworkProblem says why attaching the machines to network id would not let their pods reach
// Manila's shares, "" when it would. It is the one rule behind the wizard's confirmation and
// `machinesets patch`'s refusal (--force overrides both):
//   - the network is the machines' own: one of its subnets holds an address of the nodes
//     (nodeAddrs), so they are on it already and a second port there only confuses routing;
//   - no Manila export location lies in its subnets and no share network uses it, so traffic
//     to the shares would not go through it.
func (d *Discovery) NetworkProblem(id string, nodeAddrs []netip.Addr) string {
	var nw *Network
	for i := range d.Networks {
		if neutronid.Equal(d.Networks[i].ID, id) {
			nw = &d.Networks[i]
		}
	}
	if nw != nil {
		for _, s := range nw.Subnets {
			if i := slices.IndexFunc(nodeAddrs, func(a netip.Addr) bool { return s.CIDR.IsValid() && s.CIDR.Contains(a) }); i >= 0 {
				return fmt.Sprintf("network %s is the machines' own network: its subnet %s (%s) holds the node address %s; "+
					"attaching it again adds a second port on the same network and no route to the shares", nw.Label(), coalesce(s.Name, s.ID), s.CIDR, nodeAddrs[i])
			}
		}
	}
	for _, c := range d.Candidates {
		if neutronid.Equal(c.Network.ID, id) && (len(c.Exports) > 0 || len(c.ShareNetworks) > 0) {
			return ""
		}
	}
	label := id
	if nw != nil {
		label = nw.Label()
	}
	msg := fmt.Sprintf("no Manila export location lies in the subnets of network %s: pods would not reach the shares through it", label)
	if best, err := d.StorageNetwork(); err == nil {
		msg += fmt.Sprintf("; Manila exports on network %s (%s)", best.Network.Label(), strings.Join(best.Reasons, "; "))
	}
	return msg
}
