package openstack

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func egress(proto string, min, max int, prefix string) Rule {
	return Rule{Direction: "egress", EtherType: "IPv4", Protocol: proto, PortMin: min, PortMax: max, RemoteIPPrefix: prefix}
}

func TestCheckEgress(t *testing.T) {
	storage := netip.MustParseAddr("10.0.0.10")
	defaultGroup := SecurityGroup{Name: "default", Rules: []Rule{
		{Direction: "egress", EtherType: "IPv4"}, {Direction: "egress", EtherType: "IPv6"},
		{Direction: "ingress", EtherType: "IPv4", RemoteGroupID: "self"},
	}}
	blockEgress := SecurityGroup{Name: "block-egress"}
	nfsIngressOnly := SecurityGroup{Name: "nfs", Rules: []Rule{
		{Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortMin: 2049, PortMax: 2049},
		{Direction: "ingress", EtherType: "IPv4", Protocol: "tcp", PortMin: 111, PortMax: 111},
	}}
	tests := []struct {
		name        string
		groups      []SecurityGroup
		portSec     bool
		dest        netip.Addr
		proto       string
		allowed     bool
		blocked     []string
		summaryHave string
	}{
		{"default group allows everything", []SecurityGroup{defaultGroup}, true, storage, "NFS", true, nil, "allowed"},
		{"no egress rule blocks NFS", []SecurityGroup{blockEgress}, true, storage, "NFS", false, []string{"2049/tcp", "111/tcp", "111/udp"}, "would block NFS"},
		{"no egress rule blocks CephFS", []SecurityGroup{blockEgress}, true, storage, "cephfs", false, []string{"3300/tcp", "6789/tcp", "6800-7300/tcp"}, "would block CEPHFS"},
		{"groups are additive", []SecurityGroup{blockEgress, defaultGroup}, true, storage, "NFS", true, nil, "allowed"},
		{"ingress rules do not open egress", []SecurityGroup{nfsIngressOnly}, true, storage, "NFS", false, []string{"2049/tcp", "111/tcp", "111/udp"}, ""},
		{"port security off filters nothing", []SecurityGroup{blockEgress}, false, storage, "NFS", true, nil, "port security is off"},
		{"2049 alone is NFSv4", []SecurityGroup{{Name: "v4", Rules: []Rule{egress("tcp", 2049, 2049, "10.0.0.0/24")}}}, true, storage, "NFS", true, []string{"111/tcp", "111/udp"}, "NFSv3"},
		{"prefix elsewhere does not count", []SecurityGroup{{Name: "x", Rules: []Rule{egress("tcp", 2049, 2049, "192.168.0.0/16")}}}, true, storage, "NFS", false, []string{"2049/tcp", "111/tcp", "111/udp"}, ""},
		{"protocol by number", []SecurityGroup{{Name: "n", Rules: []Rule{egress("6", 0, 0, ""), egress("17", 111, 111, "")}}}, true, storage, "NFS", true, nil, ""},
		{"remote group rules do not reach storage", []SecurityGroup{{Name: "g", Rules: []Rule{{Direction: "egress", EtherType: "IPv4", RemoteGroupID: "abc"}}}}, true, storage, "NFS", false, []string{"2049/tcp", "111/tcp", "111/udp"}, ""},
		{"partial OSD range", []SecurityGroup{{Name: "ceph", Rules: []Rule{egress("tcp", 3300, 3300, ""), egress("tcp", 6789, 6789, ""), egress("tcp", 6800, 7000, ""), egress("tcp", 7100, 7300, "")}}}, true, storage, "CEPHFS", false, []string{"7001-7099/tcp"}, "7001-7099/tcp"},
		{"overlapping ranges cover", []SecurityGroup{{Name: "ceph", Rules: []Rule{egress("tcp", 3000, 6900, ""), egress("tcp", 6850, 7300, "")}}}, true, storage, "CEPHFS", true, nil, ""},
		{"IPv4 rule does not open IPv6", []SecurityGroup{{Name: "v4only", Rules: []Rule{{Direction: "egress", EtherType: "IPv4"}}}}, true, netip.MustParseAddr("fd00::10"), "NFS", false, []string{"2049/tcp", "111/tcp", "111/udp"}, ""},
		{"no destination: only anywhere counts", []SecurityGroup{{Name: "x", Rules: []Rule{egress("tcp", 2049, 2049, "10.0.0.0/24"), egress("", 0, 0, "0.0.0.0/0")}}}, true, netip.Addr{}, "NFS", true, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := CheckEgress(tt.groups, tt.portSec, tt.dest, tt.proto)
			var blocked []string
			for _, b := range v.Blocked {
				blocked = append(blocked, b.String())
			}
			if v.Allowed != tt.allowed || !slices.Equal(blocked, tt.blocked) {
				t.Errorf("allowed=%v blocked=%v, want %v %v (%s)", v.Allowed, blocked, tt.allowed, tt.blocked, v.Summary)
			}
			if !strings.Contains(v.Summary, tt.summaryHave) {
				t.Errorf("summary %q lacks %q", v.Summary, tt.summaryHave)
			}
		})
	}
}

func TestUncovered(t *testing.T) {
	need := PortRange{Protocol: "tcp", Min: 10, Max: 20}
	tests := []struct {
		open [][2]int
		want []string
	}{
		{nil, []string{"10-20/tcp"}},
		{[][2]int{{1, 65535}}, nil},
		{[][2]int{{12, 14}}, []string{"10-11/tcp", "15-20/tcp"}},
		{[][2]int{{15, 30}, {5, 12}}, []string{"13-14/tcp"}},
		{[][2]int{{21, 30}, {1, 9}}, []string{"10-20/tcp"}},
		{[][2]int{{10, 10}, {11, 19}, {20, 20}}, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, g := range uncovered(need, tt.open) {
			got = append(got, g.String())
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("uncovered(%v) = %v, want %v", tt.open, got, tt.want)
		}
	}
}
