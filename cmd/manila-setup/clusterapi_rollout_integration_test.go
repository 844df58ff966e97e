//go:build integration

package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv/capictl"
)

// capiTemplatesOf waits until a Cluster API MachineSet of openshift-cluster-api has n Running
// Machines and returns the template each was cloned from.
func capiTemplatesOf(t *testing.T, dyn dynamic.Interface, set string, n int) []string {
	t.Helper()
	var from []string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ms, err := dyn.Resource(clusterapi.MachineGVR).Namespace(machinesets.ClusterAPINamespace).List(ctx, metav1.ListOptions{LabelSelector: clusterv1.MachineSetNameLabel + "=" + set})
		if err != nil {
			return false, nil
		}
		from = from[:0]
		for _, m := range ms.Items {
			if phase, _, _ := unstructured.NestedString(m.Object, "status", "phase"); phase != "Running" || m.GetDeletionTimestamp() != nil {
				return false, nil
			}
			infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
			o, err := dyn.Resource(clusterapi.OpenStackMachineGVR).Namespace(machinesets.ClusterAPINamespace).Get(ctx, infra, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			from = append(from, o.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation])
		}
		return len(from) == n, nil
	})
	if err != nil {
		t.Fatalf("Cluster API MachineSet %s never had %d Running Machines: %v (cloned from %v)", set, n, err, from)
	}
	return from
}

// TestClusterAPIRolloutCommands: against the simulated Cluster API MachineSet controller, on an
// OpenShift cluster running the Machine API → Cluster API migration: `machinesets rollout`
// rolls the Cluster API copy of the MachineSet Cluster API is authoritative for (one line for
// it, done, never skipped) and leaves a Cluster API-only set alone; `clusterapi rollout` then
// says up to date, exits 1 with the Machine named when a new Machine fails (the sets after it
// left pending) and for an unknown --name, 2 for flags that cannot roll anything.
func TestClusterAPIRolloutCommands(t *testing.T) {
	// ostest-worker-0 has no Machines: the Machine API rollout finds it up to date.
	api, _, dyn := newMigratingCluster(t)
	withReplicas := func(doc string, n string) string {
		return strings.Replace(doc, `"spec":{`, `"spec":{"replicas":`+n+`,`, 1)
	}
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-worker-1"))
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-extra"))
	capiObject(t, dyn, clusterapi.MachineSetGVR, withReplicas(capiSet("MachineSet", "ostest-worker-1", "ostest-worker-1"), "2"))
	capiObject(t, dyn, clusterapi.MachineSetGVR, withReplicas(capiSet("MachineSet", "ostest-extra", "ostest-extra"), "1"))
	ctl := capictl.Start(t, api.Config, capictl.Options{Namespace: machinesets.ClusterAPINamespace})
	capiTemplatesOf(t, dyn, "ostest-worker-1", 2)
	capiTemplatesOf(t, dyn, "ostest-extra", 1)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", kubeconfig)
	const net = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"

	code, out, errOut := runCLI(t, "clusterapi", "patch", "--network", net)
	if code != exitOK || !strings.Contains(out, "MachineSet: new Machines get the port; Cluster API MachineSets do not replace running Machines: `manila-setup clusterapi rollout` replaces them one at a time without losing capacity.") {
		t.Fatalf("clusterapi patch: exit %d\n%s%s", code, out, errOut)
	}

	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--name", "nope"}, exitInvalid, `--name: Not found: "nope"`},
		{[]string{"--max-surge", "0"}, exitUsage, "cannot both be 0"},
		{[]string{"-n", ""}, exitUsage, "--namespace cannot be empty"},
	} {
		code, _, errOut := runCLI(t, append([]string{"clusterapi", "rollout"}, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("clusterapi rollout %v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.want, errOut)
		}
	}

	start := time.Now()
	code, out, errOut = runCLI(t, "machinesets", "rollout", "--poll-interval", "50ms", "--timeout", "20s")
	t.Logf("machinesets rollout took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if code != exitOK || !strings.Contains(out, "ostest-worker-1  2/2 replaced  done") || !strings.Contains(out, "ostest-worker-0  0/2 replaced  up-to-date") ||
		strings.Contains(out, "skipped") || strings.Contains(out, "ostest-extra") {
		t.Fatalf("machinesets rollout: exit %d\n%s%s", code, out, errOut)
	}
	for _, from := range capiTemplatesOf(t, dyn, "ostest-worker-1", 2) {
		if !strings.HasPrefix(from, "ostest-worker-1-manila-") {
			t.Errorf("a Machine of the Cluster API copy of ostest-worker-1 is cloned from %s after the rollout", from)
		}
	}
	if from := capiTemplatesOf(t, dyn, "ostest-extra", 1); from[0] != "ostest-extra" {
		t.Errorf("machinesets rollout replaced the Machine of the Cluster API-only set ostest-extra (now from %s)", from[0])
	}

	code, out, errOut = runCLI(t, "clusterapi", "rollout", "--name", "ostest-worker-1", "-o", "json")
	var rows []rollout.SetProgress
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil || len(rows) != 1 || rows[0].State != rollout.UpToDate {
		t.Errorf("clusterapi rollout of a rolled set: exit %d, %v\n%s%s", code, err, out, errOut)
	}

	ctl.FailNext("Quota exceeded for resources: ['port']")
	code, out, errOut = runCLI(t, "clusterapi", "rollout", "--poll-interval", "50ms")
	created := ctl.Created()
	failed := created[len(created)-1]
	if code != exitInvalid || !strings.Contains(errOut, "rollout of Cluster API MachineSet openshift-cluster-api/ostest-extra stopped: new Machine "+failed+" failed: CreateError: Quota exceeded") ||
		!strings.Contains(errOut, "oc delete machines.cluster.x-k8s.io -n openshift-cluster-api "+failed) || !strings.Contains(out, "ostest-worker-1  0/2 replaced  pending") {
		t.Errorf("clusterapi rollout with a failing Machine: exit %d\n%s%s", code, out, errOut)
	}
	if !slices.Contains(capiTemplatesOfAll(t, dyn, "ostest-extra"), "ostest-extra") {
		t.Error("the old Machine of ostest-extra was removed though the new one failed")
	}
}

// capiTemplatesOfAll returns the template each live Machine of a set was cloned from, now.
func capiTemplatesOfAll(t *testing.T, dyn dynamic.Interface, set string) []string {
	t.Helper()
	ms, err := dyn.Resource(clusterapi.MachineGVR).Namespace(machinesets.ClusterAPINamespace).List(context.Background(), metav1.ListOptions{LabelSelector: clusterv1.MachineSetNameLabel + "=" + set})
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for _, m := range ms.Items {
		infra, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		o, err := dyn.Resource(clusterapi.OpenStackMachineGVR).Namespace(machinesets.ClusterAPINamespace).Get(context.Background(), infra, metav1.GetOptions{})
		if err == nil {
			from = append(from, o.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation])
		}
	}
	return from
}
