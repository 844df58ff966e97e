//go:build integration

package openstack

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDiscoverPerZone runs discovery on the loopback cloud of the zones shape: Manila back ends
// in az1 and az2, each exporting on a storage network of its site, and a second back end in
// az1 on a third network. A project of its own makes a share on each back end, and a second one
// in az2, so that the whole evidence favours az2's network, which would be wrong for az1.
func TestDiscoverPerZone(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "zones")
	seed := cloud.Seed
	az2 := seed.MoreStorageNetworks["storage-az2"]
	fast := seed.MoreStorageNetworks["storage-az1-fast"]
	if az2.ID == "" || fast.ID == "" || seed.StorageZone != "az1" {
		t.Fatalf("the zones cloud's seed lacks its networks: %+v", seed)
	}
	p := ostest.NewProject(t, cloud, "zones-discover")
	p.CreateSharesIn("zones-general-az1", 1, "default", "az1")
	p.CreateSharesIn("zones-fast-az1", 1, "fast", "az1")
	p.CreateSharesIn("zones-general-az2", 2, "default", "az2")

	c, _ := connect(t, cloud, ostest.CloudName, func(cfg *Config) { cfg.CloudsFile = p.CloudsFile })
	d, err := c.Discover(testContext(t, 2*time.Minute), DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	zones := d.ByZone()
	t.Logf("by zone: %s", ZoneSummary(zones))
	want := map[string][]string{"az1": {seed.Networks["storage"], fast.ID}, "az2": {az2.ID}}
	if len(zones) != 2 {
		t.Fatalf("zones %+v, want az1 and az2", zones)
	}
	for _, z := range zones {
		var got []string
		for _, c := range z.Networks {
			got = append(got, c.Network.ID)
			if !slices.Equal(c.Zones, []string{z.Zone}) {
				t.Errorf("zone %s: network %s serves zones %v, want only %s", z.Zone, c.Network.Name, c.Zones, z.Zone)
			}
		}
		slices.Sort(got)
		w := slices.Clone(want[z.Zone])
		slices.Sort(w)
		if !slices.Equal(got, w) {
			t.Errorf("zone %s: networks %v, want %v", z.Zone, got, w)
		}
	}
	rk, ok := d.Zone("az2")
	if !ok || rk.Candidates[0].Network.ID != az2.ID || rk.Candidates[0].Shares < 2 {
		t.Errorf("az2's ranking: %+v, want storage-az2 first with its two shares at least", rk)
	}
	// The whole ranking puts az2's network first: a rule taking it for every worker would leave
	// az1's workers with a port that leads nowhere. StorageNetwork refuses and names the zones.
	if d.Candidates[0].Network.ID != az2.ID {
		t.Errorf("whole ranking starts with %s, want storage-az2 (it has the most shares)", d.Candidates[0].Network.Name)
	}
	_, err = d.StorageNetwork()
	var sne *StorageNetworkError
	if !errors.As(err, &sne) || len(sne.Zones) != 2 || !strings.Contains(err.Error(), "az1: ") || !strings.Contains(err.Error(), "az2: ") {
		t.Errorf("StorageNetwork on the zones cloud: %v, want a refusal naming each zone's networks", err)
	}
}
