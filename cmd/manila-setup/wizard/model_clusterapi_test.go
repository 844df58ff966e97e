package wizard

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// newClusterAPIBackend is a cluster in the middle of OpenShift's Machine API → Cluster API
// migration: worker-1 has moved to Cluster API (its copy in openshift-cluster-api is what its
// machines follow), and openshift-cluster-api also holds a standalone MachineSet, a
// MachineDeployment with the MachineSet it made, a paused set and another provider's.
func newClusterAPIBackend() *fakeBackend {
	f := newFakeBackend()
	f.clusterAPI = true
	f.sets[3] = machinesets.SetStatus{Name: "ostest-x7k2p-worker-1", Role: "worker", Replicas: 1, Wanted: 1, ReadyReplicas: 1, StorageNetwork: attach.StateNA, SecurityGroups: attach.StateNA,
		Machines: 1, ClusterAPI: true, Note: "Cluster API is authoritative for it (status.authoritativeAPI ClusterAPI)"}
	na := attach.StateNA
	f.capi = []clusterapi.Status{
		{Kind: clusterapi.KindMachineSet, Name: "ostest-x7k2p-worker-0", Replicas: 2, Template: "ostest-x7k2p-worker-0", StorageNetwork: na, SecurityGroups: na, Note: "paused (annotation cluster.x-k8s.io/paused): ..."},
		{Kind: clusterapi.KindMachineSet, Name: "ostest-x7k2p-worker-1", Replicas: 1, Template: "ostest-x7k2p-worker-1", StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 1, OnTemplate: 1},
		{Kind: clusterapi.KindMachineSet, Name: "capi-gpu", Replicas: 1, Template: "capi-gpu-tmpl", StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 1, OnTemplate: 1},
		{Kind: clusterapi.KindMachineSet, Name: "capi-md-7f9c4", Replicas: 2, Template: "capi-md-tmpl", StorageNetwork: na, SecurityGroups: na, Note: "made by MachineDeployment capi-md", Machines: 2, OnTemplate: 2},
		{Kind: clusterapi.KindMachineSet, Name: "capi-paused", Replicas: 1, Template: "capi-paused-tmpl", StorageNetwork: na, SecurityGroups: na, Note: "paused (annotation cluster.x-k8s.io/paused): Cluster API does not act on it"},
		{Kind: clusterapi.KindMachineSet, Name: "capi-vsphere", Replicas: 1, Template: "vs-tmpl", StorageNetwork: na, SecurityGroups: na, Note: "machines made from a VSphereMachineTemplate, not an OpenStackMachineTemplate"},
		{Kind: clusterapi.KindMachineDeployment, Name: "capi-md", Replicas: 2, Template: "capi-md-tmpl", StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 2, OnTemplate: 2},
	}
	return f
}

