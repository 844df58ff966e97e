//go:build integration

package attach

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestFitnessOfRealNetworks: storage networks of every bad shape, made in the loopback Neutron
// beside a fit one (no gateway, DNS 0.0.0.0, DHCP on), read back as the CLI reads them, and
// judged: each gives exactly its finding, the fit one none.
func TestFitnessOfRealNetworks(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "ms-fitness")
	fit := map[string]any{"cidr": "10.50.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range fit {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	nets := map[string]struct {
		id   string
		opts FitnessOptions
		want []string
	}{
		"fit":           {p.CreateNetworkWith("fit", nil, fit).ID, FitnessOptions{SecurityGroups: true}, nil},
		"dhcp-off":      {p.CreateNetworkWith("dhcp-off", nil, with(map[string]any{"enable_dhcp": false})).ID, FitnessOptions{}, []string{"error:dhcp-off"}},
		"neutron-made":  {p.CreateNetworkWith("neutron-made", nil, map[string]any{"cidr": "10.51.0.0/24"}).ID, FitnessOptions{}, []string{"warning:default-route", "warning:dns-announced"}},
		"default-route": {p.CreateNetworkWith("default-route", nil, with(map[string]any{"host_routes": []map[string]any{{"destination": "0.0.0.0/0", "nexthop": "10.50.0.254"}}})).ID, FitnessOptions{}, []string{"warning:default-route"}},
		"no-port-sec":   {p.CreateNetworkWith("no-port-sec", map[string]any{"port_security_enabled": false}, fit).ID, FitnessOptions{SecurityGroups: true}, []string{"error:port-security-off"}},
		"real-dns":      {p.CreateNetworkWith("real-dns", nil, with(map[string]any{"dns_nameservers": []string{"192.0.2.53"}})).ID, FitnessOptions{}, []string{"warning:dns-announced"}},
		// The cluster's VIP and machine network lie in the subnet.
		"holds-vip": {p.CreateNetworkWith("holds-vip", nil, with(map[string]any{"cidr": "10.52.0.0/24"})).ID,
			FitnessOptions{VIPs: []netip.Addr{netip.MustParseAddr("10.196.0.5"), netip.MustParseAddr("10.52.0.5")}}, []string{"error:vip-in-subnet"}},
		"overlap": {p.CreateNetworkWith("overlap", nil, with(map[string]any{"cidr": "10.53.0.0/24"})).ID,
			FitnessOptions{MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.53.0.0/16")}}, []string{"error:overlap"}},
		// IPv6 storage subnets (Neutron takes no 0.0.0.0 DNS on them): SLAAC gives the nodes an
		// address, stateful DHCPv6 gives them none unless they ask for one.
		"v6-slaac": {p.CreateNetworkWith("v6-slaac", nil, map[string]any{"cidr": "fd00:54::/64", "ip_version": 6, "gateway_ip": nil,
			"ipv6_ra_mode": "slaac", "ipv6_address_mode": "slaac"}).ID, FitnessOptions{}, []string{"warning:dns-announced"}},
		"v6-stateful": {p.CreateNetworkWith("v6-stateful", nil, map[string]any{"cidr": "fd00:55::/64", "ip_version": 6, "gateway_ip": nil,
			"ipv6_ra_mode": "dhcpv6-stateful", "ipv6_address_mode": "dhcpv6-stateful"}).ID, FitnessOptions{}, []string{"warning:dns-announced", "warning:ipv6-dhcpv6-stateful"}},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	client, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, n := range nets {
		ids = append(ids, n.id)
	}
	read, err := client.Networks(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(nets) {
		t.Fatalf("read %d networks, want %d", len(read), len(nets))
	}
	for _, n := range read {
		tt := nets[n.Name]
		got := findingIDs(Fitness(n, tt.opts))
		if !slices.Equal(got, tt.want) {
			t.Errorf("network %s (subnets %+v, port security %v): findings %v, want %v", n.Name, n.Subnets, n.PortSecurity, got, tt.want)
		}
	}
}
