// Command manila-setup-operator is the in-cluster Manila CSI driver operator: the binary the
// Deployment printed by `manila-setup operator render` runs. It is separate from the
// manila-setup CLI so that the CLI does not carry (and initialise at every start) the
// operator's controller libraries; `manila-setup operator start` runs this binary.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/internal/leaderelection"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// Set at build time by the Makefile: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = "dev"
	commit  = "unknown"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// Exit codes, as the manila-setup CLI's: 0 success, 2 usage or environment.
const (
	exitOK    = 0
	exitUsage = 2
)

func run(args []string, stdout, stderr io.Writer) int {
	root := &cobra.Command{
		Use:           "manila-setup-operator",
		Short:         "The in-cluster Manila CSI driver operator",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetArgs(args)
	root.AddCommand(newStartCommand(), newProbeCommand(), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "manila-setup-operator %s (commit %s, %s, %s/%s)\n", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	})
	if err := root.Execute(); err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return exitCode(err)
	}
	return exitOK
}

// StartOptions are the flags of `start`.
type StartOptions struct {
	Kubeconfig       string
	Mode             string
	Namespace        string
	Resync           time.Duration
	Cloud            string
	MachineNetworks  []string
	StorageNetworkID string
	HealthAddress    string
	MetricsAddress   string
	MetricsCertDir   string
	ProbeAddress     string
	LeaderElect      bool
	// The lease timings, as Kubernetes components name their flags; OpenShift's by default.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	OpenStackTimeout                          time.Duration
	ManilaGrace                               time.Duration
	Verbosity                                 int
	Profiling                                 bool

	images operator.Images
	cfg    *rest.Config
}

