package wizard

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

func TestConnectSaysWhatAManagementClusterOffers(t *testing.T) {
	for _, c := range []struct {
		machineAPI bool
		want       string
	}{
		{true, "4 MachineSets, 4 NodePools (HyperShift management cluster)"},
		{false, "4 NodePools (HyperShift management cluster, no MachineSets)"},
	} {
		d := start(t, newManagementBackend(c.machineAPI), false, 200, 40)
		mustContain(t, view(d), c.want)
	}
}

// TestConnectNotesWhatCouldNotBeRead: a management cluster whose MachineSets are refused goes on
// with its NodePools, and the connect screen says what was refused.
func TestConnectNotesWhatCouldNotBeRead(t *testing.T) {
	b := newManagementBackend(false)
	b.connectNote = "cluster https://api.ostest.example.com:6443 (context \"admin\") refused to list MachineSets in openshift-machine-api: the wizard needs list and patch on machinesets.machine.openshift.io there; log in as a cluster admin; only its NodePools are offered"
	d := start(t, b, false, 200, 40)
	mustContain(t, view(d), "! cluster https://api.ostest.example.com:6443", "only its NodePools are offered", "enter next")
	d.press("enter")
	if d.m.step != stepNetwork {
		t.Fatalf("a noted connection did not go on (step %d)", d.m.step)
	}
}

// TestSetsOfferNodePools: on a management cluster the fourth screen lists the NodePools under
// the MachineSets, the OpenStack ones preselected, the others never selectable; the cursor runs
// from the MachineSets into the NodePools.
func TestSetsOfferNodePools(t *testing.T) {
	d := toSets(t, newManagementBackend(true), false, 120, 40)
	if got := chosenKeys(d.m.screens.sets, workers.SectionMachineSets); !slices.Equal(got, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) {
		t.Errorf("MachineSets preselected: %v", got)
	}
	if got := chosenKeys(d.m.screens.sets, workers.SectionNodePools); !slices.Equal(got, []string{"clusters/hc1-gpu", "clusters/hc1-workers", "clusters/hc2-workers"}) {
		t.Errorf("NodePools preselected: %v", got)
	}
	mustContain(t, view(d), "4/7 MachineSets, NodePools", "2 of 4 MachineSets and 3 of 4 NodePools selected",
		"NODEPOOL              HOSTED CLUSTER REPLICAS STORAGE NET", "[x] clusters/hc1-workers  hc1            3        missing",
		" -  clusters/hc3-kubevirt hc3            2        not OpenStack (KubeVirt)")

	d.press("down", "down", "down", "down", "down", "space") // hc1-workers, the second NodePool
	if got := chosenKeys(d.m.screens.sets, workers.SectionNodePools); slices.Contains(got, "clusters/hc1-workers") || len(got) != 2 {
		t.Errorf("space on hc1-workers: %v", got)
	}
	d.press("down", "down", "space")
	if slices.Contains(chosenKeys(d.m.screens.sets, workers.SectionNodePools), "clusters/hc3-kubevirt") {
		t.Error("a KubeVirt NodePool could be chosen")
	}
	mustContain(t, view(d), "NodePool clusters/hc3-kubevirt cannot be chosen: not OpenStack (KubeVirt)")

	// Nothing of either kind: enter does not go on.
	d.press("up", "space", "up", "up", "space", "up", "space", "up", "space")
	if len(chosenKeys(d.m.screens.sets, workers.SectionMachineSets))+len(chosenKeys(d.m.screens.sets, workers.SectionNodePools)) != 0 {
		t.Fatalf("still chosen: %v %v", chosenKeys(d.m.screens.sets, workers.SectionMachineSets), chosenKeys(d.m.screens.sets, workers.SectionNodePools))
	}
	d.press("enter")
	if d.m.step != stepSets {
		t.Fatal("went on with nothing chosen")
	}
	mustContain(t, view(d), "choose at least one MachineSet or NodePool (space)")
}

