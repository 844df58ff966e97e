package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/cmd/manila-setup/rolloutview"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

func newMachineSetsCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("machinesets", "Attach the storage network to the MachineSets of a running cluster",
		`Attach the Manila storage network and its security groups to the OpenstackProviderSpec of the
MachineSets in openshift-machine-api, and replace the machines so that the running nodes get
the new network port without dropping below capacity.

  manila-setup machinesets list
  manila-setup machinesets patch --network <storage network ID> --security-group <security group ID>
  manila-setup machinesets rollout`)
	cmd.AddCommand(
		newMachineSetsListCommand(g, streams),
		newMachineSetsPatchCommand(g, streams),
		newMachineSetsRolloutCommand(g, streams),
	)
	return cmd
}

// ---- list ----

type machineSetsListOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Networks       []string
	SecurityGroups []string
}

func newMachineSetsListCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &machineSetsListOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the MachineSets and whether they have the storage network",
		Long: `List the MachineSets in openshift-machine-api with their role, replicas and Ready machines,
whether their OpenstackProviderSpec has the storage network and security groups, and how many
of their Machines were created from the current template (the others need a rollout).

The storage network and security groups looked for are those given with --network and
--security-group, else those "machinesets patch" recorded on each MachineSet, else, with a
cloud (--os-cloud or $OS_CLOUD), the network Manila exports on as "networks discover" finds it.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().StringSliceVar(&o.Networks, "network", nil, "storage network ID to look for (repeat or comma-separate)")
	cmd.Flags().StringSliceVar(&o.SecurityGroups, "security-group", nil, "security group ID to look for (repeat or comma-separate)")
	return cmd
}

// Complete has nothing to fill in: the cluster is contacted in Run.
func (o *machineSetsListOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *machineSetsListOptions) Validate() error {
	return attachmentFlagErrors(attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups}, false)
}

func (o *machineSetsListOptions) Run(ctx context.Context) error {
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	sets, err := machinesets.List(ctx, clients.machines, attach.Attachment{Networks: o.Networks, SecurityGroups: o.SecurityGroups})
	if err != nil {
		return environmentError(err)
	}
	if sets, err = o.withDiscoveredNetwork(ctx, clients, sets); err != nil {
		return err
	}
	if o.g.Output != outputText {
		if sets == nil {
			sets = []machinesets.SetStatus{}
		}
		return printStructured(o.streams.Out, o.g.Output, sets)
	}
	if len(sets) == 0 {
		_, err := fmt.Fprintf(o.streams.Out, "No MachineSets in namespace %s.\n", machinesets.Namespace)
		return err
	}
	w := tabwriter.NewWriter(o.streams.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLE\tREPLICAS\tREADY\tSTORAGE NETWORK\tSECURITY GROUPS\tUP TO DATE\tNOTE")
	unknown, outdated := false, false
	for _, s := range sets {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%d/%d\t%s\n", s.Name, orDash(s.Role), s.Replicas, s.ReadyReplicas,
			s.StorageNetwork, s.SecurityGroups, s.UpToDate, s.Wanted, s.Note)
		unknown = unknown || s.StorageNetwork == attach.StateUnknown
		outdated = outdated || s.UpToDate < s.Wanted
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if unknown {
		fmt.Fprintln(o.streams.Out, "\nunknown: no storage network was given (--network, --security-group), none was recorded by \"machinesets patch\", and no cloud was named (--os-cloud) to find it.")
	}
	if outdated {
		fmt.Fprintln(o.streams.Out, "\nUP TO DATE counts the Machines replaced as \"manila-setup machinesets rollout\" counts them (on the MachineSet's networks and running, of its replicas); the rollout replaces the others.")
	}
	return writeFailedMachines(o.streams.Out, sets)
}

// writeFailedMachines lists, per MachineSet, the Machines that attach the storage network but
// failed without a Node, with the Machine API's reason and message (a storage subnet without
// free addresses: Neutron's "No more IP addresses available on network ...").
func writeFailedMachines(out io.Writer, sets []machinesets.SetStatus) error {
	n := 0
	for _, s := range sets {
		n += len(s.Failed)
	}
	if n == 0 {
		return nil
	}
	machines := fmt.Sprintf("%d Machines attach the storage network but failed", n)
	if n == 1 {
		machines = "1 Machine attaches the storage network but failed"
	}
	fmt.Fprintf(out, "\n%s without a Node (a storage subnet without free addresses fails them so):\n", machines)
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "MACHINESET\tMACHINE\tPHASE\tREASON\tMESSAGE")
	for _, s := range sets {
		for _, f := range s.Failed {
			fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", s.Name, f.Name, orDash(f.Phase), orDash(f.Reason), orDash(f.Message))
		}
	}
	return w.Flush()
}

// withDiscoveredNetwork judges the sets for which nothing was given or recorded against the
// network Manila exports on, when a cloud is named: "missing" says more than "unknown". It
// says on stderr which network that is; a cloud that cannot tell leaves them unknown, with a
// note why.
func (o *machineSetsListOptions) withDiscoveredNetwork(ctx context.Context, clients *clusterClients, sets []machinesets.SetStatus) ([]machinesets.SetStatus, error) {
	if len(o.Networks) > 0 || o.g.OSCloud == "" || !slices.ContainsFunc(sets, func(s machinesets.SetStatus) bool { return s.StorageNetwork == attach.StateUnknown }) {
		return sets, nil
	}
	c, err := (&cloudOptions{global: o.g, streams: o.streams}).connect(ctx)
	if err != nil {
		fmt.Fprintf(o.streams.ErrOut, "note: the storage network could not be found with cloud %s: %v\n", o.g.OSCloud, err)
		return sets, nil
	}
	d, err := c.Discover(ctx, openstack.DiscoverOptions{})
	var best *openstack.Candidate
	if err == nil {
		best, err = d.StorageNetwork()
	}
	if err != nil {
		fmt.Fprintf(o.streams.ErrOut, "note: the storage network could not be found with cloud %s: %v\n", o.g.OSCloud, err)
		return sets, nil
	}
	fmt.Fprintf(o.streams.ErrOut, "storage network %s, as discovery finds it with cloud %s (nothing given or recorded)\n", best.Network.Label(), o.g.OSCloud)
	judged, err := machinesets.List(ctx, clients.machines, attach.Attachment{Networks: []string{best.Network.ID}})
	if err != nil {
		return nil, environmentError(err)
	}
	byName := map[string]machinesets.SetStatus{}
	for _, s := range judged {
		byName[s.Name] = s
	}
	for i := range sets {
		if j, ok := byName[sets[i].Name]; ok && sets[i].StorageNetwork == attach.StateUnknown {
			sets[i].StorageNetwork = j.StorageNetwork
		}
	}
	return sets, nil
}

// flagErrors prints errors of the ID flags (of every kind's patch) as one line each: --network[1]: Invalid value: ...
func flagErrors(errs field.ErrorList) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = "--" + e.Error()
	}
	return invalidInput(errors.New(strings.Join(lines, "\n")))
}

// ---- patch ----

type machineSetsPatchOptions struct {
	g       *GlobalOptions
	streams IOStreams

	attachFlags
	Names    []string
	Selector string
	roll     patchRolloutFlags

	progress       *rolloutview.ProgressPrinter
	patchedPrinted bool // by printBeforeRollout
}

func newMachineSetsPatchCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &machineSetsPatchOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "patch --network ID [--security-group ID] [--name N... | --selector L] [--remove] [--rollout]",
		Short: "Add the storage network and security groups to the MachineSets' providerSpec (--remove: take them off)",
		Long: `Add networks: [{uuid: ID, noAllowedAddressPairs: true}] and securityGroups: [{uuid: ID}] to the