// TestSetsOfferClusterAPI: the Machine API set Cluster API is authoritative for is selectable and
// shows its copy's state; the copies are not listed again; the Cluster API section lists the
// others, the paused, MachineDeployment-owned and other providers' ones not selectable with
// clusterapi's reason.
func TestSetsOfferClusterAPI(t *testing.T) {
	d := toSets(t, newClusterAPIBackend(), false, 120, 40)
	if got := chosenKeys(d.m.screens.sets, workers.SectionMachineSets); !slices.Equal(got, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) {
		t.Errorf("MachineSets preselected: %v", got)
	}
	if got := chosenKeys(d.m.screens.sets, workers.SectionClusterAPI); !slices.Equal(got, []string{"machineset/capi-gpu", "machinedeployment/capi-md"}) {
		t.Errorf("Cluster API objects preselected: %v", got)
	}
	v := view(d)
	mustContain(t, v, "2 of 4 MachineSets and 2 of 5 Cluster API sets selected", "via CAPI",
		"[x] ostest-x7k2p-worker-1 worker   1/1      missing", "Cluster API MachineSets, MachineDeployments of openshift-cluster-api",
		"[x] capi-gpu              MachineSet 1        capi-gpu-tmpl        missing      1/1",
		"[x] capi-md               Deployment 2", " -  capi-paused           MachineSet 1        paused (annotation cluster.x-k8s.io/paused)",
		" -  capi-md-7f9c4         MachineSet 2        made by MachineDeployment capi-md", "not an OpenStackMachineTem")
	if strings.Count(v, "ostest-x7k2p-worker-1") != 1 || strings.Count(v, "ostest-x7k2p-worker-0") != 1 {
		t.Errorf("a Cluster API copy is listed besides its MachineSet:\n%s", v)
	}
	// capi-gpu, capi-md-7f9c4: the first toggles, the second cannot be chosen.
	d.press("down", "down", "down", "down", "space")
	if slices.Contains(chosenKeys(d.m.screens.sets, workers.SectionClusterAPI), "machineset/capi-gpu") {
		t.Errorf("space on capi-gpu: %v", chosenKeys(d.m.screens.sets, workers.SectionClusterAPI))
	}
	d.press("down", "space")
	mustContain(t, view(d), "Cluster API MachineSet capi-md-7f9c4 cannot be chosen: made by MachineDeployment capi-md")
	if len(chosenKeys(d.m.screens.sets, workers.SectionClusterAPI)) != 1 {
		t.Errorf("chosen: %v", chosenKeys(d.m.screens.sets, workers.SectionClusterAPI))
	}
}

// TestSetsGoOnWhenClusterAPICannotBeRead: a refused list of the Cluster API objects leaves the
// MachineSets offered, with a note; the set attached through its copy cannot be chosen.
func TestSetsGoOnWhenClusterAPICannotBeRead(t *testing.T) {
	b := newClusterAPIBackend()
	b.capiListErr = errors.New(`machinesets.cluster.x-k8s.io is forbidden: User "dev" cannot list resource "machinesets"`)
	d := toSets(t, b, false, 120, 40)
	v := view(d)
	mustContain(t, v, "note: the Cluster API objects of openshift-cluster-api could not be read", "cannot list resource", "ostest-x7k2p-worker-0")
	if got := chosenKeys(d.m.screens.sets, workers.SectionMachineSets); !slices.Equal(got, []string{"ostest-x7k2p-worker-0"}) {
		t.Errorf("MachineSets preselected: %v", got)
	}
	if len(chosenKeys(d.m.screens.sets, workers.SectionClusterAPI)) != 0 {
		t.Errorf("Cluster API objects chosen: %v", chosenKeys(d.m.screens.sets, workers.SectionClusterAPI))
	}
}

// TestSetsWithoutTheCopyStayNotSelectable: a set Cluster API is authoritative for whose copy
// cannot be read is not offered, and says what to check; one Migrating (no ClusterAPI flag)
// keeps the Machine API's reason.
func TestSetsWithoutTheCopyStayNotSelectable(t *testing.T) {
	b := newClusterAPIBackend()
	b.capi = nil
	b.sets[2].StorageNetwork, b.sets[2].SecurityGroups, b.sets[2].Note = attach.StateNA, attach.StateNA, "it is migrating between the Machine API and Cluster API"
	d := toSets(t, b, false, 200, 40)
	if got := chosenKeys(d.m.screens.sets, workers.SectionMachineSets); len(got) != 0 {
		t.Errorf("chosen: %v", got)
	}
	mustContain(t, view(d), "its Cluster API copy openshift-cluster-api/ostest-x7k2p-worker-1 cannot be read", "it is migrating between")
}

