package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

func newControlPlaneCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("controlplane", "Attach the storage network to the masters, through the ControlPlaneMachineSet",
		`Attach the Manila storage network and its security groups to the masters of a cluster whose
masters run workloads (a compact cluster, or schedulable masters): to the template of the
ControlPlaneMachineSet "cluster" in openshift-machine-api, which the control-plane-machine-set
operator then rolls out to the masters as its strategy says.

  manila-setup controlplane list
  manila-setup controlplane patch --network <storage network ID> --security-group <security group ID> --dry-run
  manila-setup controlplane rollout`)
	cmd.AddCommand(newControlPlaneListCommand(g, streams), newControlPlanePatchCommand(g, streams), newControlPlaneRolloutCommand(g, streams))
	return cmd
}

// ---- list ----

type controlPlaneListOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Networks       []string
	SecurityGroups []string
}

func newControlPlaneListCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &controlPlaneListOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Show the ControlPlaneMachineSet and whether its masters have the storage network",
		Long: `Show the ControlPlaneMachineSet "cluster" of openshift-machine-api: its state and strategy, its
replicas as the control-plane-machine-set operator counts them (updated, ready), whether its
template has the storage network and security groups, how many master Machines are on the
template's networks, and what stops a change now or is left to do.

The storage network and security groups looked for are those given with --network and
--security-group, else those "controlplane patch" recorded on the set.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringSliceVar(&o.Networks, "network", nil, "storage network ID to look for (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&o.SecurityGroups, "security-group", nil, "security group ID to look for (repeat or comma-separate)")
	return cmd
}

// Complete has nothing to fill in: the cluster is contacted in Run.
func (o *controlPlaneListOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *controlPlaneListOptions) Validate() error {
	return attachmentFlagErrors(attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups}, false)
}

func (o *controlPlaneListOptions) Run(ctx context.Context) error {
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	st, err := machinesets.ControlPlaneList(ctx, clients.machines, clients.dynamic, attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups})
	if err != nil {
		return environmentError(err)
	}
	if o.g.Output != outputText {
		if st == nil {
			return printStructured(o.streams.Out, o.g.Output, []machinesets.ControlPlaneStatus{})
		}
		return printStructured(o.streams.Out, o.g.Output, []machinesets.ControlPlaneStatus{*st})
	}
	if st == nil {
		_, err := fmt.Fprintf(o.streams.Out, "No %s in namespace %s: the masters are not managed by one.\n", machinesets.ControlPlaneKind, machinesets.Namespace)
		return err
	}
	w := tabwriter.NewWriter(o.streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tSTATE\tSTRATEGY\tREPLICAS\tUPDATED\tREADY\tSTORAGE NETWORK\tSECURITY GROUPS\tON TEMPLATE")
	fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%d/%d\n", st.Name, st.State, st.Strategy, st.Replicas, st.UpdatedReplicas, st.ReadyReplicas,
		st.StorageNetwork, st.SecurityGroups, st.OnNetworks, st.Masters)
	if err := w.Flush(); err != nil {
		return err
	}
	if st.Note != "" {
		fmt.Fprintf(o.streams.Out, "\nnote: %s\n", st.Note)
	}
	if st.StorageNetwork == attach.StateUnknown {
		fmt.Fprintln(o.streams.Out, "\nunknown: no storage network was given (--network, --security-group) and none was recorded by \"controlplane patch\".")
	}
	return nil
}

// ---- patch ----

type controlPlanePatchOptions struct {
	g       *GlobalOptions
	streams IOStreams

	attachFlags
	// Rollout replaces the masters after the patch (controlplane rollout).
	Rollout bool
	roll    controlPlaneRolloutFlags
}

func newControlPlanePatchCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &controlPlanePatchOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "patch --network ID [--security-group ID] [--remove] [--dry-run]",
		Short: "Add the storage network and security groups to the ControlPlaneMachineSet's template (--remove: take them off)",
		Long: `Add networks: [{uuid: ID, noAllowedAddressPairs: true}] and securityGroups: [{uuid: ID}] to the
OpenstackProviderSpec of the ControlPlaneMachineSet's template, where they are absent: after the
machine network's entry and the master security group, as the installer's
controlPlane.platform.openstack.additionalNetworkIDs and additionalSecurityGroupIDs would have
written them. Every other field is left exactly as it is; a server-side dry run precedes the
write. What was attached is recorded in the annotation ` + attach.Annotation + `.

The control-plane-machine-set operator then replaces every master, as the set's strategy says:
RollingUpdate (the default) one master at a time, a new one first; OnDelete only once a master's
Machine is deleted. Nothing is written, with exit 1 and the reason, when the change would not be
rolled out or would be undone:
  - the set is Inactive (the operator rebuilds an inactive set's template from the newest
    master); activating it is a decision of its own, which --force does not take;
  - its strategy is Recreate (declared, not implemented: the operator only reports Degraded);
  - its masters are not at rest: the operator has not seen its current spec, a master is not
    updated or not ready, or it is Degraded or Progressing; or a ClusterOperator the change
    leans on (etcd, kube-apiserver, machine-api, control-plane-machine-set) is not Available,
    is Progressing or Degraded (--force overrules these).
