//go:build integration

package clusterapi

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/attach/rollout/rollouttest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/capictl"
)

// capiFleet is a namespace of standalone Cluster API MachineSets made from one template,
// "workers", whose Machines the simulated controller keeps.
type capiFleet struct {
	ns    string
	admin dynamic.Interface
	ctl   *capictl.Controller
}

func newRolloutFleet(t *testing.T, api *testenv.APIServer, namespace string, sets map[string]int64) *capiFleet {
	t.Helper()
	ctx := context.Background()
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	f := &capiFleet{ns: namespace, admin: dynamic.NewForConfigOrDie(api.Config)}
	tmpl := template("workers", nil, nil)
	tmpl.SetNamespace(namespace)
	f.create(t, TemplateGVR, tmpl)
	for name, replicas := range sets {
		s := set(KindMachineSet, name, TemplateKind, "workers", nil)
		s.SetNamespace(namespace)
		_ = unstructured.SetNestedField(s.Object, replicas, "spec", "replicas")
		f.create(t, MachineSetGVR, s)
	}
	f.ctl = capictl.Start(t, api.Config, capictl.Options{Namespace: namespace})
	for name, replicas := range sets {
		f.waitRunning(t, name, int(replicas))
	}
	return f
}

func (f *capiFleet) create(t *testing.T, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	made, err := f.admin.Resource(gvr).Namespace(f.ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s/%s: %v", u.GetKind(), f.ns, u.GetName(), err)
	}
	return made
}

// capiMachine is a Machine of a set as the tests look at it.
type capiMachine struct {
	name, clonedFrom string
	running, marked  bool
}

// machines lists the live Machines of a set with the template each was cloned from.
func (f *capiFleet) machines(ctx context.Context, set string) ([]capiMachine, error) {
	ms, err := f.admin.Resource(MachineGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{LabelSelector: clusterv1.MachineSetNameLabel + "=" + set})
	if err != nil {
		return nil, err
	}
	infra, err := f.admin.Resource(OpenStackMachineGVR).Namespace(f.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	from := map[string]string{}
	for _, o := range infra.Items {
		from[o.GetName()] = o.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	}
	var out []capiMachine
	for _, m := range ms.Items {
		if m.GetDeletionTimestamp() != nil {
			continue
		}
		phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
		node, _, _ := unstructured.NestedString(m.Object, "status", "nodeRef", "name")
		infraName, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		_, marked := m.GetAnnotations()[clusterv1.DeleteMachineAnnotation]
		out = append(out, capiMachine{name: m.GetName(), clonedFrom: from[infraName], running: phase == "Running" && node != "", marked: marked})
	}
	return out, nil
}

func runningCount(ms []capiMachine) int {
	n := 0
	for _, m := range ms {
		if m.running {
			n++
		}
	}
	return n
}

func capiMachineNames(ms []capiMachine) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.name)
	}
	slices.Sort(out)
	return out
}

// waitRunning waits until a set has n Machines, all Running.
func (f *capiFleet) waitRunning(t *testing.T, set string, n int) []capiMachine {
	t.Helper()
	var ms []capiMachine
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var err error
		ms, err = f.machines(ctx, set)
		return err == nil && len(ms) == n && runningCount(ms) == n, nil
	})
	if err != nil {
		t.Fatalf("Cluster API MachineSet %s/%s never had %d Running Machines (%+v); controller: %v", f.ns, set, n, ms, f.ctl.Err())
	}
	return ms
}

// patch points every set of the fleet at a new template with the storage port; it returns
// the new template's name.
func (f *capiFleet) patch(t *testing.T, ctx context.Context) (*Report, string) {
	t.Helper()
	report, err := Patch(ctx, f.admin, Scope{Namespace: f.ns}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}}, By: "test"})
	if err != nil {
		t.Fatal(err)
	}
	newTemplate := ""
	for _, r := range report.Results {
		if r.Action == attach.ActionPatched {
			newTemplate = r.Template
		}
	}
	if newTemplate == "" {
		t.Fatalf("nothing patched: %+v", report.Results)
	}
	return report, newTemplate
}

// capacityLog records, at every poll of a rollout, the Running and live Machines of each set.
type capacityLog struct {
	f  *capiFleet
	mu sync.Mutex
	// minRunning and maxLive per set; polls counts the observations.
	minRunning, maxLive map[string]int
	polls               int
	err                 error
}

func newCapacityLog(f *capiFleet) *capacityLog {
	return &capacityLog{f: f, minRunning: map[string]int{}, maxLive: map[string]int{}}
}

func (c *capacityLog) observe(sp rollout.SetProgress) {
	if sp.State != rollout.Running {
		return
	}
	ms, err := c.f.machines(context.Background(), sp.Name)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.err = err
		return
	}
	c.polls++
	if n, ok := c.minRunning[sp.Name]; !ok || runningCount(ms) < n {
		c.minRunning[sp.Name] = runningCount(ms)
	}
	c.maxLive[sp.Name] = max(c.maxLive[sp.Name], len(ms))
}