// TestReviewShowsNodePoolDiffsAndTheGroupsTheyCannotTake: the review computes the NodePools'
// patch as a dry run beside the MachineSets', warns once that the security groups are not added
// to NodePools, without blocking, and prints the nodepools patch command with the NodePools'
// names.
func TestReviewShowsNodePoolDiffsAndTheGroupsTheyCannotTake(t *testing.T) {
	b := newManagementBackend(true)
	d := toReview(t, b, false, 80, 24)
	if !slices.Equal(b.poolsPatched, []string{"dry:clusters/hc1-gpu", "dry:clusters/hc1-workers", "dry:clusters/hc2-workers"}) {
		t.Fatalf("review wrote NodePools: %v", b.poolsPatched)
	}
	all := ansi.Strip(strings.Join(d.m.screens.review.content(400, false), "\n"))
	mustContain(t, all,
		"MachineSet ostest-x7k2p-worker-0: adds network "+fakeStorageNet,
		"NodePool clusters/hc1-gpu: unchanged, already attached",
		"NodePool clusters/hc1-workers (HostedCluster hc1): adds a port on network "+fakeStorageNet,
		"! The security groups chosen are not added to NodePool clusters/hc1-gpu, clusters/hc1-workers, clusters/hc2-workers: a NodePool's additional ports take none of their own.",
		"--- NodePool clusters/hc1-workers spec.platform.openstack", "+    id: "+fakeStorageNet,
		"manila-setup --os-cloud mycloud machinesets patch --network "+fakeStorageNet+" --security-group "+fakeNFSGroup+" --name ostest-x7k2p-worker-0 --name ostest-x7k2p-worker-1",
		"manila-setup --os-cloud mycloud nodepools patch --network "+fakeStorageNet+" --name clusters/hc1-gpu --name clusters/hc1-workers --name clusters/hc2-workers",
		"(all act on the kubeconfig's current context")
	if strings.Contains(all, "nodepools patch --network "+fakeStorageNet+" --security-group") {
		t.Error("the nodepools command carries --security-group, which a NodePool port cannot take")
	}
	d.press("enter")
	if d.m.step != stepApply {
		t.Fatalf("the security-group warning blocked the apply (step %d)", d.m.step)
	}
}

// toPoolsOnly is the review of a management cluster's NodePools alone (its MachineSets
// deselected).
func toPoolsOnly(t *testing.T, b *fakeBackend, dry bool) *driver {
	t.Helper()
	d := toSets(t, b, dry, 120, 40)
	d.press("down", "down", "space", "down", "space", "enter")
	if d.m.step != stepReview || len(chosenKeys(d.m.screens.sets, workers.SectionMachineSets)) != 0 {
		t.Fatalf("step %d, MachineSets chosen %v", d.m.step, chosenKeys(d.m.screens.sets, workers.SectionMachineSets))
	}
	return d
}

// TestApplyPatchesNodePoolsAndLeavesTheRollToHyperShift: NodePools alone are patched, nothing is
// rolled, the screen says per NodePool what HyperShift does (by upgradeType) and follows its
// status; the verify screen does not read this cluster's driver but says how to check it in each
// hosted cluster.
func TestApplyPatchesNodePoolsAndLeavesTheRollToHyperShift(t *testing.T) {
	b := newManagementBackend(true)
	d := toPoolsOnly(t, b, false)
	all := ansi.Strip(strings.Join(d.m.screens.review.content(400, false), "\n"))
	if strings.Contains(all, "machinesets patch") || strings.Contains(all, "machinesets rollout") || !strings.Contains(all, "(it acts on the kubeconfig's current context") {
		t.Errorf("commands for NodePools alone:\n%s", all)
	}
	d.press("enter")
	d.settle(300 * time.Millisecond)
	if d.m.screens.apply.phase != applyDone {
		t.Fatalf("phase %s err %s", d.m.screens.apply.phase, d.m.screens.apply.err)
	}
	for _, p := range b.patched {
		if !strings.HasPrefix(p, "dry:") {
			t.Errorf("MachineSet %s patched though none was chosen", p)
		}
	}
	if len(b.rolled) != 0 {
		t.Errorf("rolled %v", b.rolled)
	}
	if got := b.poolsPatched[len(b.poolsPatched)-3:]; !slices.Equal(got, []string{"clusters/hc1-gpu", "clusters/hc1-workers", "clusters/hc2-workers"}) {
		t.Errorf("NodePools patched: %v", got)
	}
	mustContain(t, view(d), "✓ every chosen NodePool has its port on the storage network; HyperShift rolls the change out itself",
		"NodePool clusters/hc1-workers: patched, adds a port on network "+fakeStorageNet,
		"HyperShift replaces its machines (upgradeType Replace)",
		"now: 2 of 3 nodes · UpdatingPlatformMachineTemplate: platform machine template update in progress",
		"watch: oc get nodepool -n clusters hc1-workers",
		"upgradeType InPlace: only machines created from now on get the port",
		"NodePool clusters/hc1-gpu: unchanged, already attached")
	if o := d.m.Outcome(); !o.Applied || o.Err != nil || !strings.Contains(o.Summary, "Attached network "+fakeStorageNet+" to NodePools clusters/hc1-gpu, clusters/hc1-workers, clusters/hc2-workers; HyperShift rolls the change out itself: watch `oc get nodepools -n clusters`") {
		t.Errorf("outcome %+v", o)
	}

	// HyperShift finishes: the next read of the NodePools shows it.
	b.mu.Lock()
	b.pools[1].CurrentNodes, b.pools[1].Conditions = 3, []nodepools.Condition{{Type: "Ready", Status: "True"}}
	b.mu.Unlock()
	next, cmd := d.m.Update(followPollMsg{})
	d.m = next.(Model)
	d.run(cmd)
	mustContain(t, view(d), "now: 3 of 3 nodes · Ready")

	d.press("enter")
	if d.m.step != stepVerify {
		t.Fatalf("step %d", d.m.step)
	}
	d.settle(200 * time.Millisecond)
	if b.storageReads != 0 {
		t.Errorf("the management cluster's driver was read %d times for NodePools alone", b.storageReads)
	}
	screen := view(d)
	mustContain(t, screen, "not on this management cluster", "hcp create kubeconfig --namespace clusters --name hc1 > hc1.kubeconfig",
		"manila-setup --kubeconfig hc1.kubeconfig operator status", "--name hc2 > hc2.kubeconfig", "enter finish")
	if strings.Contains(screen, "not found: the Manila CSI driver operator is not installed") || strings.Contains(screen, "multi-writer") {
		t.Errorf("the verify screen judges the management cluster:\n%s", screen)
	}
}

