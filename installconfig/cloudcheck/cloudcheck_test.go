package cloudcheck

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// TestFitness: each finding of attach.Fitness becomes one problem at the network's field, with
// its ID as the rule, errors as errors and warnings as warnings, and the fix the install-config
// needs where the finding's own is for a running cluster.
func TestFitness(t *testing.T) {
	ref := installconfig.IDRef{Kind: installconfig.Networks, ID: "d65e53a1-a189-436d-9fac-887318eaf064",
		Field: "compute[0].platform.openstack.additionalNetworkIDs[0]", Line: 7, Column: 9}
	fit := openstack.Subnet{ID: "s-id", Name: "v4", CIDR: netip.MustParsePrefix("172.16.32.0/24"), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"}}
	network := func(edit func(s *openstack.Subnet)) openstack.Network {
		s := fit
		if edit != nil {
			edit(&s)
		}
		return openstack.Network{ID: ref.ID, Name: "storage", Subnets: []openstack.Subnet{s}}
	}
	apart := installconfig.CloudRefs{MachineNetworks: []installconfig.CIDRRef{{CIDR: "10.196.0.0/16", Field: "networking.machineNetwork[0].cidr"}}}
	off := false
	tests := []struct {
		name string
		refs installconfig.CloudRefs
		net  openstack.Network
		want []string // severity rule: detail substring
	}{
		{"fit", apart, network(nil), nil},
		{"inside a wider machine network", installconfig.CloudRefs{MachineNetworks: []installconfig.CIDRRef{{CIDR: "172.16.0.0/12", Field: "networking.machineNetwork[0].cidr"}}},
			network(nil), []string{`error overlap: network storage (` + ref.ID + `), subnet v4 (s-id): its range 172.16.32.0/24 overlaps the cluster's network 172.16.0.0/12 (networking.machineNetwork[0].cidr): the nodes would route part of the cluster's traffic to the storage network; fix: choose networking CIDRs apart from the storage subnet`}},
		{"the installer's default service network", installconfig.CloudRefs{ServiceNetworks: []installconfig.CIDRRef{{CIDR: "172.16.32.128/25", Field: "networking.serviceNetwork", Default: true}}},
			network(nil), []string{"error overlap: ", "(the installer's default, as networking.serviceNetwork is not set)"}},
		{"a cluster network", installconfig.CloudRefs{ClusterNetworks: []installconfig.CIDRRef{{CIDR: "172.16.0.0/14", Field: "networking.clusterNetwork[1].cidr"}}},
			network(nil), []string{"error overlap: ", "172.16.0.0/14 (networking.clusterNetwork[1].cidr)"}},
		{"malformed CIDR and VIP left to the installer", installconfig.CloudRefs{MachineNetworks: []installconfig.CIDRRef{{CIDR: "172.16.32.0/99"}}, VIPs: []installconfig.VIPRef{{Address: "172.16.32.300"}}},
			network(nil), nil},
		{"a VIP inside", installconfig.CloudRefs{VIPs: []installconfig.VIPRef{{Address: "10.196.0.5", Field: "platform.openstack.apiVIPs[0]"}, {Address: "172.16.32.7", Field: "platform.openstack.ingressVIP"}}},
			network(nil), []string{"error vip-in-subnet: ", "holds the VIP 172.16.32.7 (platform.openstack.ingressVIP): ", "fix: give platform.openstack.apiVIPs and ingressVIPs addresses of the machine network"}},
		{"DHCP off", apart, network(func(s *openstack.Subnet) { s.DHCP = false }), []string{"error dhcp-off: ", "fix: openstack subnet set --dhcp v4"}},
		// The machines always get their role's security group: no pool can take such a network.
		{"port security off", apart, openstack.Network{ID: ref.ID, Name: "storage", PortSecurity: &off, Subnets: []openstack.Subnet{fit}},
			[]string{"error port-security-off: ", "fix: the installer puts each machine's own security group (<infraID>-<role>) on this port too, whatever additionalSecurityGroupIDs says: openstack network set --enable-port-security " + ref.ID + ", or attach the network after the install with `manila-setup machinesets patch`"}},
		{"as Neutron makes a subnet", apart, network(func(s *openstack.Subnet) { s.Gateway, s.DNS = netip.MustParseAddr("172.16.32.1"), nil }),
			[]string{"warning default-route: ", "fix: openstack subnet set --gateway none v4", "warning dns-announced: "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ps := fitness(ref, tt.net, fitnessOptions(tt.refs))
			var got []string
			for _, p := range ps {
				got = append(got, string(p.Severity)+" "+p.Rule()+": "+p.Detail)
				if p.Field != ref.Field || p.BadValue != ref.ID || p.Line != 7 || p.Column != 9 {
					t.Errorf("problem not at the network's field: %+v", p)
				}
			}
			all := strings.Join(got, "\n")
			for _, w := range tt.want {
				if !strings.Contains(all, w) {
					t.Errorf("problems\n%s\nlack %q", all, w)
				}
			}
			if tt.want == nil && len(ps) > 0 {
				t.Errorf("problems for a fit network:\n%s", all)
			}
		})
	}
}

// TestFitnessOptionsSources: every parsed network and VIP is judged, and named by its field.
func TestFitnessOptionsSources(t *testing.T) {
	opts := fitnessOptions(installconfig.CloudRefs{
		MachineNetworks: []installconfig.CIDRRef{{CIDR: "10.0.0.0/16", Field: "networking.machineNetwork", Default: true}},
		ClusterNetworks: []installconfig.CIDRRef{{CIDR: "10.128.0.0/14", Field: "networking.clusterNetwork[0].cidr"}},
		ServiceNetworks: []installconfig.CIDRRef{{CIDR: "172.30.0.0/16", Field: "networking.serviceNetwork[0]"}},
		VIPs:            []installconfig.VIPRef{{Address: "10.0.0.5", Field: "platform.openstack.apiVIPs[0]"}},
	})
	want := attach.FitnessOptions{
		MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16"), netip.MustParsePrefix("10.128.0.0/14"), netip.MustParsePrefix("172.30.0.0/16")},
		VIPs:            []netip.Addr{netip.MustParseAddr("10.0.0.5")},
	}
	if !slices.Equal(opts.MachineNetworks, want.MachineNetworks) || !slices.Equal(opts.VIPs, want.VIPs) || !opts.SecurityGroups ||
		opts.Sources["10.0.0.0/16"] != "the installer's default, as networking.machineNetwork is not set" ||
		opts.Sources["172.30.0.0/16"] != "networking.serviceNetwork[0]" || opts.Sources["10.0.0.5"] != "platform.openstack.apiVIPs[0]" {
		t.Errorf("options %+v", opts)
	}
}