func progressOf(results []rollout.SetProgress) map[string]rollout.SetProgress {
	out := map[string]rollout.SetProgress{}
	for _, r := range results {
		out[r.Name] = r
	}
	return out
}

// checkRolled: the set has its replicas back and no rollout annotation, and every Machine is
// Running, cloned from template, unmarked and not one of old.
func (f *capiFleet) checkRolled(t *testing.T, ctx context.Context, set string, replicas int, template string, old []string) {
	t.Helper()
	u, err := f.admin.Resource(MachineSetGVR).Namespace(f.ns).Get(ctx, set, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas"); got != int64(replicas) {
		t.Errorf("%s: replicas %d after the rollout, want %d", set, got, replicas)
	}
	if _, ok := u.GetAnnotations()[rollout.OriginalReplicasAnnotation]; ok {
		t.Errorf("%s: annotation %s left behind", set, rollout.OriginalReplicasAnnotation)
	}
	for _, m := range f.waitRunning(t, set, replicas) {
		if m.clonedFrom != template || m.marked || slices.Contains(old, m.name) {
			t.Errorf("%s: Machine %+v after the rollout, want one cloned from %s, unmarked, not one of %v", set, m, template, old)
		}
	}
}

// TestRolloutClusterAPI: standalone Cluster API MachineSets pointed at a new template by Patch
// are rolled by Rollout against a simulated MachineSet controller on a real apiserver: every
// Machine ends up cloned from the new template, without ever fewer Running Machines than the
// replicas nor more than one surge above them, and then Patch deletes the old template; a
// MachineDeployment's MachineSet is left alone; a second rollout writes nothing; a new Machine
// that fails stops the rollout, named, with the old Machines left; a rollout stopped half-way
// finishes when run again.
func TestRolloutClusterAPI(t *testing.T) {
	api := testenv.NewAPIServer(t)
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	const poll = 50 * time.Millisecond

	t.Run("rolls", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		f := newRolloutFleet(t, api, "capi-roll", map[string]int64{"ms-a": 3, "ms-b": 1})
		// A MachineDeployment's MachineSet: its deployment rolls it, never this rollout.
		md := set(KindMachineDeployment, "md-0", TemplateKind, "workers", nil)
		md.SetNamespace(f.ns)
		md = f.create(t, MachineDeploymentGVR, md)
		owned := set(KindMachineSet, "md-0-x7k2p", TemplateKind, "workers", md)
		owned.SetNamespace(f.ns)
		_ = unstructured.SetNestedField(owned.Object, int64(0), "spec", "replicas")
		f.create(t, MachineSetGVR, owned)
		oldA, _ := f.machines(ctx, "ms-a")
		oldB, _ := f.machines(ctx, "ms-b")
		_, newTemplate := f.patch(t, ctx)

		capacity := newCapacityLog(f)
		// The check of the first new machine of each set: asked once per set, about a new
		// Machine with its addresses; its Node is a workload cluster's, not read here.
		checker := &rollouttest.Recorder{}
		start := time.Now()
		results, err := Rollout(ctx, f.admin, f.ns, nil, rollout.Options{MaxSurge: 1, Timeout: 2 * time.Minute, PollInterval: poll, Progress: capacity.observe, Canary: checker})
		if err != nil {
			t.Fatalf("rollout: %v", err)
		}
		if len(checker.Facts()) != 2 {
			t.Errorf("%d checks, want one per set: %+v", len(checker.Facts()), checker.Facts())
		}
		for _, fc := range checker.Facts() {
			if slices.Contains(capiMachineNames(append(slices.Clone(oldA), oldB...)), fc.Machine) || len(fc.MachineAddresses) == 0 ||
				!strings.Contains(fc.NodeElsewhere, "workload cluster of namespace "+f.ns) || fc.NodeIP.IsValid() {
				t.Errorf("check of %+v", fc)
			}
		}
		t.Logf("rolled 4 Machines in %s, %d polls", time.Since(start).Round(time.Millisecond), capacity.polls)
		got := progressOf(results)
		for name, want := range map[string]rollout.SetProgress{
			"ms-a": {State: rollout.Done, Replaced: 3, Total: 3}, "ms-b": {State: rollout.Done, Replaced: 1, Total: 1},
			"md-0-x7k2p": {State: rollout.Skipped},
		} {
			if r := got[name]; r.State != want.State || r.Replaced != want.Replaced || r.Total != want.Total {
				t.Errorf("%s: %+v, want %s %d/%d", name, r, want.State, want.Replaced, want.Total)
			}
		}
		if r := got["md-0-x7k2p"]; !strings.Contains(r.Phase, "made by MachineDeployment md-0") {
			t.Errorf("md-0-x7k2p: %q", r.Phase)
		}
		if capacity.err != nil {
			t.Fatal(capacity.err)
		}
		for name, replicas := range map[string]int{"ms-a": 3, "ms-b": 1} {
			if capacity.minRunning[name] < replicas || capacity.maxLive[name] > replicas+1 {
				t.Errorf("%s: between %d Running and %d live Machines during the rollout, want at least %d Running and at most %d", name, capacity.minRunning[name], capacity.maxLive[name], replicas, replicas+1)
			}
		}
		if capacity.polls == 0 {
			t.Error("no poll of the rollout was observed")
		}
		f.checkRolled(t, ctx, "ms-a", 3, newTemplate, capiMachineNames(oldA))
		f.checkRolled(t, ctx, "ms-b", 1, newTemplate, capiMachineNames(oldB))
		// Each old Machine went because the rollout marked it, not by the controller's own choice.
		if d := f.ctl.Deleted(); len(d) != 4 || slices.ContainsFunc(d, func(d capictl.Deletion) bool { return !d.Marked }) {
			t.Errorf("Machines the controller deleted: %+v, want the 4 old ones, each marked", d)
		}

		// Up to date now: a second rollout says so and writes nothing.
		w := &requests{counts: map[string]int{}}
		cfg := rest.CopyConfig(api.Config)
		cfg.WrapTransport = w.wrap
		again, err := Rollout(ctx, dynamic.NewForConfigOrDie(cfg), f.ns, []string{"ms-a", "machineset/ms-b"}, rollout.Options{MaxSurge: 1, PollInterval: poll})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range again {
			if r.State != rollout.UpToDate {
				t.Errorf("second rollout: %+v, want up-to-date", r)
			}
		}
		if c := w.takeWrites(); len(again) != 2 || len(c) != 0 {
			t.Errorf("second rollout: %d sets, writes %v", len(again), c)
		}

		// No Machine is made from the old template any more: the next Patch deletes it (md-0
		// keeps using workers, so move it along first).
		if err := f.admin.Resource(MachineDeploymentGVR).Namespace(f.ns).Delete(ctx, "md-0", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := f.admin.Resource(MachineSetGVR).Namespace(f.ns).Delete(ctx, "md-0-x7k2p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		report, err := Patch(ctx, f.admin, Scope{Namespace: f.ns}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}}, By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Templates) != 1 || report.Templates[0].Name != "workers" || !report.Templates[0].Deleted {
			t.Errorf("templates after the rollout: %+v, want workers deleted", report.Templates)
		}
	})

	t.Run("a failing Machine stops it", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		f := newRolloutFleet(t, api, "capi-fail", map[string]int64{"ms-f": 2})
		old, _ := f.machines(ctx, "ms-f")
		_, newTemplate := f.patch(t, ctx)
		const quota = "Quota exceeded for resources: ['port']. (HTTP 409)"
		f.ctl.FailNext(quota)
		opts := rollout.Options{MaxSurge: 1, Timeout: 2 * time.Minute, PollInterval: poll}
		results, err := Rollout(ctx, f.admin, f.ns, nil, opts)
		var rerr *rollout.Error
		if !errors.As(err, &rerr) {
			t.Fatalf("rollout with a failing Machine: %v", err)
		}
		failed := f.ctl.Created()[2]
		for _, want := range []string{
			"rollout of Cluster API MachineSet capi-fail/ms-f stopped", "new Machine " + failed + " failed: CreateError: " + quota, "0 of 2 Machines were replaced",
			"oc describe machines.cluster.x-k8s.io -n capi-fail " + failed, "oc delete machines.cluster.x-k8s.io -n capi-fail " + failed,
			"run `manila-setup clusterapi rollout -n capi-fail` again",
		} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q\ndoes not say %q", err, want)
			}
		}
		if len(results) != 1 || results[0].State != rollout.Failed {
			t.Errorf("results: %+v", results)
		}
		now, _ := f.machines(ctx, "ms-f")
		for _, o := range old {
			i := slices.IndexFunc(now, func(m capiMachine) bool { return m.name == o.name })
			if i < 0 || !now[i].running || now[i].marked {
				t.Errorf("old Machine %s after the failure: %+v", o.name, now)
			}
		}

		// The admin deletes the failed Machine; run again, the rollout finishes.
		if err := f.admin.Resource(MachineGVR).Namespace(f.ns).Delete(ctx, failed, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := Rollout(ctx, f.admin, f.ns, nil, opts); err != nil {
			t.Fatalf("rollout after the failed Machine was deleted: %v", err)
		}
		f.checkRolled(t, ctx, "ms-f", 2, newTemplate, capiMachineNames(old))
	})

	t.Run("resumes", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		f := newRolloutFleet(t, api, "capi-resume", map[string]int64{"ms-r": 3})
		old, _ := f.machines(ctx, "ms-r")
		_, newTemplate := f.patch(t, ctx)

		// Killed once the first old Machine is replaced.
		stopCtx, stop := context.WithCancel(ctx)
		capacity := newCapacityLog(f)
		opts := rollout.Options{MaxSurge: 1, Timeout: 2 * time.Minute, PollInterval: poll, Progress: func(sp rollout.SetProgress) {
			capacity.observe(sp)
			if sp.Replaced >= 1 {
				stop()
			}
		}}
		_, err := Rollout(stopCtx, f.admin, f.ns, nil, opts)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped rollout: %v", err)
		}
		u, err := f.admin.Resource(MachineSetGVR).Namespace(f.ns).Get(ctx, "ms-r", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := u.GetAnnotations()[rollout.OriginalReplicasAnnotation]; got != "3" {
			t.Fatalf("after the stop: annotation %s = %q, want 3", rollout.OriginalReplicasAnnotation, got)
		}
		left, _ := f.machines(ctx, "ms-r")
		if !slices.ContainsFunc(left, func(m capiMachine) bool { return m.clonedFrom == "workers" }) {
			t.Fatalf("not stopped half-way, no old Machine left: %+v", left)
		}

		opts.Progress = capacity.observe
		results, err := Rollout(ctx, f.admin, f.ns, nil, opts)
		if err != nil {
			t.Fatalf("resumed rollout: %v", err)
		}
		if r := results[0]; r.State != rollout.Done || r.Replaced != 3 || r.Total != 3 {
			t.Errorf("resumed rollout: %+v", r)
		}
		if capacity.minRunning["ms-r"] < 3 || capacity.maxLive["ms-r"] > 4 {
			t.Errorf("between %d Running and %d live Machines across the stop, want at least 3 and at most 4", capacity.minRunning["ms-r"], capacity.maxLive["ms-r"])
		}
		f.checkRolled(t, ctx, "ms-r", 3, newTemplate, capiMachineNames(old))
	})

	t.Run("a removal tells the canary what went", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		f := newRolloutFleet(t, api, "capi-remove", map[string]int64{"ms-x": 2})
		_, attached := f.patch(t, ctx)
		checker := &rollouttest.Recorder{}
		opts := rollout.Options{MaxSurge: 1, Timeout: 2 * time.Minute, PollInterval: poll, Canary: checker}
		if _, err := Rollout(ctx, f.admin, f.ns, nil, opts); err != nil {
			t.Fatalf("rollout of the attachment: %v", err)
		}
		if fc := checker.Facts(); len(fc) != 1 || len(fc[0].RemovedNetworks) != 0 || !slices.Contains(fc[0].StorageNetworks, storageNet) {
			t.Fatalf("the attachment's check: %+v, want the storage network recorded and nothing removed", fc)
		}
		f.checkRolled(t, ctx, "ms-x", 2, attached, nil)

		report, err := Patch(ctx, f.admin, Scope{Namespace: f.ns}, attach.Options{Remove: &attach.Removal{}, By: "test"})
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Results) != 1 || report.Results[0].Action != attach.ActionPatched || report.Results[0].Template == attached {
			t.Fatalf("removal: %+v", report.Results)
		}
		detached := report.Results[0].Template
		checker = &rollouttest.Recorder{}
		opts.Canary = checker
		if _, err := Rollout(ctx, f.admin, f.ns, nil, opts); err != nil {
			t.Fatalf("rollout of the removal: %v", err)
		}
		// The first Machine made from the template without the port is checked for a port
		// left on the network taken off; the set no longer records it as storage.
		if fc := checker.Facts(); len(fc) != 1 || !slices.Equal(fc[0].RemovedNetworks, []string{storageNet}) || len(fc[0].StorageNetworks) != 0 {
			t.Errorf("the removal's check: %+v, want RemovedNetworks [%s] and no storage network", fc, storageNet)
		}
		f.checkRolled(t, ctx, "ms-x", 2, detached, nil)
	})

	t.Run("selection", func(t *testing.T) {
		_, err := Rollout(context.Background(), dynamic.NewForConfigOrDie(api.Config), "capi-roll", []string{"nope"}, rollout.Options{MaxSurge: 1})
		var sel *attach.SelectionError
		if !errors.As(err, &sel) || !strings.Contains(err.Error(), `"nope"`) {
			t.Errorf("unknown name: %v", err)
		}
		_, err = Rollout(context.Background(), dynamic.NewForConfigOrDie(api.Config), "capi-roll", nil, rollout.Options{})
		if err == nil || !strings.Contains(err.Error(), "cannot both be 0") {
			t.Errorf("no surge, no unavailable: %v", err)
		}
	})
}
