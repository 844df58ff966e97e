//go:build integration

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestNetworksAttachInTmux runs the real binary in a real terminal (tmux), types through every
// screen like a person, and checks that the cluster's MachineSets and Machines changed.
func TestNetworksAttachInTmux(t *testing.T) {
	cloud := testenv.NewCloud(t)
	bin := buildCLI(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	mc := createMachineSetNamespace(t, ctx, c.APIServer)
	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: 500 * time.Millisecond, Ports: ports})
	const infraID = "tmux-4q9z"
	for i, replicas := range []int32{1, 1} {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet(infraID, i, replicas), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old, err := machinectl.WaitMachinesRunning(ctx, mc, 2, 2*time.Minute)
	if err != nil {
		t.Fatalf("Machines not Running: %v; %s", err, ctl)
	}
	// A Manila StorageClass without the operator: the verify screen must say the driver is missing.
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-default"}, Provisioner: "manila.csi.openstack.org"}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storageNet, nfsGroup := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]

	command := fmt.Sprintf("env TERM=xterm-256color %s --kubeconfig %s --os-client-config-file %s --os-cloud %s networks attach --no-color --poll-interval 200ms --check-timeout 4s; echo EXIT=$?; sleep 600",
		bin, c.Kubeconfig, cloud.CloudsFile, testenv.CloudDemo)
	term := testenv.NewTmux(t, 100, 30, command)
	start := time.Now()
	term.WaitFor(2*time.Minute, "1/7 Connect", "✓ cloud manila-setup", "2 MachineSets")
	term.Keys("?")
	term.WaitFor(2*time.Minute, "Help: Connect", "Any key closes this help.")
	term.Keys("Space")
	term.WaitFor(2*time.Minute, "Press enter to continue.")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "2/7 Storage network", "› * storage", "exported on it")
	// "deco": an "o" no network ID holds (a filter of hex letters alone also matches the IDs).
	term.Keys("/", "d", "e", "c", "o")
	term.WaitFor(2*time.Minute, "1 of 3 networks", "no Manila export location lies in this")
	term.Keys("Escape") // clears the filter; the cursor stays on decoy
	term.WaitFor(2*time.Minute, "3 of 3 networks", "›   decoy")
	term.Keys("Up")
	term.WaitFor(2*time.Minute, "› * storage")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "3/7 Security groups", "› [ ] nfs")
	term.Keys("Space", "r")
	term.WaitFor(2*time.Minute, "[x] nfs", "Rules of nfs", "together: NFS")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "4/7 MachineSets", "2 of 2 MachineSets selected")
	term.Keys("Enter")
	// The seeded storage subnet is as Neutron makes one (a gateway, no DNS servers): its
	// warnings come first and must be acknowledged before anything is applied.
	screen := term.WaitFor(2*time.Minute, "5/7 Review", "its gateway 10.0.0.1 is handed out", "! 2 warnings to acknowledge (a) before applying")
	t.Logf("review screen:\n%s", screen)
	term.Keys("a")
	term.WaitFor(2*time.Minute, "✓ 2 warnings of the storage network acknowledged")
	term.Keys("G")
	// The equivalent commands repeat the flags the wizard was started with (clouds.yaml only
	// where the environment would not name it anyway), and run as printed: the patch, copied
	// from the screen with --dry-run added, exits 0 with a new shell's environment.
	want := []string{"machinesets rollout", "--name " + infraID + "-worker-0", "--kubeconfig " + c.Kubeconfig}
	if os.Getenv("OS_CLIENT_CONFIG_FILE") != cloud.CloudsFile {
		want = append(want, "--os-client-config-file "+cloud.CloudsFile)
	}
	screen = term.WaitFor(2*time.Minute, want...)
	patch := copiedCommand(screen, "machinesets patch")
	run := exec.CommandContext(ctx, "sh", "-c", strings.Replace(patch, "manila-setup", bin, 1)+" --dry-run")
	if out, err := run.CombinedOutput(); err != nil {
		t.Errorf("the printed command failed as copied: %s\n%v\n%s", patch, err, out)
	}
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "6/7 Apply and roll")
	screen = term.WaitFor(6*time.Minute, "every chosen MachineSet was patched and its machines replaced")
	t.Logf("rolled %s after the start:\n%s", time.Since(start).Round(time.Second), screen)
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "7/7 Verify", "not found: the Manila CSI driver operator is not installed", "csi-manila-default")
	term.Keys("t")
	screen = term.WaitFor(2*time.Minute, "PVC rwx-check was not bound within 4s", "cleaned up: namespace manila-setup-rwx-check-")
	t.Logf("verify screen:\n%s", screen)
	term.Keys("Enter")
	screen = term.WaitFor(2*time.Minute, "EXIT=0", "their machines were replaced.")
	t.Logf("after the wizard:\n%s", screen)

	for i := 0; i < 2; i++ {
		name := fmt.Sprintf("%s-worker-%d", infraID, i)
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := machinesets.DecodeProviderSpec(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
		if err != nil {
			t.Fatal(err)
		}
		attached := slices.ContainsFunc(spec.Spec.Networks, func(n machinev1alpha1.NetworkParam) bool { return n.UUID == storageNet && n.NoAllowedAddressPairs })
		if !attached || !spec.HasSecurityGroup(nfsGroup) {
			t.Errorf("MachineSet %s: networks %+v, security groups %+v", name, spec.Spec.Networks, spec.Spec.SecurityGroups)
		}
	}
	list, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Items {
		if m.DeletionTimestamp == nil && slices.Contains(old, m.Name) {
			t.Errorf("Machine %s was not replaced", m.Name)
		}
	}
	nss, _ := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	for _, ns := range nss.Items {
		if strings.HasPrefix(ns.Name, "manila-setup-rwx-check-") && ns.DeletionTimestamp == nil && ns.Status.Phase != corev1.NamespaceTerminating {
			t.Errorf("namespace %s of the multi-writer check was left behind", ns.Name)
		}
	}
}

// copiedCommand is the command line on the screen that contains what, with its shell
// continuations joined, as a user copies it.
func copiedCommand(screen, what string) string {
	var cmd []string
	for _, l := range strings.Split(screen, "\n") {
		l = strings.TrimSpace(l)
		if len(cmd) == 0 && !strings.HasPrefix(l, "manila-setup ") {
			continue
		}
		cmd = append(cmd, strings.TrimSuffix(l, "\\"))
		if !strings.HasSuffix(l, "\\") {
			if joined := strings.Join(cmd, " "); strings.Contains(joined, what) {
				return strings.Join(strings.Fields(joined), " ")
			}
			cmd = nil
		}
	}
	return ""
}