OpenstackProviderSpec of the worker MachineSets (or those named with --name, or matching
--selector), where they are absent. A network that is already there (by uuid, filter.id or as a
ports[] entry) is never added twice; every other field is left exactly as it is.

Control-plane MachineSets are never touched; other platforms' MachineSets are skipped. With
--os-cloud (or $OS_CLOUD) the IDs are checked in Neutron before anything is written, and so is
the network itself: one in whose subnets no Manila export location lies, or the machines' own
network (a subnet holding a node's address), is refused with exit 1 unless --force, as the
wizard asks before taking it. So is the room in its subnets: when the machines of the sets that
get the network, plus the rollout's surge (--max-surge with --rollout, else 1), outnumber the
free addresses Neutron counts (allocation pools minus the ports on the subnet), the patch is
refused with exit 1, naming the numbers, the subnet and the fix, unless --force; such machines
would fail with Neutron's "No more IP addresses available on network". --discover attaches the
network Manila exports on, found as "networks discover" finds it. What was attached is recorded
in the annotation ` + attach.Annotation + `.

Patching changes only the template: run "manila-setup machinesets rollout" afterwards to
replace the running machines.

With -f FILE (or - for standard input) the MachineSets of a file are patched instead, for
clusters managed from Git, and no cluster is contacted: the same change as on a cluster, spliced
into the text so that only the added lines differ (comments, order and formatting kept). The file
may hold several documents and Lists; other objects are kept as they are. The patched file goes
to standard output (-o json: the MachineSets as a JSON List), what was done to standard error;
--in-place writes it back (atomically, keeping FILE.bak); --dry-run prints the diff.

` + removeHelp + `

--rollout replaces the machines afterwards, as "manila-setup machinesets rollout" does (its
--max-surge, --max-unavailable, --timeout, --no-canary and --resume). A rollout that takes a
network off the machines (after --remove) is refused, with exit 1 and nothing changed, while
pods on the nodes it replaces use Manila volumes (claims bound to PersistentVolumes of
` + attach.ManilaDriver + `), naming them; --force rolls anyway. After a removal the canary
also checks, with --os-cloud, that the first new Machine's server has no port left on the
removed networks.`,
		Example: `  manila-setup machinesets patch --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --dry-run
  manila-setup machinesets patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --name mycluster-x7k2p-worker-0
  manila-setup machinesets patch -f clusters/prod/worker-machinesets.yaml --network 5f0c3b7e-... --in-place
  manila-setup machinesets patch --remove --dry-run
  manila-setup machinesets patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name mycluster-x7k2p-worker-0 --rollout
  manila-setup machinesets patch --remove -f clusters/prod/worker-machinesets.yaml --in-place`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	o.attachFlags.add(f, attachHelp{objects: "MachineSets",
		securityGroup: "ID of a security group to add (repeat or comma-separate)",
		force:         "attach a network even where no Manila export location lies, or the machines' own, or its subnets lack free addresses for the machines; with --remove --rollout, roll even while pods on the machines use Manila volumes"})
	f.StringSliceVar(&o.Names, "name", nil, "patch only these MachineSets (default: every worker MachineSet)")
	f.StringVarP(&o.Selector, "selector", "l", "", "patch only the MachineSets matching this label selector")
	o.roll.add(f, "manila-setup machinesets rollout")
	return cmd
}

// Validate checks the flags before anything is contacted.
func (o *machineSetsPatchOptions) Validate() error {
	if len(o.Names) > 0 && o.Selector != "" {
		return usageError("--name and --selector cannot be used together")
	}
	if err := o.roll.validate(o.File); err != nil {
		return err
	}
	return o.attachFlags.validate(o.g)
}

// Complete has nothing to fill in: the cluster and the cloud are contacted in Run.
func (o *machineSetsPatchOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *machineSetsPatchOptions) Run(ctx context.Context) error {
	sel := machinesets.Selection{Names: o.Names, Selector: o.Selector}
	req, err := o.attachFlags.request(ctx, o.g, o.streams, workers.Selection{MachineSets: &sel}, inputfile.MachineSets)
	if err != nil {
		return err
	}
	if o.File != "" { // a file has no cluster, and no nodes to ask
		_, err := o.applyFile(ctx, o.g, o.streams, req, nil)
		return err
	}
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	if o.roll.Rollout {
		// A dry run rolls nothing: its surge is counted against the free addresses, and no
		// canary is made.
		ropts := rollout.Options{MaxSurge: o.roll.MaxSurge}
		if !o.DryRun {
			if ropts, err = o.roll.options(ctx, o.g, o.streams, clients.kube, o.printer().Update); err != nil {
				return err
			}
		}
		req.Rollout = &workers.Rollout{Sets: ropts}
		req.Patched = o.printBeforeRollout
	}
	report, err := clients.workers().Apply(ctx, req)
	o.sayReport(o.streams.ErrOut, report)
	if report != nil {
		for _, t := range report.Templates {
			if t.Deleted {
				fmt.Fprintf(o.streams.ErrOut, "template %s/%s deleted: no set and no Machine uses it any more\n", clusterapi.OpenShiftNamespace, t.Name)
			}
		}
	}
	if req.Rollout != nil && o.patchedPrinted {
		return o.printRollout(report, err)
	}
	if err := o.printApplied(o.streams, report, err, func(r *workers.Report) error { return o.print(r.Results) }); err != nil {
		return err
	}
	return invalidRow(o.g, report)
}

// printer shows the rollout's progress (one per command: the patch's rollout).
func (o *machineSetsPatchOptions) printer() *rolloutview.ProgressPrinter {
	if o.progress == nil {
		o.progress = newRolloutPrinter(o.g, o.streams)
	}
	return o.progress
}

// printBeforeRollout prints what the patch did, before the rollout's progress.
func (o *machineSetsPatchOptions) printBeforeRollout(report *workers.Report) {
	o.patchedPrinted = true
	o.sayReport(o.streams.ErrOut, report)
	if o.g.Output == outputText {
		_, _ = writePatchTable(o.streams.Out, report.Results)
		writePatchWarnings(o.streams.ErrOut, report.Results)
		fmt.Fprintln(o.streams.Out)
	}
}

// printRollout ends a patch with --rollout: with -o json|yaml standard output holds one
// object, the patch's results and the rollout's sets.
func (o *machineSetsPatchOptions) printRollout(report *workers.Report, err error) error {
	if o.g.Output != outputText {
		out := map[string]any{"results": o.resultsJSON(report.Results), "rollout": report.Rollout}
		if perr := printStructured(o.streams.Out, o.g.Output, out); perr != nil && err == nil {
			err = perr
		}
	}
	return rolloutExit(err)
}

// patchErrorExit gives a patch error its exit code: 1 for what the user gave, 2 otherwise.
func patchErrorExit(err error) error {
	var unknown *attach.UnknownIDsError
	var selection *attach.SelectionError
	var file *filepatch.Error
	var notRecorded *attach.NotRecordedError
	var mounted *attach.MountedError
	var full *attach.CapacityError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &full):
		return invalidInput(fmt.Errorf("%w\nnothing patched; --force patches anyway", err))
	case errors.As(err, &unknown), errors.As(err, &selection), errors.As(err, &file), errors.As(err, &notRecorded), errors.As(err, &mounted):
		return invalidInput(err)
	default:
		return environmentError(err)
	}
}

func (o *machineSetsPatchOptions) print(results []attach.Result) error {
	return o.printResults(o.g, o.streams, results, func(n int) string {
		return fmt.Sprintf("%d MachineSet(s) patched. Running machines keep their old ports until they are replaced:\n  manila-setup machinesets rollout\n", n)
	})
}

// writePatchTable writes a line per MachineSet: name, action, what was added or why not. It
// returns how many were (or would be) patched.
func writePatchTable(out io.Writer, results []attach.Result) (int, error) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	patched := 0
	for _, r := range results {
		detail := r.Reason
		if r.Action == attach.ActionPatched || r.Action == attach.ActionWouldPatch {
			detail = r.Change()
			patched++
		}
		if r.ConflictRetries > 0 {
			detail += fmt.Sprintf(" (after %d conflict(s) with another writer)", r.ConflictRetries)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", rowName(r), r.Action, detail)
	}
	return patched, w.Flush()
}

// rowName is how the tables name a result's object: a Machine API MachineSet by its name, a
// NodePool as namespace/name, a Cluster API object as kind/name.
func rowName(r attach.Result) string {
	switch {
	case r.Kind == "NodePool":
		return r.Namespace + "/" + r.Name
	case r.Kind == "" || r.Kind == "MachineSet" && r.Namespace == machinesets.Namespace:
		return r.Name
	}
	return strings.ToLower(r.Kind) + "/" + r.Name
}

func writePatchWarnings(out io.Writer, results []attach.Result) {
	for _, r := range results {
		if r.Warning != "" {
			fmt.Fprintf(out, "warning: %s\n", r.Warning)
		}
	}
}

// ---- rollout ----

type machineSetsRolloutOptions struct {
	g       *GlobalOptions
	streams IOStreams

	Names          []string
	Selector       string
	MaxSurge       int32
	MaxUnavailable int32
	Timeout        time.Duration
	PollInterval   time.Duration
	Force          bool
	canary         canaryFlags
}

func newMachineSetsRolloutCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &machineSetsRolloutOptions{g: g, streams: streams}
	cmd := &cobra.Command{
		Use:   "rollout [--name N...] [--max-surge 1] [--max-unavailable 0] [--timeout 30m]",
		Short: "Replace the machines that lack their MachineSet's networks, without losing capacity",
		Long: `Replace, one MachineSet after the other, the Machines whose providerSpec lacks a network or
security group of their MachineSet's template, or has one it no longer has: scale the set up by --max-surge, wait until the
new Machine's Node is Ready, mark one old Machine with machine.openshift.io/delete-machine and
scale down, repeat. A set never has more than --max-unavailable of its replicas missing, and
gets its original replica count back at the end.

Safe to interrupt: after Ctrl-C or a kill, run it again and it continues where it stopped (the
original replica count is kept in the annotation ` + rollout.OriginalReplicasAnnotation + `).
A new Machine that fails, or has no Ready Node within --timeout, stops the rollout and leaves
the remaining old Machines as they are.

` + canaryHelp + `

Machines that have a network their template no longer has (after "machinesets patch --remove")
are replaced too. That is refused, with exit 1 and no Machine replaced, while pods on their
nodes use Manila volumes, naming them; --force replaces them anyway.

A MachineSet that Cluster API is authoritative for (status.authoritativeAPI ClusterAPI, the
Machine API → Cluster API migration) makes its machines from its Cluster API copy in
` + machinesets.ClusterAPINamespace + `: that copy is rolled instead, after the others, as
'manila-setup clusterapi rollout' does.`,
		Args: cobra.NoArgs,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Names, "name", nil, "roll only these MachineSets (default: every worker MachineSet)")
	f.StringVarP(&o.Selector, "selector", "l", "", "roll only the MachineSets matching this label selector")
	f.Int32Var(&o.MaxSurge, "max-surge", rollout.DefaultMaxSurge, "Machines a set may have above its replica count")
	f.Int32Var(&o.MaxUnavailable, "max-unavailable", 0, "replicas of a set that may be missing (not Ready) at any time")
	f.DurationVar(&o.Timeout, "timeout", rollout.DefaultTimeout, "how long a new Machine may take to become a Ready Node")
	f.DurationVar(&o.PollInterval, "poll-interval", rollout.DefaultPollInterval, "how often the cluster is read")
	_ = f.MarkHidden("poll-interval")
	f.BoolVar(&o.Force, "force", false, "replace machines that lose a network (after patch --remove) even while pods on them use Manila volumes")
	o.canary.addFlags(f)
	return cmd
}

func (o *machineSetsRolloutOptions) Validate() error {
	if len(o.Names) > 0 && o.Selector != "" {
		return usageError("--name and --selector cannot be used together")
	}
	if err := o.canary.validate(); err != nil {
		return err
	}
	return rolloutFlagsError(o.MaxSurge, o.MaxUnavailable, o.Timeout, o.PollInterval)
}

// rolloutFlagsError checks the flags both rollout commands share.
func rolloutFlagsError(maxSurge, maxUnavailable int32, timeout, pollInterval time.Duration) error {
	if maxSurge < 0 || maxUnavailable < 0 {
		return usageError("--max-surge and --max-unavailable cannot be negative")
	}
	if maxSurge == 0 && maxUnavailable == 0 {
		return usageError("--max-surge and --max-unavailable cannot both be 0: no machine could be replaced")
	}
	if timeout <= 0 || pollInterval <= 0 {
		return usageError("--timeout must be positive")
	}
	return nil
}

// Complete has nothing to fill in: the cluster is contacted in Run.
func (o *machineSetsRolloutOptions) Complete(*cobra.Command, []string) error { return nil }

func (o *machineSetsRolloutOptions) Run(ctx context.Context) error {
	clients, err := o.g.clients(ctx)
	if err != nil {
		return err
	}
	printer := newRolloutPrinter(o.g, o.streams)
	sel := machinesets.Selection{Names: o.Names, Selector: o.Selector}
	opts := rollout.Options{
		MaxSurge:       o.MaxSurge,
		MaxUnavailable: o.MaxUnavailable,
		Timeout:        o.Timeout,
		PollInterval:   o.PollInterval,
		Progress:       printer.Update,
	}
	if err := o.canary.options(ctx, o.g, o.streams, clients.kube, &opts); err != nil {
		return err
	}
	if err := refuseRemovalRisk(ctx, clients.workers(), workers.Removal{MachineSets: &sel}, o.Force, o.streams, "no Machine was replaced"); err != nil {
		return err
	}
	results, err := clients.workers().Roll(ctx, workers.Selection{MachineSets: &sel}, opts)
	if o.g.Output != outputText && results != nil {
		if perr := printStructured(o.streams.Out, o.g.Output, results); perr != nil && err == nil {
			err = perr
		}
	}
	return rolloutExit(err)
}

// newRolloutPrinter shows a rollout's progress: on standard output for text, else on standard
// error (standard output then holds the structured result).
func newRolloutPrinter(g *GlobalOptions, streams IOStreams) *rolloutview.ProgressPrinter {
	progressOut := streams.Out
	if g.Output != outputText {
		progressOut = streams.ErrOut
	}
	tty, width := terminal(progressOut)
	return rolloutview.NewProgressPrinter(progressOut, tty, width)
}

// rolloutExit is rolloutExitFor `machinesets rollout`.
func rolloutExit(err error) error {
	return rolloutExitFor(err, "manila-setup machinesets rollout")
}

// rolloutExitFor says how a rollout ended, for the exit code: stopped by the user (130), a
// Machine that failed or a selection that matches nothing (1), or the environment (2); command
// continues it.
func rolloutExitFor(err error, command string) error {
	var rolloutErr *rollout.Error
	var selection *attach.SelectionError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return interrupted(fmt.Errorf("interrupted. Nothing is left half-done: run `%s` again to continue", command))
	case errors.As(err, &rolloutErr), errors.As(err, &selection):
		return invalidInput(err)
	}
	return environmentError(err)
}

// terminal reports whether w is a terminal, and its width.
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, 0
	}
	width, _, err := term.GetSize(int(f.Fd()))
	if err != nil {
		return true, 0
	}
	return true, width
}
