package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/installconfig/cloudcheck"
	"github.com/manila-setup/manila-setup/internal/cmdrun"
	"github.com/manila-setup/manila-setup/internal/inputfile"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

func newInstallConfigCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	cmd := groupCommand("installconfig", "Check and patch an install-config.yaml before installing",
		`Check and patch the OpenStack part of an install-config.yaml before "openshift-install create
cluster": the additionalNetworkIDs and additionalSecurityGroupIDs of the compute pools, the
control plane and platform.openstack.defaultMachinePlatform.

Every mistake is reported with its field path, so a wrong ID is caught in milliseconds instead
of after a long install.`)
	cmd.AddCommand(newInstallConfigValidateCommand(g, streams), newInstallConfigPatchCommand(g, streams))
	return cmd
}

// readInstallConfig reads FILE, or standard input for "-": bounded and stopped by Ctrl-C
// (internal/inputfile). An input that cannot be read, or is not a file, exits 2.
func readInstallConfig(ctx context.Context, path string, stdin io.Reader) (name string, data []byte, err error) {
	name, data, err = readInput(ctx, path, stdin, inputfile.InstallConfig, environmentError)
	if path == "-" {
		name = "<stdin>"
	}
	return name, data, err
}

func exactlyOneFile(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError("%s: expected exactly one FILE (or - for standard input), got %d arguments\nSee '%s --help'.",
			cmd.CommandPath(), len(args), cmd.CommandPath())
	}
	return nil
}

// ---- validate ----

// installConfigValidateOptions are the inputs of `installconfig validate`.
type installConfigValidateOptions struct {
	global  *GlobalOptions
	streams IOStreams

	File   string
	Strict bool
	// Offline skips the cloud checks even when a cloud is named ($OS_CLOUD in a hook's
	// environment, say).
	Offline bool
	cloud   *cloudOptions
}

func newInstallConfigValidateCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &installConfigValidateOptions{global: g, streams: streams, cloud: &cloudOptions{global: g, streams: streams}}
	cmd := &cobra.Command{
		Use:   "validate FILE|-",
		Short: "Check the additional network and security group IDs of an install-config.yaml",
		Long: `Check the additionalNetworkIDs and additionalSecurityGroupIDs of an install-config.yaml, offline
and in milliseconds, the way openshift-install reads them, and a little stricter:

  - every ID is a UUID v4 in canonical form (36 lower-case characters);
  - no ID twice in a list;
  - the lists are lists of strings, in the places the installer reads them;
  - no misspelt or misplaced key (additionalNetworkID, additionalNetworks, ...) that the
    installer rejects and other tools silently drop;
  - the platform is openstack; the YAML is well-formed, with no key set twice.

With a cloud (--os-cloud NAME, or $OS_CLOUD; --offline skips it), the IDs are also looked up:

  - each network exists and the project can see it; each security group exists; an ID in
    the wrong list (a security group given as a network, a subnet, a port) is named as such;
  - each additional network is fit to be the machines' second NIC (the rules every command
    applies to a storage network, see "manila-setup networks discover"): errors for a network
    whose subnets have DHCP off, port security off while the pool asks for security groups, a
    subnet that overlaps networking's machine, cluster or service networks, or one that holds
    an API or ingress VIP; warnings for a gateway or 0.0.0.0/0 host route, DNS servers handed
    out, an IPv6 subnet without router advertisements. Each names the network, the subnet and
    the fix;
  - a warning for each compute pool whose machines get no network Manila exports on, naming
    that network and the patch command that adds it.

Every problem is printed on one line as PATH: Invalid value: "VALUE": why; with -o json each
also has its rule, a stable name (the storage-network findings keep their IDs: dhcp-off,
default-route, ...). Warnings (a key spelled in another case, a pool list that replaces the
defaultMachinePlatform list, a second YAML document, no Manila network, a storage subnet that
hands out a default route or DNS servers) do not fail the check unless --strict is given.

Exit codes: 0 valid, 1 invalid, 2 usage error, the file cannot be read, or the cloud cannot
be asked (the offline results are still printed).`,
		Example: `  manila-setup installconfig validate install-config.yaml
  manila-setup installconfig validate --os-cloud openstack install-config.yaml
  manila-setup installconfig validate -o json install-config.yaml
  cat install-config.yaml | manila-setup installconfig validate -`,
		Args: exactlyOneFile,
		RunE: cmdrun.RunE(o),
	}
	cmd.Flags().BoolVar(&o.Strict, "strict", false, "fail (exit 1) on warnings too")
	cmd.Flags().BoolVar(&o.Offline, "offline", false, "only the offline checks, even when a cloud is named")
	o.cloud.addFlags(cmd.Flags())
	return cmd
}

