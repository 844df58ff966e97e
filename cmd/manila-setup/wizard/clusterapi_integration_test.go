//go:build integration

package wizard

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/capictl"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestWizardClusterAPI drives the wizard against the loopback OpenStack and a real
// kube-apiserver of a cluster in the Machine API → Cluster API migration (TechPreviewNoUpgrade
// CRDs, Cluster API's and CAPO's CRDs, capictl creating the Cluster API MachineSets' Machines):
// Machine API MachineSet ostest-worker-0, which Cluster API is authoritative for, with its copy;
// a standalone Cluster API MachineSet ostest-extra and a MachineDeployment ostest-md. A dry run
// writes nothing; the apply points the copy, the set and the deployment at new templates with
// the storage port, replaces every Machine of the copy and of the standalone set, and leaves the
// Machine API MachineSet alone.
func TestWizardClusterAPI(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	if err := api.UseMachineAPIFeatureSet("TechPreviewNoUpgrade"); err != nil {
		t.Fatal(err)
	}
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, ns := range []string{machinesets.Namespace, clusterapi.OpenShiftNamespace} {
		if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest", 0, 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).UpdateStatus(ctx, ms, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	create := func(gvr schema.GroupVersionResource, doc string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(gvr).Namespace(clusterapi.OpenShiftNamespace).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s %s: %v", gvr.Resource, u.GetName(), err)
		}
	}
	set := func(kind, name string) string {
		return `{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"` + kind + `","metadata":{"name":"` + name + `"},
		"spec":{"clusterName":"ostest","replicas":1,"selector":{"matchLabels":{"set":"` + name + `"}},"template":{"metadata":{"labels":{"set":"` + name + `"}},
		"spec":{"clusterName":"ostest","bootstrap":{"dataSecretName":"worker-user-data"},
		"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","name":"` + name + `"}}}}}`
	}
	for _, name := range []string{"ostest-worker-0", "ostest-extra", "ostest-md"} {
		create(clusterapi.TemplateGVR, `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","metadata":{"name":"`+name+`"},
		"spec":{"template":{"spec":{"flavor":"m1.xlarge","image":{"filter":{"name":"rhcos"}}}}}}`)
	}
	create(clusterapi.MachineSetGVR, set("MachineSet", "ostest-worker-0"))
	create(clusterapi.MachineSetGVR, set("MachineSet", "ostest-extra"))
	create(clusterapi.MachineDeploymentGVR, set("MachineDeployment", "ostest-md"))
	// Real ports on the networks the OpenStackMachines name: the rollout's check of the first new
	// machine looks for its address on the storage network.
	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	capictl.Start(t, api.Config, capictl.Options{Namespace: clusterapi.OpenShiftNamespace, Ports: ports})

	// clonedFrom is the template each Running Machine of a Cluster API MachineSet was made from,
	// once it has want of them and none is going away.
	clonedFrom := func(t *testing.T, set string, want int) []string {
		t.Helper()
		var from []string
		for deadline := time.Now().Add(settle); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			from = nil
			l, err := dyn.Resource(clusterapi.MachineGVR).Namespace(clusterapi.OpenShiftNamespace).List(ctx, metav1.ListOptions{LabelSelector: clusterv1.MachineSetNameLabel + "=" + set})
			if err != nil {
				continue
			}
			settled := true
			for _, m := range l.Items {
				phase, _, _ := unstructured.NestedString(m.Object, "status", "phase")
				infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
				o, err := dyn.Resource(clusterapi.OpenStackMachineGVR).Namespace(clusterapi.OpenShiftNamespace).Get(ctx, infra, metav1.GetOptions{})
				if phase != "Running" || m.GetDeletionTimestamp() != nil || err != nil {
					settled = false
					break
				}
				from = append(from, o.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation])
			}
			if settled && len(from) == want {
				return from
			}
		}
		t.Fatalf("Cluster API MachineSet %s never had %d Running Machines (cloned from %v)", set, want, from)
		return nil
	}
	clonedFrom(t, "ostest-worker-0", 1)
	clonedFrom(t, "ostest-extra", 1)

	// versions are the resourceVersions of everything the wizard may write, and the templates.
	versions := func() map[string]string {
		out := map[string]string{}
		for _, gvr := range []schema.GroupVersionResource{clusterapi.MachineSetGVR, clusterapi.MachineDeploymentGVR, clusterapi.TemplateGVR} {
			l, err := dyn.Resource(gvr).Namespace(clusterapi.OpenShiftNamespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, u := range l.Items {
				out[gvr.Resource+"/"+u.GetName()] = u.GetResourceVersion()
			}
		}
		m, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, "ostest-worker-0", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out["Machine API MachineSet ostest-worker-0"] = m.ResourceVersion
		return out
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	storageNet := cloud.Seed.Networks["storage"]
	walk := func(t *testing.T, dry bool, final string) Model {
		t.Helper()
		start := time.Now()
		b := testBackend(LiveConfig{Kubeconfig: kubeconfig, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo, UserAgent: "manila-setup/test", By: "manila-setup test",
			PollInterval: 50 * time.Millisecond, RolloutTimeout: 5 * time.Minute})
		tm := teatest.NewTestModel(t, New(Options{Backend: b, DryRun: dry, Context: ctx}), teatest.WithInitialTermSize(160, 50))
		scr := &terminal{}
		go scr.copyFrom(tm.Output())
		scr.waitFor(t, 0, settle, "✓ cloud manila-setup")
		for _, s := range []struct {
			key  tea.KeyMsg
			want []string
		}{
			{enter, []string{"2/7 Storage network", "› * storage"}},
			{enter, []string{"3/7 Security groups"}},
			{enter, []string{"4/7 MachineSets", "1 of 1 MachineSets and 2 of 2 Cluster API sets selected", "via CAPI",
				"ostest-extra", "MachineSet 1", "ostest-md", "Deployment 1"}},
			{enter, []string{"5/7 Review", "MachineSet ostest-worker-0: adds network " + storageNet + " (via its Cluster API copy",
				"Cluster API MachineSet ostest-extra: new OpenStackMachineTemplate ostest-extra-manila-", "Cluster API MachineDeployment ostest-md: new OpenStackMachineTemplate"}},
			// The storage network's warnings come first: the last diff is further down.
			{keyMsg("G"), []string{"+++ OpenStackMachineTemplate openshift-cluster-api/ostest-md spec.template.spec (patched)"}},
			// The seeded storage subnet's warnings, acknowledged before anything is applied.
			{keyMsg("a"), []string{"✓ 2 warnings of the storage network acknowledged"}},
			{enter, []string{final}},
		} {
			m := scr.mark()
			tm.Send(s.key)
			scr.waitFor(t, m, settle, s.want...)
		}
		tm.Send(keyMsg("q"))
		got := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
		t.Logf("wizard run took %s", time.Since(start).Round(time.Millisecond))
		return got
	}

	before := versions()
	t.Run("dry run", func(t *testing.T) {
		walk(t, true, "Dry run: nothing was patched")
		if after := versions(); !maps.Equal(before, after) {
			t.Errorf("the dry run wrote: %v -> %v", before, after)
		}
	})

	t.Run("apply", func(t *testing.T) {
		final := walk(t, false, "✓ every chosen set was patched")
		if o := final.Outcome(); !o.Applied || o.Err != nil {
			t.Errorf("outcome %+v", o)
		}
		if after := versions(); after["Machine API MachineSet ostest-worker-0"] != before["Machine API MachineSet ostest-worker-0"] {
			t.Error("the Machine API MachineSet Cluster API is authoritative for was written")
		}
		for _, o := range []struct {
			gvr  schema.GroupVersionResource
			name string
		}{{clusterapi.MachineSetGVR, "ostest-worker-0"}, {clusterapi.MachineSetGVR, "ostest-extra"}, {clusterapi.MachineDeploymentGVR, "ostest-md"}} {
			u, err := dyn.Resource(o.gvr).Namespace(clusterapi.OpenShiftNamespace).Get(ctx, o.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tmpl, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "infrastructureRef", "name")
			if !strings.HasPrefix(tmpl, o.name+"-manila-") {
				t.Errorf("%s %s makes its Machines from %s, not a new template", o.gvr.Resource, o.name, tmpl)
				continue
			}
			tu, err := dyn.Resource(clusterapi.TemplateGVR).Namespace(clusterapi.OpenShiftNamespace).Get(ctx, tmpl, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ports, _, _ := unstructured.NestedSlice(tu.Object, "spec", "template", "spec", "ports")
			if b, _ := json.Marshal(ports); !strings.Contains(string(b), `"id":"`+storageNet+`"`) {
				t.Errorf("template %s has ports %s, none on the storage network", tmpl, b)
			}
			if o.gvr == clusterapi.MachineSetGVR {
				for _, from := range clonedFrom(t, o.name, 1) {
					if from != tmpl {
						t.Errorf("a Machine of Cluster API MachineSet %s is cloned from %s after the rollout, want %s", o.name, from, tmpl)
					}
				}
			}
		}
	})
}
