//go:build integration

package machinesets

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/attach/rollout/rollouttest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// simFleet is a sim cluster with the sim Machine API and worker MachineSets whose Machines
// are Running with Ready Nodes.
type simFleet struct {
	c   *testenv.SimCluster
	ctl *machinectl.Controller
	mc  machineclient.Interface
	kc  kubernetes.Interface
	// counter counts the requests of mc and kc.
	counter *requestCounter
}

func newSimFleet(t *testing.T, sets map[string]int32) *simFleet {
	t.Helper()
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	createNamespace(t, ctx, c.Config)
	mc, kc, counter := countingClients(t, c.Config)
	f := &simFleet{c: c, mc: mc, kc: kc, counter: counter}
	f.ctl = machinectl.Start(t, c, machinectl.Options{NodeDelay: 800 * time.Millisecond})
	for name, replicas := range sets {
		role := "worker"
		if strings.Contains(name, "infra") {
			role = "infra"
		}
		ms := machinectl.MachineSet("sim-x7k2p", role, name, replicas, machinectl.WorkerProviderSpec("sim-x7k2p", "nova"))
		if _, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, replicas := range sets {
		f.waitReady(t, ctx, name, int(replicas))
	}
	return f
}

// waitReady waits until a set has n Machines, all with Ready Nodes.
func (f *simFleet) waitReady(t *testing.T, ctx context.Context, name string, n int) []machinev1beta1.Machine {
	t.Helper()
	var machines []machinev1beta1.Machine
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		machines, err = f.machines(ctx, name)
		if err != nil || len(machines) != n {
			return false, err
		}
		for _, m := range machines {
			if m.Status.NodeRef == nil {
				return false, nil
			}
			node, err := f.kc.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
			if err != nil || !testenv.NodeReady(node) {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("MachineSet %s never had %d Ready Machines (%d now): %v; %s (last error %v)", name, n, len(machines), err, f.ctl, f.ctl.Err())
	}
	return machines
}

// machines returns a set's Machines that are not being deleted.
func (f *simFleet) machines(ctx context.Context, set string) ([]machinev1beta1.Machine, error) {
	list, err := f.mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + set})
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(list.Items, func(m machinev1beta1.Machine) bool { return m.DeletionTimestamp != nil }), nil
}

func machineNames(ms []machinev1beta1.Machine) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	slices.Sort(out)
	return out
}

// checkRolled checks a set after a rollout: original replicas, every Machine new and Ready,
// none of the old ones left, their Nodes gone, no rollout annotation.
func (f *simFleet) checkRolled(t *testing.T, ctx context.Context, name string, replicas int, old []string) {
	t.Helper()
	ms, err := f.mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *ms.Spec.Replicas != int32(replicas) {
		t.Errorf("%s: replicas %d after the rollout, want %d", name, *ms.Spec.Replicas, replicas)
	}
	if _, ok := ms.Annotations[rollout.OriginalReplicasAnnotation]; ok {
		t.Errorf("%s: annotation %s left behind", name, rollout.OriginalReplicasAnnotation)
	}
	machines := f.waitReady(t, ctx, name, replicas)
	template, _ := DecodeProviderSpec(templateProviderSpec(ms))
	for _, m := range machines {
		spec, err := DecodeProviderSpec(machineProviderSpec(&m))
		if err != nil || !spec.HasNetwork(storageNet) || !spec.HasSecurityGroup(storageSG) || len(MissingFrom(template, spec)) != 0 {
			t.Errorf("%s: Machine %s lacks the storage network after the rollout", name, m.Name)
		}
		if slices.Contains(old, m.Name) {
			t.Errorf("%s: old Machine %s is still there", name, m.Name)
		}
		if m.Annotations[DeleteMachineAnnotation] != "" {
			t.Errorf("%s: Machine %s kept a delete mark", name, m.Name)
		}
	}
	for _, o := range old {
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := f.kc.CoreV1().Nodes().Get(ctx, o, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			t.Errorf("%s: Node of old Machine %s still there", name, o)
		}
	}
}

// progressLog collects what Rollout reports, for the assertions on the live progress.
type progressLog struct {
	mu    sync.Mutex
	lines []rollout.SetProgress
}

func (p *progressLog) add(sp rollout.SetProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.lines = append(p.lines, sp)
}

func (p *progressLog) phases(set string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.lines {
		if l.Name == set && (len(out) == 0 || out[len(out)-1] != l.Phase) {
			out = append(out, l.Phase)
		}
	}
	return out
}

