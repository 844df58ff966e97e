package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
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
		newOperatorInstallCommand(g, streams), newOperatorUninstallCommand(g, streams), newOperatorStatusCommand(g, streams),
		newOperatorBundleCommand(g, streams))
	return cmd
}

// ---- start ---------------------------------------------------------------------------------

// operatorBinaryName is the operator's own binary, built beside manila-setup (make build).
const operatorBinaryName = "manila-setup-operator"

func newOperatorStartCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:   "start [flags of manila-setup-operator start]",
		Short: "Run the operator (runs manila-setup-operator start)",
		Long: `Run the in-cluster operator. The operator is a binary of its own, manila-setup-operator
(what the rendered Deployment runs), so that this CLI does not carry its controller
libraries; this command runs "manila-setup-operator start" found next to this binary, else on
$PATH, with every argument passed on: see "manila-setup-operator start --help".`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			bin, err := operatorBinary()
			if err != nil {
				return environmentError(err)
			}
			argv := append([]string{bin, "start"}, operatorArgs(args)...)
			if err := syscall.Exec(bin, argv, os.Environ()); err != nil {
				return environmentError(fmt.Errorf("running %s: %w", bin, err))
			}
			return nil
		},
	}
}

// operatorArgs passes the arguments on, with this CLI's -v, -vv, --verbose (which may stand
// before "operator start" and so arrive here unparsed) turned into the operator's --v=N: its
// default is 2, and each v adds one. An explicit --v wins.
func operatorArgs(args []string) []string {
	out := make([]string, 0, len(args))
	extra, explicit := 0, false
	for _, a := range args {
		switch {
		case a == "--v" || strings.HasPrefix(a, "--v="):
			explicit = true
			out = append(out, a)
		case a == "--verbose":
			extra++
		case len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "v") == "":
			extra += len(a) - 1
		default:
			out = append(out, a)
		}
	}
	if extra > 0 && !explicit {
		out = append(out, fmt.Sprintf("--v=%d", 2+extra))
	}
	return out
}

// operatorBinary finds manila-setup-operator next to this executable, else on $PATH.
func operatorBinary() (string, error) {
	var tried []string
	if self, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(self); err == nil {
			self = resolved
		}
		p := filepath.Join(filepath.Dir(self), operatorBinaryName)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
		tried = append(tried, p)
	}
	if p, err := exec.LookPath(operatorBinaryName); err == nil {
		return p, nil
	}
	tried = append(tried, "$PATH")
	return "", fmt.Errorf("the operator binary %s was not found (looked at %s): build it with make build, or install it next to manila-setup",
		operatorBinaryName, strings.Join(tried, " and "))
}

// ---- render --------------------------------------------------------------------------------

// OperatorRenderOptions are the flags of `operator render`.
type OperatorRenderOptions struct {
	Mode                    string
	Namespace               string
	Image                   string
	WithoutClusterCSIDriver bool
	MachineNetworks         []string

	g       *GlobalOptions
	streams IOStreams
	render  operator.RenderOptions
}

func newOperatorRenderCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorRenderOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "render",
		Short: "Print the manifests that deploy the operator (pipe into kubectl apply -f -)",
		Long: `Print everything needed to deploy the operator: the ClusterCSIDriver CRD, the namespace,
RBAC, the operator Deployment and the ClusterCSIDriver manila.csi.openstack.org.

--mode companion prints the companion instead, for clusters where the platform runs its own
Manila CSI driver operator: namespace manila-setup, names of its own, the ManilaCompanion CRD
and object, no driver. Without --mode, the mode is what the cluster says when one answers
(--kubeconfig, $KUBECONFIG or ~/.kube/config), else driver; stderr says which.

Images: OPERATOR_IMAGE and the operand images (DRIVER_IMAGE, NFS_DRIVER_IMAGE, ...) from the
environment, else upstream defaults. -o yaml (default) or -o json (a v1 List).`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	addModeFlag(cmd, &o.Mode)
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "namespace of the operator and the driver (default: "+operator.DefaultNamespace+"; companion: "+operator.CompanionNamespace+")")
	cmd.Flags().StringVar(&o.Image, "image", "", "operator image, tagged with a version (default: OPERATOR_IMAGE, else this build's)")
	cmd.Flags().BoolVar(&o.WithoutClusterCSIDriver, "without-cluster-csi-driver", false, "leave out the ClusterCSIDriver object")
	addMachineNetworkFlag(cmd, &o.MachineNetworks)
	return cmd
}

