//go:build integration

package wizard

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// hostedNodePool is a NodePool of HostedCluster cluster in namespace "clusters": platform
// "OpenStack" (with ports on the networks given) or another one.
func hostedNodePool(t *testing.T, name, cluster, platform, upgradeType string, ports ...string) *unstructured.Unstructured {
	t.Helper()
	platformSpec := map[string]any{"type": platform}
	if platform == "OpenStack" {
		os := map[string]any{"flavor": "m1.xlarge"}
		for _, p := range ports {
			list, _ := os["additionalPorts"].([]any)
			os["additionalPorts"] = append(list, map[string]any{"network": map[string]any{"id": p}})
		}
		platformSpec["openstack"] = os
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
		"metadata": map[string]any{"name": name, "namespace": "clusters"},
		"spec": map[string]any{
			"clusterName": cluster, "replicas": int64(2),
			"management": map[string]any{"upgradeType": upgradeType},
			"release":    map[string]any{"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
			"platform":   platformSpec,
		},
	}}
}

// TestWizardNodePools drives the wizard through teatest against the loopback OpenStack and a
// real kube-apiserver shaped like a HyperShift management cluster on OpenStack: two worker
// MachineSets of its own, and the NodePools of three hosted clusters (hc1: Replace, hc2: InPlace
// with a port already, hc3: platform None). Three runs:
//
//  1. --dry-run, NodePools only: every screen, nothing written;
//  2. NodePools only, applied: the OpenStack NodePools get the port (read back from the
//     apiserver), the None one cannot be chosen and is untouched, the MachineSets too;
//  3. after the MachineSet API is gone (a management cluster without Machine API): the wizard
//     connects on the NodePools alone, and a second apply changes nothing.
func TestWizardNodePools(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, ns := range []string{machinesets.Namespace, "clusters"} {
		if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	const infraID = "mgmt-4h8s"
	for i := 0; i < 2; i++ {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet(infraID, i, 2), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	storageNet, otherNet, nfsGroup := cloud.Seed.Networks["storage"], "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37", cloud.Seed.SecurityGroups["nfs"]
	dyn := dynamic.NewForConfigOrDie(api.Config)
	pools := dyn.Resource(nodepools.GVR).Namespace("clusters")
	for _, np := range []*unstructured.Unstructured{
		hostedNodePool(t, "hc1-workers", "hc1", "OpenStack", "Replace"),
		hostedNodePool(t, "hc2-workers", "hc2", "OpenStack", "InPlace", otherNet),
		hostedNodePool(t, "hc3-none", "hc3", "None", "Replace"),
	} {
		if _, err := pools.Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NodePool %s: %v", np.GetName(), err)
		}
	}
	// HyperShift's view of hc1-workers, which the apply screen reports.
	u, err := pools.Get(ctx, "hc1-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = map[string]any{"replicas": int64(2), "conditions": []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "AsExpected", "lastTransitionTime": metav1.Now().UTC().Format(time.RFC3339)},
	}}
	if _, err := pools.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	versions := func() map[string]string {
		out := map[string]string{}
		l, err := pools.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range l.Items {
			out["NodePool "+u.GetName()] = u.GetResourceVersion()
		}
		sets, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).List(ctx, metav1.ListOptions{})
		if err == nil {
			for _, ms := range sets.Items {
				out["MachineSet "+ms.Name] = ms.ResourceVersion
			}
		}
		return out
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	backend := func() *LiveBackend {
		return testBackend(LiveConfig{Kubeconfig: kubeconfig, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo, UserAgent: "manila-setup/test", By: "manila-setup test"})
	}
	type step struct {
		keys []tea.KeyMsg
		want []string
	}
	keys := func(s ...string) []tea.KeyMsg {
		var out []tea.KeyMsg
		for _, k := range s {
			out = append(out, keyMsg(k))
		}
		return out
	}
	// walk runs one wizard to its end through the steps and returns its final model.
	walk := func(t *testing.T, dry bool, connected string, steps []step) Model {
		t.Helper()
		start := time.Now()
		tm := teatest.NewTestModel(t, New(Options{Backend: backend(), DryRun: dry, Context: ctx, NodePoolPoll: 300 * time.Millisecond}), teatest.WithInitialTermSize(120, 40))
		scr := &terminal{}
		go scr.copyFrom(tm.Output())
		scr.waitFor(t, 0, settle, "✓ cloud manila-setup", connected)
		for _, s := range steps {
			m := scr.mark()
			for _, k := range s.keys {
				tm.Send(k)
			}
			scr.waitFor(t, m, settle, s.want...)
		}
		tm.Send(enter)
		final := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
		t.Logf("wizard run took %s", time.Since(start).Round(time.Millisecond))
		return final
	}
	// Down to the fourth screen, the NFS group chosen, the MachineSets deselected.
	toNodePools := []step{
		{keys("enter"), []string{"2/7 Storage network", "› * storage"}},
		{keys("enter"), []string{"3/7 Security groups", "› [ ] nfs"}},
		{keys("space", "enter"), []string{"4/7 MachineSets, NodePools", "2 of 2 MachineSets and 2 of 3 NodePools selected",
			"clusters/hc1-workers", "hc1", "missing", "clusters/hc3-none", "not OpenStack (None)"}},
		{keys("space", "down", "space"), []string{"0 of 2 MachineSets and 2 of 3 NodePools selected"}},
		{keys("down", "down", "down", "space"), []string{"NodePool clusters/hc3-none cannot be chosen: not OpenStack (None)"}},
		{keys("enter"), []string{"5/7 Review", "NodePool clusters/hc1-workers (HostedCluster hc1): adds a port on network " + storageNet,
			"The security groups chosen are not added to NodePool clusters/hc1-workers, clusters/hc2-workers"}},
		// Under the storage network's warnings: the diffs and the commands, at the end.
		{keys("G"), []string{"+    id: " + storageNet, "nodepools patch", "--network " + storageNet, "--name clusters/hc2-workers"}},
	}
	const mixed = "2 MachineSets, 3 NodePools (HyperShift management cluster)"

	before := versions()
	t.Run("dry run", func(t *testing.T) {
		final := walk(t, true, mixed, append(slices.Clone(toNodePools),
			step{keys("a", "enter"), []string{"6/7 Apply and roll · dry run", "Dry run: nothing was patched", "NodePool clusters/hc2-workers: dry run, would get its port"}},
			step{keys("enter"), []string{"7/7 Verify", "not on this management cluster", "hcp create kubeconfig --namespace clusters --name hc1 > hc1.kubeconfig"}},
		))
		if o := final.Outcome(); o.Applied || o.Summary != "Dry run: nothing was changed." {
			t.Errorf("outcome %+v", o)
		}
		if after := versions(); !maps.Equal(before, after) {
			t.Errorf("the dry run wrote: %v -> %v", before, after)
		}
	})

	t.Run("apply", func(t *testing.T) {
		final := walk(t, false, mixed, append(slices.Clone(toNodePools),
			step{keys("a", "enter"), []string{"6/7 Apply and roll", "✓ every chosen NodePool has its port on the storage network",
				"NodePool clusters/hc1-workers: patched, adds a port on network " + storageNet, "HyperShift replaces its machines (upgradeType Replace)",
				"now: 0 of 2 nodes", "now: 2 of 2 nodes · Ready", "watch: oc get nodepool -n clusters hc1-workers",
				"upgradeType InPlace: only machines created from now on get the port"}},
			step{keys("enter"), []string{"7/7 Verify", "manila-setup --kubeconfig hc2.kubeconfig operator status"}},
		))
		if o := final.Outcome(); !o.Applied || o.Err != nil {
			t.Errorf("outcome %+v", o)
		}
		after := versions()
		for what, v := range before {
			changed := after[what] != v
			if want := what == "NodePool hc1-workers" || what == "NodePool hc2-workers"; changed != want {
				t.Errorf("%s: resourceVersion %s -> %s, want changed: %v", what, v, after[what], want)
			}
		}
		for name, want := range map[string][]string{"hc1-workers": {storageNet}, "hc2-workers": {otherNet, storageNet}} {
			u, err := pools.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var np struct {
				Spec struct {
					Platform struct {
						OpenStack struct {
							AdditionalPorts []struct {
								Network     struct{ ID string }
								Description string
							}
						}
					}
				}
			}
			b, _ := json.Marshal(u.Object)
			if err := json.Unmarshal(b, &np); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range np.Spec.Platform.OpenStack.AdditionalPorts {
				got = append(got, p.Network.ID)
				if p.Network.ID == storageNet && p.Description != nodepools.PortDescription {
					t.Errorf("%s: the storage port's description is %q", name, p.Description)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("NodePool %s: ports on %v, want %v", name, got, want)
			}
			if rec := record.Parse(u.GetAnnotations()); rec == nil || !slices.Equal(rec.Networks, []string{storageNet}) || slices.Contains(rec.SecurityGroups, nfsGroup) {
				t.Errorf("NodePool %s: attachment record %+v", name, rec)
			}
		}
		before = after
	})

	// A management cluster without the Machine API: the wizard goes on with the NodePools, and
	// attaching again changes nothing.
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if err := crds.Delete(ctx, "machinesets.machine.openshift.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(settle)
	for {
		_, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the MachineSet API is still served after its CRD was deleted: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	delete(before, "MachineSet "+infraID+"-worker-0")
	delete(before, "MachineSet "+infraID+"-worker-1")
	t.Run("again without MachineSets", func(t *testing.T) {
		final := walk(t, false, "3 NodePools (HyperShift management cluster, no MachineSets)", []step{
			{keys("enter"), []string{"2/7 Storage network", "› * storage"}},
			{keys("enter"), []string{"3/7 Security groups"}},
			{keys("enter"), []string{"4/7 NodePools", "2 of 3 NodePools selected", "has it"}},
			{keys("enter"), []string{"5/7 Review", "NodePool clusters/hc1-workers: unchanged, already attached", "NodePool clusters/hc2-workers: unchanged, already attached"}},
			{keys("a", "enter"), []string{"6/7 Apply and roll", "NodePool clusters/hc1-workers: unchanged, already attached"}},
			{keys("enter"), []string{"7/7 Verify", "hcp create kubeconfig"}},
		})
		if o := final.Outcome(); o.Err != nil {
			t.Errorf("outcome %+v", o)
		}
		if after := versions(); !maps.Equal(before, after) {
			t.Errorf("a second attachment wrote: %v -> %v", before, after)
		}
	})
	if t.Failed() {
		fmt.Println("NodePools after the runs:", versions())
	}

	// Neither kind served: then, and only then, the cluster is refused, saying what is needed.
	if err := crds.Delete(ctx, "nodepools.hypershift.openshift.io", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(settle); ; {
		if _, err := pools.List(ctx, metav1.ListOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("NodePools are still served after their CRD was deleted")
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, err = backend().Connect(ctx, testenv.CloudDemo, "")
	if err == nil || !strings.Contains(err.Error(), "serves neither MachineSets (machine.openshift.io/v1beta1) nor NodePools (nodepools.hypershift.openshift.io)") {
		t.Errorf("connecting to a cluster with neither: %v", err)
	}
}
