package workers

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// TestAssembleShowsCopiesOnTheirMachineSet: a MachineSet Cluster API is authoritative for takes
// its copy's state, the copy is not offered again, a MachineDeployment is; without its copy the
// set says why.
func TestAssembleShowsCopiesOnTheirMachineSet(t *testing.T) {
	l := Listed{
		MachineSets: []machinesets.SetStatus{
			{Name: "w-0", Role: "worker", StorageNetwork: attach.StateMissing},
			{Name: "w-1", Role: "worker", StorageNetwork: attach.StateNA, ClusterAPI: true, Note: "Cluster API is authoritative"},
			{Name: "w-2", Role: "worker", StorageNetwork: attach.StateNA, ClusterAPI: true},
		},
		ClusterAPI: []clusterapi.Status{
			{Kind: clusterapi.KindMachineSet, Name: "w-1", Replicas: 3, Machines: 3, OnTemplate: 1, StorageNetwork: attach.StateAttached, SecurityGroups: attach.StateAttached},
			{Kind: clusterapi.KindMachineDeployment, Name: "md-0", StorageNetwork: attach.StateMissing},
		},
	}
	inv, err := Assemble(Kinds{MachineSets: true, ClusterAPI: true}, l)
	if err != nil {
		t.Fatal(err)
	}
	w1 := inv.MachineSets[1]
	if w1.StorageNetwork != attach.StateAttached || w1.UpToDate != 1 || w1.Wanted != 3 || w1.Note != "" {
		t.Errorf("w-1 does not carry its copy's state: %+v", w1)
	}
	if w2 := inv.MachineSets[2]; w2.StorageNetwork != attach.StateNA || !strings.Contains(w2.Note, "its Cluster API copy openshift-cluster-api/w-2 cannot be read") {
		t.Errorf("w-2 without a copy: %+v", w2)
	}
	if !reflect.DeepEqual(inv.MachineSets[0], l.MachineSets[0]) {
		t.Errorf("w-0 changed: %+v", inv.MachineSets[0])
	}
	if len(inv.ClusterAPI) != 1 || inv.ClusterAPI[0].Name != "md-0" {
		t.Errorf("Cluster API objects offered on their own: %+v, want md-0 only", inv.ClusterAPI)
	}
}

// TestAssembleNotesWhatCannotBeRead: a kind beside the MachineSets that cannot be read is a note;
// the MachineSets, or the only kind asked for, cannot be left out.
func TestAssembleNotesWhatCannotBeRead(t *testing.T) {
	refused := errors.New("forbidden")
	sets := []machinesets.SetStatus{{Name: "w-0"}}
	inv, err := Assemble(Kinds{MachineSets: true, ClusterAPI: true, NodePools: true},
		Listed{MachineSets: sets, ClusterAPIErr: refused, NodePoolsErr: refused})
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.MachineSets) != 1 || len(inv.Notes) != 2 || !strings.Contains(inv.Notes[0], "Cluster API objects of openshift-cluster-api could not be read") ||
		!strings.Contains(inv.Notes[1], "the NodePools could not be read") {
		t.Errorf("inventory: %+v", inv)
	}
	for name, c := range map[string]struct {
		kinds Kinds
		l     Listed
	}{
		"MachineSets refused":       {Kinds{MachineSets: true, NodePools: true}, Listed{MachineSetsErr: refused, NodePools: []nodepools.Status{{Name: "p"}}}},
		"only NodePools, refused":   {Kinds{NodePools: true}, Listed{NodePoolsErr: refused}},
		"only Cluster API, refused": {Kinds{ClusterAPI: true}, Listed{ClusterAPIErr: refused}},
	} {
		if _, err := Assemble(c.kinds, c.l); !errors.Is(err, refused) {
			t.Errorf("%s: %v, want the read's error", name, err)
		}
	}
}