// addMachineNetworkFlag adds --machine-network, which the rendered operator gets.
func addMachineNetworkFlag(cmd *cobra.Command, networks *[]string) {
	cmd.Flags().StringSliceVar(networks, "machine-network", nil, "the nodes' network CIDRs, for the operator's StorageClasses where the cluster keeps no install-config (kube-system/cluster-config-v1), as plain Kubernetes")
}

func (o *OperatorRenderOptions) Complete(cmd *cobra.Command, _ []string) error {
	mode, err := resolveMode(o.Mode, func() (*rest.Config, error) { return o.g.restConfig(cmdrun.CommandContext(cmd)) }, o.streams)
	if err != nil {
		return err
	}
	o.render = operator.RenderOptionsFromEnv(os.Getenv)
	o.render.Mode = mode
	o.render.Namespace = namespaceFor(o.Namespace, mode)
	o.render.WithoutClusterCSIDriver = o.WithoutClusterCSIDriver
	o.render.MachineNetworks = o.MachineNetworks
	if o.Image != "" {
		o.render.OperatorImage = o.Image
	}
	return nil
}

func (o *OperatorRenderOptions) Validate() error { return checkOperatorImage(o.render.OperatorImage) }

// checkOperatorImage refuses an operator image that names no version (untagged, :latest): the
// cluster would run whatever that name points at on the day a node pulls it.
func checkOperatorImage(ref string) error {
	if ref == "" {
		return usageError("--image: no operator image: this build has no version of its own; give --image or OPERATOR_IMAGE")
	}
	if err := operator.CheckImageReference(ref); err != nil {
		return usageError("--image: Invalid value: %q: %v", ref, err)
	}
	return nil
}

func (o *OperatorRenderOptions) Run(context.Context) error {
	g, streams := o.g, o.streams
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
	Mode            string
	Namespace       string
	Image           string
	NoCredentials   bool
	ForceConflicts  bool
	MachineNetworks []string

	g       *GlobalOptions
	streams IOStreams

	render      operator.RenderOptions
	credentials map[string][]byte
	cfg         *rest.Config
}

func newOperatorInstallCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorInstallOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Deploy the operator with server-side apply, with credentials from clouds.yaml",
		Long: `Apply what "operator render" prints with server-side apply (field manager manila-setup),
and store the cloud selected by --os-cloud (from --os-client-config-file / clouds.yaml) as
Secret manila-cloud-credentials, renamed "openstack", with its CA certificate when clouds.yaml
names one. Running it again updates everything in place.

The cluster is read before anything is written. Where the platform runs its own Manila CSI
driver operator (OpenShift with the Storage capability), the companion is installed (mode
companion: namespace manila-setup, its own names, no driver; StorageClasses
manila-setup-<share type> restricted to the machine network; status on ManilaCompanion
"cluster"); elsewhere the driver (mode driver). --mode asks for one: a mode the cluster is not
of writes nothing and exits 1, naming the objects that decide.

Nothing another component owns is written over: every object is read first, and where one exists
and is not manila-setup's (neither its app.kubernetes.io/managed-by label nor its field
managers), has a controller of another kind, or has fields another manager set that install
would change, nothing is written: the command names each object, its managers or the fields,
and exits 1. A CustomResourceDefinition that exists and is not ours is used as it is.
--force-conflicts takes them over all the same (server-side apply with force).`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	addModeFlag(cmd, &o.Mode)
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "namespace of the operator and the driver (default: "+operator.DefaultNamespace+"; companion: "+operator.CompanionNamespace+")")
	cmd.Flags().StringVar(&o.Image, "image", "", "operator image, tagged with a version (default: OPERATOR_IMAGE, else this build's)")
	cmd.Flags().BoolVar(&o.NoCredentials, "no-credentials", false, "do not create Secret manila-cloud-credentials")
	cmd.Flags().BoolVar(&o.ForceConflicts, "force-conflicts", false, "write every object, also over another manager's objects and fields")
	addMachineNetworkFlag(cmd, &o.MachineNetworks)
	return cmd
}

