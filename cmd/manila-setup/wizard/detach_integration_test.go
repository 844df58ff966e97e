//go:build integration

package wizard

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
	"github.com/manila-setup/manila-setup/workers"
)

// manilaPod puts on node a pod that uses a claim bound to a Manila PersistentVolume, as
// inuse.ManilaMounts finds them (the claim itself is not read).
func manilaPod(t *testing.T, ctx context.Context, c *testenv.SimCluster, node string) {
	t.Helper()
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "manila-pv"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: attach.ManilaDriver, VolumeHandle: "share-1"}},
		ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data"},
	}}
	if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"}, Spec: corev1.PodSpec{
		NodeName:   node,
		Containers: []corev1.Container{{Name: "app", Image: "registry.example/app"}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestWizardDetach attaches the storage network to one worker MachineSet and rolls it (as
// `machinesets patch --rollout` would), puts a pod on a Manila volume on its node, then drives
// the wizard: d on that set, the review of the removal refused for that pod, f and y to force,
// the removal applied and rolled. The set loses the network and its record, its Machine is
// replaced by one without the network, and the other worker is left alone.
func TestWizardDetach(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const infraID = "det-7k2p"
	mc, _ := simWorkers(t, ctx, c, cloud, infraID)
	storageNet := cloud.Seed.Networks["storage"]
	set := infraID + "-worker-1"

	backend := testBackend(LiveConfig{
		Kubeconfig: c.Kubeconfig, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo,
		UserAgent: "manila-setup/test", By: "manila-setup test",
		PollInterval: 200 * time.Millisecond, RolloutTimeout: 5 * time.Minute,
	})
	if _, err := backend.Connect(ctx, testenv.CloudDemo, ""); err != nil {
		t.Fatal(err)
	}
	sel := workers.Selection{MachineSets: &machinesets.Selection{Names: []string{set}}}
	if _, err := backend.Apply(ctx, attachRequest(attach.Attachment{Networks: []string{storageNet}}, sel, false)); err != nil {
		t.Fatal(err)
	}
	if _, err := backend.Roll(ctx, sel, func(rollout.SetProgress) {}); err != nil {
		t.Fatal(err)
	}
	machines := func() []string {
		live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+set)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range live {
			names = append(names, m.Name)
		}
		return names
	}
	attached := machines()
	m0, err := mc.MachineV1beta1().Machines(machinesets.Namespace).Get(ctx, attached[0], metav1.GetOptions{})
	if err != nil || m0.Status.NodeRef == nil {
		t.Fatalf("Machine %s of %s has no node: %v", attached[0], set, err)
	}
	manilaPod(t, ctx, c, m0.Status.NodeRef.Name)

	tm := teatest.NewTestModel(t, New(Options{Backend: backend, Context: ctx}), teatest.WithInitialTermSize(140, 45))
	scr := &terminal{}
	go scr.copyFrom(tm.Output())
	scr.waitFor(t, 0, settle, "✓ cloud manila-setup", "✓ cluster")
	m := scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "2/7 Storage network", "› * storage", "✓ export address")
	m = scr.mark()
	tm.Send(enter)
	// The node of the attached set lists its storage address after its node IP: that does not
	// make the storage network the machines' own, so the wizard goes on without asking.
	scr.waitFor(t, m, settle, "3/7 Security groups", "nfs")
	if strings.Contains(scr.since(m), "attach it anyway") {
		t.Fatalf("the storage network, attached to one set, was taken for the machines' own:\n%s", scr.since(m))
	}
	m = scr.mark()
	tm.Send(enter)
	// The sets load after the step is drawn, and keys sent meanwhile move nothing: wait for
	// the rows before moving down them.
	scr.waitFor(t, m, settle, "4/7 MachineSets", "2 of 3 MachineSets selected", "control plane: never touched")
	m = scr.mark()
	// The sets are listed by name: master, worker-0, worker-1.
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	scr.waitFor(t, m, settle, "d detach")
	m = scr.mark()
	tm.Type("d")
	scr.waitFor(t, m, settle, "5/7 Review", "removes network "+storageNet, "-  uuid: "+storageNet,
		"refusing to replace the machines of 1 node(s) while pods on them use Manila volumes", "pod default/app on node "+m0.Status.NodeRef.Name)
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "Not detached. Press esc to go back")
	m = scr.mark()
	tm.Type("f")
	scr.waitFor(t, m, settle, "Detach anyway?")
	m = scr.mark()
	tm.Type("y")
	scr.waitFor(t, m, settle, "Forced: enter detaches")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "6/7 Apply and roll")
	scr.waitFor(t, m, 6*time.Minute, "✓ every chosen MachineSet was patched and its machines replaced")
	tm.Type("q")
	final := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
	if o := final.Outcome(); !o.Applied || o.Err != nil || !strings.Contains(o.Summary, "Detached network "+storageNet+" from MachineSet "+set) {
		t.Errorf("outcome %+v", o)
	}

	ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, set, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec, err := machinesets.DecodeProviderSpec(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
	if err != nil || spec.HasNetwork(storageNet) {
		t.Errorf("MachineSet %s still has the storage network: %v %+v", set, err, spec)
	}
	if _, ok := ms.Annotations[attach.Annotation]; ok {
		t.Errorf("MachineSet %s keeps its record", set)
	}
	now := machines()
	for _, name := range now {
		if name == attached[0] {
			t.Errorf("Machine %s was not replaced", name)
		}
		mach, err := mc.MachineV1beta1().Machines(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s, err := machinesets.DecodeProviderSpec(mach.Spec.ProviderSpec.Value.Raw); err != nil || s.HasNetwork(storageNet) {
			t.Errorf("Machine %s still has the storage network", name)
		}
	}
	other, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, infraID+"-worker-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Annotations[attach.Annotation]; ok {
		t.Error("the other worker MachineSet was changed")
	}
}