A set that already has what is asked is reported unchanged, whatever its state.

With --os-cloud (or $OS_CLOUD) the IDs and the network are checked in Neutron as for
"machinesets patch" (a network without Manila exports, the machines' own, or without free
addresses for the masters is refused unless --force); --discover attaches the network Manila
exports on. The project's quotas must also hold the one more master a replacement makes (Nova
instances, cores and RAM of the template's flavor, a Neutron port per networks and ports entry):
otherwise nothing is written, with exit 1 naming each quota (--force overrules). A root volume's
Cinder quota is not read.

With -f FILE (or - for standard input) the ControlPlaneMachineSet of a file is patched instead,
for clusters managed from Git: the patched file goes to standard output (--in-place writes it
back, keeping FILE.bak; --dry-run prints the diff), every other object of the file, worker
MachineSets included, kept byte for byte. A file has no status: its set's spec is checked
(Inactive and Recreate are refused), its masters are not.

` + removeHelp + ` A removal, too, makes the operator replace every
master: on a cluster it is refused (exit 1, naming the pods, claims and nodes) while pods on the
masters use Manila volumes; --force removes anyway, --dry-run says it would be refused.`,
		Example: `  manila-setup controlplane patch --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --security-group 77c0a1d2-... --dry-run
  manila-setup controlplane patch --discover --security-group 77c0a1d2-...
  manila-setup controlplane patch --remove --dry-run
  manila-setup controlplane patch -f clusters/prod/controlplane.yaml --network 5f0c3b7e-... --security-group 77c0a1d2-... --in-place`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Networks, "network", nil, "ID of the storage network to attach, or with --remove to remove (repeat or comma-separate)")
	f.StringSliceVar(&o.SecurityGroups, "security-group", nil, "ID of a security group to add (repeat or comma-separate)")
	f.BoolVar(&o.DryRun, "dry-run", false, "print the unified diff of the template and write nothing")
	f.BoolVar(&o.Discover, "discover", false, "attach the network Manila exports on, as 'manila-setup networks discover' finds it (needs a cloud)")
	f.BoolVar(&o.Force, "force", false, "change the set while its masters are not at rest; attach a network even where no Manila export location lies, or the machines' own, or its subnets lack free addresses; with --remove, remove while pods on the masters use Manila volumes")
	f.BoolVar(&o.Remove, "remove", false, "remove what manila-setup attached (the "+attach.Annotation+" record), and nothing else; with --network/--security-group only those")
	f.StringVarP(&o.File, "filename", "f", "", "patch the ControlPlaneMachineSet of this file (- for standard input) instead of the cluster's")
	f.BoolVar(&o.Rollout, "rollout", false, "then replace the masters and wait until all are on the template and ready (as 'controlplane rollout')")
	o.roll.add(cmd)
	f.BoolVar(&o.InPlace, "in-place", false, "with -f: write the patched file back, keeping FILE.bak")
	return cmd
}

// Validate checks the flags before anything is contacted.
func (o *controlPlanePatchOptions) Validate() error {
	if o.Rollout && (o.File != "" || o.DryRun) {
		return usageError("--rollout replaces the cluster's masters: it cannot be used with -f or --dry-run")
	}
	if o.Rollout && o.g.Output != outputText {
		return usageError("--rollout follows the masters as text lines: use -o with 'controlplane rollout' alone")
	}
	if err := o.roll.validate(); err != nil {
		return err
	}
	return o.attachFlags.validate(o.g)
}

// Complete has nothing to fill in: the cluster and the cloud are contacted in Run.
func (o *controlPlanePatchOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *controlPlanePatchOptions) Run(ctx context.Context) error {
	req, err := o.attachFlags.request(ctx, o.g, o.streams, workers.Selection{ControlPlane: true}, inputfile.ControlPlane)
	if err != nil {
		return err
	}
	if o.File != "" {
		// A file has no cluster: its set's spec is checked, not its masters.
		_, err := o.applyFile(ctx, o.g, o.streams, req, nil)
		return err
	}
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	if o.Rollout {
		masters, err := o.roll.options(ctx, o.g, o.streams, clients)
		if err != nil {
			return err
		}
		req.Rollout = &workers.Rollout{Masters: masters}
		req.Patched = func(report *workers.Report) {
			o.sayReport(o.streams.ErrOut, report)
			_ = o.print(report.Results)
		}
	}
	report, err := clients.workers().Apply(ctx, req)
	if report != nil && report.Masters != nil {
		return o.roll.report(o.g, o.streams, *report.Masters, err)
	}
	if err := o.printApplied(o.streams, report, err, func(r *workers.Report) error { return o.print(r.Results) }); err != nil {
		return err
	}
	return invalidRow(o.g, report)
}

func (o *controlPlanePatchOptions) print(results []attach.Result) error {
	return o.printResults(o.g, o.streams, results, func(int) string {
		return fmt.Sprintf("%s %s patched. Follow the masters' replacement with:\n  manila-setup controlplane list\n", machinesets.ControlPlaneKind, machinesets.ControlPlaneName)
	})
}
