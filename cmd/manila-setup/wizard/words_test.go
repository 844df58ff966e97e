package wizard

import (
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/workers"
)

// TestTitleAndHelp: the words of the screens for each mix of kinds offered.
func TestTitleAndHelp(t *testing.T) {
	for _, c := range []struct {
		kinds                 workers.Kinds
		title                 string
		sets, review, applied string // the start of what each screen's help adds
	}{
		{workers.Kinds{}, "", "", "", ""},
		{workers.Kinds{MachineSets: true}, "MachineSets", "", "", ""},
		{workers.Kinds{MachineSets: true, ClusterAPI: true}, "MachineSets, Cluster API", " Cluster API MachineSets and MachineDeployments get", "", " Cluster API MachineSets are rolled"},
		{workers.Kinds{NodePools: true}, "NodePools", " NodePools (HyperShift) get", " A NodePool's additional port", " NodePools are patched only"},
		{workers.Kinds{MachineSets: true, ClusterAPI: true, NodePools: true}, "MachineSets, Cluster API, NodePools", " Cluster API MachineSets and MachineDeployments get", " A NodePool's additional port", " Cluster API MachineSets are rolled"},
	} {
		if got := offeredTitle(c.kinds); got != c.title {
			t.Errorf("%+v: title %q, want %q", c.kinds, got, c.title)
		}
		for step, want := range map[stepID]string{stepSets: c.sets, stepReview: c.review, stepApply: c.applied, stepNetwork: ""} {
			got := kindsHelp(c.kinds, step)
			if want == "" && got != "" || !strings.HasPrefix(got, want) {
				t.Errorf("%+v, screen %d: %q, want it to start with %q", c.kinds, step, got, want)
			}
		}
	}
	// Both kinds: Cluster API's sentence, then the NodePools'.
	both := kindsHelp(workers.Kinds{ClusterAPI: true, NodePools: true}, stepApply)
	if !strings.HasSuffix(both, " NodePools are patched only: HyperShift rolls the change out itself, as each NodePool's spec.management.upgradeType says.") ||
		!strings.HasPrefix(both, " Cluster API MachineSets are rolled as MachineSets are") {
		t.Errorf("help of both kinds: %q", both)
	}
}

// TestLegend: what the sets screen explains under each kind's list, by what the list holds.
func TestLegend(t *testing.T) {
	row := workers.Row{Section: workers.SectionMachineSets, Name: "w-0"}
	via := row
	via.Mark = "via CAPI"
	for _, c := range []struct {
		name string
		sec  workers.Section
		want []string // the start of each line
	}{
		{"MachineSets among other kinds, none", workers.Section{ID: workers.SectionMachineSets}, nil},
		{"MachineSets alone, none", workers.Section{ID: workers.SectionMachineSets, EmptyWarns: true}, []string{"MACHINES: "}},
		{"MachineSets", workers.Section{ID: workers.SectionMachineSets, Rows: []workers.Row{row}}, []string{"MACHINES: "}},
		{"a MachineSet via CAPI", workers.Section{ID: workers.SectionMachineSets, Rows: []workers.Row{row, via}}, []string{"MACHINES: ", "via CAPI: Cluster API is authoritative"}},
		{"Cluster API", workers.Section{ID: workers.SectionClusterAPI}, []string{"Cluster API sets get a new template"}},
		{"no NodePools", workers.Section{ID: workers.SectionNodePools}, nil},
		{"NodePools", workers.Section{ID: workers.SectionNodePools, Rows: []workers.Row{{Section: workers.SectionNodePools}}}, []string{"NodePools get a port"}},
	} {
		got := legend(c.sec)
		ok := len(got) == len(c.want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], c.want[i])
		}
		if !ok {
			t.Errorf("%s: legend %q, want lines starting %q", c.name, got, c.want)
		}
	}
}
