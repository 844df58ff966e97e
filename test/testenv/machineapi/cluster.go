// Package machineapi runs the OpenShift Machine API for real beside a sim cluster
// (test/testenv) and the loopback OpenStack with Nova: the MachineSet, machine, drain and
// nodelink controllers of github.com/openshift/machine-api-operator with an OpenStack actuator
// (test/machineapi, built by test/env/machineapi/build.sh) create real servers and ports. One
// stand-in is left, the node booter (test/testenv/nodeboot): what a booted RHCOS server does
// (register its Node with the node IP it chose), which the fake virt driver does not.
package machineapi

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
	"github.com/manila-setup/manila-setup/test/testenv/nodeboot"
)

// Names the installer and the Machine API use.
const (
	Namespace         = machinectl.Namespace
	CredentialsSecret = "openstack-cloud-credentials"
	UserDataSecret    = "worker-user-data"
	// MachineNetwork and the VIPs are those of machinectl.DefaultInstallConfig.
	MachineNetwork = "10.196.0.0/16"
	APIVIP         = "10.196.0.5"
	IngressVIP     = "10.196.0.7"
)

// Binaries returns the folder holding machine-api-openstack: $MANILA_SETUP_MACHINEAPI_BIN if
// set (make test sets it), else what test/env/machineapi/build.sh prints (it builds the program
// once, then answers from its cache).
func Binaries(ctx context.Context) (string, error) {
	return testenv.BuiltFolder(ctx, "MANILA_SETUP_MACHINEAPI_BIN", "test/env/machineapi/build.sh", "machine-api-openstack")
}

// ClusterOptions shape an installer-shaped cluster with the real Machine API.
type ClusterOptions struct {
	// CloudsFile is the loopback cloud's clouds.yaml (testenv.Cloud.CloudsFile); required.
	CloudsFile string
	// Cloud is the cloud of CloudsFile the cluster lives in (its servers, its network); default
	// testenv.CloudDemo. A test's own project (test/ostest) keeps its servers apart.
	Cloud string
	// InfraID is the infrastructure name; default "ostest-" and five random characters, so that
	// clusters sharing a cloud do not share its resources.
	InfraID string
	// Workers is the replica count of the worker MachineSet; default 2.
	Workers int32
	// Zones makes one worker MachineSet per availability zone of Nova, of Workers replicas
	// each, as openshift-install does for compute[].platform.openstack.zones
	// (<infraID>-worker-<i>, the zone in its providerSpec); none: one set in zone nova.
	Zones []string
	// NodeIP is the nodes' nodeip-configuration; its VIPs default to the cluster's.
	NodeIP machinectl.NodeIPRule
	// Masters makes the three masters Machines of the Machine API, real servers, under the
	// installer's ControlPlaneMachineSet (Active, RollingUpdate), which the controllers keep
	// (test/machineapi/controlplane) with etcd's hooks, as on every cluster the installer made;
	// their Nodes are tainted NoSchedule, beside the worker MachineSet. Without it (and without
	// Compact) the cluster has no master Machine: the sim cluster's own control-plane Nodes
	// stand for the masters.
	Masters bool
	// Compact makes a compact cluster: the masters of Masters, schedulable, and no worker
	// MachineSet (Workers is ignored).
	Compact bool
	// InstallConfig is the install-config the cluster was installed from, kept in
	// kube-system/cluster-config-v1; default machinectl.DefaultInstallConfig. Its machine
	// network must be MachineNetwork.
	InstallConfig []byte
	// MachineNetworkV6, when set, makes the machine network dual-stack: an IPv6 subnet of this
	// CIDR beside MachineNetwork (the install-config should list both in machineNetwork).
	MachineNetworkV6 string
	// Bodies, when set, gives some servers real bodies instead of kwok Nodes (nodeboot.Bodies).
	Bodies nodeboot.Bodies
}

// Cluster is a sim cluster shaped like a fresh OpenShift-on-OpenStack install whose workers
// are real servers of the loopback cloud, made by the real Machine API.
type Cluster struct {
	// MachineSet is the name of the worker MachineSet (the first zone's, with Zones).
	MachineSet string
	// MachineSets are the worker MachineSets, one per zone of ClusterOptions.Zones.
	MachineSets []string
	InfraID     string
	// Cloud is what the installer left in the cloud for this cluster.
	Cloud *InstallerCloud
	// Clients see the cloud as the cluster's user (project demo) does.
	Clients *Clients
	Booter  *nodeboot.Booter

	mc          machineclient.Interface
	controllers *testenv.Process
	dir         string
	cancel      context.CancelFunc
	done        chan struct{}
}

