package controllers

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// zonesRanking is what discovery sees on a cloud of two zones: az1's shares exported on
// storage-az1 (172.18.1.0/24) and storage-az1-fast (172.18.3.0/24), az2's on storage-az2
// (172.18.2.0/24); the decoy 192.168.50.0/24 exports nothing.
func zonesRanking() *openstack.Ranking {
	cand := func(id, name, cidr string, zones ...string) openstack.Candidate {
		p := netip.MustParsePrefix(cidr)
		return openstack.Candidate{Network: openstack.Network{ID: id, Name: name}, Score: 100, Confidence: openstack.ConfidenceHigh, Zones: zones,
			Exports: []openstack.NetworkExport{{Address: p.Addr().Next().Next(), CIDR: p, Shares: 1, Preferred: true}}}
	}
	az1, az1fast, az2 := cand("n1", "storage-az1", "172.18.1.0/24", "az1"), cand("n3", "storage-az1-fast", "172.18.3.0/24", "az1"), cand("n2", "storage-az2", "172.18.2.0/24", "az2")
	return &openstack.Ranking{
		Candidates: []openstack.Candidate{az1, az2, az1fast},
		Zones: []openstack.ZoneRanking{
			{Zone: "az1", Ranking: openstack.Ranking{Candidates: []openstack.Candidate{az1, az1fast}}},
			{Zone: "az2", Ranking: openstack.Ranking{Candidates: []openstack.Candidate{az2}}},
		},
	}
}

func TestStorageNetworksOfZones(t *testing.T) {
	s := &storageNetworks{at: time.Now(), ranking: zonesRanking()}
	if id, _, why := s.network(); id != "" || !strings.Contains(why, "per availability zone") {
		t.Fatalf("network: %q, %q; want none, per zone", id, why)
	}
	if got := strings.Join(s.networkIDs(), ","); got != "n1,n3,n2" {
		t.Errorf("networkIDs %q, want every zone's", got)
	}
	if got := shareclient.Join(s.exportSubnets()); got != "172.18.1.0/24, 172.18.3.0/24, 172.18.2.0/24" {
		t.Errorf("exportSubnets %q", got)
	}
	// One CIDR for the driver: the three export subnets' covering holds no other export.
	if got := s.exportSubnet(); got != "172.18.0.0/22" {
		t.Errorf("exportSubnet %q, want 172.18.0.0/22", got)
	}
	withOther := zonesRanking()
	withOther.Candidates = append(withOther.Candidates, openstack.Candidate{Network: openstack.Network{ID: "n9", Name: "other"},
		Exports: []openstack.NetworkExport{{Address: netip.MustParseAddr("172.18.0.9"), CIDR: netip.MustParsePrefix("172.18.0.0/24")}}})
	if got := (&storageNetworks{at: time.Now(), ranking: withOther}).exportSubnet(); got != "" {
		t.Errorf("exportSubnet with another network's export in the covering: %q, want none", got)
	}
	if given := (&storageNetworks{given: "n2", at: time.Now(), ranking: zonesRanking()}); given.zones() != nil || strings.Join(given.networkIDs(), ",") != "n2" {
		t.Errorf("--storage-network: zones %v, networkIDs %v; want none, the one given", given.zones(), given.networkIDs())
	}
}

func TestZonesVerdict(t *testing.T) {
	zones := (&storageNetworks{at: time.Now(), ranking: zonesRanking()}).zones()
	ms := machineSetOn
	status, _, msg, n := zonesVerdict([]*unstructured.Unstructured{ms("w-az1", "az1", "n1", "n3"), ms("w-az2", "az2", "n2")}, zones)
	if status != operatorv1.ConditionTrue || n != 0 || !strings.Contains(msg, "w-az1 (az1), w-az2 (az2)") {
		t.Errorf("each set on its zone's networks: %s %q (%d)", status, msg, n)
	}
	status, reason, msg, n := zonesVerdict([]*unstructured.Unstructured{
		ms("w-az1", "az1", "n1"), ms("w-az2", "az2", "n1"), ms("w-none", ""), ms("w-az3", "az3", "n2"),
	}, zones)
	if status != operatorv1.ConditionFalse || reason != "MachineSetsNotAttached" || n != 4 {
		t.Fatalf("%s %s (%d): %q", status, reason, n, msg)
	}
	for _, want := range []string{
		`MachineSet w-az1 (zone az1) does not attach "storage-az1-fast" (n3)`,
		`MachineSet w-az2 (zone az2) does not attach "storage-az2" (n2)`,
		"MachineSet w-none names no availability zone",
		"MachineSet w-az3 makes its machines in availability zone az3, where Manila exports no share",
		"machinesets patch --discover --rollout",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("%q does not say %q", msg, want)
		}
	}
}

// machineSetOn is a MachineSet whose providerSpec attaches nets (by uuid), in zone ("": none).
func machineSetOn(name, zone string, nets ...string) *unstructured.Unstructured {
	var entries []any
	for _, n := range nets {
		entries = append(entries, map[string]any{"uuid": n})
	}
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetName(name)
	_ = unstructured.SetNestedSlice(u.Object, entries, "spec", "template", "spec", "providerSpec", "value", "networks")
	if zone != "" {
		_ = unstructured.SetNestedField(u.Object, zone, "spec", "template", "spec", "providerSpec", "value", "availabilityZone")
	}
	return u
}
