//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

func capiObject(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, doc string) {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(gvr).Namespace(machinesets.ClusterAPINamespace).Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func regexpMatch(pattern, s string) bool { return regexp.MustCompile(pattern).MatchString(s) }

func capiSet(kind, name, template string) string {
	return `{"apiVersion":"cluster.x-k8s.io/v1beta1","kind":"` + kind + `","metadata":{"name":"` + name + `"},
	"spec":{"clusterName":"ostest","selector":{"matchLabels":{"set":"` + name + `"}},"template":{"metadata":{"labels":{"set":"` + name + `"}},
	"spec":{"clusterName":"ostest","bootstrap":{"dataSecretName":"worker-user-data"},
	"infrastructureRef":{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","name":"` + template + `"}}}}}`
}

// newMigratingCluster is an apiserver shaped like an OpenShift cluster running the Machine API →
// Cluster API migration: the TechPreviewNoUpgrade Machine API CRDs, Cluster API's and CAPO's, the
// two namespaces, and two worker MachineSets, ostest-worker-0 (status.authoritativeAPI
// MachineAPI) and ostest-worker-1 (ClusterAPI), each of 2 replicas.
func newMigratingCluster(t *testing.T) (*testenv.APIServer, machineclient.Interface, dynamic.Interface) {
	t.Helper()
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	if err := api.UseMachineAPIFeatureSet("TechPreviewNoUpgrade"); err != nil {
		t.Fatal(err)
	}
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	mc := createMachineSetNamespace(t, ctx, api)
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.ClusterAPINamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, authority := range []machinev1beta1.MachineAuthority{machinev1beta1.MachineAuthorityMachineAPI, machinev1beta1.MachineAuthorityClusterAPI} {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet("ostest", i, 2), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms.Status.AuthoritativeAPI = authority
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).UpdateStatus(ctx, ms, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return api, mc, dynamic.NewForConfigOrDie(api.Config)
}

// capiTemplate is an OpenStackMachineTemplate with no ports, as JSON.
func capiTemplate(name string) string {
	return `{"apiVersion":"infrastructure.cluster.x-k8s.io/v1beta1","kind":"OpenStackMachineTemplate","metadata":{"name":"` + name + `"},
	"spec":{"template":{"spec":{"flavor":"m1.xlarge","image":{"filter":{"name":"rhcos"}}}}}}`
}

// TestClusterAPICommands: on an OpenShift cluster running the Machine API → Cluster API
// migration (TechPreviewNoUpgrade CRDs) with Cluster API's and CAPO's CRDs: `machinesets patch`
// patches the Machine API set and, for the set Cluster API is authoritative for, its Cluster
// API copy (a new template), one row each; `clusterapi patch` does the MachineDeployment, says
// who rolls, and exits 1 for a set whose template is missing; `clusterapi patch -f` patches a
// file with no cluster.
func TestClusterAPICommands(t *testing.T) {
	ctx := context.Background()
	api, mc, dyn := newMigratingCluster(t)
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-worker-1"))
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-md"))
	capiObject(t, dyn, clusterapi.MachineSetGVR, capiSet("MachineSet", "ostest-worker-1", "ostest-worker-1"))
	capiObject(t, dyn, clusterapi.MachineDeploymentGVR, capiSet("MachineDeployment", "ostest-md", "ostest-md"))
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", kubeconfig)
	const net, sg = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "77c0a1d2-1111-4111-8111-111111111111"

	code, out, errOut := runCLI(t, "machinesets", "patch", "--network", net, "--security-group", sg)
	if code != exitOK || !strings.Contains(out, "ostest-worker-0  patched  added network "+net) || !strings.Contains(out, "ostest-worker-1  patched  added network "+net) ||
		!strings.Contains(errOut, "its Cluster API copy in openshift-cluster-api now makes its machines from OpenStackMachineTemplate ostest-worker-1-manila-") {
		t.Fatalf("machinesets patch: exit %d\n%s%s", code, out, errOut)
	}
	u, err := dyn.Resource(clusterapi.MachineSetGVR).Namespace(machinesets.ClusterAPINamespace).Get(ctx, "ostest-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if name, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "infrastructureRef", "name"); !strings.HasPrefix(name, "ostest-worker-1-manila-") {
		t.Errorf("the Cluster API copy points at %q", name)
	}
	// The Machine API set Cluster API is authoritative for was not written.
	ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, "ostest-worker-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if attach.RecordIn(ms.Annotations) != nil {
		t.Errorf("the Machine API copy of ostest-worker-1 was patched: %v", ms.Annotations)
	}
	code, out, _ = runCLI(t, "machinesets", "patch", "--network", net, "--security-group", sg, "-o", "json")
	var rows []attach.Result
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil || len(rows) != 2 || rows[1].Action != attach.ActionUnchanged || !rows[1].ClusterAPI {
		t.Errorf("second machinesets patch: exit %d, %v\n%s", code, err, out)
	}

	code, out, errOut = runCLI(t, "clusterapi", "patch", "--network", net, "--dry-run")
	if code != exitOK || !strings.Contains(out, "machinedeployment/ostest-md  would-patch  added network "+net) || !strings.Contains(out, "+- {}") || !strings.Contains(out, "Dry run: nothing was written.") {
		t.Errorf("clusterapi patch --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "clusterapi", "patch", "--network", net, "--name", "machinedeployment/ostest-md")
	if code != exitOK || !strings.Contains(out, "template ostest-md -> ostest-md-manila-") || !strings.Contains(out, "Cluster API replaces its Machines itself") ||
		!strings.Contains(out, "template ostest-md deleted: no set and no Machine uses it any more") {
		t.Errorf("clusterapi patch: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = runCLI(t, "clusterapi", "list", "--network", net)
	if code != exitOK || !regexpMatch(`MachineDeployment\s+ostest-md\s+0\s+ostest-md-manila-[0-9a-f]{8}\s+attached\s+attached\s+0/0`, out) ||
		!regexpMatch(`MachineSet\s+ostest-worker-1\s+0\s+ostest-worker-1-manila-[0-9a-f]{8}\s+attached`, out) {
		t.Errorf("clusterapi list: exit %d\n%s%s", code, out, errOut)
	}

	capiObject(t, dyn, clusterapi.MachineSetGVR, capiSet("MachineSet", "ostest-broken", "gone"))
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"patch", "--network", net}, exitInvalid, `MachineSet openshift-cluster-api/ostest-broken cannot be patched: spec.template.spec.infrastructureRef: Not found: OpenStackMachineTemplate "gone"`},
		{[]string{"patch", "--network", net, "--name", "nope"}, exitInvalid, `--name: Not found: "nope"`},
		{[]string{"patch"}, exitUsage, "--network is required"},
		{[]string{"patch", "--network", net, "-n", "empty"}, exitOK, ""},
	} {
		code, _, errOut := runCLI(t, append([]string{"clusterapi"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.want, errOut)
		}
	}

	// -f touches no cluster: a kubeconfig that points nowhere is never read.
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	file := filepath.Join(t.TempDir(), "machines.yaml")
	data, err := os.ReadFile("../../clusterapi/testdata/file/openshift-cluster-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, data, 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "clusterapi", "patch", "-f", file, "--network", net, "--in-place")
	written, _ := os.ReadFile(file)
	backup, _ := os.ReadFile(file + ".bak")
	if code != exitOK || !strings.Contains(out, "new OpenStackMachineTemplate(s) appended: ocp-worker-0-manila-") || string(backup) != string(data) ||
		strings.Count(string(written), "\nkind: OpenStackMachineTemplate\n") != 4 {
		t.Errorf("clusterapi patch -f --in-place: exit %d\n%s%s", code, out, errOut)
	}
}
