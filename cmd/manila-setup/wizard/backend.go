package wizard

import (
	"context"
	"net/netip"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/internal/rwxcheck"
	"github.com/manila-setup/manila-setup/operator/health"
	"github.com/manila-setup/manila-setup/workers"
)

// Backend is everything the wizard reads from and writes to the cloud and the cluster. Each
// call runs inside a tea.Cmd, never in Update.
type Backend interface {
	// Targets lists the clouds of clouds.yaml and the contexts of the kubeconfig, with the ones
	// the flags and environment preselect.
	Targets() Targets
	// Connect authenticates to cloud and reads the cluster of kubeContext; later calls use them.
	Connect(ctx context.Context, cloud, kubeContext string) (Connection, error)
	// Discover finds the network Manila exports on (and lists every network).
	Discover(ctx context.Context) (*openstack.Discovery, error)
	// SecurityGroups lists the project's security groups with their rules.
	SecurityGroups(ctx context.Context) ([]openstack.SecurityGroup, error)
	// Inventory reads the kinds of machines of kinds and how far each object has want
	// (workers.Cluster.Inventory): the rows the wizard offers.
	Inventory(ctx context.Context, want attach.Attachment, kinds workers.Kinds) (*workers.Inventory, error)
	// Apply makes the change req asks, as the patch commands do (workers.Cluster.Apply: the
	// IDs checked in Neutron, the capacity counted, the removal risk refused unless
	// req.Force). The wizard's requests are Chosen (the user saw the network's findings) and
	// roll the MachineSets Later, in a step of their own (Roll). One row per object.
	Apply(ctx context.Context, req workers.Request) (*workers.Report, error)
	// Roll replaces the machines of what sel selects (workers.Cluster.Roll), reporting every
	// change: the MachineSets (through their Cluster API copy where Cluster API is
	// authoritative), then the standalone Cluster API MachineSets; MachineDeployments and
	// NodePools roll by themselves.
	Roll(ctx context.Context, sel workers.Selection, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error)
	// UpdateSubnet changes a subnet of the storage network so that its DHCP hands the nodes no
	// default route and no DNS server (openstack.Client.UpdateSubnet). The wizard calls it only
	// after the user saw the change and said yes. A subnet the user's role may not change is
	// an error of openstack.KindForbidden.
	UpdateSubnet(ctx context.Context, u openstack.SubnetUpdate) error
	// Network reads one network again, with its subnets, as Discover lists it.
	Network(ctx context.Context, id string) (openstack.Network, error)
	// Storage reads the ClusterCSIDriver's conditions and the Manila StorageClasses.
	Storage(ctx context.Context) (StorageStatus, error)
	// CheckRWX creates a ReadWriteMany PVC of storageClass with two writer pods on different
	// nodes, collects what both wrote, and deletes everything it created.
	CheckRWX(ctx context.Context, storageClass string, report func(string)) RWXResult
}

// Targets are the choices of the connect screen.
type Targets struct {
	Clouds     []string
	CloudsFile string
	Cloud      string // preselected: --os-cloud, $OS_CLOUD, "openstack" or the only entry
	CloudsErr  string // why no cloud can be offered, with the fix

	Kubeconfig  string
	Contexts    []string
	Context     string // preselected: the kubeconfig's current context
	ContextsErr string
}

// Connection is what a successful Connect found.
type Connection struct {
	Cloud    string
	Region   string
	Identity string // user "demo", project "demo"; never a secret
	Cluster  string // the apiserver URL
	Context  string
	// Served is what the cluster serves of the kinds of machines (workers.Cluster.Detect).
	workers.Served
	// Flags are the global flags the equivalent commands repeat (LiveConfig.CommandFlags).
	Flags []string
	// NodeAddresses are the nodes' internal addresses (machinesets.NodeAddresses): what tells
	// the machines' own network.
	NodeAddresses []netip.Addr
	// Fitness is what the cluster's install-config says a storage subnet must neither overlap
	// nor hold (its networks and VIPs, deploy.ReadInstallConfig), for attach.Fitness.
	Fitness attach.FitnessOptions
}

// Condition is one condition of the ClusterCSIDriver.
type Condition = health.Condition

// StorageStatus is what the verify screen shows.
type StorageStatus struct {
	// Driver is false when the ClusterCSIDriver does not exist (the operator is not installed).
	Driver         bool
	Conditions     []Condition
	StorageClasses []string
}

// RWXResult is the outcome of the multi-writer check (internal/rwxcheck).
type RWXResult = rwxcheck.Result
