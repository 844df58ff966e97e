package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
)

func newOperatorCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("operator", "Run, render or inspect the in-cluster Manila CSI driver operator",
		`The in-cluster operator detects Manila in the Keystone catalog, deploys the Manila CSI driver
and its NFS partner node plugin, keeps one StorageClass per Manila share type and reports its
state on the ClusterCSIDriver manila.csi.openstack.org.

Deploy it with:
  manila-setup operator render | kubectl apply -f -
  kubectl -n openshift-cluster-csi-drivers create secret generic manila-cloud-credentials --from-file=clouds.yaml
or in one step (server-side apply, credentials from --os-cloud):
  manila-setup operator install --os-cloud mycloud`)
	cmd.AddCommand(newOperatorStartCommand(g, streams), newOperatorRenderCommand(g, streams),
		newOperatorInstallCommand(g, streams), newOperatorStatusCommand(g, streams))
	return cmd
}

// restConfig loads the kubeconfig of --kubeconfig/$KUBECONFIG/~/.kube/config, or the in-cluster
// configuration when inCluster is allowed and that file does not exist.
func restConfig(g *GlobalOptions, inCluster bool) (*rest.Config, error) {
	if g.Kubeconfig != "" {
		if _, err := os.Stat(g.Kubeconfig); err == nil || !inCluster {
			cfg, err := clientcmd.BuildConfigFromFlags("", g.Kubeconfig)
			if err != nil {
				return nil, environmentError(fmt.Errorf("kubeconfig %s: %w", g.Kubeconfig, err))
			}
			return cfg, nil
		}
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, environmentError(fmt.Errorf("no kubeconfig (%s) and not running in a cluster: %w", g.Kubeconfig, err))
	}
	return cfg, nil
}

// ---- start ---------------------------------------------------------------------------------

// OperatorStartOptions are the flags of `operator start`.
type OperatorStartOptions struct {
	Namespace        string
	Resync           time.Duration
	Cloud            string
	MachineNetworks  []string
	StorageNetworkID string
	HealthAddress    string
	LeaderElect      bool
	OpenStackTimeout time.Duration

	images operator.Images
	cfg    *rest.Config
}

func newOperatorStartCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorStartOptions{}
	cmd := &cobra.Command{
		Use:   "start",
		Short: "Run the operator (in a Deployment in the cluster)",
		Long: `Run the operator: leader election on a Lease in its namespace, /healthz, /readyz and
/metrics on --health-address (loopback by default), graceful shutdown on SIGTERM.

Operand images come only from the environment: DRIVER_IMAGE, NFS_DRIVER_IMAGE,
PROVISIONER_IMAGE, SNAPSHOTTER_IMAGE, RESIZER_IMAGE, LIVENESS_PROBE_IMAGE,
NODE_DRIVER_REGISTRAR_IMAGE, KUBE_RBAC_PROXY_IMAGE.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(g); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return o.Run(ctx, g)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Namespace, "namespace", operator.DefaultNamespace, "namespace of the operator, its credentials and the driver")
	f.DurationVar(&o.Resync, "resync", operator.DefaultResync, "how often every controller re-checks, Manila included")
	f.StringVar(&o.Cloud, "cloud", "", `cloud of the credentials' clouds.yaml (default: "openstack", else the only one)`)
	f.StringSliceVar(&o.MachineNetworks, "machine-network", nil, "CIDR allowed to mount the shares (nfs-shareClient); default: install-config's machineNetwork")
	f.StringVar(&o.StorageNetworkID, "storage-network", "", "ID of the Neutron network Manila exports on")
	f.StringVar(&o.HealthAddress, "health-address", operator.DefaultHealthAddress, `address of /healthz, /readyz and /metrics ("" disables)`)
	f.BoolVar(&o.LeaderElect, "leader-elect", true, "take a Lease so that only one replica acts")
	f.DurationVar(&o.OpenStackTimeout, "openstack-timeout", 10*time.Second, "timeout of each OpenStack request")
	return cmd
}

func (o *OperatorStartOptions) Complete(g *GlobalOptions) error {
	var err error
	if o.images, err = operator.ImagesFromEnv(os.Getenv); err != nil {
		return usageError("%v", err)
	}
	if o.cfg, err = restConfig(g, true); err != nil {
		return err
	}
	// klog verbosity follows -v until the ClusterCSIDriver's operatorLogLevel takes over.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", fmt.Sprint(2+g.Verbosity))
	return nil
}

func (o *OperatorStartOptions) Validate() error {
	if o.Resync < time.Second {
		return usageError("--resync: Invalid value: %q: must be at least 1s", o.Resync)
	}
	for i, c := range o.MachineNetworks {
		if _, err := operator.MachineNetworksFromInstallConfig([]byte("networking: {machineNetwork: [{cidr: \"" + c + "\"}]}")); err != nil {
			return usageError("--machine-network[%d]: Invalid value: %q: must be a CIDR", i, c)
		}
	}
	return nil
}

