package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/workers"
)

func newClusterAPICommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "clusterapi",
		Short: "Attach the storage network to Cluster API MachineSets and MachineDeployments (OpenStack)",
		Long: `Where Cluster API makes the machines (OpenShift's openshift-cluster-api namespace, for
MachineSets whose authoritative API is ClusterAPI, or any Cluster API management cluster on
OpenStack), the storage network is attached through the machines' OpenStackMachineTemplate.
Templates cannot be changed, so each set gets a new template with the port added, and is
pointed at it. A MachineDeployment then replaces its machines itself; the running machines of
a MachineSet are replaced by 'clusterapi rollout'.

  manila-setup clusterapi patch --network <storage network ID> --security-group <security group ID>
  manila-setup clusterapi rollout`,
	}
	cmd.AddCommand(newClusterAPIListCommand(g, streams), newClusterAPIPatchCommand(g, streams), newClusterAPIRolloutCommand(g, streams))
	return cmd
}

// ---- list ----

type clusterAPIListOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Networks       []string
	SecurityGroups []string
	Namespace      string
}

func newClusterAPIListCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &clusterAPIListOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "list [-n NAMESPACE]",
		Short: "List the Cluster API MachineSets and MachineDeployments and whether their template has the storage network",
		Long: `List the Cluster API MachineSets and MachineDeployments of the namespace (default
` + clusterapi.OpenShiftNamespace + `): the OpenStackMachineTemplate their new Machines are made from,
whether it has a port on the storage network and the security groups (those given with --network
and --security-group, else those "clusterapi patch" recorded), and how many of their Machines
were made from it (the others were made from an older template).`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringSliceVar(&o.Networks, "network", nil, "storage network ID to look for (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&o.SecurityGroups, "security-group", nil, "security group ID to look for (repeat or comma-separate)")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", clusterapi.OpenShiftNamespace, "namespace of the Cluster API objects")
	return cmd
}

func (o *clusterAPIListOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *clusterAPIListOptions) Validate() error {
	return attachmentFlagErrors(attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups}, false)
}

func (o *clusterAPIListOptions) Run(ctx context.Context) error {
	cluster, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	dyn := cluster.dynamic
	list, err := clusterapi.List(ctx, dyn, o.Namespace, attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups})
	if err != nil {
		return environmentError(err)
	}
	if o.g.Output != outputText {
		if list == nil {
			list = []clusterapi.Status{}
		}
		return printStructured(o.streams.Out, o.g.Output, list)
	}
	if len(list) == 0 {
		_, err := fmt.Fprintf(o.streams.Out, "No Cluster API MachineSets or MachineDeployments in namespace %s.\n", o.Namespace)
		return err
	}
	w := tabwriter.NewWriter(o.streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "KIND\tNAME\tREPLICAS\tTEMPLATE\tSTORAGE NETWORK\tSECURITY GROUPS\tON TEMPLATE\tNOTE")
	for _, s := range list {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%d/%d\t%s\n", s.Kind, s.Name, s.Replicas, s.Template, s.StorageNetwork, s.SecurityGroups, s.OnTemplate, s.Machines, s.Note)
	}
	return w.Flush()
}

// ---- patch ----

type clusterAPIPatchOptions struct {
	g       *GlobalOptions
	streams IOStreams

	attachFlags
	Namespace     string
	Names         []string
	KeepTemplates bool
}

func newClusterAPIPatchCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &clusterAPIPatchOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "patch --network ID [--security-group ID] [-n NAMESPACE] [--name [KIND/]NAME...] [--remove]",
		Short: "Give Cluster API MachineSets and MachineDeployments a template with a port on the storage network",
		Long: `For each Cluster API MachineSet and MachineDeployment of the namespace (default
` + clusterapi.OpenShiftNamespace + `) whose machines are made from an OpenStackMachineTemplate that
lacks a port on the storage network or a security group: create a new template, a copy of it
with {network: {id: ID}} appended to spec.template.spec.ports (the default port written out
first when ports was empty, as CAPO adds it only then; no allowedAddressPairs) and the security
groups added to spec.template.spec.securityGroups, and point the set at it. Sets that shared a
template share the new one. A MachineSet made by a MachineDeployment is left to it.

A MachineDeployment then replaces its Machines by itself. A MachineSet makes only its new
Machines from the new template: 'manila-setup clusterapi rollout' replaces the running ones
without losing capacity.

The templates replaced are deleted by a later run once no set uses them and no Machine was
made from them (--keep-templates leaves them). With --os-cloud the IDs are checked in Neutron
and a network where no Manila export lies is refused unless --force; --discover attaches the
network Manila exports on.

With -f FILE (or -) the Cluster API objects of a file are patched instead (GitOps): the sets'
references are changed in place and the new templates appended as documents; the old templates
stay in the file until no Machine uses them. --in-place writes it back (keeping FILE.bak),
--dry-run prints the diff.

` + removeHelp + ` A removal, too, is a new template (a copy
without the ports on those networks and without those security groups) the set is pointed at.
Its Machines are replaced as after an attachment (a MachineDeployment by itself, a MachineSet
with 'manila-setup clusterapi rollout'): on a cluster it is refused (exit 1, naming the pods,
claims and nodes) while pods on their nodes use Manila volumes, or, outside
` + clusterapi.OpenShiftNamespace + `, whose nodes are a workload cluster's, always; --force removes anyway.`,
		Example: `  manila-setup clusterapi patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --dry-run
  manila-setup clusterapi patch -n capi-clusters --network 5f0c3b7e-... --name machinedeployment/md-0
  manila-setup clusterapi patch -f clusters/prod/machines.yaml --network 5f0c3b7e-... --in-place
  manila-setup clusterapi patch --remove --dry-run
  manila-setup clusterapi patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name machineset/ocp-worker-0
  manila-setup clusterapi patch --remove -f clusters/prod/machines.yaml --in-place`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	o.attachFlags.add(f, attachHelp{objects: "Cluster API objects",
		securityGroup: "ID of a security group to add (repeat or comma-separate)",
		force:         "attach a network even where no Manila export location lies, or its subnets lack free addresses for the machines; with --remove, remove while pods on the machines use Manila volumes"})
	f.StringVarP(&o.Namespace, "namespace", "n", clusterapi.OpenShiftNamespace, "namespace of the Cluster API objects")
	f.StringSliceVar(&o.Names, "name", nil, "patch only these (NAME, machineset/NAME or machinedeployment/NAME)")
	f.BoolVar(&o.KeepTemplates, "keep-templates", false, "never delete the templates replaced, even once unused")
	return cmd
}

func (o *clusterAPIPatchOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *clusterAPIPatchOptions) Validate() error {
	if o.Namespace == "" && o.File == "" {
		return usageError("--namespace cannot be empty")
	}
	return o.attachFlags.validate(o.g)
}

func (o *clusterAPIPatchOptions) Run(ctx context.Context) error {
	scope := clusterapi.Scope{Namespace: o.Namespace, Names: o.Names, KeepTemplates: o.KeepTemplates}
	req, err := o.attachFlags.request(ctx, o.g, o.streams, workers.Selection{ClusterAPIScope: &scope}, inputfile.ClusterAPI)
	if err != nil {
		return err
	}
	if o.File != "" {
		_, err := o.applyFile(ctx, o.g, o.streams, req, func(w io.Writer, res *attach.FileResult) error {
			if len(res.Appended) == 0 {
				return nil
			}
			_, err := fmt.Fprintf(w, "new OpenStackMachineTemplate(s) appended: %s; the old ones stay in the file until no Machine uses them\n", strings.Join(res.Appended, ", "))
			return err
		})
		return err
	}
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	report, err := clients.workers().Apply(ctx, req)
	if err := o.printApplied(o.streams, report, err, func(r *workers.Report) error {
		return printClusterAPIReport(o.g, o.streams, &clusterapi.Report{Results: r.Results, Templates: r.Templates}, o.DryRun, &o.attachFlags)
	}); err != nil {
		return err
	}
	return invalidRow(o.g, report)
}

// printClusterAPIReport prints what Patch did: a line per set, the diffs of a dry run, the
// templates replaced, and who replaces the running machines.
func printClusterAPIReport(g *GlobalOptions, streams IOStreams, report *clusterapi.Report, dryRun bool, a *attachFlags) error {
	if report == nil {
		report = &clusterapi.Report{Results: []attach.Result{}}
	}
	if g.Output != outputText {
		return printStructured(streams.Out, g.Output, struct {
			*clusterapi.Report
			Results []resultJSON `json:"results"` // hides the Report's own, with the findings
		}{report, a.resultsJSON(report.Results)})
	}
	out := streams.Out
	patched, err := writePatchTable(out, report.Results)
	if err != nil {
		return err
	}
	for _, r := range report.Results {
		if r.OldTemplate != "" {
			fmt.Fprintf(out, "  %s/%s: template %s -> %s\n", strings.ToLower(r.Kind), r.Name, r.OldTemplate, r.Template)
		}
	}
	for _, r := range report.Results {
		if r.Diff != "" {
			fmt.Fprintf(out, "\n%s", r.Diff)
		}
	}
	for _, t := range report.Templates {
		if t.Deleted {
			fmt.Fprintf(out, "template %s deleted: no set and no Machine uses it any more\n", t.Name)
		} else {
			fmt.Fprintf(out, "template %s %s\n", t.Name, t.Reason)
		}
	}
	writePatchWarnings(streams.ErrOut, report.Results)
	switch {
	case dryRun:
		_, err := fmt.Fprintln(out, "\nDry run: nothing was written.")
		return err
	case patched > 0:
		fmt.Fprintf(out, "\n%d set(s) pointed at new templates.\n", patched)
		seen := map[string]bool{}
		for _, r := range report.Results {
			if r.Rolls != "" && !seen[r.Kind] {
				seen[r.Kind] = true
				fmt.Fprintf(out, "%s: %s.\n", r.Kind, r.Rolls)
			}
		}
	}
	return nil
}

