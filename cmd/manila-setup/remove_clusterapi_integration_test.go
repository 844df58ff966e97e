//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
)

// TestClusterAPIRemove: on a cluster running the Machine API → Cluster API migration, a
// MachineDeployment whose template has a port the user added by hand gets the storage port, then
// clusterapi patch --remove: refused while a pod on the node of one of its Machines uses a Manila
// volume (naming them), shown by --dry-run, done with --force (a new template with the hand-added
// port and without the storage port; the record gone), unchanged the second time. machinesets
// patch --remove takes the port off the Cluster API copy of the set Cluster API is authoritative
// for. The file form goes there and back with -f.
func TestClusterAPIRemove(t *testing.T) {
	ctx := context.Background()
	api, _, dyn := newMigratingCluster(t)
	const net, hand = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	handTemplate := `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","metadata":{"name":"ostest-md"},
	"spec":{"template":{"spec":{"flavor":"m1.xlarge","image":{"filter":{"name":"rhcos"}},"ports":[{},{"network":{"id":"` + hand + `"},"vnicType":"direct"}]}}}}`
	capiObject(t, dyn, clusterapi.TemplateGVR, handTemplate)
	capiObject(t, dyn, clusterapi.MachineDeploymentGVR, capiSet("MachineDeployment", "ostest-md", "ostest-md"))
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-worker-1"))
	capiObject(t, dyn, clusterapi.MachineSetGVR, capiSet("MachineSet", "ostest-worker-1", "ostest-worker-1"))
	capiMachineOn(t, ctx, dyn, "ostest-md-abcde", "ostest-md", "capi-node-0")
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", kubeconfig)
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, args...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	cli(exitOK, "clusterapi", "patch", "--network", net, "--name", "machinedeployment/ostest-md")
	manilaVolumeInUse(t, ctx, api.Client, "capi-node-0")

	out := cli(exitInvalid, "clusterapi", "patch", "--remove", "--name", "machinedeployment/ostest-md")
	for _, want := range []string{"pod default/app on node capi-node-0", "claim default/data", "--force", "nothing was changed"} {
		if !strings.Contains(out, want) {
			t.Errorf("refusal does not say %q:\n%s", want, out)
		}
	}
	out = cli(exitOK, "clusterapi", "patch", "--remove", "--name", "machinedeployment/ostest-md", "--dry-run")
	if !strings.Contains(out, "machinedeployment/ostest-md  would-patch  removed network "+net) || !strings.Contains(out, "-    id: "+net) || strings.Contains(out, "-    id: "+hand) {
		t.Errorf("--remove --dry-run:\n%s", out)
	}
	out = cli(exitOK, "clusterapi", "patch", "--remove", "--name", "machinedeployment/ostest-md", "--force")
	if !strings.Contains(out, "machinedeployment/ostest-md  patched  removed network "+net) || !strings.Contains(out, "warning: --force: replacing the machine of node capi-node-0") {
		t.Errorf("--remove --force:\n%s", out)
	}
	spec := templateSpecOf(t, dyn, clusterapi.MachineDeploymentGVR, "ostest-md")
	if strings.Contains(spec, net) || !strings.Contains(spec, hand) {
		t.Errorf("the template after the removal: %s", spec)
	}
	if out := cli(exitOK, "clusterapi", "patch", "--remove", "--name", "machinedeployment/ostest-md"); !strings.Contains(out, "machinedeployment/ostest-md  unchanged  no attachment record") {
		t.Errorf("second removal:\n%s", out)
	}

	// The Cluster API copy of the Machine API set Cluster API is authoritative for.
	cli(exitOK, "machinesets", "patch", "--network", net)
	if spec := templateSpecOf(t, dyn, clusterapi.MachineSetGVR, "ostest-worker-1"); !strings.Contains(spec, net) {
		t.Fatalf("the copy's template after attaching: %s", spec)
	}
	out = cli(exitOK, "machinesets", "patch", "--remove")
	if !regexpMatch(`ostest-worker-0\s+patched\s+removed network `+net, out) || !regexpMatch(`ostest-worker-1\s+patched\s+removed network `+net, out) {
		t.Errorf("machinesets patch --remove:\n%s", out)
	}
	if spec := templateSpecOf(t, dyn, clusterapi.MachineSetGVR, "ostest-worker-1"); strings.Contains(spec, net) {
		t.Errorf("the copy's template after the removal: %s", spec)
	}

	// The file form, there and back.
	file := filepath.Join(t.TempDir(), "machines.yaml")
	src, err := os.ReadFile("../../clusterapi/testdata/file/openshift-cluster-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, src, 0o600); err != nil {
		t.Fatal(err)
	}
	cli(exitOK, "clusterapi", "patch", "-f", file, "--network", net, "--in-place")
	out = cli(exitOK, "clusterapi", "patch", "-f", file, "--remove", "--in-place")
	if !regexpMatch(`machineset/ocp-worker-0\s+patched\s+removed network `+net, out) || !strings.Contains(out, "new OpenStackMachineTemplate(s) appended") {
		t.Errorf("-f --remove:\n%s", out)
	}
	if out := cli(exitOK, "clusterapi", "patch", "-f", file, "--remove", "--in-place"); !strings.Contains(out, "unchanged, not written") {
		t.Errorf("-f --remove again:\n%s", out)
	}
}

// templateSpecOf is the spec of the template a set (or deployment) of the Cluster API namespace
// points at, as JSON; its record must be gone once nothing recorded is left.
func templateSpecOf(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) string {
	t.Helper()
	ctx := context.Background()
	ns := machinesets.ClusterAPINamespace
	set, err := dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref, _, _ := unstructured.NestedString(set.Object, "spec", "template", "spec", "infrastructureRef", "name")
	tmpl, err := dyn.Resource(clusterapi.TemplateGVR).Namespace(ns).Get(ctx, ref, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, _, _ := unstructured.NestedMap(tmpl.Object, "spec")
	b, _ := json.Marshal(spec)
	return string(b) + " record: " + set.GetAnnotations()[attach.Annotation]
}

// capiMachineOn makes a Cluster API Machine of MachineDeployment deployment whose Node is node.
func capiMachineOn(t *testing.T, ctx context.Context, dyn dynamic.Interface, name, deployment, node string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	doc := `{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"Machine","metadata":{"name":"` + name + `","labels":{"cluster.x-k8s.io/deployment-name":"` + deployment + `"}},
	"spec":{"clusterName":"ostest","bootstrap":{"dataSecretName":"worker-user-data"},
	"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachine","name":"` + name + `"}}}`
	if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	machines := dyn.Resource(clusterapi.MachineGVR).Namespace(machinesets.ClusterAPINamespace)
	created, err := machines.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(created.Object, map[string]any{"kind": "Node", "name": node}, "status", "nodeRef")
	if _, err := machines.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
