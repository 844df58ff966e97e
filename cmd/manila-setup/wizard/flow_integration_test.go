//go:build integration

package wizard

import (
	"bytes"
	"context"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/exp/teatest"
	machinev1alpha1 "github.com/openshift/api/machine/v1alpha1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// screen collects everything the program draws, so that a wait can look at what was drawn
// since a given point.
type screen struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *screen) copyFrom(r io.Reader) {
	b := make([]byte, 4096)
	for {
		n, err := r.Read(b)
		if n > 0 {
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
		}
		if err != nil && err != io.EOF {
			return
		}
		if n == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (s *screen) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// settle bounds a wait for the wizard to draw what it must. It only caps a failure: with the
// whole suite running on two cores, a step that asks the cloud or the cluster can take many
// times what it takes on an idle machine.
const settle = 2 * time.Minute

// waitFor waits until every text appears in what was drawn after mark.
func (s *screen) waitFor(t *testing.T, mark int, timeout time.Duration, texts ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		drawn := s.buf.String()[mark:]
		s.mu.Unlock()
		missing := ""
		for _, text := range texts {
			if !strings.Contains(drawn, text) {
				missing = text
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q not drawn within %s; last 3000 bytes drawn:\n%s", missing, timeout, tail(drawn, 3000))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// simWorkers creates installer-shaped MachineSets (two workers, one control plane with no
// replicas) in a sim cluster whose Machine API is machinectl, and waits for the workers' Machines.
func simWorkers(t *testing.T, ctx context.Context, c *testenv.SimCluster, infraID string) (machineclient.Interface, []string) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: 500 * time.Millisecond})
	sets := []*machinev1beta1.MachineSet{
		machinectl.WorkerMachineSet(infraID, 0, 2),
		machinectl.WorkerMachineSet(infraID, 1, 1),
		machinectl.MachineSet(infraID, "master", infraID+"-master", 0, machinectl.WorkerProviderSpec(infraID, "nova")),
	}
	for _, ms := range sets {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	old, err := machinectl.WaitMachinesRunning(ctx, mc, 3, 2*time.Minute)
	if err != nil {
		t.Fatalf("worker Machines not Running: %v; %s", err, ctl)
	}
	return mc, slices.Clone(old)
}

// installDriverStatus makes the cluster look as if the operator ran: a ClusterCSIDriver with
// conditions and a Manila StorageClass (nothing provisions its volumes in a sim cluster).
func installDriverStatus(t *testing.T, ctx context.Context, c *testenv.SimCluster) {
	t.Helper()
	oc, err := operatorclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	d, err := oc.OperatorV1().ClusterCSIDrivers().Create(ctx, &operatorv1.ClusterCSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: DriverName},
		Spec:       operatorv1.ClusterCSIDriverSpec{OperatorSpec: operatorv1.OperatorSpec{ManagementState: operatorv1.Managed}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	d.Status.Conditions = []operatorv1.OperatorCondition{
		{Type: "ManilaDriverControllerServiceControllerAvailable", Status: operatorv1.ConditionTrue, Reason: "AsExpected", LastTransitionTime: now},
		{Type: "ManilaDriverControllerServiceControllerDegraded", Status: operatorv1.ConditionFalse, LastTransitionTime: now},
	}
	if _, err := oc.OperatorV1().ClusterCSIDrivers().UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-default"}, Provisioner: DriverName,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var (
	enter = tea.KeyMsg{Type: tea.KeyEnter}
	space = tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
)

// TestWizardFullFlow drives the whole wizard through teatest against the loopback OpenStack and
// a sim cluster: connect, the discovered storage network, the NFS security group, the worker
// MachineSets, review, apply and roll, verify with the multi-writer check. Then it checks the
// cluster: the MachineSets carry the network (noAllowedAddressPairs) and the group, every old
// Machine was replaced, and the check's namespace is gone.
func TestWizardFullFlow(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c := testenv.NewSimCluster(t, testenv.SimOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const infraID = "tui-7k2p"
	mc, old := simWorkers(t, ctx, c, infraID)
	installDriverStatus(t, ctx, c)
	storageNet, nfsGroup := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]

	backend := NewLiveBackend(LiveConfig{
		Kubeconfig: c.Kubeconfig, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo,
		UserAgent: "manila-setup/test", By: "manila-setup test",
		PollInterval: 200 * time.Millisecond, RolloutTimeout: 5 * time.Minute, CheckTimeout: 4 * time.Second,
	})
	start := time.Now()
	tm := teatest.NewTestModel(t, New(Options{Backend: backend, Context: ctx, StoragePoll: 500 * time.Millisecond}), teatest.WithInitialTermSize(120, 40))
	scr := &screen{}
	go scr.copyFrom(tm.Output())

	scr.waitFor(t, 0, settle, "✓ cloud manila-setup", "✓ cluster", "3 MachineSets")
	t.Logf("connected after %s", time.Since(start).Round(time.Millisecond))
	m := scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "2/7 Storage network", "› * storage", "exported on it", "✓ export address")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "3/7 Security groups", "› [ ] nfs", "suggested: allows NFS egress to 10.0.0.")
	m = scr.mark()
	tm.Send(space)
	scr.waitFor(t, m, settle, "[x] nfs")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "4/7 MachineSets", "2 of 3 MachineSets selected", "control plane: never touched")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "5/7 Review", "+- noAllowedAddressPairs: true", "+  uuid: "+storageNet, "+- uuid: "+nfsGroup)
	m = scr.mark()
	tm.Type("G") // to the end: the equivalent commands
	scr.waitFor(t, m, settle, "machinesets patch --network "+storageNet, "machinesets rollout --name "+infraID+"-worker-0 --name "+infraID+"-worker-1")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "6/7 Apply and roll", "rolling")
	scr.waitFor(t, m, 6*time.Minute, "✓ every chosen MachineSet was patched and its machines replaced")
	t.Logf("rolled after %s", time.Since(start).Round(time.Millisecond))
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "7/7 Verify", "conditions as expected: every controller Available, none Degraded", "csi-manila-default")
	m = scr.mark()
	tm.Type("t")
	// Nothing provisions volumes in a sim cluster: the check must say so, and clean up.
	scr.waitFor(t, m, settle, "✗ multi-writer check on csi-manila-default: PVC rwx-check was not bound within 4s", "cleaned up: namespace manila-setup-rwx-check-")
	tm.Send(enter)
	final := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
	if o := final.Outcome(); !o.Applied || o.Err != nil || o.Interrupted {
		t.Errorf("outcome %+v", o)
	}

	// The cluster changed for real.
	for _, name := range []string{infraID + "-worker-0", infraID + "-worker-1"} {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		spec, err := machinesets.DecodeProviderSpec(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
		if err != nil {
			t.Fatal(err)
		}
		netOK := slices.ContainsFunc(spec.Spec.Networks, func(n machinev1alpha1.NetworkParam) bool {
			return n.UUID == storageNet && n.NoAllowedAddressPairs
		})
		if !netOK || !spec.HasSecurityGroup(nfsGroup) {
			t.Errorf("MachineSet %s: networks %+v, security groups %+v", name, spec.Spec.Networks, spec.Spec.SecurityGroups)
		}
		if _, ok := ms.Annotations[attach.Annotation]; !ok {
			t.Errorf("MachineSet %s has no %s", name, attach.Annotation)
		}
	}
	master, _ := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, infraID+"-master", metav1.GetOptions{})
	if spec, _ := machinesets.DecodeProviderSpec(master.Spec.Template.Spec.ProviderSpec.Value.Raw); spec == nil || spec.HasNetwork(storageNet) {
		t.Error("the control-plane MachineSet was patched")
	}
	list, err := mc.MachineV1beta1().Machines(machinesets.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, mach := range list.Items {
		if mach.DeletionTimestamp != nil {
			continue
		}
		live++
		if slices.Contains(old, mach.Name) {
			t.Errorf("Machine %s was not replaced", mach.Name)
		}
		if spec, err := machinesets.DecodeProviderSpec(mach.Spec.ProviderSpec.Value.Raw); err != nil || !spec.HasNetwork(storageNet) {
			t.Errorf("Machine %s lacks the storage network", mach.Name)
		}
	}
	if live != 3 {
		t.Errorf("%d Machines after the rollout, want 3", live)
	}
	nss, _ := c.Client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: rwxcheck.Label})
	for _, ns := range nss.Items {
		if ns.DeletionTimestamp == nil {
			t.Errorf("namespace %s of the multi-writer check was left behind", ns.Name)
		}
	}
}

