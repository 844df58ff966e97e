package wizard

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
)

// withRecord gives MachineSet worker-1 of b the record of an attachment by manila-setup.
func withRecord(b *fakeBackend) *fakeBackend {
	for i := range b.sets {
		if b.sets[i].Name == "ostest-x7k2p-worker-1" {
			b.sets[i].Recorded = &attach.Record{Attachment: attach.Attachment{Networks: []string{fakeStorageNet}, SecurityGroups: []string{fakeNFSGroup}}}
		}
	}
	return b
}

// toDetachReview presses d on worker-1 (the fourth row), after d on a set without a record.
func toDetachReview(t *testing.T, b *fakeBackend) *driver {
	t.Helper()
	d := toSets(t, b, false, 100, 30)
	d.press("d")
	if d.m.step != stepSets {
		t.Fatalf("d on a set without a record left the screen: step %d", d.m.step)
	}
	mustContain(t, view(d), "MachineSet ostest-x7k2p-infra-0 cannot be detached here: it has no attachment record")
	d.press("down", "down", "down")
	mustContain(t, view(d), "d detach")
	d.press("d")
	if d.m.step != stepReview || !d.m.screens.review.detach {
		t.Fatalf("d on an attached set: step %d detach %v", d.m.step, d.m.screens.review.detach)
	}
	return d
}

func TestDetachReviewsTheRemovalThenPatchesAndRolls(t *testing.T) {
	b := withRecord(newFakeBackend())
	d := toDetachReview(t, b)
	if !slices.Equal(b.removed, []string{"dry:ostest-x7k2p-worker-1"}) || len(b.patched) != 0 {
		t.Fatalf("the review wrote something: removed %v patched %v", b.removed, b.patched)
	}
	all := ansi.Strip(strings.Join(d.m.screens.review.content(300, false), "\n"))
	mustContain(t, all, "MachineSet ostest-x7k2p-worker-1: removes network "+fakeStorageNet+", security group "+fakeNFSGroup,
		"what was added by hand stays", "-  uuid: "+fakeStorageNet,
		"manila-setup --os-cloud mycloud machinesets patch --remove --name ostest-x7k2p-worker-1 --rollout")
	mustContain(t, view(d), "enter detach")

	d.press("enter")
	d.settle(time.Second)
	if d.m.step != stepApply || d.m.screens.apply.phase != applyDone {
		t.Fatalf("apply: step %d phase %s err %s", d.m.step, d.m.screens.apply.phase, d.m.screens.apply.err)
	}
	if !slices.Contains(b.removed, "ostest-x7k2p-worker-1") || !slices.Equal(b.rolled, []string{"ostest-x7k2p-worker-1"}) || len(b.patched) != 0 {
		t.Fatalf("removed %v rolled %v patched %v", b.removed, b.rolled, b.patched)
	}
	if b.mountChecks != 2 {
		t.Fatalf("the mounts were checked %d times, want at the review and before the patch", b.mountChecks)
	}
	mustContain(t, view(d), "ostest-x7k2p-worker-1", "done", "enter verify")
	if o := d.m.Outcome(); !o.Applied || o.Err != nil || o.Summary != "Detached network "+fakeStorageNet+", security group "+fakeNFSGroup+" from MachineSet ostest-x7k2p-worker-1; the machines were replaced." {
		t.Fatalf("outcome %+v", o)
	}
}

func TestDetachIsRefusedWhilePodsUseManilaVolumesUnlessForcedTwice(t *testing.T) {
	b := withRecord(newFakeBackend())
	b.mounts = []attach.Mount{{Node: "worker-a", Pod: "app/web-0", Claim: "app/data", Volume: "pvc-1"}}
	d := toDetachReview(t, b)
	mustContain(t, view(d), "refusing to replace the machines of 1 node(s) while pods on them use Manila volumes",
		"pod app/web-0 on node worker-a (claim app/data, PersistentVolume pvc-1)", "f detach anyway")
	d.press("enter")
	if d.m.step != stepReview {
		t.Fatalf("enter while refused: step %d", d.m.step)
	}
	mustContain(t, view(d), "Not detached. Press esc to go back, or f to detach anyway")

	d.press("f")
	mustContain(t, view(d), "Detach anyway?", "pod app/web-0 on node worker-a", "y: detach anyway")
	d.press("n")
	if d.m.screens.review.forced || d.m.screens.review.forcing {
		t.Fatal("n forced the detach")
	}
	d.press("f", "y")
	if !d.m.screens.review.forced {
		t.Fatal("y did not force the detach")
	}
	all := ansi.Strip(strings.Join(d.m.screens.review.content(300, false), "\n"))
	mustContain(t, all, "Forced: enter detaches", "machinesets patch --remove --name ostest-x7k2p-worker-1 --rollout --force")

	d.press("enter")
	d.settle(time.Second)
	if d.m.screens.apply.phase != applyDone || !slices.Contains(b.removed, "ostest-x7k2p-worker-1") || b.mountChecks != 2 {
		t.Fatalf("forced: phase %s err %s removed %v mount checks %d", d.m.screens.apply.phase, d.m.screens.apply.err, b.removed, b.mountChecks)
	}
}

func TestDetachChecksTheMountsAgainBeforePatching(t *testing.T) {
	b := withRecord(newFakeBackend())
	d := toDetachReview(t, b)
	// A pod on a Manila volume came after the review.
	b.mounts = []attach.Mount{{Node: "worker-a", Pod: "app/web-0", Claim: "app/data", Volume: "pvc-1"}}
	d.press("enter")
	d.settle(time.Second)
	if d.m.screens.apply.phase != applyFailed || slices.Contains(b.removed, "ostest-x7k2p-worker-1") || len(b.rolled) != 0 {
		t.Fatalf("phase %s removed %v rolled %v", d.m.screens.apply.phase, b.removed, b.rolled)
	}
	if o := d.m.Outcome(); o.Applied || !strings.Contains(o.Summary, "The detach did not finish: refusing to replace the machines") {
		t.Fatalf("outcome %+v", o)
	}
}
