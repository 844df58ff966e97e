//go:build integration

package workers

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

const applyNet = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"

// TestApplyOneRuleForDryRunAndForce: one real apiserver with every kind a cluster can serve,
// each with the storage network attached (through Apply) and a removal that would cut a pod off
// its Manila volume: a MachineSet rolled afterwards, a Cluster API MachineDeployment, the
// ControlPlaneMachineSet (masters that run workloads), and a NodePool whose hosted cluster
// cannot be read. For every kind, the same answers: refused without a flag (nothing written),
// a note under --dry-run (its diff made, nothing written), warnings under --force (written).
func TestApplyOneRuleForDryRunAndForce(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	for _, install := range []func() error{api.InstallClusterAPICRDs, api.InstallHyperShiftCRDs} {
		if err := install(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{machinesets.Namespace, clusterapi.OpenShiftNamespace, "clusters"} {
		if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mc := machineclient.NewForConfigOrDie(api.Config)
	dyn := dynamic.NewForConfigOrDie(api.Config)
	c := Cluster{Machines: mc, Kube: api.Client, Dynamic: dyn}

	kinds := []struct {
		name  string
		sel   Selection
		node  string // "": its nodes cannot be read
		later bool   // the MachineSets are rolled afterwards
		force bool   // the attachment needs --force (the masters busy after it)
	}{
		{name: "machinesets", sel: Selection{MachineSets: &machinesets.Selection{Names: []string{"ostest-worker-0"}}}, node: "node-ms", later: true},
		{name: "clusterapi", sel: Selection{ClusterAPIScope: &clusterapi.Scope{Namespace: clusterapi.OpenShiftNamespace, Names: []string{"machinedeployment/md"}}}, node: "node-capi"},
		{name: "controlplane", sel: Selection{ControlPlane: true}, node: "node-master", force: true},
		{name: "nodepools", sel: Selection{NodePoolScope: &nodepools.Scope{Names: []string{"clusters/hc1-workers"}}}},
	}
	setUp := map[string]func(t *testing.T){
		"machinesets": func(t *testing.T) {
			if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest", 0, 1), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		},
		"clusterapi": func(t *testing.T) {
			create(t, dyn, clusterapi.TemplateGVR, `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","metadata":{"name":"md"},
				"spec":{"template":{"spec":{"flavor":"m1.xlarge","image":{"filter":{"name":"rhcos"}}}}}}`)
			create(t, dyn, clusterapi.MachineDeploymentGVR, `{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"MachineDeployment","metadata":{"name":"md"},
				"spec":{"clusterName":"ostest","selector":{"matchLabels":{"set":"md"}},"template":{"metadata":{"labels":{"set":"md"}},
				"spec":{"clusterName":"ostest","bootstrap":{"dataSecretName":"worker-user-data"},
				"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","name":"md"}}}}}`)
		},
		"controlplane": func(t *testing.T) {
			if _, err := machinectl.CreateAtRest(ctx, mc, machinectl.ControlPlaneMachineSet("ostest")); err != nil {
				t.Fatal(err)
			}
		},
		"nodepools": func(t *testing.T) {
			create(t, dyn, nodepools.GVR, `{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"NodePool","metadata":{"name":"hc1-workers","namespace":"clusters"},
				"spec":{"clusterName":"hc1","replicas":2,"management":{"upgradeType":"Replace"},"release":{"image":"quay.io/x/ocp-release:4.20.0"},
				"platform":{"type":"OpenStack","openstack":{"flavor":"m1.xlarge"}}}}`)
		},
	}

	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			setUp[k.name](t)
			attached, err := c.Apply(ctx, Request{Selection: k.sel, Attachment: attach.Attachment{Networks: []string{applyNet}}, Force: k.force, By: "test"})
			if err != nil || len(attached.Results) != 1 || attached.Results[0].Action != attach.ActionPatched {
				t.Fatalf("attach: %v %+v", err, attached)
			}
			if k.node != "" {
				machineOn(t, ctx, c, k.name, k.node)
				manilaPodOn(t, ctx, api.Client, k.node)
			}
			remove := Request{Selection: k.sel, Remove: &attach.Removal{}, By: "test"}
			if k.later {
				remove.Rollout = &Rollout{Later: true}
			}

			_, err = c.Apply(ctx, remove)
			var mounted *attach.MountedError
			var unseen *UnseenError
			switch {
			case k.node != "" && !errors.As(err, &mounted):
				t.Fatalf("without --force: %v, want the pod on %s named", err, k.node)
			case k.node == "" && !errors.As(err, &unseen):
				t.Fatalf("without --force: %v, want the unread hosted cluster named", err)
			}

			dry := remove
			dry.DryRun = true
			report, err := c.Apply(ctx, dry)
			if err != nil || len(report.Results) != 1 || report.Results[0].Action != attach.ActionWouldPatch || report.Results[0].Diff == "" ||
				!strings.Contains(strings.Join(report.Notes, "\n"), "without --dry-run the removal would be refused") {
				t.Fatalf("--dry-run: %v, notes %q, results %+v", err, report.Notes, report.Results)
			}

			forced := remove
			forced.Force = true
			report, err = c.Apply(ctx, forced)
			// Patched, not unchanged: neither the refusal nor the dry run had written.
			if err != nil || len(report.Results) != 1 || report.Results[0].Action != attach.ActionPatched ||
				!strings.Contains(strings.Join(report.Warnings, "\n"), "--force:") {
				t.Fatalf("--force: %v, warnings %q, results %+v", err, report.Warnings, report.Results)
			}
		})
	}
}

// create makes the object of doc (JSON) in its namespace, else the Cluster API one.
func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	ns := u.GetNamespace()
	if ns == "" {
		ns = clusterapi.OpenShiftNamespace
	}
	if _, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// machineOn makes a machine of the kind's object, made from its attached template, whose Node
// is node: what a controller would have made.
func machineOn(t *testing.T, ctx context.Context, c Cluster, kind, node string) {
	t.Helper()
	if kind == "clusterapi" {
		create(t, c.Dynamic, clusterapi.MachineGVR, `{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"md-abcde","labels":{"cluster.x-k8s.io/deployment-name":"md"}},
			"spec":{"clusterName":"ostest","bootstrap":{"dataSecretName":"worker-user-data"},
			"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachine","name":"md-abcde"}}}`)
		machines := c.Dynamic.Resource(clusterapi.MachineGVR).Namespace(clusterapi.OpenShiftNamespace)
		m, err := machines.Get(ctx, "md-abcde", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_ = unstructured.SetNestedField(m.Object, map[string]any{"kind": "Node", "name": node}, "status", "nodeRef")
		if _, err := machines.UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	}
	m := &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: machinesets.Namespace}}
	switch kind {
	case "machinesets":
		ms, err := c.Machines.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, "ostest-worker-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m.Labels, m.Spec = ms.Spec.Template.Labels, ms.Spec.Template.Spec
	case "controlplane":
		cpms, err := c.Machines.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Get(ctx, machinesets.ControlPlaneName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		tmpl := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine
		m.Labels, m.Spec = tmpl.ObjectMeta.Labels, tmpl.Spec
		// The operator has seen the attachment: at rest again, as before it.
		cpms.Status.ObservedGeneration = cpms.Generation
		if _, err := c.Machines.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).UpdateStatus(ctx, cpms, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	created, err := c.Machines.MachineV1beta1().Machines(machinesets.Namespace).Create(ctx, m, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: node}
	if _, err := c.Machines.MachineV1beta1().Machines(machinesets.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// manilaPodOn makes a pod on node whose claim is bound to a PersistentVolume of the Manila
// driver.
func manilaPodOn(t *testing.T, ctx context.Context, kc kubernetes.Interface, node string) {
	t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + node},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: attach.ManilaDriver, VolumeHandle: "share-" + node}},
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data-" + node},
		},
	}
	if _, err := kc.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app-" + node, Namespace: "default"},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data-" + node}}}},
		},
	}
	if _, err := kc.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
