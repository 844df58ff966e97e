package storagecheck

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/operator/shareclient"
)

func TestVerdicts(t *testing.T) {
	storage := netip.MustParsePrefix("10.0.0.0/24")
	answer := shareclient.Answer{Clients: []netip.Prefix{storage}, ViaStorageNetwork: true, Reason: "the workers have a port on the storage network"}
	rules := map[string][]shareclient.AccessRule{
		"s-ok":   {{ID: "r1", Type: "ip", To: "10.0.0.0/24", Level: "rw", State: "active"}},
		"s-old":  {{ID: "r2", Type: "ip", To: "10.196.0.0/16", Level: "rw", State: "active"}},
		"s-gone": nil,
	}
	got := verdicts([]shareclient.Volume{
		{Name: "pv-c", ShareID: "s-gone"}, {Name: "pv-a", ShareID: "s-old"}, {Name: "pv-b", ShareID: "s-ok"}, {Name: "pv-d", ShareName: "by-name"},
	}, func(id string) ([]shareclient.AccessRule, error) {
		if id == "s-gone" {
			return nil, errors.New("there is no share with ID s-gone")
		}
		return rules[id], nil
	}, answer)
	var names []string
	for _, v := range got {
		names = append(names, v.Name)
	}
	if !slices.Equal(names, []string{"pv-a", "pv-b", "pv-c", "pv-d"}) {
		t.Fatalf("volumes %v, want them sorted by name", names)
	}
	if a := got[0]; a.Skipped != "" || !slices.Equal(a.Missing, []netip.Prefix{storage}) || len(a.Fix) == 0 {
		t.Errorf("the share made before the workers moved: %+v", a)
	}
	if b := got[1]; b.Skipped != "" || len(b.Missing) != 0 {
		t.Errorf("the share that admits the storage subnet: %+v", b)
	}
	if c := got[2]; c.Skipped != "its share's access rules cannot be read: there is no share with ID s-gone" || len(c.Missing) != 0 {
		t.Errorf("the share that is gone: %+v", c)
	}
	if d := got[3]; !strings.Contains(d.Skipped, "by name only") {
		t.Errorf("the volume naming its share by name: %+v", d)
	}

	r := &Report{Volumes: got}
	if n := r.VolumeFindings(); n != 1 || !r.Failed() {
		t.Errorf("VolumeFindings = %d, Failed = %v; want 1, true", n, r.Failed())
	}
	r.Volumes = got[1:]
	if r.Failed() {
		t.Errorf("Failed without findings")
	}
}
