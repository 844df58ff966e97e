package attach

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

func fitSubnet(name, cidr string) openstack.Subnet {
	return openstack.Subnet{ID: name + "-id", Name: name, CIDR: netip.MustParsePrefix(cidr), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"}}
}

func findingIDs(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, f.Severity+":"+f.ID)
	}
	return out
}

func TestFitness(t *testing.T) {
	off := false
	on := true
	good := openstack.Network{ID: "n-id", Name: "storage", Subnets: []openstack.Subnet{fitSubnet("s", "10.0.0.0/24")}}
	with := func(f func(n *openstack.Network)) openstack.Network {
		n := good
		n.Subnets = slices.Clone(good.Subnets)
		f(&n)
		return n
	}
	for _, tt := range []struct {
		name string
		n    openstack.Network
		opts FitnessOptions
		want []string
		fix  string
	}{
		{"fit: no gateway, DNS 0.0.0.0, DHCP on", good, FitnessOptions{}, nil, ""},
		{"port security on, groups asked", with(func(n *openstack.Network) { n.PortSecurity = &on }), FitnessOptions{SecurityGroups: true}, nil, ""},
		{"DHCP off everywhere", with(func(n *openstack.Network) { n.Subnets[0].DHCP = false }), FitnessOptions{}, []string{"error:dhcp-off"}, "openstack subnet set --dhcp s"},
		{"DHCP off on one of two", with(func(n *openstack.Network) {
			n.Subnets[0].DHCP = false
			n.Subnets = append(n.Subnets, fitSubnet("s2", "10.0.1.0/24"))
		}), FitnessOptions{}, nil, ""},
		{"port security off, groups asked", with(func(n *openstack.Network) { n.PortSecurity = &off }), FitnessOptions{SecurityGroups: true}, []string{"error:port-security-off"}, "without --security-group"},
		{"port security off, no groups", with(func(n *openstack.Network) { n.PortSecurity = &off }), FitnessOptions{}, nil, ""},
		{"gateway", with(func(n *openstack.Network) { n.Subnets[0].Gateway = netip.MustParseAddr("10.0.0.1") }), FitnessOptions{}, []string{"warning:default-route"}, "openstack subnet set --gateway none s"},
		{"default host route", with(func(n *openstack.Network) {
			n.Subnets[0].HostRoutes = []openstack.Route{{Destination: netip.MustParsePrefix("0.0.0.0/0"), NextHop: netip.MustParseAddr("10.0.0.254")}}
		}), FitnessOptions{}, []string{"warning:default-route"}, "openstack subnet unset --host-route destination=0.0.0.0/0,gateway=10.0.0.254 s"},
		{"narrow host route", with(func(n *openstack.Network) {
			n.Subnets[0].HostRoutes = []openstack.Route{{Destination: netip.MustParsePrefix("172.16.0.0/24"), NextHop: netip.MustParseAddr("10.0.0.254")}}
		}), FitnessOptions{}, nil, ""},
		{"DNS announced by the DHCP server", with(func(n *openstack.Network) { n.Subnets[0].DNS = nil }), FitnessOptions{}, []string{"warning:dns-announced"}, "--dns-nameserver 0.0.0.0 s"},
		{"real DNS servers", with(func(n *openstack.Network) { n.Subnets[0].DNS = []string{"8.8.8.8"} }), FitnessOptions{}, []string{"warning:dns-announced"}, ""},
		{"gateway and DNS on a DHCP-less subnet say nothing more", with(func(n *openstack.Network) {
			n.Subnets[0].DHCP, n.Subnets[0].Gateway, n.Subnets[0].DNS = false, netip.MustParseAddr("10.0.0.1"), nil
		}), FitnessOptions{}, []string{"error:dhcp-off"}, ""},
		{"overlaps the machine network", good, FitnessOptions{MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}, []string{"error:overlap"}, ""},
		{"holds a VIP", good, FitnessOptions{VIPs: []netip.Addr{netip.MustParseAddr("10.196.0.5"), netip.MustParseAddr("10.0.0.7")}}, []string{"error:vip-in-subnet"}, "do not hold the API and ingress VIPs"},
		{"a VIP of another family", good, FitnessOptions{VIPs: []netip.Addr{netip.MustParseAddr("fd00::7")}}, nil, ""},
		{"a VIP on a DHCP-less subnet still counts", with(func(n *openstack.Network) {
			n.Subnets[0].DHCP = false
			n.Subnets = append(n.Subnets, fitSubnet("s2", "10.0.1.0/24"))
		}), FitnessOptions{VIPs: []netip.Addr{netip.MustParseAddr("10.0.0.7")}}, []string{"error:vip-in-subnet"}, ""},
		{"IPv6 without router advertisements", with(func(n *openstack.Network) {
			n.Subnets = append(n.Subnets, openstack.Subnet{ID: "v6", CIDR: netip.MustParsePrefix("fd00::/64"), IPVersion: 6, DHCP: true, DNS: []string{"0.0.0.0"}})
		}), FitnessOptions{}, []string{"warning:ipv6-no-ra"}, ""},
		{"IPv6 addresses from stateful DHCPv6 only", with(func(n *openstack.Network) {
			n.Subnets = append(n.Subnets, openstack.Subnet{ID: "v6", CIDR: netip.MustParsePrefix("fd00::/64"), IPVersion: 6, DHCP: true, DNS: []string{"0.0.0.0"},
				IPv6RAMode: "dhcpv6-stateful", IPv6AddressMode: "dhcpv6-stateful"})
		}), FitnessOptions{}, []string{"warning:ipv6-dhcpv6-stateful"}, "ip=dhcp,dhcpv6"},
		{"IPv6 with SLAAC says nothing", with(func(n *openstack.Network) {
			n.Subnets = append(n.Subnets, openstack.Subnet{ID: "v6", CIDR: netip.MustParsePrefix("fd00::/64"), IPVersion: 6, DHCP: true, DNS: []string{"0.0.0.0"},
				IPv6RAMode: "slaac", IPv6AddressMode: "slaac"})
		}), FitnessOptions{}, nil, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := Fitness(tt.n, tt.opts)
			if !slices.Equal(findingIDs(got), tt.want) {
				t.Fatalf("findings %v, want %v (%v)", findingIDs(got), tt.want, got)
			}
			for _, f := range got {
				if f.Network != "storage (n-id)" || f.Message == "" {
					t.Errorf("finding does not name the network or say what is wrong: %+v", f)
				}
			}
			if tt.fix != "" && !strings.Contains(got[0].Fix, tt.fix) {
				t.Errorf("fix %q, want it to hold %q", got[0].Fix, tt.fix)
			}
		})
	}
}