// Complete reads the kubeconfig and the cloud's credentials from clouds.yaml.
func (o *OperatorInstallOptions) Complete(cmd *cobra.Command, _ []string) error {
	g := o.g
	if err := checkModeFlag(o.Mode); err != nil {
		return err
	}
	o.render = operator.RenderOptionsFromEnv(os.Getenv)
	o.render.MachineNetworks = o.MachineNetworks
	if o.Image != "" {
		o.render.OperatorImage = o.Image
	}
	var err error
	if o.cfg, err = g.restConfig(cmdrun.CommandContext(cmd)); err != nil {
		return err
	}
	if o.NoCredentials || g.OSCloud == "" {
		return nil
	}
	o.credentials, err = credentialsFromCloudsYAML(cmdrun.CommandContext(cmd), g.OSClientConfigFile, g.OSCloud)
	return err
}

func (o *OperatorInstallOptions) Validate() error { return checkOperatorImage(o.render.OperatorImage) }

// planCredentials is deploy.PlanCredentials with the exit codes: no source is a usage error
// (the flags to give), a cluster that cannot be asked an environment error.
func planCredentials(noCredentials bool, osCloud string, hasCCO func() (bool, error)) (deploy.CredentialsPlan, error) {
	plan, err := deploy.PlanCredentials(noCredentials, osCloud, hasCCO)
	switch {
	case errors.Is(err, deploy.ErrNoCredentialsSource):
		return plan, usageError("--os-cloud (or OS_CLOUD) is required to store the credentials: the cluster has no cloud-credential operator to provide them; or pass --no-credentials")
	case err != nil:
		return plan, environmentError(err)
	}
	return plan, nil
}

// credentialsFromCloudsYAML is deploy.CredentialsFromCloudsYAML with the exit codes: a
// clouds.yaml that cannot be found or read is an environment error, one that does not give
// usable credentials invalid input.
func credentialsFromCloudsYAML(ctx context.Context, path, cloud string) (map[string][]byte, error) {
	data, err := deploy.CredentialsFromCloudsYAML(ctx, path, cloud)
	var invalid *deploy.InvalidCloudError
	switch {
	case errors.As(err, &invalid):
		return nil, invalidInput(err)
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return nil, environmentError(err)
	}
	return data, err
}

