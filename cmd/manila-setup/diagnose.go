package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/operator/deploy"
)

// DiagnoseOptions are the flags of `diagnose`.
type DiagnoseOptions struct {
	Namespace string

	g        *GlobalOptions
	streams  IOStreams
	target   string
	cloudOpt *cloudOptions
}

func newDiagnoseCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &DiagnoseOptions{g: g, streams: streams, cloudOpt: &cloudOptions{global: g, streams: streams}}
	cmd := &cobra.Command{
		Use:   "diagnose pod/NAME | pvc/NAME | volumesnapshot/NAME",
		Short: "Say why a pod's Manila volume does not mount, a claim stays Pending, or a snapshot is not taken (exit 1 when a check fails)",
		Long: `Follow a pod's (or a claim's) Manila volume through the places where it can fail, and make one
check of each: the pod (Running, or the warning that holds it, such as mount.nfs's own words);
the claim (Bound, or the provisioner's warning); its StorageClass (the driver's, a share type
Manila offers to the project, its Secret); the share (available, its export locations and the
subnet each lies in); its access rules (an ip rule, read-write, active, admitting the address
the node mounts from: the driver does not wait for a rule still queued_to_apply and says
nothing of one in error); the node (Ready, the Machine that made it and its set); the node's
server (a port on the network Manila exports on); the driver on the node (its node plugin and
NFS node plugin Ready, the CSINode listing manila.csi.openstack.org); and the class's
nfs-shareClient against where the node mounts from. A claim made from a VolumeSnapshot or
another claim gets a check of its data source: the snapshot ready and no larger than the claim
asks, or a clone, which the Manila CSI driver cannot make.

For a VolumeSnapshot: the snapshot itself (readyToUse, or the driver's error, or no status at
all when no snapshot-controller runs); whether the share type of its claim can take snapshots
(the driver snapshots only shares whose type has snapshot_support and
create_share_from_snapshot_support); and the Manila snapshot behind it.

Each check is passed, failed or not checked, with its evidence; a failed one names the command
that fixes it. Without --os-cloud the share, its access rules, the share types and the ports
are not checked, and say so. Nothing is written. Exit 1 when a check failed.`,
		Example: `  manila-setup diagnose pod/app-0 -n shop
  manila-setup diagnose pvc/data -n shop --os-cloud mycloud -o json
  manila-setup diagnose volumesnapshot/data-daily -n shop --os-cloud mycloud`,
		Args: cobra.ExactArgs(1),
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "namespace of the pod, claim or VolumeSnapshot (default: the kubeconfig context's)")
	o.cloudOpt.addFlags(cmd.Flags())
	return cmd
}

func (o *DiagnoseOptions) Complete(_ *cobra.Command, args []string) error {
	o.target = args[0]
	return nil
}

func (o *DiagnoseOptions) Validate() error {
	if _, err := diagnose.ParseTarget(o.target, "x"); err != nil {
		return usageError("%v", err)
	}
	if o.g.OSCloud != "" {
		return o.cloudOpt.validate()
	}
	return nil
}

func (o *DiagnoseOptions) Run(ctx context.Context) error {
	c, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	ns := o.Namespace
	if ns == "" {
		if ns, err = kubeconfig.Namespace(ctx, o.g.kubeOptions("")); err != nil {
			return environmentError(err)
		}
	}
	target, err := diagnose.ParseTarget(o.target, ns)
	if err != nil {
		return usageError("%v", err)
	}
	kube := c.kube
	// Unreadable: the checks go without the machine networks, and say what they could not tell.
	ic, _ := deploy.ReadInstallConfig(ctx, kube)
	in := diagnose.Inputs{Kube: kube, Meta: c.meta, Dynamic: c.dynamic, CloudName: o.g.OSCloud, MachineNetworks: ic.MachineNetworks}
	if o.g.OSCloud != "" {
		in.Cloud = o.cloudOpt.connect
	}
	report, err := diagnose.Run(ctx, in, target)
	if err != nil {
		return environmentError(err)
	}
	if o.g.Output != outputText {
		if err := printStructured(o.streams.Out, o.g.Output, report); err != nil {
			return err
		}
	} else {
		printDiagnosis(o, report, target)
	}
	if report.Count(diagnose.Failed) > 0 {
		return silentFailure(exitInvalid)
	}
	return nil
}

// printDiagnosis prints a check a line: status, link, subject, evidence; then the fix of a failed
// one, indented; then the count.
func printDiagnosis(o *DiagnoseOptions, r *diagnose.Report, t diagnose.Target) {
	w := o.streams.Out
	fmt.Fprintf(w, "diagnose %s (namespace %s)\n", r.Target, t.Namespace)
	for _, c := range r.Checks {
		fmt.Fprintf(w, "  %-11s  %-15s  %s: %s\n", c.Status, c.Name, c.Subject, c.Evidence)
		if c.Fix != "" {
			fmt.Fprintf(w, "  %-11s  %-15s  fix: %s\n", "", "", c.Fix)
		}
	}
	failed, skipped := r.Count(diagnose.Failed), r.Count(diagnose.NotChecked)
	summary := fmt.Sprintf("%d checks: %d passed, %d failed", len(r.Checks), r.Count(diagnose.Passed), failed)
	if skipped > 0 {
		summary += fmt.Sprintf(", %d not checked", skipped)
	}
	fmt.Fprintln(w, summary)
	if o.g.OSCloud == "" && skipped > 0 {
		fmt.Fprintln(w, "give --os-cloud to check the share, its access rules and the nodes' ports too")
	}
}