// TestFitnessSources: the messages say where a machine network or a VIP was read, when told.
func TestFitnessSources(t *testing.T) {
	n := openstack.Network{ID: "n-id", Name: "storage", Subnets: []openstack.Subnet{fitSubnet("s", "10.0.0.0/24")}}
	opts := FitnessOptions{
		MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("10.0.0.0/14")},
		VIPs:            []netip.Addr{netip.MustParseAddr("10.0.0.5")},
		Sources:         map[string]string{"10.0.0.0/16": "networking.machineNetwork[0].cidr", "10.0.0.5": "platform.openstack.apiVIPs[0]"},
	}
	var got []string
	for _, f := range Fitness(n, opts) {
		got = append(got, f.ID+": "+f.Message)
	}
	want := []string{
		"overlap: its range 10.0.0.0/24 overlaps the cluster's network 10.0.0.0/16 (networking.machineNetwork[0].cidr): the nodes would route part of the cluster's traffic to the storage network",
		"overlap: its range 10.0.0.0/24 overlaps the cluster's network 10.0.0.0/14: the nodes would route part of the cluster's traffic to the storage network",
		"vip-in-subnet: its range 10.0.0.0/24 holds the VIP 10.0.0.5 (platform.openstack.apiVIPs[0]): OpenShift's node-IP selection takes the interface whose subnet holds a VIP, so the nodes would take their InternalIP from the storage network (logs, exec and the node's br-ex move)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("findings\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestResolveAppliesFitness: a network Manila exports on is still refused when its machines
// would get no address, said with a warning when it hands out a default route, and --force
// attaches it while saying so.
func TestResolveAppliesFitness(t *testing.T) {
	storage := openstack.Network{ID: "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", Name: "storage", Subnets: []openstack.Subnet{fitSubnet("storage-subnet", "10.0.0.0/24")}}
	discovery := func(n openstack.Network) *openstack.Discovery {
		return &openstack.Discovery{Networks: []openstack.Network{n},
			Ranking: openstack.Ranking{Candidates: []openstack.Candidate{{Network: n, Exports: []openstack.NetworkExport{{Address: netip.MustParseAddr("10.0.0.10")}}}}}}
	}
	got, err := Resolve(discovery(storage), "demo", []string{storage.ID}, NetworkPolicy{})
	if err != nil || len(got.Warnings) != 0 {
		t.Fatalf("a fit network: %v, warnings %v", err, got.Warnings)
	}

	gateway := storage
	gateway.Subnets = []openstack.Subnet{fitSubnet("storage-subnet", "10.0.0.0/24")}
	gateway.Subnets[0].Gateway = netip.MustParseAddr("10.0.0.1")
	got, err = Resolve(discovery(gateway), "demo", []string{storage.ID}, NetworkPolicy{})
	if err != nil || len(got.Warnings) != 1 || got.Warnings[0].Finding.ID != FindingDefaultRoute || !strings.Contains(got.Warnings[0].Problem, "--gateway none storage-subnet") {
		t.Fatalf("a gateway: %v, warnings %+v", err, got.Warnings)
	}

	noDHCP := storage
	noDHCP.Subnets = []openstack.Subnet{fitSubnet("storage-subnet", "10.0.0.0/24")}
	noDHCP.Subnets[0].DHCP = false
	_, err = Resolve(discovery(noDHCP), "demo", []string{storage.ID}, NetworkPolicy{})
	var refused *NetworkPolicyError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Finding.ID != FindingDHCPOff {
		t.Fatalf("DHCP off: %v", err)
	}
	got, err = Resolve(discovery(noDHCP), "demo", []string{storage.ID}, NetworkPolicy{Force: true})
	if err != nil || len(got.Forced) != 1 || got.IDs[0] != storage.ID {
		t.Fatalf("DHCP off, forced: %v, %+v", err, got)
	}
}

// TestResolveDiscoverOnSeveralZones: on a cloud whose zones are served by different storage
// networks, --discover picks none, since one network for every machine would leave the
// workers of another zone with a port that leads nowhere; the error names each zone's.
func TestResolveDiscoverOnSeveralZones(t *testing.T) {
	az1 := openstack.Network{ID: "11111111-2a4d-4c1e-9b8a-0d6e1f2a3b4c", Name: "storage-az1", Subnets: []openstack.Subnet{fitSubnet("s1", "172.18.1.0/24")}}
	az2 := openstack.Network{ID: "22222222-2a4d-4c1e-9b8a-0d6e1f2a3b4c", Name: "storage-az2", Subnets: []openstack.Subnet{fitSubnet("s2", "172.18.2.0/24")}}
	cand := func(n openstack.Network, zone string, shares int) openstack.Candidate {
		return openstack.Candidate{Network: n, Confidence: openstack.ConfidenceHigh, Score: 100 * shares, Shares: shares, Zones: []string{zone}}
	}
	d := &openstack.Discovery{Networks: []openstack.Network{az1, az2}, Ranking: openstack.Ranking{
		// All the evidence at once favours az2's network (two shares to one).
		Candidates: []openstack.Candidate{cand(az2, "az2", 2), cand(az1, "az1", 1)},
		Zones: []openstack.ZoneRanking{
			{Zone: "az1", Ranking: openstack.Ranking{Candidates: []openstack.Candidate{cand(az1, "az1", 1)}}},
			{Zone: "az2", Ranking: openstack.Ranking{Candidates: []openstack.Candidate{cand(az2, "az2", 2)}}},
		}}}
	got, err := Resolve(d, "demo", nil, NetworkPolicy{Discover: true, Force: true})
	var none *NoStorageNetworkError
	if !errors.As(err, &none) || len(got.IDs) != 0 {
		t.Fatalf("--discover on two zones: %v, networks %v; want no network", err, got.IDs)
	}
	for _, want := range []string{`az1: "storage-az1"`, `az2: "storage-az2"`, "one zone at a time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}

// TestZoneProblems: a row of a zone a network serves no share in is a problem; a row of its
// zone, a row with no zone and a network with no zones known are not.
func TestZoneProblems(t *testing.T) {
	n := Networks{IDs: []string{"aaaaaaaa-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "bbbbbbbb-2a4d-4c1e-9b8a-0d6e1f2a3b4c"},
		Zones: map[string][]string{"aaaaaaaa-2a4d-4c1e-9b8a-0d6e1f2a3b4c": {"az1"}}}
	rows := []Result{
		{Kind: "MachineSet", Name: "w-az1", Zone: "az1", AddedNetworks: n.IDs},
		{Kind: "MachineSet", Name: "w-az2", Zone: "az2", AddedNetworks: n.IDs},
		{Kind: "MachineSet", Name: "w-none", AddedNetworks: n.IDs},
	}
	got := n.ZoneProblems(rows)
	if len(got) != 1 || got[0].Index != 0 || !strings.Contains(got[0].Problem, "MachineSet w-az2 makes its machines in availability zone az2") ||
		!strings.Contains(got[0].Problem, "for az1 only") {
		t.Fatalf("problems %+v, want w-az2 on the first network only", got)
	}
}