// TestApplyMixedRollsMachineSetsAndPatchesNodePools: both kinds chosen: the MachineSets are
// patched and rolled, the NodePools patched; the verify screen reads this cluster's driver (for
// its MachineSets) and says where the hosted clusters' one is checked.
func TestApplyMixedRollsMachineSetsAndPatchesNodePools(t *testing.T) {
	b := newManagementBackend(true)
	d := toReview(t, b, false, 120, 40)
	d.press("enter")
	d.settle(time.Second)
	if d.m.screens.apply.phase != applyDone {
		t.Fatalf("phase %s err %s", d.m.screens.apply.phase, d.m.screens.apply.err)
	}
	if !slices.Equal(b.rolled, []string{"ostest-x7k2p-worker-0", "ostest-x7k2p-worker-1"}) || !slices.Contains(b.poolsPatched, "clusters/hc2-workers") {
		t.Fatalf("rolled %v, NodePools patched %v", b.rolled, b.poolsPatched)
	}
	if o := d.m.Outcome(); !strings.Contains(o.Summary, "to MachineSets ostest-x7k2p-worker-0, ostest-x7k2p-worker-1 (their machines were replaced) and to NodePools clusters/hc1-gpu") {
		t.Errorf("outcome %+v", o)
	}
	d.press("enter")
	d.settle(200 * time.Millisecond)
	if b.storageReads == 0 {
		t.Error("the driver of the cluster whose MachineSets were rolled was not read")
	}
	mustContain(t, view(d), "conditions as expected", "csi-manila-default", "Hosted clusters", "manila-setup --kubeconfig hc2.kubeconfig operator status")
}

func TestApplyReportsANodePoolPatchFailure(t *testing.T) {
	b := newManagementBackend(true)
	d := toReview(t, b, false, 80, 24)
	b.poolPatchErr = errFake
	d.press("enter")
	d.settle(200 * time.Millisecond)
	if d.m.screens.apply.phase != applyFailed || len(b.rolled) != 0 {
		t.Fatalf("phase %s, rolled %v", d.m.screens.apply.phase, b.rolled)
	}
	// The MachineSets were patched before: the outcome says something was written.
	if o := d.m.Outcome(); o.Err == nil || !o.Applied {
		t.Errorf("outcome %+v", o)
	}
	mustContain(t, view(d), "✗ fake failure")
}

func TestDryRunWritesNoNodePool(t *testing.T) {
	b := newManagementBackend(false)
	d := toSets(t, b, true, 80, 24)
	d.press("enter", "enter")
	mustContain(t, view(d), "Dry run: nothing was patched", "NodePool clusters/hc1-workers: dry run, would get its port")
	d.press("enter")
	mustContain(t, view(d), "hcp create kubeconfig")
	for _, p := range b.poolsPatched {
		if !strings.HasPrefix(p, "dry:") {
			t.Errorf("dry run patched NodePool %s", p)
		}
	}
	if len(b.poolsPatched) == 0 {
		t.Error("the review computed no NodePool diff")
	}
}

// TestCommandsForNodePools: a NodePool selection prints nodepools patch with the network, the
// NodePools by NAMESPACE/NAME, --force when the network was questioned, no security groups.
func TestCommandsForNodePools(t *testing.T) {
	conn := &Connection{Cloud: "mycloud", Flags: []string{"--kubeconfig", "/tmp/mgmt.kubeconfig"}}
	lines := commandLines(conn, attach.Attachment{Networks: []string{fakeStorageNet}, SecurityGroups: []string{fakeNFSGroup}}, workers.Selection{NodePools: []string{"clusters/hc1-workers", "team b/x"}}, true)
	want := []string{"  manila-setup --kubeconfig /tmp/mgmt.kubeconfig --os-cloud mycloud nodepools patch --network " + fakeStorageNet + " --force --name clusters/hc1-workers --name 'team b/x'"}
	if !slices.Equal(lines, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