// TestApplyClusterAPI: the review shows the copies' and the Cluster API objects' diffs and the
// clusterapi commands; apply patches the Machine API sets (their copies included) and the
// Cluster API objects, rolls the Machine API sets and the standalone Cluster API MachineSet, not
// the MachineDeployment, and says who rolls it.
func TestApplyClusterAPI(t *testing.T) {
	b := newClusterAPIBackend()
	d := toSets(t, b, false, 250, 60)
	d.press("enter")
	mustContain(t, view(d), "MachineSet ostest-x7k2p-worker-1: adds network "+fakeStorageNet+", security group "+fakeNFSGroup+" (via its Cluster API copy in openshift-cluster-api",
		"Cluster API MachineSet capi-gpu: new OpenStackMachineTemplate capi-gpu-tmpl-manila-0a1b2c3d (from capi-gpu-tmpl)",
		"Cluster API MachineDeployment capi-md: new OpenStackMachineTemplate", "+++ OpenStackMachineTemplate openshift-cluster-api/capi-gpu-tmpl")
	d.press("G")
	mustContain(t, view(d), "manila-setup --os-cloud mycloud clusterapi patch --network "+fakeStorageNet+" --security-group "+fakeNFSGroup+" --name machineset/capi-gpu --name machinedeployment/capi-md",
		"manila-setup clusterapi rollout --name machineset/capi-gpu", "all act on the kubeconfig's current context")
	if !slices.Equal(b.capiPatched, []string{"dry:machineset/capi-gpu", "dry:machinedeployment/capi-md"}) {
		t.Errorf("review patched %v", b.capiPatched)
	}
	d.press("enter")
	d.settle(500 * time.Millisecond)
	if !slices.Equal(b.capiPatched[2:], []string{"machineset/capi-gpu", "machinedeployment/capi-md"}) {
		t.Errorf("apply patched %v", b.capiPatched)
	}
	if !slices.Equal(b.rolled, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) || !slices.Equal(b.capiRolled, []string{"machineset/capi-gpu"}) {
		t.Errorf("rolled %v, Cluster API %v", b.rolled, b.capiRolled)
	}
	mustContain(t, view(d), "✓ every chosen set was patched", "capi-gpu", "done",
		"MachineDeployment capi-md: patched, makes its Machines from OpenStackMachineTemplate capi-md-tmpl-manila-0a1b2c3d (was capi-md-tmpl)",
		"Cluster API replaces its Machines itself")
	o := d.m.Outcome()
	if !o.Applied || o.Err != nil || !strings.Contains(o.Summary, "Cluster API MachineSets capi-gpu (their Machines were replaced); MachineDeployments capi-md (Cluster API replaces their Machines itself") {
		t.Errorf("outcome %+v", o)
	}
	mustContain(t, view(d), "now: 0 of 2 Machines made from capi-md-tmpl-manila-0a1b2c3d")

	// Cluster API rolls the MachineDeployment: the next read shows it.
	b.mu.Lock()
	for i := range b.capi {
		if b.capi[i].Name == "capi-md" {
			b.capi[i].OnTemplate, b.capi[i].Machines = 2, 2
		}
	}
	b.mu.Unlock()
	next, cmd := d.m.Update(followPollMsg{})
	d.m = next.(Model)
	d.run(cmd)
	mustContain(t, view(d), "now: 2 of 2 Machines made from capi-md-tmpl-manila-0a1b2c3d")

	// A read that fails says so, and the last one read stays.
	b.mu.Lock()
	b.capiListErr = errFake
	b.mu.Unlock()
	next, cmd = d.m.Update(followPollMsg{})
	d.m = next.(Model)
	d.run(cmd)
	mustContain(t, view(d), "the MachineDeployments' progress could not be read: fake failure", "now: 2 of 2 Machines made from capi-md-tmpl-manila-0a1b2c3d")
}

// TestDryRunWritesNoClusterAPIObject: a dry run computes the diffs and writes nothing.
func TestDryRunWritesNoClusterAPIObject(t *testing.T) {
	b := newClusterAPIBackend()
	d := toSets(t, b, true, 120, 40)
	d.press("enter")
	d.settle(500 * time.Millisecond)
	d.press("enter")
	d.settle(500 * time.Millisecond)
	for _, p := range append(slices.Clone(b.capiPatched), b.patched...) {
		if !strings.HasPrefix(p, "dry:") {
			t.Errorf("a dry run patched %s", p)
		}
	}
	if len(b.rolled)+len(b.capiRolled) != 0 {
		t.Errorf("a dry run rolled %v %v", b.rolled, b.capiRolled)
	}
	mustContain(t, view(d), "MachineDeployment capi-md: dry run, would get a new template")
}