func newStartCommand() *cobra.Command {
	o := &StartOptions{}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the operator (in a Deployment in the cluster)",
		Long: `Run the operator: leader election on a Lease in its namespace, /healthz, /readyz and
/metrics on --health-address (loopback by default), /healthz and /readyz alone on
--probe-address (off by default; the rendered Deployment binds it to the pod IP for the
kubelet's probes), /metrics over HTTPS on --metrics-address for callers the API server allows
to get /metrics (off by default; the rendered Deployment binds it to the pod IP for
Prometheus), graceful shutdown on SIGTERM.

--mode driver (the default) deploys and manages the driver; --mode companion runs beside the
platform's own Manila CSI driver operator (OpenShift's), deploys nothing of the driver, keeps
StorageClasses manila-setup-<share type> restricted to the machine network and reports on
ManilaCompanion "cluster"; its namespace defaults to manila-setup.

In driver mode, operand images come only from the environment: DRIVER_IMAGE,
NFS_DRIVER_IMAGE, PROVISIONER_IMAGE, SNAPSHOTTER_IMAGE, RESIZER_IMAGE, LIVENESS_PROBE_IMAGE,
NODE_DRIVER_REGISTRAR_IMAGE, KUBE_RBAC_PROXY_IMAGE.`,
		Args: cobra.NoArgs,
		// SIGTERM ends the context: the operator releases its Lease and stops.
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, else the in-cluster configuration)")
	f.StringVar(&o.Mode, "mode", string(platform.ModeDriver), "driver or companion (beside the platform's own Manila operator)")
	f.StringVar(&o.Namespace, "namespace", "", "namespace of the operator, its credentials and (driver mode) the driver (default: "+operator.DefaultNamespace+" in driver mode, "+operator.CompanionNamespace+" in companion mode)")
	f.DurationVar(&o.Resync, "resync", operator.DefaultResync, "how often every controller re-checks, Manila included")
	f.StringVar(&o.Cloud, "cloud", "", `cloud of the credentials' clouds.yaml (default: "openstack", else the only one)`)
	f.StringSliceVar(&o.MachineNetworks, "machine-network", nil, "the machine network CIDRs (default: the install-config's machineNetwork); the StorageClasses' nfs-shareClient admits where the workers mount from: these, or the storage subnet once they are attached to the storage network")
	f.StringVar(&o.StorageNetworkID, "storage-network", "", "ID of the Neutron network Manila exports on (default: found by discovery)")
	f.StringVar(&o.HealthAddress, "health-address", controllers.DefaultHealthAddress, `address of /healthz, /readyz and /metrics ("" disables)`)
	f.StringVar(&o.ProbeAddress, "probe-address", "", `address of /healthz and /readyz only, for the kubelet's probes, e.g. the pod IP ("" disables)`)
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "take a Lease so that only one replica acts")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", controllers.DefaultLeaseDuration, "how long a standby waits after the last renewal before it takes the Lease")
	f.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", controllers.DefaultRenewDeadline, "how long the leader keeps trying to renew before it stops leading")
	f.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", controllers.DefaultRetryPeriod, "how often the Lease is tried")
	f.DurationVar(&o.OpenStackTimeout, "openstack-timeout", 10*time.Second, "timeout of each OpenStack request")
	f.DurationVar(&o.ManilaGrace, "manila-grace-period", controllers.DefaultManilaGracePeriod, "how long Manila may not answer before ManilaControllerDegraded (ManilaReachable says it at once)")
	f.StringVar(&o.MetricsAddress, "metrics-address", "", `address of /metrics over HTTPS, for callers allowed to get /metrics (TokenReview and SubjectAccessReview), e.g. the pod IP ("" disables)`)
	f.StringVar(&o.MetricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for --metrics-address (service-ca's Secret); a self-signed certificate while it has none")
	f.BoolVar(&o.Profiling, "profiling", false, "also serve Go's /debug/pprof/ on --health-address")
	f.IntVar(&o.Verbosity, "v", 2, "log verbosity until the ClusterCSIDriver's operatorLogLevel takes over")
	return cmd
}

func (o *StartOptions) Complete(cmd *cobra.Command, _ []string) error {
	if o.Mode != string(platform.ModeDriver) && o.Mode != string(platform.ModeCompanion) {
		return fmt.Errorf("--mode: Invalid value: %q: expected driver or companion", o.Mode)
	}
	if o.Namespace == "" {
		o.Namespace = operator.NamesFor(platform.Mode(o.Mode)).Namespace
	}
	var err error
	if o.Mode == string(platform.ModeDriver) {
		if o.images, err = operator.ImagesFromEnv(os.Getenv); err != nil {
			return err
		}
	}
	// Client rate: enough to create every operand in one burst (the operator raises nothing
	// itself when these are set).
	if o.cfg, err = kubeconfig.RESTConfig(cmdrun.CommandContext(cmd), kubeconfig.Options{Path: o.Kubeconfig, InCluster: true, QPS: 50, Burst: 100}); err != nil {
		return err
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	return fs.Set("v", fmt.Sprint(o.Verbosity))
}

func (o *StartOptions) Validate() error {
	if o.Resync < time.Second {
		return fmt.Errorf("--resync: Invalid value: %q: must be at least 1s", o.Resync)
	}
	if o.LeaderElect {
		switch {
		case o.RetryPeriod <= 0:
			return fmt.Errorf("--leader-elect-retry-period: Invalid value: %q: must be positive", o.RetryPeriod)
		case float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod):
			return fmt.Errorf("--leader-elect-renew-deadline: Invalid value: %q: must be longer than %v times --leader-elect-retry-period (%s)", o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
		case o.LeaseDuration <= o.RenewDeadline:
			return fmt.Errorf("--leader-elect-lease-duration: Invalid value: %q: must be longer than --leader-elect-renew-deadline (%s)", o.LeaseDuration, o.RenewDeadline)
		}
	}
	if o.ManilaGrace < 0 {
		return fmt.Errorf("--manila-grace-period: Invalid value: %q: must not be negative", o.ManilaGrace)
	}
	for i, c := range o.MachineNetworks {
		if _, err := operator.MachineNetworksFromInstallConfig([]byte("networking: {machineNetwork: [{cidr: \"" + c + "\"}]}")); err != nil {
			return fmt.Errorf("--machine-network[%d]: Invalid value: %q: must be a CIDR", i, c)
		}
	}
	return nil
}

func (o *StartOptions) Run(ctx context.Context) error {
	err := controllers.Start(ctx, controllers.StartOptions{
		Config: controllers.Config{
			Mode: platform.Mode(o.Mode), Namespace: o.Namespace, Images: o.images, Resync: o.Resync, CloudName: o.Cloud,
			MachineNetworks: o.MachineNetworks, StorageNetworkID: o.StorageNetworkID,
			OpenStackTimeout: o.OpenStackTimeout, ManilaGracePeriod: o.ManilaGrace, Version: version,
		},
		KubeConfig:     o.cfg,
		LeaderElection: o.LeaderElect,
		LeaseDuration:  o.LeaseDuration,
		RenewDeadline:  o.RenewDeadline,
		RetryPeriod:    o.RetryPeriod,
		HealthAddress:  o.HealthAddress,
		MetricsAddress: o.MetricsAddress,
		MetricsCertDir: o.MetricsCertDir,
		ProbeAddress:   o.ProbeAddress,
		Profiling:      o.Profiling,
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