func (o *installConfigValidateOptions) Complete(cmd *cobra.Command, args []string) error {
	o.File = args[0]
	return nil
}

func (o *installConfigValidateOptions) Validate() error {
	if o.Offline || o.global.OSCloud == "" {
		return nil
	}
	return o.cloud.validate()
}

func (o *installConfigValidateOptions) Run(ctx context.Context) error {
	name, data, err := readInstallConfig(ctx, o.File, o.streams.In)
	if err != nil {
		return err
	}
	var checker installconfig.CloudChecker
	var cloudErr error
	if !o.Offline && o.global.OSCloud != "" {
		if c, err := o.cloud.connect(ctx); err != nil {
			cloudErr = err
		} else {
			checker = cloudcheck.Checker{Client: c, File: o.File}
		}
	}
	problems, err := installconfig.CheckWithCloud(ctx, name, data, checker)
	if err != nil {
		cloudErr = environmentError(err)
	}
	if err := printProblems(o.streams.Out, o.global.Output, name, problems, true); err != nil {
		return environmentError(err)
	}
	if cloudErr != nil {
		// The offline results are out; the exit code says the check is incomplete.
		return fmt.Errorf("the cloud checks did not run, only the offline ones: %w", cloudErr)
	}
	if checker == nil && o.global.Output == outputText {
		// "valid" must not read as "these networks exist".
		why := "no cloud named"
		if o.Offline {
			why = "--offline"
		}
		fmt.Fprintf(o.streams.ErrOut, "note: offline checks only (%s): the IDs were not looked up in Neutron; give --os-cloud (or set OS_CLOUD) to check that they exist\n", why)
	}
	if problems.Errors() > 0 || (o.Strict && problems.Warnings() > 0) {
		return silentFailure(exitInvalid)
	}
	return nil
}

// printProblems writes problems one per line (and a summary line), or as a JSON/YAML list.
func printProblems(out io.Writer, format, name string, problems installconfig.Problems, summary bool) error {
	if format != outputText {
		if problems == nil {
			problems = installconfig.Problems{}
		}
		return printStructured(out, format, problems)
	}
	text := problems.Text(name)
	if summary {
		text += installconfig.Summary(name, problems) + "\n"
	}
	_, err := io.WriteString(out, text)
	return err
}

// ---- patch ----

// installConfigPatchOptions are the inputs of `installconfig patch`.
type installConfigPatchOptions struct {
	global  *GlobalOptions
	streams IOStreams

	File           string
	Networks       []string
	SecurityGroups []string
	Pools          []string
	ControlPlane   bool
	DryRun         bool
	Offline        bool
	// Discover adds the network Manila exports on, found by asking the cloud.
	Discover bool
	// Remove takes the IDs out instead of adding them.
	Remove bool
	cloud  *cloudOptions
	client *openstack.Client // connected once, when a cloud is used
}

// patchReport is the -o json/yaml output of patch.
type patchReport struct {
	File        string                 `json:"file"`
	Changed     bool                   `json:"changed"`
	DryRun      bool                   `json:"dryRun"`
	Written     bool                   `json:"written"`
	Backup      string                 `json:"backup,omitempty"`
	Reformatted bool                   `json:"reformatted"`
	Changes     []installconfig.Change `json:"changes"`
	Diff        string                 `json:"diff,omitempty"`
	Problems    installconfig.Problems `json:"problems"`
}