// InstallerShaped makes a sim cluster look like a fresh OpenShift-on-OpenStack install, as
// machinectl.InstallerShaped does, but with the real Machine API making real servers: the cloud
// seeded as the installer leaves it (SeedInstallerCloud), Infrastructure "cluster" with the
// cluster's VIPs, kube-system/cluster-config-v1, the Secrets openstack-cloud-credentials (the
// cloud's clouds.yaml, cloud "openstack") and worker-user-data, one worker MachineSet as
// openshift-install writes it, the controllers running as a process and the node booter (test/testenv/nodeboot) beside
// them. It returns once the workers are Ready Nodes linked to Running Machines.
func InstallerShaped(ctx context.Context, sim *testenv.SimCluster, opts ClusterOptions) (_ *Cluster, err error) {
	if opts.CloudsFile == "" {
		return nil, fmt.Errorf("machineapi.InstallerShaped: no CloudsFile")
	}
	if opts.InfraID == "" {
		opts.InfraID = "ostest-" + testenv.NameSuffix()
	}
	if opts.Cloud == "" {
		opts.Cloud = testenv.CloudDemo
	}
	if opts.Workers == 0 {
		opts.Workers = 2
	}
	if len(opts.InstallConfig) == 0 {
		opts.InstallConfig = []byte(machinectl.DefaultInstallConfig)
	}
	if len(opts.NodeIP.VIPs) == 0 {
		opts.NodeIP.VIPs = []netip.Addr{netip.MustParseAddr(APIVIP), netip.MustParseAddr(IngressVIP)}
	}
	bin, err := Binaries(ctx)
	if err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(sim.Config)
	cfg.QPS, cfg.Burst = 100, 200
	cfg.WarningHandler = rest.NoWarnings{}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mc, err := machineclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cc, err := configclient.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	clients, err := Connect(ctx, opts.CloudsFile, opts.Cloud)
	if err != nil {
		return nil, err
	}
	cl := &Cluster{InfraID: opts.InfraID, Clients: clients, done: make(chan struct{})}
	defer func() {
		if err != nil {
			_ = cl.Stop()
		}
	}()
	if cl.Cloud, err = SeedInstallerCloud(ctx, clients, opts.InfraID, MachineNetwork, opts.MachineNetworkV6, APIVIP, IngressVIP); err != nil {
		return nil, err
	}
	if err := seedCluster(ctx, kc, cc, opts); err != nil {
		return nil, err
	}
	masters := opts.Masters || opts.Compact
	if masters {
		if err := createMasters(ctx, mc, opts.InfraID); err != nil {
			return nil, err
		}
	}
	if !opts.Compact {
		sets := []*machinev1beta1.MachineSet{machinectl.WorkerMachineSet(opts.InfraID, 0, opts.Workers)}
		if len(opts.Zones) > 0 {
			sets = nil
			for i, zone := range opts.Zones {
				sets = append(sets, machinectl.MachineSet(opts.InfraID, "worker", fmt.Sprintf("%s-worker-%d", opts.InfraID, i), opts.Workers,
					machinectl.WorkerProviderSpec(opts.InfraID, zone)))
			}
		}
		for _, ms := range sets {
			if cl.Cloud.SubnetV6ID != "" {
				if err := dualStackPrimary(ms, cl.Cloud); err != nil {
					return nil, err
				}
			}
			if _, err := mc.MachineV1beta1().MachineSets(Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("creating MachineSet %s: %w", ms.Name, err)
			}
			cl.MachineSets = append(cl.MachineSets, ms.Name)
		}
		cl.MachineSet = cl.MachineSets[0]
	}

	if cl.dir, err = os.MkdirTemp("", "manila-setup-machineapi-"); err != nil {
		return nil, err
	}
	// The controllers find their cloud in the Machines' cloudsSecret only: an OS_CLOUD or
	// OS_CLIENT_CONFIG_FILE of the tests must not reach them.
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OS_") {
			env = append(env, kv)
		}
	}
	if cl.controllers, err = testenv.StartProcess(cl.dir, "machine-api-openstack", filepath.Join(bin, "machine-api-openstack"), env,
		"--kubeconfig="+sim.Kubeconfig, "--namespace="+Namespace, "--v=2"); err != nil {
		return nil, err
	}
	cl.mc = mc
	cl.Booter = &nodeboot.Booter{Servers: machineServers(mc, Namespace), Compute: clients.Compute, Network: clients.Network,
		Nodes: sim, Kube: kc, Rule: opts.NodeIP, MachineNetwork: cl.Cloud.NetworkID, MastersSchedulable: opts.Compact, Bodies: opts.Bodies}
	runCtx, cancel := context.WithCancel(context.Background())
	cl.cancel = cancel
	go func() {
		defer close(cl.done)
		cl.Booter.Run(runCtx, nodeboot.Interval)
	}()
	if masters {
		if err := cl.WaitMasters(ctx, 3, 12*time.Minute); err != nil {
			return nil, err
		}
	}
	for _, set := range cl.MachineSets {
		if err := cl.WaitReady(ctx, set, opts.Workers, 10*time.Minute); err != nil {
			return nil, err
		}
	}
	return cl, nil
}

