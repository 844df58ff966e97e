package wizard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
	"github.com/manila-setup/manila-setup/operator/health"
	"github.com/manila-setup/manila-setup/workers"
)

// DriverName is the Manila CSI driver, the name of its ClusterCSIDriver and the provisioner of
// its StorageClasses.
const DriverName = "manila.csi.openstack.org"

// LiveConfig says where the live backend finds the cloud and the cluster.
type LiveConfig struct {
	Kubeconfig string // a path, or a list of paths like $KUBECONFIG
	CloudsFile string // clouds.yaml; empty: the usual places
	Cloud      string // preselected cloud; empty: $OS_CLOUD, "openstack", the only one
	UserAgent  string
	By         string // recorded in the MachineSets' attachment annotation

	RolloutTimeout time.Duration // per new Machine; zero: rollout.DefaultTimeout
	PollInterval   time.Duration // of the rollout; zero: rollout.DefaultPollInterval
	CheckTimeout   time.Duration // of the multi-writer check; zero: 3 minutes
	CheckImage     string        // of the writer pods; empty: rwxcheck.DefaultImage

	// ConnectCloud and ConnectCluster are how the command connects to a cloud and to a context
	// of its kubeconfig (its flags, user agent, CA bundle, timeouts and transport), so that the
	// wizard reaches both as the command's other subcommands do; the wizard makes no client
	// of its own. Both are required.
	ConnectCloud   func(ctx context.Context, cloud string) (*openstack.Client, error)
	ConnectCluster func(ctx context.Context, kubeContext string) (ClusterClients, error)

	// CommandFlags are the global flags the wizard was started with that its equivalent
	// commands must repeat to act on the same cluster and clouds.yaml (--kubeconfig,
	// --os-client-config-file), as arguments.
	CommandFlags []string
}

// LiveBackend is the Backend of the command: a real cloud and a real cluster.
type LiveBackend struct {
	cfg LiveConfig

	mu    sync.Mutex
	cloud *openstack.Client
	mc    machineclient.Interface
	kc    kubernetes.Interface
	oc    operatorclient.Interface
	dyn   dynamic.Interface
}

// ClusterClients are the clients of the cluster the wizard works on.
type ClusterClients struct {
	// Host is the API server's address, for the screens.
	Host     string
	Machines machineclient.Interface
	Kube     kubernetes.Interface
	Operator operatorclient.Interface
	Dynamic  dynamic.Interface
}

// errNoConnector is a LiveConfig without ConnectCloud or ConnectCluster.
var errNoConnector = errors.New("the wizard was given no way to connect (LiveConfig.ConnectCloud, ConnectCluster)")

// NewLiveBackend returns a backend for cfg; nothing is contacted before Connect.
func NewLiveBackend(cfg LiveConfig) *LiveBackend { return &LiveBackend{cfg: cfg} }

// connectCloud authenticates to cloud, as the command says.
func (l *LiveBackend) connectCloud(ctx context.Context, cloud string) (*openstack.Client, error) {
	if l.cfg.ConnectCloud == nil {
		return nil, errNoConnector
	}
	return l.cfg.ConnectCloud(ctx, cloud)
}

// connectCluster makes the clients of kubeContext, as the command says.
func (l *LiveBackend) connectCluster(ctx context.Context, kubeContext string) (ClusterClients, error) {
	if l.cfg.ConnectCluster == nil {
		return ClusterClients{}, errNoConnector
	}
	return l.cfg.ConnectCluster(ctx, kubeContext)
}

