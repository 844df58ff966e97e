//go:build integration

package wizard

import (
	"bytes"
	"context"
	"io"
	"maps"
	"net/netip"
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
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// terminal collects everything the program draws, so that a wait can look at what was drawn
// since a given point.
type terminal struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *terminal) copyFrom(r io.Reader) {
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

func (s *terminal) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Len()
}

// since is what was drawn after mark.
func (s *terminal) since(mark int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()[mark:]
}

// settle bounds a wait for the wizard to draw what it must. It only caps a failure: with the
// whole suite running on two cores, a step that asks the cloud or the cluster can take many
// times what it takes on an idle machine.
const settle = 2 * time.Minute

// waitFor waits until every text appears in what was drawn after mark.
func (s *terminal) waitFor(t *testing.T, mark int, timeout time.Duration, texts ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		drawn := s.since(mark)
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
func simWorkers(t *testing.T, ctx context.Context, c *testenv.SimCluster, cloud *testenv.Cloud, infraID string) (machineclient.Interface, []string) {
	t.Helper()
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc, err := machineclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Real ports on the networks the Machines name: the rollout's check of the first new machine
	// looks for its address on the storage network.
	ports, err := machinectl.NeutronPorts(ctx, cloud.CloudsFile, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	ctl := machinectl.Start(t, c, machinectl.Options{NodeDelay: 500 * time.Millisecond, Ports: ports})
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
	mc, old := simWorkers(t, ctx, c, cloud, infraID)
	installDriverStatus(t, ctx, c)
	storageNet, nfsGroup := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]

	backend := testBackend(LiveConfig{
		Kubeconfig: c.Kubeconfig, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo,
		UserAgent: "manila-setup/test", By: "manila-setup test",
		PollInterval: 200 * time.Millisecond, RolloutTimeout: 5 * time.Minute, CheckTimeout: 4 * time.Second,
	})
	start := time.Now()
	tm := teatest.NewTestModel(t, New(Options{Backend: backend, Context: ctx, StoragePoll: 500 * time.Millisecond}), teatest.WithInitialTermSize(120, 40))
	scr := &terminal{}
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
	// The seeded storage subnet is as Neutron makes a subnet by default, in the admin's shared
	// network: its warnings must be acknowledged, and the member's role may not fix them.
	scr.waitFor(t, m, settle, "its gateway 10.0.0.1 is handed out by DHCP", "! 2 warnings to acknowledge (a) before applying")
	m = scr.mark()
	tm.Type("G") // to the end: the equivalent commands
	scr.waitFor(t, m, settle, "machinesets patch --network "+storageNet, "machinesets rollout --name "+infraID+"-worker-0 --name "+infraID+"-worker-1")
	m = scr.mark()
	tm.Send(enter)
	scr.waitFor(t, m, settle, "✗ nothing is applied before the warnings are acknowledged: press a")
	m = scr.mark()
	tm.Type("c")
	scr.waitFor(t, m, settle, "Change the subnets now? y changes them", "openstack subnet set --gateway none storage-subnet")
	m = scr.mark()
	tm.Type("y")
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].ID
	scr.waitFor(t, m, settle, "✗ Your role does not allow this change", "may not change it", "The cloud's administrator can make the change:",
		"openstack subnet set --gateway none "+storageSubnet, "You can still acknowledge the warnings (a)")
	m = scr.mark()
	tm.Type("a")
	scr.waitFor(t, m, settle, "✓ 2 warnings of the storage network acknowledged")
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
	if o := final.Outcome(); !o.Applied || o.Err != nil || o.Interrupted || !strings.Contains(o.Summary, "(default-route, dns-announced) were acknowledged") ||
		strings.Contains(o.Summary, "Changed in Neutron") {
		t.Errorf("outcome %+v", o)
	}
	if s := readSubnet(t, ctx, cloud.CloudsFile, testenv.CloudAdmin, storageNet); s.Gateway != netip.MustParseAddr("10.0.0.1") || len(s.DNS) != 0 {
		t.Errorf("the refused change changed the seeded subnet: %+v", s)
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

	backend := testBackend(LiveConfig{Kubeconfig: path, CloudsFile: cloud.CloudsFile, Cloud: testenv.CloudDemo, UserAgent: "manila-setup/test"})
	tm := teatest.NewTestModel(t, New(Options{Backend: backend, DryRun: true, Context: ctx}), teatest.WithInitialTermSize(80, 24))
	scr := &terminal{}
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
		{[]tea.KeyMsg{enter}, []string{"5/7 Review", "! 2 warnings to acknowledge (a) before applying", "continue (dry run)"}},
		// The diff is under the storage network's warnings: a page or two down.
		{[]tea.KeyMsg{keyMsg("f"), keyMsg("f")}, []string{"+- noAllowedAddressPairs: true"}},
		{[]tea.KeyMsg{enter}, []string{"✗ nothing is applied before the warnings are acknowledged"}},
		{[]tea.KeyMsg{keyMsg("c")}, []string{"Dry run: the change is shown, not made."}},
		{[]tea.KeyMsg{keyMsg("y"), keyMsg("a")}, []string{"✓ 2 warnings of the storage network acknowledged"}},
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

// readSubnet reads the first subnet of network id as cloud of cloudsFile sees it.
func readSubnet(t *testing.T, ctx context.Context, cloudsFile, cloud, id string) openstack.Subnet {
	t.Helper()
	c, err := openstack.Connect(ctx, openstack.Config{Cloud: cloud, CloudsFile: cloudsFile, UserAgent: "manila-setup/test"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.Network(ctx, id)
	if err != nil || len(n.Subnets) == 0 {
		t.Fatalf("reading network %s: %+v %v", id, n, err)
	}
	return n.Subnets[0]
}

// TestWizardChangesTheStorageSubnet: in a project of its own, a storage network whose subnet
// is as Neutron makes it (a gateway, no DNS) plus a default host route. The review refuses to
// apply before the acknowledgement; the change of the subnet, shown with the findings' commands
// and confirmed with y, is made in Neutron (read back here with the openstack client: no
// gateway, DNS 0.0.0.0, the other host route kept); the network read again has no warning left.
// The cluster is not touched, and quitting says what changed.
func TestWizardChangesTheStorageSubnet(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "wizard-fix")
	net := p.CreateNetworkWith("fix-store", nil, map[string]any{"cidr": "10.63.0.0/24",
		"host_routes": []map[string]string{{"destination": "0.0.0.0/0", "nexthop": "10.63.0.254"}, {"destination": "192.168.9.0/24", "nexthop": "10.63.0.253"}}})
	subnet := net.SubnetIDs[0]
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
	const infraID = "fix-8q2w"
	ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, machinectl.WorkerMachineSet(infraID, 0, 1), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}

	backend := testBackend(LiveConfig{Kubeconfig: kubeconfig, CloudsFile: p.CloudsFile, Cloud: ostest.CloudName, UserAgent: "manila-setup/test"})
	start := time.Now()
	// Wide enough that no line the test looks for wraps.
	tm := teatest.NewTestModel(t, New(Options{Backend: backend, Context: ctx}), teatest.WithInitialTermSize(220, 50))
	scr := &terminal{}
	go scr.copyFrom(tm.Output())
	scr.waitFor(t, 0, settle, "✓ cloud ostest", "✓ cluster")
	for _, step := range []struct {
		keys []tea.KeyMsg
		want []string
	}{
		{[]tea.KeyMsg{enter}, []string{"2/7 Storage network", "fix-store"}},
		// No share of this project lies in it: the guard asks, and y takes it.
		{[]tea.KeyMsg{keyMsg("/fix-store"), enter, enter}, []string{"Attach the workers to it anyway?"}},
		{[]tea.KeyMsg{keyMsg("y")}, []string{"3/7 Security groups"}},
		{[]tea.KeyMsg{enter}, []string{"4/7 MachineSets", "1 of 1 MachineSets selected"}},
		{[]tea.KeyMsg{enter}, []string{"5/7 Review", "its gateway 10.63.0.1 is handed out by DHCP", "its host route 0.0.0.0/0 via 10.63.0.254",
			"no dns_nameservers", "! 3 warnings to acknowledge (a) before applying", "+  uuid: " + net.ID}},
		{[]tea.KeyMsg{enter}, []string{"✗ nothing is applied before the warnings are acknowledged: press a"}},
		{[]tea.KeyMsg{keyMsg("c")}, []string{"subnet fix-store-subnet-0 (" + subnet + "):", "openstack subnet set --gateway none fix-store-subnet-0",
			"openstack subnet unset --host-route destination=0.0.0.0/0,gateway=10.63.0.254 fix-store-subnet-0",
			"openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 fix-store-subnet-0", "Change the subnets now?"}},
	} {
		m := scr.mark()
		for _, k := range step.keys {
			tm.Send(k)
		}
		scr.waitFor(t, m, settle, step.want...)
	}
	// Shown, not yet made: the subnet is as it was until the yes.
	if s := readSubnet(t, ctx, p.CloudsFile, ostest.CloudName, net.ID); !s.Gateway.IsValid() || len(s.DNS) != 0 {
		t.Fatalf("the subnet changed before the yes: %+v", s)
	}
	m := scr.mark()
	tm.Send(keyMsg("y"))
	scr.waitFor(t, m, settle, "✓ subnet fix-store-subnet-0 ("+subnet+`) changed: gateway_ip null, host_routes without the default ones, dns_nameservers ["0.0.0.0"]`,
		"read again from Neutron, hands the nodes no default route and no DNS server: nothing left to acknowledge")
	t.Logf("changed after %s", time.Since(start).Round(time.Millisecond))
	s := readSubnet(t, ctx, p.CloudsFile, ostest.CloudName, net.ID)
	keep := []openstack.Route{{Destination: netip.MustParsePrefix("192.168.9.0/24"), NextHop: netip.MustParseAddr("10.63.0.253")}}
	if s.Gateway.IsValid() || !slices.Equal(s.DNS, []string{"0.0.0.0"}) || !slices.Equal(s.HostRoutes, keep) {
		t.Errorf("the subnet in Neutron: gateway %v, DNS %v, host routes %v", s.Gateway, s.DNS, s.HostRoutes)
	}
	tm.Send(keyMsg("q"))
	final := tm.FinalModel(t, teatest.WithFinalTimeout(settle)).(Model)
	if o := final.Outcome(); o.Applied || !strings.HasPrefix(o.Summary, "The cluster was not changed. Changed in Neutron: subnet fix-store-subnet-0 ("+subnet+")") {
		t.Errorf("outcome %+v", o)
	}
	after, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != ms.ResourceVersion {
		t.Errorf("the MachineSet was written: %v", err)
	}
}