// TestRolloutKeepsCapacity patches two worker sets and rolls them, the first with a surge
// (never below 3 Ready), the second without surge but one unavailable (never above 2 Machines,
// never below 1 Ready): the Ready count of each set, replayed from watch events in commit order,
// stays inside those bounds for the whole run. The infra set is not touched.
func TestRolloutKeepsCapacity(t *testing.T) {
	f := newSimFleet(t, map[string]int32{"sim-worker-0": 3, "sim-worker-1": 2, "sim-infra-0": 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	old0, _ := f.machines(ctx, "sim-worker-0")
	old1, _ := f.machines(ctx, "sim-worker-1")
	infra, _ := f.machines(ctx, "sim-infra-0")

	if _, err := Patch(ctx, f.mc, Selection{}, attach.Options{Attachment: storageWant}); err != nil {
		t.Fatal(err)
	}
	// The template changed, the machines did not: list says so.
	sets, err := List(ctx, f.mc, attach.Attachment{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if s.Name == "sim-worker-0" && (s.UpToDate != 0 || s.Machines != 3 || s.StorageNetwork != attach.StateAttached) {
			t.Errorf("list before the rollout: %+v", s)
		}
	}

	mon0 := machinectl.WatchReady(t, f.c, machinectl.MachineSetLabel+"=sim-worker-0")
	var log progressLog
	// At every progress line, "machinesets list" says the same N of M as the rollout. The list
	// reads the cluster just after the rollout did, so the cluster may have moved on by then: the
	// list may say the count of the rollout's next line, never another (its reads are not counted
	// below: they go through another client).
	type pair struct {
		rollout, list, total, wanted int
		phase                        string
	}
	var pairs []pair
	var listErr error
	listClient := machineclient.NewForConfigOrDie(f.c.Config)
	agree := func(sp rollout.SetProgress) {
		log.add(sp)
		if sp.Name != "sim-worker-0" || sp.State != rollout.Running {
			return
		}
		sets, err := List(ctx, listClient, attach.Attachment{})
		if err != nil {
			listErr = err
			return
		}
		for _, s := range sets {
			if s.Name == sp.Name {
				pairs = append(pairs, pair{sp.Replaced, s.UpToDate, sp.Total, s.Wanted, sp.Phase})
			}
		}
	}
	// The check of the first new machine: this checker passes and records what it was given
	// (what it judges is workers.Canary's, tested there); the engine must ask it once, about a
	// new Machine with its Node, before the first old Machine is marked.
	checker := &rollouttest.Recorder{}
	f.counter.reset()
	start := time.Now()
	results, err := Rollout(ctx, f.mc, f.kc, Selection{Names: []string{"sim-worker-0"}}, rollout.Options{MaxSurge: 1, MaxUnavailable: 0, Timeout: 3 * time.Minute, PollInterval: 200 * time.Millisecond, Progress: agree, Canary: checker})
	if err != nil {
		t.Fatalf("rollout: %v\nphases: %q", err, log.phases("sim-worker-0"))
	}
	if listErr != nil {
		t.Errorf("list during the rollout: %v", listErr)
	}
	for i, p := range pairs {
		next := results[0].Replaced // the rollout's next count: a later line's or its result's
		for _, q := range pairs[i+1:] {
			if q.rollout != p.rollout {
				next = q.rollout
				break
			}
		}
		if (p.list != p.rollout && p.list != next) || p.wanted != p.total {
			t.Errorf("machinesets list says %d/%d where the rollout said %d/%d (%s), then %d", p.list, p.wanted, p.rollout, p.total, p.phase, next)
		}
	}
	seen := map[int]bool{}
	for _, p := range pairs {
		seen[p.list] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		t.Errorf("the list did not follow the rollout through 0, 1 and 2 of 3: %v", pairs)
	}
	if sets, err := List(ctx, listClient, attach.Attachment{}); err != nil {
		t.Error(err)
	} else if i := slices.IndexFunc(sets, func(s SetStatus) bool { return s.Name == "sim-worker-0" }); i < 0 || sets[i].UpToDate != 3 || sets[i].Wanted != 3 || sets[i].Machines != 3 {
		t.Errorf("list after the rollout: %+v", sets)
	}
	stats, err := mon0.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sim-worker-0 (3 replicas, surge 1, unavailable 0) rolled in %s: %s", time.Since(start).Round(time.Millisecond), stats)
	writes := f.counter.get("PATCH machinesets") + f.counter.get("PATCH machines")
	t.Logf("rollout requests: %s (%d writes)", f.counter, writes)
	// Per replaced Machine: surge, mark the old one, scale down; the check's verdict on the
	// first new one; then remove the annotation.
	if writes != 3*3+1+1 {
		t.Errorf("%d writes for 3 replacements and one check, want 11: %s", writes, f.counter)
	}
	if len(checker.Facts()) != 1 || slices.Contains(machineNames(old0), checker.Facts()[0].Machine) || checker.Facts()[0].Node == "" || !checker.Facts()[0].NodeIP.IsValid() ||
		!slices.Equal(checker.Facts()[0].StorageNetworks, storageWant.Networks) {
		t.Errorf("checks: %+v", checker.Facts())
	}
	if i, j := slices.IndexFunc(log.phases("sim-worker-0"), func(p string) bool { return strings.HasPrefix(p, "checking new Machine") }),
		slices.IndexFunc(log.phases("sim-worker-0"), func(p string) bool { return strings.HasPrefix(p, "removing old Machine") }); i < 0 || j < i {
		t.Errorf("the first old Machine went before the check (phases %q)", log.phases("sim-worker-0"))
	}
	if stats.MinReady < 3 || stats.MaxLive > 4 || stats.EndReady != 3 {
		t.Errorf("sim-worker-0 left its bounds: %s", stats)
	}
	if results[0].State != rollout.Done || results[0].Replaced != 3 || results[0].Total != 3 {
		t.Errorf("result %+v", results[0])
	}
	f.checkRolled(t, ctx, "sim-worker-0", 3, machineNames(old0))
	phases := log.phases("sim-worker-0")
	for _, want := range []string{"surging to 4 replicas", "waiting for new Machine", "removing old Machine", "done: 3 of 3 replaced"} {
		if !slices.ContainsFunc(phases, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("progress never said %q: %q", want, phases)
		}
	}

	mon1 := machinectl.WatchReady(t, f.c, machinectl.MachineSetLabel+"=sim-worker-1")
	start = time.Now()
	if _, err := Rollout(ctx, f.mc, f.kc, Selection{Names: []string{"sim-worker-1"}}, rollout.Options{MaxSurge: 0, MaxUnavailable: 1, Timeout: 3 * time.Minute, PollInterval: 200 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	stats, err = mon1.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("sim-worker-1 (2 replicas, surge 0, unavailable 1) rolled in %s: %s", time.Since(start).Round(time.Millisecond), stats)
	if stats.MinReady < 1 || stats.MaxLive > 2 || stats.EndReady != 2 || stats.MinReady > 1 {
		// MinReady must also reach 1: without surge, a Machine can only be replaced by first
		// removing one. A minimum of 2 would mean the bounds were not exercised.
		t.Errorf("sim-worker-1 left its bounds (want min 1, max live 2): %s", stats)
	}
	f.checkRolled(t, ctx, "sim-worker-1", 2, machineNames(old1))

	// Nothing else to do: a second rollout of everything writes nothing and says up to date.
	results, err = Rollout(ctx, f.mc, f.kc, Selection{}, rollout.Options{MaxSurge: 1, PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		want := rollout.UpToDate
		if r.Name == "sim-infra-0" {
			want = rollout.Skipped
		}
		if r.State != want {
			t.Errorf("second rollout: %s is %s (%s), want %s", r.Name, r.State, r.Phase, want)
		}
	}
	if now, _ := f.machines(ctx, "sim-infra-0"); !slices.Equal(machineNames(now), machineNames(infra)) {
		t.Errorf("infra Machines changed: %v -> %v", machineNames(infra), machineNames(now))
	}
}

// TestRolloutStopsOnAFailedMachine: the first new Machine fails; the rollout stops with a
// sentence naming it and its error, no old Machine is removed, and the set's other old Machines
// stay Ready. After the admin deletes the failed Machine, running the rollout again finishes.
func TestRolloutStopsOnAFailedMachine(t *testing.T) {
	f := newSimFleet(t, map[string]int32{"sim-worker-0": 3})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	old, _ := f.machines(ctx, "sim-worker-0")
	if _, err := Patch(ctx, f.mc, Selection{}, attach.Options{Attachment: storageWant}); err != nil {
		t.Fatal(err)
	}
	const quota = "Quota exceeded for resources: ['port']. (HTTP 409)"
	f.ctl.FailNext(quota)
	mon := machinectl.WatchReady(t, f.c, machinectl.MachineSetLabel+"=sim-worker-0")
	opts := rollout.Options{MaxSurge: 1, Timeout: 3 * time.Minute, PollInterval: 200 * time.Millisecond}
	_, err := Rollout(ctx, f.mc, f.kc, Selection{}, opts)
	var rerr *rollout.Error
	if !errors.As(err, &rerr) {
		t.Fatalf("rollout with a failing Machine: %v", err)
	}
	failed := f.ctl.Created()[3]
	t.Logf("error: %v", err)
	for _, want := range []string{"rollout of MachineSet openshift-machine-api/sim-worker-0 stopped", "new Machine " + failed + " failed: " + quota,
		"0 of 3 Machines were replaced", "oc delete machine -n openshift-machine-api " + failed} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	now, _ := f.machines(ctx, "sim-worker-0")
	for _, o := range old {
		if !slices.Contains(machineNames(now), o.Name) {
			t.Errorf("old Machine %s was removed though the new one failed", o.Name)
		}
	}

	// The admin fixes the quota and deletes the failed Machine; the rollout resumes.
	if err := f.mc.MachineV1beta1().Machines(Namespace).Delete(ctx, failed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := Rollout(ctx, f.mc, f.kc, Selection{}, opts); err != nil {
		t.Fatalf("resumed rollout: %v", err)
	}
	stats, err := mon.Stop()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failed then resumed: %s", stats)
	if stats.MinReady < 3 || stats.MaxLive > 4 {
		t.Errorf("bounds broken around the failure: %s", stats)
	}
	f.checkRolled(t, ctx, "sim-worker-0", 3, machineNames(old))
}

// TestRolloutStopsWhenANodeNeverComes: a new Machine that stays Provisioning past --timeout
// stops the rollout, named, with its phase.
func TestRolloutStopsWhenANodeNeverComes(t *testing.T) {
	f := newSimFleet(t, map[string]int32{"sim-worker-0": 2})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := Patch(ctx, f.mc, Selection{}, attach.Options{Attachment: storageWant}); err != nil {
		t.Fatal(err)
	}
	f.ctl.StallNext()
	start := time.Now()
	_, err := Rollout(ctx, f.mc, f.kc, Selection{}, rollout.Options{MaxSurge: 1, Timeout: 4 * time.Second, PollInterval: 200 * time.Millisecond})
	stalled := f.ctl.Created()[2]
	want := fmt.Sprintf("new Machine %s has no Ready Node 4s after it was created (phase Provisioning)", stalled)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want %q", err, want)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s to notice a 4s timeout", d)
	}
	if now, _ := f.machines(ctx, "sim-worker-0"); len(now) != 3 {
		t.Errorf("%d Machines after the stop, want the 2 old and the stalled one", len(now))
	}
}

// TestScaleNoticesAnotherWriter: a scale decided on a replica count someone else has changed
// meanwhile is refused (the JSON patch's test), and the rollout reads the state again instead
// of overwriting theirs; status writes of the MachineSet controller do not get in the way.
func TestScaleNoticesAnotherWriter(t *testing.T) {
	api := testenv.NewAPIServer(t)
	ctx := context.Background()
	createNamespace(t, ctx, api.Config)
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, machinectl.WorkerMachineSet("sim-x7k2p", 0, 3), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &roller{mc: mc}
	seen := rollout.SetView{Name: ms.Name, ResourceVersion: ms.ResourceVersion, Replicas: 3, Original: 3}

	// A status write moves the resourceVersion: scaling still goes through.
	ms.Status.Replicas = 3
	if _, err := mc.MachineV1beta1().MachineSets(Namespace).UpdateStatus(ctx, ms, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.Scale(ctx, seen, 4); err != nil {
		t.Fatalf("scale after a status write: %v", err)
	}
	got, _ := mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
	if *got.Spec.Replicas != 4 || got.Annotations[rollout.OriginalReplicasAnnotation] != "3" {
		t.Fatalf("after scaling: replicas %d, annotations %v", *got.Spec.Replicas, got.Annotations)
	}

	// Someone scales to 6; our next step, decided on 4, must not undo it.
	scaleTo := func(n int) {
		patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
		if _, err := mc.MachineV1beta1().MachineSets(Namespace).Patch(ctx, ms.Name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	scaleTo(6)
	seen.Replicas, seen.HasOriginal, seen.HasAnnotations = 4, true, true
	if err := r.Scale(ctx, seen, 3); !errors.Is(err, rollout.ErrReplicasChanged) {
		t.Fatalf("scale on a stale replica count: %v, want rollout.ErrReplicasChanged", err)
	}
	got, _ = mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
	if *got.Spec.Replicas != 6 {
		t.Errorf("the other writer's replicas were overwritten: %d", *got.Spec.Replicas)
	}
}
