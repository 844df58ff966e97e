package openstack

import (
	"errors"
	"strings"
	"testing"
)

// inZone is export placed in an availability zone.
func inZone(e ShareExport, zone string) ShareExport {
	e.Zone = zone
	return e
}

// The zones shape of the loopback cloud: a back end per zone, each on a network of its site,
// and a second back end in az1 on a third network.
func zonedLayout() ([]Network, Evidence) {
	nets := []Network{
		net1("n-tenant", "tenant", false, "10.196.0.0/16"),
		net1("n-az1", "storage-az1", true, "172.18.1.0/24"),
		net1("n-az2", "storage-az2", true, "172.18.2.0/24"),
		net1("n-fast", "storage-az1-fast", true, "172.18.3.0/24"),
	}
	ev := Evidence{Exports: []ShareExport{
		inZone(export("s1", "172.18.1.10", true), "az1"),
		inZone(export("s2", "172.18.2.10", true), "az2"),
		inZone(export("s3", "172.18.2.10", true), "az2"),
		inZone(export("s4", "172.18.3.10", true), "az1"),
	}, SharesSeen: 4}
	return nets, ev
}

func TestRankZonesPerZone(t *testing.T) {
	nets, ev := zonedLayout()
	if got := strings.Join(ev.Zones(), ","); got != "az1,az2" {
		t.Fatalf("zones %q, want az1,az2", got)
	}
	rk := Rank(nets, ev)
	rk.Zones = RankZones(nets, ev)
	// All the evidence at once: az2's network has two shares and would win for every worker.
	if rk.Candidates[0].Network.Name != "storage-az2" {
		t.Fatalf("whole ranking %s, want storage-az2 first", names(rk.Candidates))
	}
	if got := strings.Join(rk.Candidates[0].Zones, ","); got != "az2" {
		t.Errorf("storage-az2 serves zones %q, want az2", got)
	}
	byZone := rk.ByZone()
	if len(byZone) != 2 || byZone[0].Zone != "az1" || byZone[1].Zone != "az2" {
		t.Fatalf("by zone %+v, want az1 then az2", byZone)
	}
	if got := names(byZone[0].Networks); got != "storage-az1,storage-az1-fast" {
		t.Errorf("az1 networks %q, want both of its back ends' networks", got)
	}
	if got := names(byZone[1].Networks); got != "storage-az2" {
		t.Errorf("az2 networks %q, want storage-az2 only", got)
	}
	az2, ok := rk.Zone("az2")
	if !ok || az2.Candidates[0].Network.Name != "storage-az2" || az2.Candidates[0].Shares != 2 {
		t.Errorf("zone az2's ranking %+v", az2)
	}
	if _, ok := rk.Zone("az3"); ok {
		t.Error("a zone the evidence does not name has a ranking")
	}

	// No one network is right for every worker: StorageNetwork says so and names each zone's.
	_, err := rk.StorageNetwork()
	var sne *StorageNetworkError
	if !errors.As(err, &sne) || !errors.Is(err, ErrNoStorageNetwork) || len(sne.Zones) != 2 {
		t.Fatalf("StorageNetwork on a zoned cloud: %v, want a per-zone refusal", err)
	}
	for _, want := range []string{`az1: "storage-az1" (n-az1), "storage-az1-fast" (n-fast)`, `az2: "storage-az2" (n-az2)`, "its own zone's"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
}

func TestRankZonesOneNetworkForAll(t *testing.T) {
	// Two zones exported on one network (a stretched storage network): the choice stands.
	nets := []Network{net1("n-tenant", "tenant", false, "10.196.0.0/16"), net1("n-st", "storage", true, "10.0.0.0/24")}
	ev := Evidence{Exports: []ShareExport{
		inZone(export("s1", "10.0.0.10", true), "az1"),
		inZone(export("s2", "10.0.0.10", true), "az2"),
	}}
	rk := Rank(nets, ev)
	rk.Zones = RankZones(nets, ev)
	best, err := rk.StorageNetwork()
	if err != nil || best.Network.Name != "storage" {
		t.Fatalf("StorageNetwork %v, %v; want storage", best, err)
	}
	if got := strings.Join(best.Zones, ","); got != "az1,az2" {
		t.Errorf("zones %q, want az1,az2", got)
	}
}

func TestRankZonesOneZoneIsTheWholeRanking(t *testing.T) {
	nets := []Network{net1("n-st", "storage", true, "10.0.0.0/24")}
	ev := Evidence{Exports: []ShareExport{inZone(export("s1", "10.0.0.10", true), "nova")}}
	if z := RankZones(nets, ev); z != nil {
		t.Fatalf("one zone ranked apart: %+v", z)
	}
	rk := Rank(nets, ev)
	if got, ok := rk.Zone("nova"); !ok || got != &rk {
		t.Error("the ranking of a cloud of one zone is not that zone's")
	}
}

func TestEvidenceInZoneShareNetworks(t *testing.T) {
	// A share network subnet with no zone serves every zone; one with a zone serves it only.
	ev := Evidence{ShareNetworks: []ShareNetwork{{ID: "sn", Name: "sn", Subnets: []ShareNetworkSubnet{
		{NeutronNetID: "n-any"}, {NeutronNetID: "n-b", AvailabilityZone: "b"},
	}}}}
	if got := strings.Join(ev.Zones(), ","); got != "b" {
		t.Fatalf("zones %q, want b", got)
	}
	a, b := ev.InZone("a"), ev.InZone("b")
	if len(a.ShareNetworks) != 1 || len(a.ShareNetworks[0].Subnets) != 1 || a.ShareNetworks[0].Subnets[0].NeutronNetID != "n-any" {
		t.Errorf("zone a's share networks %+v, want the zoneless subnet only", a.ShareNetworks)
	}
	if len(b.ShareNetworks) != 1 || len(b.ShareNetworks[0].Subnets) != 2 {
		t.Errorf("zone b's share networks %+v, want both subnets", b.ShareNetworks)
	}
}