func (o *OperatorInstallOptions) Run(ctx context.Context) error {
	g, streams := o.g, o.streams
	plan, err := planCredentials(o.NoCredentials, g.OSCloud, func() (bool, error) { return deploy.HasCloudCredentialOperator(o.cfg) })
	if err != nil {
		return err
	}
	o.render.CredentialsRequest = plan == deploy.CredentialsCCO
	// The mode: asked for, else what the cluster is (Install checks again before it writes).
	mode := platform.Mode(o.Mode)
	if mode == "" {
		d, err := deploy.Detect(ctx, o.cfg)
		if err != nil {
			return environmentError(err)
		}
		mode = platform.ModeDriver
		if d.Mode == platform.ModeCompanion {
			mode = platform.ModeCompanion
			fmt.Fprintf(streams.ErrOut, "mode companion: %s\n", d.Message)
		}
	}
	o.render.Mode = mode
	o.render.Namespace = namespaceFor(o.Namespace, mode)
	o.Namespace = o.render.Namespace
	rendered, err := operator.Render(o.render)
	if err != nil {
		return usageError("%v", err)
	}
	type notApplied struct {
		Object string `json:"object"`
		Why    string `json:"why"`
	}
	skipped := []notApplied{}
	applied, err := deploy.Install(ctx, o.cfg, rendered, o.Namespace, deploy.InstallOptions{Credentials: o.credentials, ForceConflicts: o.ForceConflicts,
		OnSkipped: func(object, why string) { skipped = append(skipped, notApplied{object, why}) }})
	var refused *deploy.RefusedError
	var owned *deploy.OwnershipError
	switch {
	case errors.As(err, &refused), errors.As(err, &owned):
		return invalidInput(err) // the cluster is not one to install into: a failed check
	case err != nil:
		return environmentError(err)
	}
	if g.Output != outputText {
		return printStructured(streams.Out, g.Output, map[string]any{"applied": applied, "skipped": skipped})
	}
	for _, a := range applied {
		fmt.Fprintf(streams.Out, "%s applied\n", a)
	}
	for _, sk := range skipped {
		fmt.Fprintf(streams.Out, "%s not applied: %s\n", sk.Object, sk.Why)
	}
	if plan == deploy.CredentialsCCO {
		fmt.Fprintf(streams.Out, "The cloud-credential operator writes Secret %s/%s from the cluster's own credentials (no --os-cloud given).\n",
			o.Namespace, operator.CredentialsSecretName)
	}
	if mode == platform.ModeCompanion {
		fmt.Fprintf(streams.Out, "The companion runs beside the platform's Manila CSI driver operator and writes nothing of the platform's.\n")
	}
	fmt.Fprintf(streams.Out, "Follow the driver with: manila-setup operator status\n")
	return nil
}

// ---- uninstall -----------------------------------------------------------------------------

// OperatorUninstallOptions are the flags of `operator uninstall`.
type OperatorUninstallOptions struct {
	Mode       string
	Namespace  string
	KeepDriver bool
	Force      bool
	DryRun     bool
	Timeout    time.Duration

	g       *GlobalOptions
	streams IOStreams
	cfg     *rest.Config
}

func newOperatorUninstallCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorUninstallOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "uninstall [--dry-run] [--keep-driver | --force] [--timeout 5m]",
		Short: "Delete what operator install and the operator created, and nothing else",
		Long: `Delete the operator and what it deployed, in the mode the cluster is (or --mode): the objects
"operator install" writes, and those the operator made (the driver's Deployment and
DaemonSets, its Secret, StorageClasses, CSIDriver, RBAC, ...: the objects labelled
app.kubernetes.io/managed-by=manila-setup-operator). The operator's Deployment goes first, so
that it re-creates nothing; then the operands, waiting until their pods are gone (--timeout);
then the cluster-scoped objects; the CustomResourceDefinition last.

An object is deleted only when it is manila-setup's, as install judges it: its managed-by label
or field manager is ours, no platform component wrote it, and no other object controls it.
Anything else under our names (the platform's own Manila operator, in companion mode or on a
cluster that only looks like plain Kubernetes) is listed as left, and never written. A Secret
another manager wrote (the cloud-credential operator's, one made by hand) is left; a
StorageClass a PersistentVolume names is kept; the namespace is kept while it holds anything
else, the CRD while custom resources that are not ours remain.

While PersistentVolumes of the driver exist, nothing is deleted (exit 1, naming them), unless
--keep-driver (delete only the operator: the driver runs on, unmanaged) or --force (delete the
driver too; the volumes lose it). In companion mode the driver is the platform's, and volumes
stop nothing. --dry-run prints the plan and deletes nothing (each delete is sent as a server-side
dry run); it exits 1 where the real run would be refused.`,
		Example: `  manila-setup operator uninstall --dry-run
  manila-setup operator uninstall --keep-driver
  manila-setup operator uninstall --force -o yaml`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	addModeFlag(cmd, &o.Mode)
	cmd.Flags().StringVar(&o.Namespace, "namespace", "", "namespace of the operator and the driver (default: "+operator.DefaultNamespace+"; companion: "+operator.CompanionNamespace+")")
	cmd.Flags().BoolVar(&o.KeepDriver, "keep-driver", false, "delete only the operator's own objects; the driver keeps running, unmanaged")
	cmd.Flags().BoolVar(&o.Force, "force", false, "delete the driver also while PersistentVolumes of it exist (StorageClasses they name are kept)")
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "print what would be deleted and kept; delete nothing")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", deploy.DefaultUninstallTimeout, "how long the deleted workloads may take to be gone, pods included")
	cmd.MarkFlagsMutuallyExclusive("keep-driver", "force")
	return cmd
}