// Targets reads clouds.yaml and the kubeconfig; it authenticates nowhere.
func (l *LiveBackend) Targets() Targets {
	t := Targets{Kubeconfig: l.cfg.Kubeconfig}
	names, source, err := openstack.CloudNames(context.Background(), openstack.Config{CloudsFile: l.cfg.CloudsFile})
	t.Clouds, t.CloudsFile = names, source
	if err != nil {
		t.CloudsErr = err.Error()
	}
	t.Cloud = l.cfg.Cloud
	if t.Cloud == "" {
		t.Cloud = os.Getenv("OS_CLOUD")
	}
	switch {
	case t.Cloud != "" && !slices.Contains(names, t.Cloud) && err == nil:
		t.CloudsErr = fmt.Sprintf("cloud %q (--os-cloud or OS_CLOUD) is not in %s; choose one of the list", t.Cloud, source)
	case t.Cloud == "" && slices.Contains(names, "openstack"):
		t.Cloud = "openstack"
	}

	// Bounded, and run as a command of the screen: a kubeconfig that is a stream nobody writes
	// never blocks the wizard, whose own keys quit it.
	raw, err := kubeconfig.Raw(context.Background(), kubeconfig.Options{Path: l.cfg.Kubeconfig})
	switch {
	case err != nil:
		t.ContextsErr = err.Error()
	case len(raw.Contexts) == 0:
		t.ContextsErr = fmt.Sprintf("kubeconfig %s has no contexts: log in first (oc login), or pass --kubeconfig", orNone(l.cfg.Kubeconfig))
	}
	for name := range raw.Contexts {
		t.Contexts = append(t.Contexts, name)
	}
	slices.Sort(t.Contexts)
	t.Context = raw.CurrentContext
	return t
}

// Connect authenticates to the cloud and reads the cluster, both at once: its MachineSets and,
// on a HyperShift management cluster, its NodePools. The cluster is refused only when neither
// can be worked on.
func (l *LiveBackend) Connect(ctx context.Context, cloud, kubeContext string) (Connection, error) {
	conn := Connection{Cloud: cloud, Context: kubeContext, Flags: l.cfg.CommandFlags}
	var (
		wg         sync.WaitGroup
		client     *openstack.Client
		cloudErr   error
		kube       ClusterClients
		clusterErr error
		cluster    workers.Served
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		client, cloudErr = l.connectCloud(ctx, cloud)
		if cloudErr != nil {
			cloudErr = fmt.Errorf("cloud %q: %w", cloud, cloudErr)
		}
	}()
	go func() {
		defer wg.Done()
		if kube, clusterErr = l.connectCluster(ctx, kubeContext); clusterErr != nil {
			return
		}
		where := fmt.Sprintf("cluster %s (context %q)", kube.Host, kubeContext)
		use := workers.Cluster{Machines: kube.Machines, Kube: kube.Kube, Dynamic: kube.Dynamic}
		if cluster, clusterErr = use.Detect(ctx, where); clusterErr == nil {
			conn.NodeAddresses, conn.Fitness = use.OwnNetworks(ctx)
		}
	}()
	wg.Wait()
	if err := errors.Join(cloudErr, clusterErr); err != nil {
		return conn, err
	}
	l.mu.Lock()
	l.cloud, l.mc, l.kc, l.oc, l.dyn = client, kube.Machines, kube.Kube, kube.Operator, kube.Dynamic
	l.mu.Unlock()
	conn.Region, conn.Identity, conn.Cluster = client.Region(), client.Identity(), kube.Host
	conn.Served = cluster
	return conn, nil
}

func (l *LiveBackend) clients() (*openstack.Client, machineclient.Interface, kubernetes.Interface, operatorclient.Interface) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cloud, l.mc, l.kc, l.oc
}

var errNotConnected = errors.New("not connected: go back to the first screen")

// Discover runs the discovery of `networks discover`.
func (l *LiveBackend) Discover(ctx context.Context) (*openstack.Discovery, error) {
	c, _, _, _ := l.clients()
	if c == nil {
		return nil, errNotConnected
	}
	d, err := c.Discover(ctx, openstack.DiscoverOptions{})
	if openstack.KindOf(err) == openstack.KindNoEndpoint {
		// Without Manila the networks are still offered, none preselected.
		nets, nerr := c.Networks(ctx)
		if nerr != nil {
			return nil, nerr
		}
		return &openstack.Discovery{Networks: nets, NetworksSeen: len(nets), Ranking: openstack.Ranking{Notes: []string{err.Error()}}}, nil
	}
	return d, err
}

// SecurityGroups lists the project's groups.
func (l *LiveBackend) SecurityGroups(ctx context.Context) ([]openstack.SecurityGroup, error) {
	c, _, _, _ := l.clients()
	if c == nil {
		return nil, errNotConnected
	}
	return c.SecurityGroups(ctx)
}