func (o *OperatorStartOptions) Run(ctx context.Context, g *GlobalOptions) error {
	err := operator.Start(ctx, operator.StartOptions{
		Config: operator.Config{
			Namespace: o.Namespace, Images: o.images, Resync: o.Resync, CloudName: o.Cloud,
			MachineNetworks: o.MachineNetworks, StorageNetworkID: o.StorageNetworkID,
			OpenStackTimeout: o.OpenStackTimeout, Version: version,
		},
		KubeConfig:     o.cfg,
		LeaderElection: o.LeaderElect,
		HealthAddress:  o.HealthAddress,
	})
	if err != nil {
		return environmentError(err)
	}
	return nil
}

// ---- render --------------------------------------------------------------------------------

// OperatorRenderOptions are the flags of `operator render`.
type OperatorRenderOptions struct {
	Namespace               string
	WithoutClusterCSIDriver bool
	render                  operator.RenderOptions
}

func newOperatorRenderCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorRenderOptions{}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the manifests that deploy the operator (pipe into kubectl apply -f -)",
		Long: `Print everything needed to deploy the operator: the ClusterCSIDriver CRD, the namespace,
RBAC, the operator Deployment and the ClusterCSIDriver manila.csi.openstack.org.

Images: OPERATOR_IMAGE and the operand images (DRIVER_IMAGE, NFS_DRIVER_IMAGE, ...) from the
environment, else upstream defaults. -o yaml (default) or -o json (a v1 List).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete()
			return o.Run(g, streams)
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", operator.DefaultNamespace, "namespace of the operator and the driver")
	cmd.Flags().BoolVar(&o.WithoutClusterCSIDriver, "without-cluster-csi-driver", false, "leave out the ClusterCSIDriver object")
	return cmd
}

func (o *OperatorRenderOptions) Complete() {
	o.render = operator.RenderOptionsFromEnv(os.Getenv)
	o.render.Namespace = o.Namespace
	o.render.WithoutClusterCSIDriver = o.WithoutClusterCSIDriver
}

func (o *OperatorRenderOptions) Run(g *GlobalOptions, streams IOStreams) error {
	out, err := operator.Render(o.render)
	if err != nil {
		return usageError("%v", err)
	}
	if g.Output == outputJSON {
		objs, err := operator.Objects(out)
		if err != nil {
			return err
		}
		items := make([]any, 0, len(objs))
		for _, u := range objs {
			items = append(items, u.Object)
		}
		return printStructured(streams.Out, outputJSON, map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	}
	_, err = streams.Out.Write(out)
	return err
}

// ---- install -------------------------------------------------------------------------------

// OperatorInstallOptions are the flags of `operator install`.
type OperatorInstallOptions struct {
	Namespace     string
	NoCredentials bool

	render      operator.RenderOptions
	credentials map[string][]byte
	cfg         *rest.Config
}

func newOperatorInstallCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorInstallOptions{}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Deploy the operator with server-side apply, with credentials from clouds.yaml",
		Long: `Apply what "operator render" prints with server-side apply (field manager manila-setup),
and store the cloud selected by --os-cloud (from --os-client-config-file / clouds.yaml) as
Secret manila-cloud-credentials, renamed "openstack", with its CA certificate when clouds.yaml
names one. Running it again updates everything in place.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(g); err != nil {
				return err
			}
			return o.Run(cmd.Context(), g, streams)
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", operator.DefaultNamespace, "namespace of the operator and the driver")
	cmd.Flags().BoolVar(&o.NoCredentials, "no-credentials", false, "do not create Secret manila-cloud-credentials")
	return cmd
}

func (o *OperatorInstallOptions) Complete(g *GlobalOptions) error {
	o.render = operator.RenderOptionsFromEnv(os.Getenv)
	o.render.Namespace = o.Namespace
	var err error
	if o.cfg, err = restConfig(g, false); err != nil {
		return err
	}
	if o.NoCredentials {
		return nil
	}
	if g.OSCloud == "" {
		return usageError("--os-cloud (or OS_CLOUD) is required to store the credentials; or pass --no-credentials")
	}
	o.credentials, err = credentialsFromCloudsYAML(g.OSClientConfigFile, g.OSCloud)
	return err
}