// TestWizardDryRunAndAFailingContext starts on a kubeconfig whose current context points at
// nothing: the connect screen explains, the other context works, and a --dry-run walk through
// every screen leaves the MachineSets exactly as they were.
func TestWizardDryRunAndAFailingContext(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	const infraID = "dry-5m3n"
	for i := 0; i < 2; i++ {
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet(infraID, i, 2), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	versions := func() map[string]string {
		list, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, ms := range list.Items {
			out[ms.Name] = ms.ResourceVersion
		}
		return out
	}
	before := versions()

	// The admin kubeconfig plus a context "dead" on a port nothing listens on, made current.
	dir := t.TempDir()
	path, err := api.KubeconfigFor(dir, "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kcfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good := kcfg.CurrentContext
	dead := clientcmdapi.NewCluster()
	dead.Server = "https://127.0.0.1:1"
	kcfg.Clusters["dead"] = dead
	deadCtx := kcfg.Contexts[good].DeepCopy()
	deadCtx.Cluster = "dead"
	kcfg.Contexts["a-dead"] = deadCtx
	kcfg.CurrentContext = "a-dead"
	if err := clientcmd.WriteToFile(*kcfg, path); err != nil {
		t.Fatal(err)
	}

	backend := NewLiveBackend(LiveConfig{Kubeconfig: path, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo, UserAgent: "manila-setup/test"})
	tm := teatest.NewTestModel(t, New(Options{Backend: backend, DryRun: true, Context: ctx}), teatest.WithInitialTermSize(80, 24))
	scr := &screen{}
	go scr.copyFrom(tm.Output())
	scr.waitFor(t, 0, settle, "cannot be reached", "127.0.0.1:1", "press r to check again")
	m := scr.mark()
	tm.Send(tea.KeyMsg{Type: tea.KeyTab})
	tm.Send(tea.KeyMsg{Type: tea.KeyDown})
	tm.Send(enter)
	scr.waitFor(t, m, settle, "✓ cluster", "2 MachineSets")
	for _, step := range []struct {
		keys []tea.KeyMsg
		want []string
	}{
		{[]tea.KeyMsg{enter}, []string{"2/7 Storage network · dry run", "› * storage"}},
		{[]tea.KeyMsg{enter}, []string{"3/7 Security groups"}},
		{[]tea.KeyMsg{space, enter}, []string{"4/7 MachineSets", "2 of 2 MachineSets selected"}},
		{[]tea.KeyMsg{enter}, []string{"5/7 Review", "+- noAllowedAddressPairs: true", "continue (dry run)"}},
		{[]tea.KeyMsg{enter}, []string{"6/7 Apply and roll", "Dry run: nothing was patched and no machine was replaced."}},
		{[]tea.KeyMsg{enter}, []string{"7/7 Verify", "not found: the Manila CSI driver operator is not installed"}},
	} {
		m := scr.mark()
		for _, k := range step.keys {
			tm.Send(k)
		}
		scr.waitFor(t, m, settle, step.want...)
	}
	tm.Send(enter)
	final := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
	if o := final.Outcome(); o.Applied || o.Summary != "Dry run: nothing was changed." {
		t.Errorf("outcome %+v", o)
	}
	if after := versions(); !maps.Equal(before, after) {
		t.Errorf("the dry run changed MachineSets: %v -> %v", before, after)
	}
}
