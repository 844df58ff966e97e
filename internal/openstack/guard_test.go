package openstack

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNetworkProblem(t *testing.T) {
	sub := func(name, cidr, net string) Subnet {
		return Subnet{ID: name + "-id", Name: name, NetworkID: net, CIDR: netip.MustParsePrefix(cidr)}
	}
	storage := Network{ID: "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", Name: "storage", Subnets: []Subnet{sub("storage-subnet", "10.0.0.0/24", "s")}}
	tenant := Network{ID: "1a2b3c4d-0000-4000-8000-000000000001", Name: "tenant", Subnets: []Subnet{sub("tenant-subnet", "10.196.0.0/16", "t")}}
	decoy := Network{ID: "1a2b3c4d-0000-4000-8000-000000000002", Name: "decoy", Subnets: []Subnet{sub("decoy-subnet", "192.168.50.0/24", "d")}}
	dhss := Network{ID: "1a2b3c4d-0000-4000-8000-000000000003", Name: "share-net"}
	d := &Discovery{Networks: []Network{storage, tenant, decoy, dhss}, Ranking: Ranking{Candidates: []Candidate{
		{Network: storage, Confidence: ConfidenceHigh, Score: 105, Reasons: []string{"1 share is exported on it"},
			Exports: []NetworkExport{{Address: netip.MustParseAddr("10.0.0.10"), CIDR: netip.MustParsePrefix("10.0.0.0/24")}}},
		{Network: dhss, Confidence: ConfidenceMedium, Score: 50, ShareNetworks: []string{"sn1"}},
	}}}
	nodes := []netip.Addr{netip.MustParseAddr("10.196.3.4")}
	for _, c := range []struct {
		id   string
		want string // "" or a fragment of the problem
	}{
		{storage.ID, ""},
		{strings.ToUpper(storage.ID), ""}, // IDs compare as Neutron does
		{dhss.ID, ""},                     // a share network's network carries shares too
		{tenant.ID, `is the machines' own network: its subnet tenant-subnet (10.196.0.0/16) holds the node address 10.196.3.4`},
		{decoy.ID, `no Manila export location lies in the subnets of network "decoy"`},
		{"9d9d9d9d-0000-4000-8000-000000000009", "no Manila export location lies in the subnets of network 9d9d9d9d"},
	} {
		got := d.NetworkProblem(c.id, nodes)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.id, got, c.want)
		}
	}
	// Without the nodes' addresses only the export rule applies.
	if got := d.NetworkProblem(tenant.ID, nil); !strings.Contains(got, "no Manila export location") {
		t.Errorf("tenant without node addresses: %q", got)
	}
}
