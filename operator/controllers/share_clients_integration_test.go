//go:build integration

package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestStorageClassesStayPutWhenMachinesComeAndGo runs the operator as its ServiceAccount on an
// installer-shaped sim cluster whose Machine API stand-in gives every server real Neutron
// ports on the loopback cloud (Provisioning, then Provisioned with the server's addresses, then
// Running once its Node joins). The worker MachineSet is attached to the storage network and
// rolled half-way when the operator starts, so its StorageClasses admit both networks. Then:
//   - the rollout goes on to the end: every class is re-created exactly once, for the storage
//     subnet alone;
//   - the set is scaled from 3 to 5, as a cluster autoscaler does: no class is touched (same
//     UID, value and resourceVersion, no watch event, no StorageClassRecreated event);
//   - a Machine is deleted and replaced, as a machine health check does: the same;
//   - a Machine fails without a Node (its storage port refused, the subnet full): the same.
func TestStorageClassesStayPutWhenMachinesComeAndGo(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	h := &harness{t: t, ctx: ctx, sim: sim, kube: sim.Client, dyn: dynamic.NewForConfigOrDie(sim.Config), resync: 2 * time.Second, logs: &testenv.SyncBuffer{}}
	storageNet := cloud.Seed.Networks["storage"]
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	machineNetwork := cloud.Seed.Subnets["tenant-subnet"].CIDR // the install-config's, too
	both := storageSubnet + "," + machineNetwork

	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	// A Node joins 3 s after its Machine is created, half of which the server exists without it.
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-keep1", Workers: 3,
		Controller: machinectl.Options{NodeDelay: 3 * time.Second, Ports: ports}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	mc := machineclient.NewForConfigOrDie(sim.Config)
	results, err := machinesets.Patch(ctx, mc, machinesets.Selection{}, attach.Options{
		Attachment: attach.Attachment{Networks: []string{storageNet}}, By: "manila-setup test"})
	if err != nil || len(results) != 1 || results[0].Action != attach.ActionPatched {
		t.Fatalf("machinesets.Patch: %v, %+v", err, results)
	}
	// Half-way: one Machine of the old template replaced (deleted; the set makes a new one from
	// its attached template), two left.
	machines := func() (fresh, old []machinev1beta1.Machine, joined int) {
		t.Helper()
		list, err := mc.MachineV1beta1().Machines(machinectl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + cl.MachineSet})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range list.Items {
			if m.Status.NodeRef != nil && m.DeletionTimestamp == nil {
				joined++
			}
			spec, err := machinesets.DecodeProviderSpec(m.Spec.ProviderSpec.Value.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if spec.HasNetwork(storageNet) {
				fresh = append(fresh, m)
			} else {
				old = append(old, m)
			}
		}
		return fresh, old, joined
	}
	_, old, _ := machines()
	if err := mc.MachineV1beta1().Machines(machinectl.Namespace).Delete(ctx, old[0].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// settled waits until the set has want Machines, every one with its Node and none being
	// deleted, fresh of them made from the attached template.
	settled := func(what string, want, fresh int) {
		t.Helper()
		h.eventually(what, settle, func() (bool, string) {
			f, o, joined := machines()
			return len(f)+len(o) == want && len(f) == fresh && joined == want,
				fmt.Sprintf("%d Machines of the attached template, %d older, %d with a Node (%s)", len(f), len(o), joined, cl.Controller)
		})
	}
	settled("half-way: 1 of 3 Machines replaced", 3, 1)

	// The operator, as its ServiceAccount, with the demo project's credentials: discovery finds
	// the storage subnet from where the project's shares are exported.
	creds := cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3"))
	defer h.start(h.installAsServiceAccount(creds), Config{Namespace: testNS, Images: testImages, Resync: h.resync, StorageNetworkID: storageNet, Version: "test"})()

	classes := func() map[string]storagev1.StorageClass {
		t.Helper()
		list, err := sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
		if err != nil {
			t.Fatal(err)
		}
		// The classes of the seeded share types (a test of another package may add a share
		// type to a shared cloud).
		out := map[string]storagev1.StorageClass{}
		for _, sc := range list.Items {
			if _, ok := cloud.Seed.ShareTypes[sc.Annotations[operator.AnnotationShareType]]; ok {
				out[sc.Name] = sc
			}
		}
		return out
	}
	wantClasses := len(cloud.Seed.ShareTypes)
	classesAdmit := func(what, want string) map[string]storagev1.StorageClass {
		t.Helper()
		var got map[string]storagev1.StorageClass
		h.eventually(fmt.Sprintf("%d StorageClasses with nfs-shareClient %s (%s)", wantClasses, want, what), settle, func() (bool, string) {
			got = classes()
			var seen []string
			ok := len(got) == wantClasses
			for name, sc := range got {
				seen = append(seen, name+"="+sc.Parameters["nfs-shareClient"])
				ok = ok && sc.Parameters["nfs-shareClient"] == want
			}
			sort.Strings(seen)
			return ok, strings.Join(seen, " ")
		})
		return got
	}
	recreated := func() int {
		t.Helper()
		list, err := sim.Client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range list.Items {
			if e.Reason == "StorageClassRecreated" {
				n += max(1, int(e.Count))
			}
		}
		return n
	}
	// quiet waits until the controllers that read the Machines have each finished two more
	// syncs (so one began after the caller's change settled), and until the Manila controller
	// has checked Manila since.
	quiet := func() {
		t.Helper()
		h.waitSyncs(2, manilaName, storageNetworkName)
	}

	before := classesAdmit("half-way: the old Machines mount through the machine network", both)
	h.eventually("StorageNetworkReachable=True", settle, h.condIs(operator.ConditionStorageNetworkReachable, operatorv1.ConditionTrue, ""))
	t.Logf("half-way, %s: %s", operator.ConditionStorageNetworkReachable, h.condition(operator.ConditionStorageNetworkReachable).Message)

	t.Run("the rollout from half-way to done changes the classes once", func(t *testing.T) {
		h.t = t
		quiet()
		baseline := recreated()
		w := watchClasses(t, ctx, sim)
		progress, err := machinesets.Rollout(ctx, mc, sim.Client, machinesets.Selection{}, rollout.Options{MaxSurge: 1, PollInterval: 200 * time.Millisecond, Timeout: 2 * time.Minute})
		if err != nil || len(progress) != 1 || progress[0].State != rollout.Done {
			t.Fatalf("machinesets.Rollout: %v, %+v", err, progress)
		}
		settled("the rollout done", 3, 3)
		after := classesAdmit("every Machine of the attached template", storageSubnet)
		quiet()
		// Each class went once: deleted and created again, one StorageClassRecreated each.
		events := w.stop()
		for name, sc := range before {
			// After the creation, the next apply may take over the fields' ownership (a
			// modification of metadata alone).
			got := slices.DeleteFunc(slices.Clone(events[name]), func(e watch.EventType) bool { return e == watch.Modified })
			if !slices.Equal(got, []watch.EventType{watch.Deleted, watch.Added}) {
				t.Errorf("StorageClass %s: watch events %v during the rollout, want one deletion, then one creation", name, events[name])
			}
			if after[name].UID == sc.UID {
				t.Errorf("StorageClass %s: not re-created (UID %s)", name, sc.UID)
			}
		}
		if n := recreated() - baseline; n != len(before) {
			t.Errorf("%d StorageClassRecreated events during the rollout, want %d (one per class)", n, len(before))
		}
		before = after
	})

	// untouched checks that no class changed since before, after change() and the cluster
	// settled with want Machines.
	untouched := func(t *testing.T, what string, want int, change func()) {
		h.t = t
		quiet()
		baseline := recreated()
		w := watchClasses(t, ctx, sim)
		change()
		settled(what, want, want)
		quiet()
		if events := w.stop(); len(events) > 0 {
			t.Errorf("the StorageClasses changed: watch events %v", events)
		}
		now := classes()
		if len(now) != len(before) {
			t.Errorf("%d StorageClasses, %d before", len(now), len(before))
		}
		for name, sc := range before {
			got := now[name]
			if got.UID != sc.UID || got.ResourceVersion != sc.ResourceVersion || got.Parameters["nfs-shareClient"] != storageSubnet {
				t.Errorf("StorageClass %s: UID %s resourceVersion %s nfs-shareClient %q, before %s %s %q", name,
					got.UID, got.ResourceVersion, got.Parameters["nfs-shareClient"], sc.UID, sc.ResourceVersion, sc.Parameters["nfs-shareClient"])
			}
		}
		if n := recreated() - baseline; n != 0 {
			t.Errorf("%d StorageClassRecreated events", n)
		}
		// The message may follow the cluster by up to machinery.MessageRefresh.
		h.eventually(operator.ConditionStorageNetworkReachable+" after "+what, settle, func() (bool, string) {
			c := h.condition(operator.ConditionStorageNetworkReachable)
			return c.Status == operatorv1.ConditionTrue && strings.Contains(c.Message, "every worker has a port on the storage network"), fmt.Sprintf("%s %s", c.Status, c.Message)
		})
	}

	t.Run("a scale-up of the attached set leaves the classes untouched", func(t *testing.T) {
		untouched(t, "scaled from 3 to 5", 5, func() {
			if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Patch(ctx, cl.MachineSet, types.MergePatchType,
				[]byte(`{"spec":{"replicas":5}}`), metav1.PatchOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	})

	t.Run("a machine replaced leaves the classes untouched", func(t *testing.T) {
		untouched(t, "a Machine deleted and replaced", 5, func() {
			fresh, _, _ := machines()
			if err := mc.MachineV1beta1().Machines(machinectl.Namespace).Delete(ctx, fresh[0].Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.eventually("Machine "+fresh[0].Name+" gone", settle, func() (bool, string) {
				f, _, _ := machines()
				return !slices.ContainsFunc(f, func(m machinev1beta1.Machine) bool { return m.Name == fresh[0].Name }), "still there"
			})
		})
	})

	// A Machine whose storage port Neutron refuses (a full storage subnet) fails without a Node:
	// it never mounts, so it does not widen the classes either.
	t.Run("a machine that fails without a Node leaves the classes untouched", func(t *testing.T) {
		h.t = t
		quiet()
		baseline := recreated()
		w := watchClasses(t, ctx, sim)
		cl.FailNext("error creating Openstack instance: No more IP addresses available on network " + storageNet)
		if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Patch(ctx, cl.MachineSet, types.MergePatchType,
			[]byte(`{"spec":{"replicas":6}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		h.eventually("a sixth Machine Failed, five with a Node", settle, func() (bool, string) {
			list, err := mc.MachineV1beta1().Machines(machinectl.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + cl.MachineSet})
			if err != nil {
				return false, err.Error()
			}
			failed, joined := 0, 0
			for _, m := range list.Items {
				if m.Status.Phase != nil && *m.Status.Phase == machinev1beta1.PhaseFailed && m.Status.NodeRef == nil {
					failed++
				}
				if m.Status.NodeRef != nil {
					joined++
				}
			}
			return failed == 1 && joined == 5, fmt.Sprintf("%d Failed, %d with a Node (%s)", failed, joined, cl.Controller)
		})
		quiet()
		if events := w.stop(); len(events) > 0 {
			t.Errorf("the StorageClasses changed: watch events %v", events)
		}
		now := classes()
		for name, sc := range before {
			got := now[name]
			if got.UID != sc.UID || got.Parameters["nfs-shareClient"] != storageSubnet {
				t.Errorf("StorageClass %s: UID %s nfs-shareClient %q, before %s %q", name, got.UID, got.Parameters["nfs-shareClient"], sc.UID, sc.Parameters["nfs-shareClient"])
			}
		}
		if n := recreated() - baseline; n != 0 {
			t.Errorf("%d StorageClassRecreated events", n)
		}
		t.Logf("%s: %s", operator.ConditionStorageNetworkReachable, h.condition(operator.ConditionStorageNetworkReachable).Message)
	})
}

// classWatch records the watch events of the operator's StorageClasses, by class name.
type classWatch struct {
	t       *testing.T
	w       watch.Interface
	done    chan struct{}
	mu      sync.Mutex
	stopped bool
	err     string
	events  map[string][]watch.EventType
}

// watchClasses watches the operator's StorageClasses from now on.
func watchClasses(t *testing.T, ctx context.Context, sim *testenv.SimCluster) *classWatch {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue}
	list, err := sim.Client.StorageV1().StorageClasses().List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.ResourceVersion = list.ResourceVersion
	w, err := sim.Client.StorageV1().StorageClasses().Watch(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	cw := &classWatch{t: t, w: w, done: make(chan struct{}), events: map[string][]watch.EventType{}}
	go func() {
		defer close(cw.done)
		for ev := range w.ResultChan() {
			cw.mu.Lock()
			if sc, ok := ev.Object.(*storagev1.StorageClass); ok {
				cw.events[sc.Name] = append(cw.events[sc.Name], ev.Type)
			} else if st, ok := ev.Object.(*metav1.Status); ok && !cw.stopped && cw.err == "" {
				cw.err = st.Message
			}
			cw.mu.Unlock()
		}
		cw.mu.Lock()
		defer cw.mu.Unlock()
		if !cw.stopped && cw.err == "" {
			cw.err = "the watch ended before the test stopped it"
		}
	}()
	return cw
}

// stop ends the watch and returns what it saw; a watch that broke before fails the test (it
// may have missed events).
func (cw *classWatch) stop() map[string][]watch.EventType {
	cw.t.Helper()
	cw.mu.Lock()
	cw.stopped = true
	cw.mu.Unlock()
	cw.w.Stop()
	<-cw.done
	cw.mu.Lock()
	defer cw.mu.Unlock()
	if cw.err != "" {
		cw.t.Errorf("StorageClass watch: %s", cw.err)
	}
	return cw.events
}
