package machinectl

import (
	"net/netip"
	"slices"
	"testing"
)

func TestNodeIPFollowsTheConsumersRule(t *testing.T) {
	primary := NIC{Network: "ostest-8x2kq-openshift", Addr: netip.MustParseAddr("10.196.1.10"), Subnet: netip.MustParsePrefix("10.196.0.0/16"), DefaultRoute: true}
	withGateway := NIC{Network: "manila-storage", Addr: netip.MustParseAddr("10.0.0.20"), Subnet: netip.MustParsePrefix("10.0.0.0/24"), DefaultRoute: true}
	noGateway := withGateway
	noGateway.DefaultRoute = false
	noDHCP := withGateway
	noDHCP.NoDHCP = true
	vipOnLink := []netip.Addr{netip.MustParseAddr("10.196.0.5")}
	vipElsewhere := []netip.Addr{netip.MustParseAddr("192.0.2.5")}
	for _, c := range []struct {
		name string
		rule NodeIPRule
		nics []NIC
		want netip.Addr
	}{
		{"VIPs on the machine network", NodeIPRule{VIPs: vipOnLink, StorageRouteFirst: true}, []NIC{primary, withGateway}, primary.Addr},
		{"hint in the storage subnet", NodeIPRule{VIPs: vipOnLink, Hint: netip.MustParseAddr("10.0.0.1")}, []NIC{primary, withGateway}, withGateway.Addr},
		{"VIPs off-link, storage route first", NodeIPRule{VIPs: vipElsewhere, StorageRouteFirst: true}, []NIC{primary, withGateway}, withGateway.Addr},
		{"VIPs off-link, storage subnet without gateway", NodeIPRule{VIPs: vipElsewhere, StorageRouteFirst: true}, []NIC{primary, noGateway}, primary.Addr},
		{"VIPs off-link, primary route first", NodeIPRule{VIPs: vipElsewhere}, []NIC{primary, withGateway}, primary.Addr},
		{"a NIC without DHCP has no address", NodeIPRule{Hint: netip.MustParseAddr("10.0.0.1")}, []NIC{primary, noDHCP}, primary.Addr},
	} {
		if got := c.rule.NodeIP(c.nics); got != c.want {
			t.Errorf("%s: node IP %s, want %s", c.name, got, c.want)
		}
	}
	// Nova lists the addresses by network name: here the storage one first.
	if got := MachineAddresses([]NIC{primary, withGateway}); !slices.Equal(got, []netip.Addr{withGateway.Addr, primary.Addr}) {
		t.Errorf("machine addresses %v", got)
	}
	if got := NodeAddresses(withGateway.Addr, []netip.Addr{withGateway.Addr, primary.Addr}); !slices.Equal(got, []netip.Addr{withGateway.Addr, primary.Addr}) {
		t.Errorf("node addresses %v", got)
	}
}