// credentialsFromCloudsYAML extracts one cloud as clouds.yaml with a single cloud "openstack",
// and the CA file it names, for the credentials Secret.
func credentialsFromCloudsYAML(path, cloud string) (map[string][]byte, error) {
	candidates := []string{path}
	if path == "" {
		home, _ := os.UserHomeDir()
		candidates = []string{"clouds.yaml", filepath.Join(home, ".config", "openstack", "clouds.yaml"), "/etc/openstack/clouds.yaml"}
	}
	var raw []byte
	var err error
	for _, p := range candidates {
		if raw, err = os.ReadFile(p); err == nil {
			path = p
			break
		}
	}
	if err != nil {
		return nil, environmentError(fmt.Errorf("reading clouds.yaml: %w", err))
	}
	var all map[string]map[string]any
	if err := yaml.Unmarshal(raw, &all); err != nil {
		return nil, invalidInput(fmt.Errorf("%s: not valid YAML", path))
	}
	c, ok := all["clouds"][cloud]
	if !ok {
		return nil, invalidInput(fmt.Errorf("%s: cloud %q not found", path, cloud))
	}
	data := map[string][]byte{}
	if m, ok := c.(map[string]any); ok {
		if ca, ok := m["cacert"].(string); ok && ca != "" {
			if !filepath.IsAbs(ca) {
				ca = filepath.Join(filepath.Dir(path), ca)
			}
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, environmentError(fmt.Errorf("cacert of cloud %q: %w", cloud, err))
			}
			data[operator.CredentialsCAKey] = pem
			delete(m, "cacert")
		}
	}
	out, err := yaml.Marshal(map[string]any{"clouds": map[string]any{operator.DefaultCloudName: c}})
	if err != nil {
		return nil, err
	}
	if _, err := operator.ParseCredentials(out, operator.DefaultCloudName, data[operator.CredentialsCAKey]); err != nil {
		return nil, invalidInput(fmt.Errorf("%s: %v", path, err))
	}
	data[operator.CredentialsKey] = out
	return data, nil
}

func (o *OperatorInstallOptions) Run(ctx context.Context, g *GlobalOptions, streams IOStreams) error {
	rendered, err := operator.Render(o.render)
	if err != nil {
		return usageError("%v", err)
	}
	applied, err := operator.Install(ctx, o.cfg, rendered, o.Namespace, o.credentials)
	if err != nil {
		return environmentError(err)
	}
	if g.Output != outputText {
		return printStructured(streams.Out, g.Output, map[string]any{"applied": applied})
	}
	for _, a := range applied {
		fmt.Fprintf(streams.Out, "%s applied\n", a)
	}
	fmt.Fprintf(streams.Out, "Follow the driver with: manila-setup operator status\n")
	return nil
}

// ---- status --------------------------------------------------------------------------------

// OperatorStatusOptions are the flags of `operator status`.
type OperatorStatusOptions struct {
	Namespace string
	cfg       *rest.Config
}

func newOperatorStatusCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarise the operator's conditions and the driver's health",
		Long: `Show the conditions of the ClusterCSIDriver manila.csi.openstack.org, the driver's
Deployment and DaemonSets and the StorageClasses. Exit code 1 when something is Degraded or an
installed operand is not available.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if o.cfg, err = restConfig(g, false); err != nil {
				return err
			}
			return o.Run(cmd.Context(), g, streams)
		},
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", operator.DefaultNamespace, "namespace of the driver")
	return cmd
}

func (o *OperatorStatusOptions) Run(ctx context.Context, g *GlobalOptions, streams IOStreams) error {
	st, err := operator.GetStatus(ctx, o.cfg, o.Namespace)
	if err != nil {
		return environmentError(err)
	}
	if g.Output != outputText {
		if err := printStructured(streams.Out, g.Output, st); err != nil {
			return err
		}
	} else {
		printStatusText(streams, st)
	}
	if !st.Healthy {
		return silentFailure(exitInvalid)
	}
	return nil
}

func printStatusText(streams IOStreams, st *operator.Status) {
	w := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
	health := "healthy"
	if !st.Healthy {
		health = "NOT healthy"
	}
	fmt.Fprintf(w, "ClusterCSIDriver %s: %s, managementState %s, generation %d (observed %d), version %s\n\n",
		operator.DriverName, health, st.ManagementState, st.Generation, st.ObservedGen, st.Version)
	fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
	}
	fmt.Fprintln(w, "\nOPERAND\tREADY\tUP-TO-DATE\tAVAILABLE")
	for _, op := range st.Operands {
		if !op.Present {
			fmt.Fprintf(w, "%s/%s\t-\t-\tnot deployed\n", strings.ToLower(op.Kind), op.Name)
			continue
		}
		fmt.Fprintf(w, "%s/%s\t%d/%d\t%t\t%t\n", strings.ToLower(op.Kind), op.Name, op.Ready, op.Desired, op.UpToDate, op.Available)
	}
	fmt.Fprintf(w, "\nStorageClasses: %s\n", strings.Join(append([]string{}, st.StorageClasses...), ", "))
	w.Flush()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