func (o *OperatorUninstallOptions) Complete(cmd *cobra.Command, _ []string) error {
	var err error
	o.cfg, err = o.g.restConfig(cmdrun.CommandContext(cmd))
	return err
}

func (o *OperatorUninstallOptions) Validate() error {
	if err := checkModeFlag(o.Mode); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return usageError("--timeout: Invalid value: %q: must be a positive duration such as 5m", o.Timeout)
	}
	return nil
}

func (o *OperatorUninstallOptions) Run(ctx context.Context) error {
	g, streams := o.g, o.streams
	report, err := deploy.Uninstall(ctx, o.cfg, deploy.UninstallOptions{Mode: platform.Mode(o.Mode), Namespace: o.Namespace,
		KeepDriver: o.KeepDriver, Force: o.Force, DryRun: o.DryRun, Timeout: o.Timeout})
	if report != nil {
		if g.Output != outputText {
			if perr := printStructured(streams.Out, g.Output, report); perr != nil {
				return perr
			}
		} else {
			printUninstallText(streams, report)
		}
	}
	switch {
	case deploy.IsUninstallRefusal(err):
		return invalidInput(err)
	case err != nil:
		return environmentError(err)
	}
	return nil
}

func printUninstallText(streams IOStreams, r *deploy.UninstallReport) {
	w := streams.Out
	for _, p := range r.Objects {
		switch {
		case p.Action == deploy.ActionDelete && r.Refused:
			fmt.Fprintf(w, "%s: not deleted (refused)\n", p.Key())
		case p.Action == deploy.ActionDelete && p.Deleted && p.Terminating:
			fmt.Fprintf(w, "%s: being deleted already\n", p.Key())
		case p.Action == deploy.ActionDelete && p.Deleted && r.DryRun:
			fmt.Fprintf(w, "%s: would be deleted (dry run)\n", p.Key())
		case p.Action == deploy.ActionDelete && p.Deleted:
			fmt.Fprintf(w, "%s: deleted\n", p.Key())
		case p.Action == deploy.ActionDelete:
			fmt.Fprintf(w, "%s: not deleted (stopped before)\n", p.Key())
		case p.Action == deploy.ActionKeep:
			fmt.Fprintf(w, "%s: kept: %s\n", p.Key(), p.Reason)
		default:
			fmt.Fprintf(w, "%s: left: %s\n", p.Key(), p.Reason)
		}
	}
	if len(r.Objects) == 0 {
		fmt.Fprintf(w, "Nothing of manila-setup's (mode %s, namespace %s) is in the cluster.\n", r.Mode, r.Namespace)
	}
	if r.Refused {
		return
	}
	what := "The driver runs on, unmanaged"
	if r.Mode == platform.ModeCompanion {
		what = "What the companion made stays, unmanaged"
	}
	if len(r.Unmanaged) > 0 {
		fmt.Fprintf(w, "%s: nothing updates or repairs its %d objects (%s) now; manila-setup operator install manages them again.\n",
			what, len(r.Unmanaged), deploy.Summarize(r.Unmanaged, 3))
	}
	if r.Mode == platform.ModeCompanion {
		fmt.Fprintf(w, "The platform's own Manila CSI driver (its operator, driver and StorageClasses) is not manila-setup's: uninstall deletes none of it.\n")
	}
	if len(r.VolumesWithoutDriver) > 0 {
		fmt.Fprintf(w, "PersistentVolumes that lose their driver (--force): %s. Mounts in running pods stay; new mounts, expansions and deletions of their shares fail until a driver is installed again.\n",
			strings.Join(r.VolumesWithoutDriver, ", "))
	}
	if len(r.SnapshotsWithoutDriver) > 0 {
		fmt.Fprintf(w, "VolumeSnapshotContents that lose their driver (--force): %s. They, their VolumeSnapshots and their Manila snapshots stay; restores and deletions of them fail until a driver is installed again.\n",
			deploy.Summarize(r.SnapshotsWithoutDriver, 5))
	}
	verb := "deleted"
	if r.DryRun {
		verb = "would be deleted (dry run: nothing was)"
	}
	fmt.Fprintf(w, "%d %s, %d kept, %d left (not manila-setup's)", r.Deleted, verb, r.Kept, r.Left)
	if r.WorkloadsGoneAfter != "" {
		fmt.Fprintf(w, "; workloads gone after %s", r.WorkloadsGoneAfter)
	}
	fmt.Fprintln(w)
}