// UpdateSubnet makes the change of a subnet the user confirmed.
func (l *LiveBackend) UpdateSubnet(ctx context.Context, u openstack.SubnetUpdate) error {
	c, _, _, _ := l.clients()
	if c == nil {
		return errNotConnected
	}
	_, err := c.UpdateSubnet(ctx, u)
	return err
}

// Network reads one network again, after its subnets changed.
func (l *LiveBackend) Network(ctx context.Context, id string) (openstack.Network, error) {
	c, _, _, _ := l.clients()
	if c == nil {
		return openstack.Network{}, errNotConnected
	}
	return c.Network(ctx, id)
}

// Inventory is what `machinesets list`, `clusterapi list` and `nodepools list` show, assembled
// as the wizard offers it.
func (l *LiveBackend) Inventory(ctx context.Context, want attach.Attachment, kinds workers.Kinds) (*workers.Inventory, error) {
	if l.dynamic() == nil {
		return nil, errNotConnected
	}
	return l.cluster().Inventory(ctx, want, kinds)
}

// cluster is the use case over the clients of Connect.
func (l *LiveBackend) cluster() workers.Cluster {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := workers.Cluster{Machines: l.mc, Kube: l.kc, Dynamic: l.dyn}
	if l.cloud != nil {
		c.Room = l.cloud.RoomForServer
	}
	return c
}

// Apply is what the patch commands do (workers.Cluster.Apply), with the cloud connected to
// and the wizard's name in the record.
func (l *LiveBackend) Apply(ctx context.Context, req workers.Request) (*workers.Report, error) {
	c, _, _, _ := l.clients()
	if l.dynamic() == nil {
		return nil, errNotConnected
	}
	if req.Remove == nil {
		req.Cloud = c
	}
	req.By = l.cfg.By
	return l.cluster().Apply(ctx, req)
}

func (l *LiveBackend) dynamic() dynamic.Interface {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dyn
}

// Roll is what `machinesets rollout` and `clusterapi rollout` do, one after the other, with the
// check of the first new machine of each set (workers.Canary) against the cloud connected to.
func (l *LiveBackend) Roll(ctx context.Context, sel workers.Selection, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error) {
	if l.dynamic() == nil {
		return nil, errNotConnected
	}
	c, _, kc, _ := l.clients()
	return l.cluster().Roll(ctx, sel, rollout.Options{
		MaxSurge: rollout.DefaultMaxSurge,
		Timeout:  l.cfg.RolloutTimeout, PollInterval: l.cfg.PollInterval,
		Canary:   workers.NewCanary(ctx, kc, c),
		Progress: progress,
	})
}

// Storage reads the ClusterCSIDriver and the Manila StorageClasses.
func (l *LiveBackend) Storage(ctx context.Context) (StorageStatus, error) {
	_, _, kc, oc := l.clients()
	if kc == nil {
		return StorageStatus{}, errNotConnected
	}
	var s StorageStatus
	d, err := oc.OperatorV1().ClusterCSIDrivers().Get(ctx, DriverName, metav1.GetOptions{})
	switch {
	case err == nil:
		s.Driver = true
		for _, c := range d.Status.Conditions {
			s.Conditions = append(s.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
		}
		slices.SortFunc(s.Conditions, func(a, b Condition) int { return strings.Compare(a.Type, b.Type) })
	case apierrors.IsNotFound(err):
	default:
		return s, fmt.Errorf("reading ClusterCSIDriver %s: %v", DriverName, err)
	}
	list, err := kc.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return s, fmt.Errorf("listing StorageClasses: %v", err)
	}
	s.StorageClasses = health.StorageClasses(list.Items)
	return s, nil
}

// CheckRWX is the multi-writer check; see rwx.go.
func (l *LiveBackend) CheckRWX(ctx context.Context, storageClass string, report func(string)) RWXResult {
	_, _, kc, _ := l.clients()
	if kc == nil {
		return RWXResult{StorageClass: storageClass, Problem: errNotConnected.Error()}
	}
	timeout := l.cfg.CheckTimeout
	if timeout == 0 {
		timeout = 3 * time.Minute
	}
	return rwxcheck.Run(ctx, kc, rwxcheck.Options{StorageClass: storageClass, Timeout: timeout, Image: l.cfg.CheckImage, Report: report})
}