func newInstallConfigPatchCommand(g *GlobalOptions, streams IOStreams) *cobra.Command {
	o := &installConfigPatchOptions{global: g, streams: streams, cloud: &cloudOptions{global: g, streams: streams}}
	cmd := &cobra.Command{
		Use:   "patch FILE --network ID...|--discover --security-group ID... [--pool NAME...] [--control-plane] [--remove] [--dry-run]",
		Short: "Add network and security group IDs to the machine pools of an install-config.yaml",
		Long: `Add network and security group IDs to the additionalNetworkIDs and additionalSecurityGroupIDs of
the compute pools (all of them, or those named with --pool) and, with --control-plane, of the
control plane; platform.openstack is created where a pool has none. Non-canonical forms of
IDs already in the file (upper case, {...}, urn:uuid:..., no dashes) are rewritten in canonical
form.

A pool's own list replaces the one of platform.openstack.defaultMachinePlatform, so a list that
patch creates in a pool starts with the default's IDs: the machines keep them.

patch is idempotent: IDs already there are not added again, and a second run changes nothing.
It validates the file first and refuses to patch an invalid one, and checks its result. It
edits the text in place: comments, key order, quoting, unknown fields and the file mode are
kept, and for the usual layouts the diff is only the added lines. The file is replaced
atomically (temporary file, fsync, rename) and the previous content is kept in FILE.bak.
With --dry-run it prints a unified diff and writes nothing. With FILE "-" it reads standard
input and writes the result to standard output.

With a cloud (--os-cloud NAME, or $OS_CLOUD), the result is checked against it as validate does
before anything is written: an ID the cloud does not know, one in the wrong list, or a network
unfit to be the machines' second NIC stops the patch (exit 1); its warnings are printed and the
file is patched; a cloud that cannot be asked stops it too (exit 2). --offline skips the cloud.
With --discover, the network Manila exports on (as "networks discover" finds it) is added
without looking its ID up; it is printed on standard error with the reason.

--remove goes back: it takes the IDs of --network and --security-group out of the same lists
(the pools' own additionalNetworkIDs and additionalSecurityGroupIDs; a list inherited from
defaultMachinePlatform is left alone), keeping every other item and byte; a list left empty
stays as []. An ID in no list is nothing to do. The cloud is not asked.

Exit codes: 0 patched or nothing to do, 1 the file (or, with a cloud, the result) is invalid,
2 usage error, the file cannot be read or written, or the cloud cannot be asked.`,
		Example: `  manila-setup installconfig patch install-config.yaml --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --dry-run
  manila-setup installconfig patch install-config.yaml \
      --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --security-group 0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37
  manila-setup installconfig patch install-config.yaml --network ID --pool worker --control-plane
  manila-setup installconfig patch install-config.yaml --os-cloud mycloud --discover --dry-run
  manila-setup installconfig patch install-config.yaml --remove --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --control-plane --dry-run`,
		Args: exactlyOneFile,
		RunE: cmdrun.RunE(o),
	}
	f := cmd.Flags()
	f.StringSliceVar(&o.Networks, "network", nil, "ID of a network to add (repeat or separate with commas)")
	f.StringSliceVar(&o.SecurityGroups, "security-group", nil, "ID of a security group to add (repeat or separate with commas)")
	f.StringSliceVar(&o.Pools, "pool", nil, "name of a compute pool to patch (default: every compute pool)")
	f.BoolVar(&o.ControlPlane, "control-plane", false, "patch the control plane too")
	f.BoolVar(&o.DryRun, "dry-run", false, "print a unified diff of the change and write nothing")
	f.BoolVar(&o.Offline, "offline", false, "do not check the result with the cloud, even when one is named")
	f.BoolVar(&o.Discover, "discover", false, "add the network Manila exports on, as 'manila-setup networks discover' finds it (needs a cloud)")
	f.BoolVar(&o.Remove, "remove", false, "remove the IDs of --network and --security-group from the pools' own lists instead of adding them")
	o.cloud.addFlags(f)
	return cmd
}

