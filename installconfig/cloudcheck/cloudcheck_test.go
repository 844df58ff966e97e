package cloudcheck

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

func TestOverlaps(t *testing.T) {
	ref := installconfig.IDRef{Kind: installconfig.Networks, ID: "d65e53a1-a189-436d-9fac-887318eaf064",
		Field: "compute[0].platform.openstack.additionalNetworkIDs[0]", Line: 7, Column: 9}
	net := openstack.Network{ID: ref.ID, Name: "storage", Subnets: []openstack.Subnet{
		{Name: "v4", CIDR: netip.MustParsePrefix("172.16.32.0/24")},
		{Name: "v6", CIDR: netip.MustParsePrefix("fd00:5:6::/64")},
	}}
	tests := []struct {
		name    string
		machine []installconfig.CIDRRef
		want    []string // one substring per expected problem
	}{
		{"apart", []installconfig.CIDRRef{{CIDR: "10.196.0.0/16", Field: "networking.machineNetwork[0].cidr"}}, nil},
		{"inside a wider machine network", []installconfig.CIDRRef{{CIDR: "172.16.0.0/12", Field: "networking.machineNetwork[0].cidr"}},
			[]string{`subnet "v4" 172.16.32.0/24 of network "storage" (d65e53a1-a189-436d-9fac-887318eaf064) overlaps the machine network 172.16.0.0/12 (networking.machineNetwork[0].cidr)`}},
		{"the installer's default", []installconfig.CIDRRef{{CIDR: "172.16.32.128/25", Field: "networking.machineNetwork", Default: true}},
			[]string{"(the installer's default, as networking.machineNetwork is not set)"}},
		{"IPv6 against IPv6 only", []installconfig.CIDRRef{
			{CIDR: "fd00:5::/32", Field: "networking.machineNetwork[0].cidr"},
			{CIDR: "10.0.0.0/8", Field: "networking.machineNetwork[1].cidr"},
		}, []string{`subnet "v6" fd00:5:6::/64`}},
		{"malformed CIDR left to the installer", []installconfig.CIDRRef{{CIDR: "172.16.32.0/99", Field: "networking.machineNetwork[0].cidr"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := overlaps(ref, net, tt.machine)
			if len(ps) != len(tt.want) {
				t.Fatalf("%d problems, want %d: %v", len(ps), len(tt.want), ps)
			}
			for i, p := range ps {
				if !strings.Contains(p.Text("ic.yaml"), tt.want[i]) || p.Field != ref.Field || p.Line != 7 ||
					p.Rule() != RuleMachineNetworkOverlap || p.Severity != installconfig.SeverityError {
					t.Errorf("problem %d: %s (line %d, rule %s), want %q", i, p.Text("ic.yaml"), p.Line, p.Rule(), tt.want[i])
				}
			}
		})
	}
}