// dualStackPrimary gives the MachineSet the primary network a dual-stack install writes: a
// dual-stack cluster names its machine network in the install-config's controlPlanePort (the
// network and its two subnets), and the installer's providerSpec names them by ID, not by the
// cluster's tag (the real actuator refuses a tag that matches two subnets: "port 0 has no
// network and unable to infer from fixed IPs").
func dualStackPrimary(ms *machinev1beta1.MachineSet, ic *InstallerCloud) error {
	tagged := fmt.Sprintf(`"networks": [{"filter": {}, "subnets": [{"filter": {"tags": "openshiftClusterID=%s"}}]}]`, ic.InfraID)
	byID := fmt.Sprintf(`"networks": [{"filter": {"id": %q}, "subnets": [{"filter": {"id": %q}}, {"filter": {"id": %q}}]}]`, ic.NetworkID, ic.SubnetID, ic.SubnetV6ID)
	raw := &ms.Spec.Template.Spec.ProviderSpec.Value.Raw
	if !bytes.Contains(*raw, []byte(tagged)) {
		return fmt.Errorf("MachineSet %s: no primary network by the cluster's tag to make dual-stack in %s", ms.Name, *raw)
	}
	*raw = bytes.Replace(*raw, []byte(tagged), []byte(byID), 1)
	return nil
}

// NewCluster is InstallerShaped for a test: it fails the test when the cluster does not come up,
// and at the test's end stops the controllers and deletes the cluster's servers and ports,
// failing the test for what it could not delete. Called after the project's (or cloud's) own
// cleanup was registered, so it runs before it: servers and ports go first.
func NewCluster(t testing.TB, ctx context.Context, sim *testenv.SimCluster, opts ClusterOptions) *Cluster {
	t.Helper()
	cl, err := InstallerShaped(ctx, sim, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("the cluster's servers and ports not all deleted: %v", err)
		}
	})
	return cl
}

// createMasters creates the three masters as the installer does, Machines <infraID>-master-<i>
// of its master providerSpec, and the ControlPlaneMachineSet over them.
func createMasters(ctx context.Context, mc machineclient.Interface, infraID string) error {
	cpms := machinectl.ControlPlaneMachineSet(infraID)
	cpms.Status = machinev1.ControlPlaneMachineSetStatus{} // the controller writes it
	for i := 0; i < 3; i++ {
		t := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine
		m := &machinev1beta1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-master-%d", infraID, i), Namespace: Namespace, Labels: t.ObjectMeta.Labels},
			Spec:       *t.Spec.DeepCopy(),
		}
		if _, err := mc.MachineV1beta1().Machines(Namespace).Create(ctx, m, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating master Machine %s: %w", m.Name, err)
		}
	}
	if _, err := mc.MachineV1().ControlPlaneMachineSets(Namespace).Create(ctx, cpms, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating ControlPlaneMachineSet %s: %w", cpms.Name, err)
	}
	return nil
}

// WaitMasters waits until want master Machines are Running with a nodeRef, none deleting, and
// the ControlPlaneMachineSet reports them ready and updated.
func (c *Cluster) WaitMasters(ctx context.Context, want int, timeout time.Duration) error {
	mc, _ := c.machineClient()
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if c.controllers.Exited() {
			return false, fmt.Errorf("machine-api-openstack exited:\n%s", c.controllers.Tail(40))
		}
		list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.RoleLabel + "=master"})
		if err != nil {
			return false, nil
		}
		running, deleting := 0, 0
		last = "masters:"
		for _, m := range list.Items {
			phase := ""
			if m.Status.Phase != nil {
				phase = *m.Status.Phase
			}
			last += fmt.Sprintf(" %s %s", m.Name, phase)
			switch {
			case m.DeletionTimestamp != nil:
				deleting++
			case phase == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil:
				running++
			}
		}
		cpms, err := mc.MachineV1().ControlPlaneMachineSets(Namespace).Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		st := cpms.Status
		last += fmt.Sprintf("; ControlPlaneMachineSet: replicas %d, ready %d, updated %d", st.Replicas, st.ReadyReplicas, st.UpdatedReplicas)
		return running == want && deleting == 0 && st.ObservedGeneration == cpms.Generation && int(st.ReadyReplicas) == want && int(st.UpdatedReplicas) == want, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w (node booter: %v)\nmachine-api-openstack log:\n%s", last, err, c.Booter.Err(), c.controllers.Tail(30))
	}
	return nil
}