func (o *installConfigPatchOptions) Complete(cmd *cobra.Command, args []string) error {
	o.File = args[0]
	return nil
}

func (o *installConfigPatchOptions) Validate() error {
	if o.Remove && o.Discover {
		return usageError("installconfig patch: --remove takes out the IDs given: name them with --network and --security-group, not --discover")
	}
	if o.Discover && (o.Offline || o.global.OSCloud == "") {
		return usageError("installconfig patch: --discover asks the cloud: name it with --os-cloud (or $OS_CLOUD), without --offline")
	}
	if len(o.Networks) == 0 && len(o.SecurityGroups) == 0 && !o.Discover {
		return usageError("installconfig patch: give at least one --network or --security-group, or --discover")
	}
	if o.File == "-" && !o.DryRun && o.global.Output != outputText {
		return usageError("installconfig patch: -o %s cannot be combined with FILE - (the patched file goes to standard output)", o.global.Output)
	}
	if !o.Offline && o.global.OSCloud != "" {
		return o.cloud.validate()
	}
	return nil
}

func (o *installConfigPatchOptions) connect(ctx context.Context) error {
	if o.client != nil {
		return nil
	}
	c, err := o.cloud.connect(ctx)
	o.client = c
	return err
}

// discover adds the network Manila exports on to o.Networks, chosen by the one rule of
// openstack.Ranking.StorageNetwork: evidence from Manila, never a guess from a name or a tie.
func (o *installConfigPatchOptions) discover(ctx context.Context, name string) error {
	if err := o.connect(ctx); err != nil {
		return fmt.Errorf("%s not patched: --discover could not ask the cloud: %w", name, err)
	}
	d, err := o.client.Discover(ctx, openstack.DiscoverOptions{})
	if err != nil {
		return environmentError(fmt.Errorf("%s not patched: --discover: %w", name, err))
	}
	id, err := discoveredStorageNetwork(d, o.client, name+" not patched", o.streams)
	if err != nil {
		return err
	}
	o.Networks = append(o.Networks, id)
	return nil
}

// discoveredStorageNetwork is the network --discover adds, chosen by the one rule of
// openstack.Ranking.StorageNetwork (evidence from Manila, never a guess from a name or a tie),
// and said on stderr; what says why there is none starts with subject.
func discoveredStorageNetwork(d *openstack.Discovery, client *openstack.Client, subject string, streams IOStreams) (string, error) {
	best, err := attach.StorageNetworkOf(d, client.Identity())
	if err != nil {
		return "", environmentError(fmt.Errorf("%s: %w", subject, err))
	}
	fmt.Fprintf(streams.ErrOut, "discovered: network %s: %s\n", best.Network.Label(), strings.Join(best.Reasons, "; "))
	return best.Network.ID, nil
}

func (o *installConfigPatchOptions) Run(ctx context.Context) error {
	name, data, err := readInstallConfig(ctx, o.File, o.streams.In)
	if err != nil {
		return err
	}
	if o.Discover {
		if err := o.discover(ctx, name); err != nil {
			return err
		}
	}
	toStdout := o.File == "-" && !o.DryRun
	run := installconfig.FilePatch{Name: name, Data: data, Options: installconfig.PatchOptions{
		Networks:       o.Networks,
		SecurityGroups: o.SecurityGroups,
		Pools:          o.Pools,
		ControlPlane:   o.ControlPlane,
		Remove:         o.Remove,
	}}
	if !o.DryRun && !toStdout {
		run.Path = o.File
	}
	if !o.Offline && o.global.OSCloud != "" && !o.Remove { // a removal adds nothing to check
		run.Cloud = func(ctx context.Context) (installconfig.CloudChecker, error) {
			if err := o.connect(ctx); err != nil {
				return nil, err
			}
			return cloudcheck.Checker{Client: o.client, File: o.File}, nil
		}
	}
	res, err := run.Run(ctx)
	if err != nil {
		return o.patchError(name, err)
	}

	report := patchReport{File: name, Changed: res.Changed, DryRun: o.DryRun, Reformatted: res.Reformatted,
		Changes: res.Changes, Problems: res.Warnings, Written: res.Written, Backup: res.Backup}
	if report.Changes == nil {
		report.Changes = []installconfig.Change{}
	}
	if report.Problems == nil {
		report.Problems = installconfig.Problems{}
	}
	if o.global.Output != outputText {
		if o.DryRun {
			report.Diff = res.Diff
		}
		if err := printStructured(o.streams.Out, o.global.Output, report); err != nil {
			return environmentError(err)
		}
		return nil
	}
	_ = printProblems(o.streams.ErrOut, outputText, name, res.Warnings, false)
	switch {
	case toStdout:
		_, err = o.streams.Out.Write(res.Output)
	case o.DryRun:
		_, err = io.WriteString(o.streams.Out, res.Diff)
	default:
		err = o.printChanges(name, res.PatchResult, report)
	}
	if err != nil {
		return environmentError(err)
	}
	return nil
}