// ---- status --------------------------------------------------------------------------------

// OperatorStatusOptions are the flags of `operator status`.
type OperatorStatusOptions struct {
	Namespace string

	g       *GlobalOptions
	streams IOStreams
	cfg     *rest.Config
}

func newOperatorStatusCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &OperatorStatusOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Summarise the operator's conditions and the driver's health",
		Long: `Show which kind of cluster this is (mode driver, companion or none, and why), the
conditions of the ClusterCSIDriver manila.csi.openstack.org, the driver's Deployment and
DaemonSets and the StorageClasses of the Manila driver. Where the platform runs its own Manila
operator (companion), its ClusterCSIDriver is read and its conditions alone say how the driver
is. Exit code 1 when something is Degraded or an installed operand is not available.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringVar(&o.Namespace, "namespace", operator.DefaultNamespace, "namespace of the driver")
	return cmd
}

func (o *OperatorStatusOptions) Complete(cmd *cobra.Command, _ []string) error {
	var err error
	o.cfg, err = o.g.restConfig(cmdrun.CommandContext(cmd))
	return err
}

func (o *OperatorStatusOptions) Validate() error { return nil }

func (o *OperatorStatusOptions) Run(ctx context.Context) error {
	g, streams := o.g, o.streams
	st, err := deploy.GetStatus(ctx, o.cfg, o.Namespace)
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

func printStatusText(streams IOStreams, st *deploy.Status) {
	w := tabwriter.NewWriter(streams.Out, 0, 4, 2, ' ', 0)
	health := "healthy"
	if !st.Healthy {
		health = "NOT healthy"
	}
	fmt.Fprintf(w, "ClusterCSIDriver %s: %s, managementState %s, generation %d (observed %d), version %s\n",
		operator.DriverName, health, st.ManagementState, st.Generation, st.ObservedGen, st.Version)
	fmt.Fprintf(w, "mode %s (%s): %s\n", st.Mode.Mode, st.Mode.Reason, st.Mode.Message)
	fmt.Fprintf(w, "credentials: %s\n\n", st.Credentials)
	fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tMESSAGE")
	for _, c := range st.Conditions {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, deploy.OneLine(c.Message))
	}
	if len(st.Operands) > 0 {
		fmt.Fprintln(w, "\nOPERAND\tREADY\tUP-TO-DATE\tAVAILABLE")
	}
	for _, op := range st.Operands {
		if !op.Present {
			fmt.Fprintf(w, "%s/%s\t-\t-\tnot deployed\n", strings.ToLower(op.Kind), op.Name)
			continue
		}
		fmt.Fprintf(w, "%s/%s\t%d/%d\t%t\t%t\n", strings.ToLower(op.Kind), op.Name, op.Ready, op.Desired, op.UpToDate, op.Available)
	}
	fmt.Fprintf(w, "\nStorageClasses: %s\n", strings.Join(append([]string{}, st.StorageClasses...), ", "))
	if c := st.Companion; c != nil {
		fmt.Fprintf(w, "\n%s %s (manila-setup's companion, namespace %s), version %s\n", operator.CompanionKind, operator.CompanionName, c.Namespace, c.Version)
		fmt.Fprintf(w, "credentials: %s\n\n", c.Credentials)
		if len(c.Conditions) == 0 {
			fmt.Fprintf(w, "The companion has reported nothing yet: is it running? kubectl -n %s get pods\n", c.Namespace)
		} else {
			fmt.Fprintln(w, "CONDITION\tSTATUS\tREASON\tMESSAGE")
		}
		for _, cond := range c.Conditions {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, deploy.OneLine(cond.Message))
		}
		scs := strings.Join(c.StorageClasses, ", ")
		if scs == "" {
			scs = "none yet"
		}
		fmt.Fprintf(w, "\nStorageClasses restricted to the machine network: %s\n", scs)
	} else if st.Mode.Mode == platform.ModeCompanion {
		fmt.Fprintf(w, "\nmanila-setup's companion is not installed (StorageClasses restricted to the machine network, storage network status): manila-setup operator install\n")
	}
	fmt.Fprintf(w, "\nA pod that does not mount its volume, a claim that stays Pending: manila-setup diagnose pod/NAME -n NAMESPACE --os-cloud CLOUD\n")
	w.Flush()
}

// ---- modes ---------------------------------------------------------------------------------

func addModeFlag(cmd *cobra.Command, mode *string) {
	cmd.Flags().StringVar(mode, "mode", "", "driver or companion (beside the platform's own Manila operator); default: what the cluster is")
}

func checkModeFlag(mode string) error {
	if mode != "" && mode != string(platform.ModeDriver) && mode != string(platform.ModeCompanion) {
		return usageError("--mode: Invalid value: %q: expected driver or companion", mode)
	}
	return nil
}

// namespaceFor is the namespace given, else the mode's.
func namespaceFor(given string, mode platform.Mode) string {
	if given != "" {
		return given
	}
	return operator.NamesFor(mode).Namespace
}

// modeProbeTimeout bounds how long render waits for a cluster to say its mode.
const modeProbeTimeout = 5 * time.Second

// resolveMode is --mode when given, else what the cluster says when one answers, else driver;
// stderr says which and why, since render's output depends on it.
func resolveMode(flag string, restConfig func() (*rest.Config, error), streams IOStreams) (platform.Mode, error) {
	if err := checkModeFlag(flag); err != nil {
		return "", err
	}
	if flag != "" {
		return platform.Mode(flag), nil
	}
	cfg, err := restConfig()
	if err != nil {
		fmt.Fprintf(streams.ErrOut, "mode driver: no cluster to ask (%v); give --mode companion for a cluster whose platform runs its own Manila operator\n", deploy.OneLine(err.Error()))
		return platform.ModeDriver, nil
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = modeProbeTimeout
	ctx, cancel := context.WithTimeout(context.Background(), modeProbeTimeout)
	defer cancel()
	d, err := deploy.Detect(ctx, cfg)
	if err != nil {
		fmt.Fprintf(streams.ErrOut, "mode driver: the cluster did not say its mode (%v); give --mode to choose\n", deploy.OneLine(err.Error()))
		return platform.ModeDriver, nil
	}
	if d.Mode == platform.ModeCompanion {
		fmt.Fprintf(streams.ErrOut, "mode companion (from the cluster): %s\n", d.Message)
		return platform.ModeCompanion, nil
	}
	fmt.Fprintf(streams.ErrOut, "mode driver (from the cluster): %s\n", d.Message)
	return platform.ModeDriver, nil
}