// ---- rollout ----

type clusterAPIRolloutOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Namespace      string
	Names          []string
	MaxSurge       int32
	MaxUnavailable int32
	Timeout        time.Duration
	PollInterval   time.Duration
	canary         canaryFlags
}

func newClusterAPIRolloutCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &clusterAPIRolloutOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "rollout [-n NAMESPACE] [--name NAME...] [--max-surge 1] [--max-unavailable 0] [--timeout 30m]",
		Short: "Replace the Machines of Cluster API MachineSets not made from their current template, without losing capacity",
		Long: `Replace, one MachineSet after the other, the Machines of the Cluster API MachineSets of the
namespace (default ` + clusterapi.OpenShiftNamespace + `) that were not made from the set's current
OpenStackMachineTemplate (their OpenStackMachine's cluster.x-k8s.io/cloned-from-name annotation
names another template, as after 'clusterapi patch'): scale the set up by --max-surge, wait
until a new Machine is Running with a Node, mark one old Machine with
cluster.x-k8s.io/delete-machine (Cluster API deletes marked Machines first) and scale down,
repeat. A set never has more than --max-unavailable of its replicas missing, and gets its
original replica count back at the end. MachineDeployments, and the MachineSets they own,
replace their Machines themselves and are left alone.

Safe to interrupt: run it again and it continues where it stopped (the original replica count
is kept in the annotation ` + rollout.OriginalReplicasAnnotation + `). A new Machine that
fails, or is not Running within --timeout, stops the rollout and leaves the remaining old
Machines as they are. Once no Machine is made from a replaced template, the next
'clusterapi patch' deletes it.

` + canaryHelp,
		Example: `  manila-setup clusterapi rollout
  manila-setup clusterapi rollout -n capi-clusters --name md-0-workers --max-surge 2`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringVarP(&o.Namespace, "namespace", "n", clusterapi.OpenShiftNamespace, "namespace of the Cluster API MachineSets")
	f.StringSliceVar(&o.Names, "name", nil, "roll only these MachineSets (default: every standalone MachineSet of the namespace)")
	f.Int32Var(&o.MaxSurge, "max-surge", rollout.DefaultMaxSurge, "Machines a set may have above its replica count")
	f.Int32Var(&o.MaxUnavailable, "max-unavailable", 0, "replicas of a set that may be missing (not Running) at any time")
	f.DurationVar(&o.Timeout, "timeout", rollout.DefaultTimeout, "how long a new Machine may take to be Running with a Node")
	f.DurationVar(&o.PollInterval, "poll-interval", rollout.DefaultPollInterval, "how often the cluster is read")
	_ = f.MarkHidden("poll-interval")
	o.canary.addFlags(f)
	return cmd
}

func (o *clusterAPIRolloutOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *clusterAPIRolloutOptions) Validate() error {
	if o.Namespace == "" {
		return usageError("--namespace cannot be empty")
	}
	if err := o.canary.validate(); err != nil {
		return err
	}
	return rolloutFlagsError(o.MaxSurge, o.MaxUnavailable, o.Timeout, o.PollInterval)
}

func (o *clusterAPIRolloutOptions) Run(ctx context.Context) error {
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	dyn := clients.dynamic
	printer := newRolloutPrinter(o.g, o.streams)
	opts := rollout.Options{MaxSurge: o.MaxSurge, MaxUnavailable: o.MaxUnavailable, Timeout: o.Timeout, PollInterval: o.PollInterval, Progress: printer.Update}
	if err := o.canary.options(ctx, o.g, o.streams, clients.kube, &opts); err != nil {
		return err
	}
	results, err := clusterapi.Rollout(ctx, dyn, o.Namespace, o.Names, opts)
	if o.g.Output != outputText && results != nil {
		if perr := printStructured(o.streams.Out, o.g.Output, results); perr != nil && err == nil {
			err = perr
		}
	}
	return rolloutExitFor(err, clusterAPIRolloutCommand(o.Namespace))
}

// clusterAPIRolloutCommand is the command that continues a rollout of namespace.
func clusterAPIRolloutCommand(namespace string) string {
	if namespace == clusterapi.OpenShiftNamespace {
		return "manila-setup clusterapi rollout"
	}
	return "manila-setup clusterapi rollout -n " + namespace
}
