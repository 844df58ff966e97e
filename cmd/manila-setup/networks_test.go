package main

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

func TestMarkOf(t *testing.T) {
	c := openstack.Candidate{Shares: 3, ShareNetworks: []string{"sn1"}, Exports: []openstack.NetworkExport{
		{Address: netip.MustParseAddr("10.0.0.10")}, {Address: netip.MustParseAddr("10.0.0.20")}, {Address: netip.MustParseAddr("10.0.0.30")}}}
	if got := markOf(c); got != "* exports 3 shares (10.0.0.10, 10.0.0.20, ...); share network sn1" {
		t.Errorf("markOf = %q", got)
	}
	var b strings.Builder
	if err := printNetworkRows(&b, []NetworkRow{{Name: "a", ID: "1", CIDRs: []string{}}, {Name: "b", ID: "2", CIDRs: []string{"10.0.0.0/24"}, Manila: true, mark: "* x"}}); err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.HasSuffix(line, " ") {
			t.Errorf("trailing blanks: %q", line)
		}
	}
	if !strings.Contains(b.String(), "a     1   -") || !strings.Contains(b.String(), "* x") {
		t.Errorf("rows:\n%s", b.String())
	}
}
