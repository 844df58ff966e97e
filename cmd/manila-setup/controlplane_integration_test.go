//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"

	machinev1 "github.com/openshift/api/machine/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestControlPlaneCommands runs controlplane list and patch as an admin would, in-process
// against a real apiserver with the installer's ControlPlaneMachineSet: no set, then the
// dry run, the patch (exit 0, the RollingUpdate note), list with the record, an Inactive set
// refused with exit 1 even with --force, and --remove.
func TestControlPlaneCommands(t *testing.T) {
	api := testenv.NewAPIServer(t)
	ctx := context.Background()
	mc := createMachineSetNamespace(t, ctx, api)
	admin, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", admin)

	code, out, errOut := runCLI(t, "controlplane", "list")
	if code != exitOK || !strings.Contains(out, "No ControlPlaneMachineSet in namespace openshift-machine-api") {
		t.Fatalf("list without a set: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", cliStorageNet, "--dry-run")
	if code != exitInvalid || !strings.Contains(errOut, "no ControlPlaneMachineSet cluster in namespace openshift-machine-api") {
		t.Fatalf("patch without a set: exit %d, want %d\n%s%s", code, exitInvalid, out, errOut)
	}

	createControlPlaneMachineSet(t, ctx, mc, "ostest-cp2")

	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG, "--dry-run")
	if code != exitOK || !strings.Contains(out, "controlplanemachineset/cluster  would-patch  added network "+cliStorageNet) ||
		!strings.Contains(out, "+- noAllowedAddressPairs: true") || !strings.Contains(out, "Dry run: nothing was written.") {
		t.Fatalf("patch --dry-run: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup controlplane patch --network %s --security-group %s --dry-run\n%s", cliStorageNet, cliStorageSG, out)
	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", cliStorageNet, "--security-group", cliStorageSG)
	if code != exitOK || !strings.Contains(out, "controlplanemachineset/cluster  patched") || !strings.Contains(errOut, "strategy RollingUpdate") {
		t.Fatalf("patch: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "controlplane", "list", "-o", "json")
	var listed []machinesets.ControlPlaneStatus
	if code != exitOK || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0].StorageNetwork != "attached" ||
		listed[0].State != "Active" || listed[0].Recorded == nil {
		t.Fatalf("list -o json after the patch: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "controlplane", "list")
	if code != exitOK || !strings.Contains(out, "cluster  Active  RollingUpdate  3") || !strings.Contains(out, "the operator has not seen its current spec yet") {
		t.Fatalf("list after the patch: exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("$ manila-setup controlplane list\n%s", out)

	// The removal, once the operator has seen the patch.
	got, err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Get(ctx, machinesets.ControlPlaneName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Status.ObservedGeneration = got.Generation
	if _, err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "--remove")
	if code != exitOK || !strings.Contains(out, "controlplanemachineset/cluster  patched  removed network "+cliStorageNet) {
		t.Fatalf("patch --remove: exit %d\n%s%s", code, out, errOut)
	}

	// An Inactive set (the state an Active one cannot return to: a new cluster's).
	if err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Delete(ctx, machinesets.ControlPlaneName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	inactive := machinectl.ControlPlaneMachineSet("ostest-cp2")
	inactive.Spec.State = machinev1.ControlPlaneMachineSetStateInactive
	if _, err := mc.MachineV1().ControlPlaneMachineSets(machinesets.Namespace).Create(ctx, inactive, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "controlplane", "patch", "--network", cliStorageNet, "--force")
	if code != exitInvalid || !strings.Contains(errOut, "its state is Inactive") || strings.Contains(errOut, "--force changes it anyway") {
		t.Fatalf("patch of an Inactive set with --force: exit %d, want %d and a refusal --force does not overrule\n%s%s", code, exitInvalid, out, errOut)
	}
	t.Logf("$ manila-setup controlplane patch --network %s --force  (Inactive)\n%s", cliStorageNet, errOut)
}

// createControlPlaneMachineSet creates the installer's ControlPlaneMachineSet of infraID with the
// status its operator reports at rest (3 masters, all updated and ready, this generation seen).
func createControlPlaneMachineSet(t *testing.T, ctx context.Context, mc machineclient.Interface, infraID string) {
	t.Helper()
	if _, err := machinectl.CreateAtRest(ctx, mc, machinectl.ControlPlaneMachineSet(infraID)); err != nil {
		t.Fatal(err)
	}
}