// patchError gives an error of installconfig.FilePatch its words and exit code: the problems
// that stop the patch (offline or from the cloud) as the requested output, exit 1; a wrong
// option, exit 2; a cloud that could not be asked or a failed write, exit 2; a stop, 130.
func (o *installConfigPatchOptions) patchError(name string, err error) error {
	var optErr *installconfig.OptionError
	var invalid *installconfig.InvalidError
	var rejected *installconfig.CloudRejectedError
	var cloudErr *installconfig.CloudCheckError
	var stopped *installconfig.StoppedError
	var problems installconfig.Problems
	switch {
	case errors.As(err, &optErr):
		return usageError("%v", err)
	case errors.As(err, &invalid):
		problems = invalid.Problems
		if o.global.Output == outputText {
			fmt.Fprintf(o.streams.ErrOut, "error: %s not patched: %v\n", name, err)
		}
	case errors.As(err, &rejected):
		problems = rejected.Problems
		if o.global.Output == outputText {
			fmt.Fprintf(o.streams.ErrOut, "error: %s not patched: the cloud rejects the result:\n", name)
		}
	case errors.As(err, &cloudErr):
		return err // the connection's own exit code where it has one, else 2
	case errors.As(err, &stopped):
		return interrupted(err)
	default:
		return environmentError(err)
	}
	if o.global.Output != outputText {
		if perr := printStructured(o.streams.Out, o.global.Output, patchReport{File: name, DryRun: o.DryRun,
			Changes: []installconfig.Change{}, Problems: problems}); perr != nil {
			return environmentError(perr)
		}
		return silentFailure(exitInvalid)
	}
	_ = printProblems(o.streams.ErrOut, outputText, name, problems, false)
	return silentFailure(exitInvalid)
}

func (o *installConfigPatchOptions) printChanges(name string, res *installconfig.PatchResult, report patchReport) error {
	out := o.streams.Out
	if !res.Changed && o.Remove {
		_, err := fmt.Fprintf(out, "%s: nothing to change: no selected pool's own list has these IDs\n", name)
		return err
	}
	if !res.Changed {
		_, err := fmt.Fprintf(out, "%s: nothing to change: every selected pool already has these IDs\n", name)
		return err
	}
	for _, c := range res.Changes {
		for _, id := range c.Added {
			fmt.Fprintf(out, "%s: added %s\n", c.Field, id)
		}
		for _, id := range c.Removed {
			fmt.Fprintf(out, "%s: removed %s\n", c.Field, id)
		}
		for _, n := range c.Normalized {
			fmt.Fprintf(out, "%s: rewrote %s\n", c.Field, n)
		}
		if c.Note != "" {
			fmt.Fprintf(out, "%s: note: %s\n", c.Field, c.Note)
		}
	}
	if res.Reformatted {
		fmt.Fprintf(out, "%s: note: written out as a whole (YAML anchors or merges had to be expanded); comments and key order are kept, blank lines may not be\n", name)
	}
	_, err := fmt.Fprintf(out, "%s: written; the previous version is in %s\n", name, report.Backup)
	return err
}
