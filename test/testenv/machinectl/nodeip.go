package machinectl

import (
	"net/netip"
	"slices"
	"strings"
)

// What a booted machine with a storage NIC looks like, modeled from the consumers' code
// (../shared/reference/second-nic.md), because a kwok node has no network of its own:
//   - the Machine API's OpenStack provider reports every fixed IP of the server as an
//     InternalIP, networks in lexical order of their names (compute/instance_types.go);
//   - the node IP is chosen by OpenShift's on-prem nodeip-configuration (baremetal-runtimecfg
//     `node-ip`): first the interface whose on-link subnet holds NODEIP_HINT or a VIP; only if
//     none does, the interface with the lowest-metric default route;
//   - a NIC gets a default route from DHCP when its subnet has a gateway or a 0.0.0.0/0 host
//     route.

// NIC is one interface of a simulated server after DHCP.
type NIC struct {
	// Network is the name of the network (Nova lists a server's addresses by it).
	Network string
	Addr    netip.Addr
	// Subnet is the on-link prefix of Addr.
	Subnet netip.Prefix
	// DefaultRoute: DHCP handed out a default route on this NIC.
	DefaultRoute bool
	// NoDHCP: the subnet has DHCP off, so the machine never configures Addr (Nova still lists
	// it among the server's addresses).
	NoDHCP bool
}

// NodeIPRule is what nodeip-configuration is given, and how the NICs' default routes rank.
type NodeIPRule struct {
	// VIPs are the cluster's API and ingress VIPs.
	VIPs []netip.Addr
	// Hint is NODEIP_HINT, when set.
	Hint netip.Addr
	// StorageRouteFirst: the storage NICs' default routes have a lower metric than the primary
	// NIC's. NetworkManager numbers the routes of same-type devices in the order they come up,
	// so which NIC wins is decided at boot; the default (false) is the primary NIC first.
	StorageRouteFirst bool
}

// NodeIP is the address the node registers with: nics[0] is the primary NIC, the others the
// storage NICs in the order they were attached.
func (r NodeIPRule) NodeIP(nics []NIC) netip.Addr {
	var wanted []netip.Addr
	if r.Hint.IsValid() {
		wanted = append(wanted, r.Hint)
	}
	wanted = append(wanted, r.VIPs...)
	nics = slices.DeleteFunc(slices.Clone(nics), func(n NIC) bool { return n.NoDHCP })
	for _, want := range wanted {
		for _, n := range nics {
			if n.Subnet.Contains(want) {
				return n.Addr
			}
		}
	}
	ranked := slices.Clone(nics)
	if r.StorageRouteFirst && len(ranked) > 1 {
		ranked = append(ranked[1:], ranked[0])
	}
	for _, n := range ranked {
		if n.DefaultRoute {
			return n.Addr
		}
	}
	if len(nics) > 0 {
		return nics[0].Addr
	}
	return netip.Addr{}
}

// MachineAddresses are the InternalIPs the Machine API reports for a server with these NICs:
// networks in lexical order of their names, so the first may well be a storage address.
func MachineAddresses(nics []NIC) []netip.Addr {
	sorted := slices.Clone(nics)
	slices.SortStableFunc(sorted, func(a, b NIC) int { return strings.Compare(a.Network, b.Network) })
	out := make([]netip.Addr, len(sorted))
	for i, n := range sorted {
		out[i] = n.Addr
	}
	return out
}

// NodeAddresses are a Node's InternalIPs: its node IP first (the kubelet's --node-ip), then
// the server's other addresses as the cloud provider reports them.
func NodeAddresses(nodeIP netip.Addr, machine []netip.Addr) []netip.Addr {
	out := []netip.Addr{nodeIP}
	for _, a := range machine {
		if a != nodeIP {
			out = append(out, a)
		}
	}
	return out
}
