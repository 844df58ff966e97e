package diagnose

import (
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// twoZones: az1 is served on storage-az1 and storage-az1-fast, az2 on storage-az2.
func twoZones() zoneFacts {
	cand := func(id, name, cidr string) openstack.Candidate {
		p := netip.MustParsePrefix(cidr)
		return openstack.Candidate{Network: openstack.Network{ID: id, Name: name},
			Exports: []openstack.NetworkExport{{Address: p.Addr().Next(), CIDR: p, Shares: 1}}}
	}
	return zoneFacts{
		{Zone: "az1", Networks: []openstack.Candidate{cand("n1", "storage-az1", "172.18.1.0/24"), cand("n3", "storage-az1-fast", "172.18.3.0/24")}},
		{Zone: "az2", Networks: []openstack.Candidate{cand("n2", "storage-az2", "172.18.2.0/24")}},
	}
}

func zonedNode(name, zone string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
	if zone != "" {
		n.Labels[corev1.LabelTopologyZone] = zone
	}
	return n
}

func TestJudgeZone(t *testing.T) {
	share := &openstack.Share{ID: "s1", AvailabilityZone: "az1", ExportLocations: []openstack.ExportLocation{{Path: "172.18.1.10:/exports/s1"}}}
	if c := judgeZone(twoZones(), share, zonedNode("w1", "az1")); c.Status != Passed {
		t.Errorf("same zone: %+v", c)
	}
	c := judgeZone(twoZones(), share, zonedNode("w2", "az2"))
	if c.Status != Failed {
		t.Fatalf("other zone: %+v", c)
	}
	for _, want := range []string{"zone az2", "share is in zone az1", "172.18.1.10", `"storage-az1" (n1) (zone az1)`, "availability: az2", "nodeSelector topology.kubernetes.io/zone: az1"} {
		if !strings.Contains(c.Evidence+" "+c.Fix, want) {
			t.Errorf("other zone: %q / %q does not say %q", c.Evidence, c.Fix, want)
		}
	}
	if c := judgeZone(twoZones(), share, zonedNode("w3", "")); c.Status != NotChecked {
		t.Errorf("no zone label: %+v", c)
	}
}

func TestJudgeZonePorts(t *testing.T) {
	zones := twoZones()
	port := func(net, addr string) openstack.Port {
		return openstack.Port{ID: "p-" + net, NetworkID: net, FixedIPs: []netip.Addr{netip.MustParseAddr(addr)}}
	}
	both := []openstack.Port{port("n1", "172.18.1.101"), port("n3", "172.18.3.101")}
	if c := judgeZonePorts(zones, zonedNode("w1", "az1"), "srv", both, "MachineSet ms-az1"); c.Status != Passed {
		t.Errorf("both of az1's networks: %+v", c)
	}
	c := judgeZonePorts(zones, zonedNode("w1", "az1"), "srv", both[:1], "MachineSet ms-az1")
	if c.Status != Failed || !strings.Contains(c.Evidence, `"storage-az1-fast" (n3)`) || c.Fix != "manila-setup machinesets patch --discover --name ms-az1 --rollout" {
		t.Errorf("one of az1's two networks: %+v", c)
	}
	c = judgeZonePorts(zones, zonedNode("w2", "az2"), "srv", both[:1], "MachineSet ms-az2")
	if c.Status != Failed || !strings.Contains(c.Evidence, `leads to another zone's exports`) || !strings.Contains(c.Evidence, `"storage-az2" (n2)`) {
		t.Errorf("az2's Node on az1's network: %+v", c)
	}
	if c := judgeZonePorts(zones, zonedNode("w4", "az4"), "srv", nil, ""); c.Status != Failed || !strings.Contains(c.Evidence, "where Manila exports no share") {
		t.Errorf("a zone Manila does not serve: %+v", c)
	}
}