// seedCluster creates what the installer leaves in the cluster for the Machine API.
func seedCluster(ctx context.Context, kc kubernetes.Interface, cc configclient.Interface, opts ClusterOptions) error {
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.InfrastructureSpec{PlatformSpec: configv1.PlatformSpec{Type: configv1.OpenStackPlatformType}},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("creating Infrastructure cluster: %w", err)
	}
	infra.Status = configv1.InfrastructureStatus{
		InfrastructureName:     opts.InfraID,
		ControlPlaneTopology:   configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode,
		PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType, OpenStack: &configv1.OpenStackPlatformStatus{
			APIServerInternalIPs: []string{APIVIP}, IngressIPs: []string{IngressVIP},
			LoadBalancer: &configv1.OpenStackPlatformLoadBalancer{Type: configv1.LoadBalancerTypeOpenShiftManagedDefault},
		}},
	}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("Infrastructure cluster status: %w", err)
	}
	for _, ns := range []string{"kube-system", Namespace} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	if _, err := kc.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster-config-v1", Namespace: "kube-system"},
		Data:       map[string]string{"install-config": string(opts.InstallConfig)},
	}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating kube-system/cluster-config-v1: %w", err)
	}
	clouds, err := cloudsYAMLFor(opts.CloudsFile, opts.Cloud, "openstack")
	if err != nil {
		return err
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecret, Namespace: Namespace}, Data: map[string][]byte{"clouds.yaml": clouds}},
		// A worker's pointer Ignition config, as the installer writes it.
		{ObjectMeta: metav1.ObjectMeta{Name: "master-user-data", Namespace: Namespace}, Data: map[string][]byte{
			"userData": []byte(`{"ignition":{"config":{"merge":[{"source":"https://api-int.ostest.example.com:22623/config/master"}]},"version":"3.2.0"}}`),
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: UserDataSecret, Namespace: Namespace}, Data: map[string][]byte{
			"userData": []byte(`{"ignition":{"config":{"merge":[{"source":"https://api-int.ostest.example.com:22623/config/worker"}]},"version":"3.2.0"}}`),
		}},
	} {
		if _, err := kc.CoreV1().Secrets(Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Secret %s/%s: %w", Namespace, s.Name, err)
		}
	}
	return nil
}

// WaitReady waits until MachineSet set has want Ready replicas, each Machine Running with a
// nodeRef; it fails early when the controllers exit, and says what the Machines and the
// controllers' log last showed.
func (c *Cluster) WaitReady(ctx context.Context, set string, want int32, timeout time.Duration) error {
	mc, err := c.machineClient()
	if err != nil {
		return err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if c.controllers.Exited() {
			return false, fmt.Errorf("machine-api-openstack exited:\n%s", c.controllers.Tail(40))
		}
		ms, err := mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, set, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		list, err := mc.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.MachineSetLabel + "=" + set})
		if err != nil {
			return false, nil
		}
		running := int32(0)
		last = fmt.Sprintf("MachineSet %s: %d/%d ready;", set, ms.Status.ReadyReplicas, want)
		for _, m := range list.Items {
			phase := ""
			if m.Status.Phase != nil {
				phase = *m.Status.Phase
			}
			last += fmt.Sprintf(" %s %s", m.Name, phase)
			if m.DeletionTimestamp == nil && phase == machinev1beta1.PhaseRunning && m.Status.NodeRef != nil {
				running++
			}
		}
		return ms.Status.ReadyReplicas == want && running == want, nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w (node booter: %v)\nmachine-api-openstack log:\n%s", last, err, c.Booter.Err(), c.controllers.Tail(30))
	}
	return nil
}

func (c *Cluster) machineClient() (machineclient.Interface, error) {
	return c.mc, nil
}

// Log returns the last lines of the controllers' log.
func (c *Cluster) Log(lines int) string {
	if c.controllers == nil {
		return ""
	}
	return c.controllers.Tail(lines)
}

// Stop stops the controllers and the node booter, then deletes the cluster's servers, ports
// and the rest of what SeedInstallerCloud made, so the cloud keeps nothing of the cluster; the
// error says what could not be deleted.
func (c *Cluster) Stop() error {
	if c.controllers != nil {
		c.controllers.Stop()
	}
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	var err error
	if c.Cloud != nil {
		err = c.Cloud.Delete(context.Background())
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
	return err
}
