//go:build integration

package openstack

import (
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestNetworkCapacityOnNeutron counts the free addresses of a network of a project of its own
// in the loopback Neutron: an IPv4 subnet with two allocation pools (15 addresses), ports that
// took addresses from them, a port given an address outside the pools (not counted) and one
// given an address inside; and an IPv6 SLAAC subnet, counted apart and capped.
func TestNetworkCapacityOnNeutron(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "capcount")
	n := p.CreateNetworkWith("capacity", nil,
		map[string]any{"cidr": "192.168.90.0/24", "gateway_ip": "192.168.90.1",
			"allocation_pools": []map[string]string{{"start": "192.168.90.10", "end": "192.168.90.19"}, {"start": "192.168.90.200", "end": "192.168.90.204"}}},
		map[string]any{"cidr": "fd00:90::/64", "ip_version": 6, "ipv6_address_mode": "slaac", "ipv6_ra_mode": "slaac"})
	v4 := n.SubnetIDs[0]
	for _, name := range []string{"a", "b", "c"} {
		p.CreatePort(n.ID, "capacity-"+name, "")
	}
	p.CreatePortWith(n.ID, "capacity-outside", "", map[string]any{"fixed_ips": []map[string]string{{"subnet_id": v4, "ip_address": "192.168.90.100"}}})
	p.CreatePortWith(n.ID, "capacity-inside", "", map[string]any{"fixed_ips": []map[string]string{{"subnet_id": v4, "ip_address": "192.168.90.203"}}})

	c, cnt := connect(t, &testenv.Cloud{CloudsFile: p.CloudsFile}, ostest.CloudName)
	cnt.reset()
	start := time.Now()
	got, err := c.NetworkCapacity(testContext(t, time.Minute), n.ID)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	total, requests := cnt.snapshot()
	t.Logf("NetworkCapacity: %d requests in %s\n%s", total, took.Round(time.Millisecond), requests)
	if len(got) != 2 || got[0].Subnet.ID != v4 || got[1].Subnet.IPVersion != 6 {
		t.Fatalf("subnets %+v, want the IPv4 one, then the IPv6 one", got)
	}
	if s := got[0]; s.Size != 15 || s.Used != 4 || s.Free != 11 || len(s.Pools) != 2 || s.Subnet.Name != "capacity-subnet-0" || s.Subnet.CIDR.String() != "192.168.90.0/24" {
		t.Errorf("IPv4 subnet: %+v; want 15 addresses in 2 pools, 4 in use (3 ports, 192.168.90.203; not 192.168.90.100 outside the pools), 11 free", s)
	}
	if s := got[1]; s.Size != MaxCount || s.Used < 3 || s.Free != MaxCount-s.Used {
		t.Errorf("IPv6 subnet: %+v; want the count capped at %d, at least the 3 ports without fixed IPs in use (SLAAC)", s, MaxCount)
	}
	// One list of the subnets, one of the ports per subnet.
	if total != 3 || cnt.get("GET /v2.0/subnets") != 1 || cnt.get("GET /v2.0/ports") != 2 {
		t.Errorf("%d requests, want 3:\n%s", total, requests)
	}
}
