package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// attachFlags are the flags of every command that attaches the storage network (machinesets,
// nodepools and clusterapi patch), with their one set of rules.
type attachFlags struct {
	Networks       []string
	SecurityGroups []string
	DryRun         bool
	Discover       bool
	Force          bool
	File           string
	InPlace        bool
	// Remove takes off what the objects' records say manila-setup attached, instead of
	// attaching (attach.Removal); --network and --security-group then narrow it.
	Remove bool

	// findings are what the networks attached would do to the machines (attach.Fitness), of
	// Apply's report: said on standard error, and in each object's row of -o json|yaml.
	findings []networkFinding
	// said: the report was said (sayReport), before the rollout or after Apply.
	said bool
	// cloud is the cloud options connected to (--os-cloud), for the checks after the patch's.
	cloud *openstack.Client
}

// networkFinding is a finding of one network the patch attaches.
type networkFinding struct {
	network string // its ID, as given or discovered
	attach.Finding
	// Forced: an error that --force let through.
	Forced bool `json:"forced,omitempty"`
}

// resultJSON is one object's row of -o json|yaml: what Patch did, and the findings of the
// networks it added.
type resultJSON struct {
	attach.Result
	Findings []networkFinding `json:"findings,omitempty"`
}

// resultsJSON gives each result the findings of the networks it adds (or, on a dry run,
// would add): the warnings, and the errors --force let through, with their stable IDs.
func (a *attachFlags) resultsJSON(results []attach.Result) []resultJSON {
	out := make([]resultJSON, len(results))
	for i, r := range results {
		out[i].Result = r
		for _, f := range a.findings {
			if slices.ContainsFunc(r.AddedNetworks, func(id string) bool { return neutronid.Equal(id, f.network) }) {
				out[i].Findings = append(out[i].Findings, f)
			}
		}
	}
	return out
}

// printResults prints what a patch did: with -o json|yaml the results and their findings;
// else a line per object, the diffs, the warnings on standard error, and then the dry run's
// line, or next's words of what happens to the patched objects' machines.
func (a *attachFlags) printResults(g *GlobalOptions, streams IOStreams, results []attach.Result, next func(patched int) string) error {
	if g.Output != outputText {
		return printStructured(streams.Out, g.Output, a.resultsJSON(results))
	}
	out := streams.Out
	patched, err := writePatchTable(out, results)
	if err != nil {
		return err
	}
	for _, r := range results {
		if r.Diff != "" {
			fmt.Fprintf(out, "\n%s", r.Diff)
		}
	}
	writePatchWarnings(streams.ErrOut, results)
	switch {
	case a.DryRun:
		_, err := fmt.Fprintln(out, "\nDry run: nothing was written.")
		return err
	case patched > 0:
		_, err := fmt.Fprint(out, "\n"+next(patched))
		return err
	}
	return nil
}

// attachHelp are the words that differ between the commands.
type attachHelp struct {
	objects       string // "MachineSets", "NodePools", "Cluster API objects"
	securityGroup string // the --security-group help
	force         string // the --force help
}

func (a *attachFlags) add(f *pflag.FlagSet, h attachHelp) {
	f.StringSliceVar(&a.Networks, "network", nil, "ID of the storage network to attach, or with --remove to remove (repeat or comma-separate)")
	f.StringSliceVar(&a.SecurityGroups, "security-group", nil, h.securityGroup)
	f.BoolVar(&a.DryRun, "dry-run", false, "print a unified diff per object and write nothing")
	f.BoolVar(&a.Discover, "discover", false, "attach the network Manila exports on, as 'manila-setup networks discover' finds it (needs a cloud)")
	f.BoolVar(&a.Force, "force", false, h.force)
	f.StringVarP(&a.File, "filename", "f", "", "patch the "+h.objects+" of this file (- for standard input) instead of the cluster's")
	f.BoolVar(&a.InPlace, "in-place", false, "with -f: write the patched file back, keeping FILE.bak")
	f.BoolVar(&a.Remove, "remove", false, "remove what manila-setup attached (the "+attach.Annotation+" record), and nothing else; with --network/--security-group only those")
}

// removeHelp is the paragraph of the patch commands' help about --remove.
const removeHelp = `--remove goes back: it removes exactly what the object's record (annotation
` + attach.Annotation + `) says manila-setup added, networks and security groups, and
rewrites or removes the record; what the user added by hand stays, a storage-like network
included. --network and --security-group narrow it to those IDs, which must be in the record.
An object without a record is left unchanged: nothing of it is known to be manila-setup's.`

// validate checks the flags before anything is contacted: a network or --discover (with a
// cloud), the file flags, and every ID given.
func (a *attachFlags) validate(g *GlobalOptions) error {
	if a.Remove {
		return a.validateRemove()
	}
	if a.Discover && g.OSCloud == "" {
		return usageError("--discover asks the cloud: name it with --os-cloud (or $OS_CLOUD)")
	}
	if len(a.Networks) == 0 && !a.Discover {
		return usageError("--network is required: the ID of the storage network to attach (see `manila-setup networks`), or --discover")
	}
	if err := fileFlagsError(a.File, a.InPlace, a.DryRun); err != nil {
		return err
	}
	// With --discover the network is found in Run: only the IDs given are checked here.
	return attachmentFlagErrors(a.attachment(), !a.Discover)
}

// validateRemove checks the flags of --remove: the IDs, if any, name what to remove.
func (a *attachFlags) validateRemove() error {
	if a.Discover {
		return usageError("--discover finds a network to attach; --remove takes off what the record names (narrow it with --network)")
	}
	if err := fileFlagsError(a.File, a.InPlace, a.DryRun); err != nil {
		return err
	}
	if errs := a.removal().Validate(); len(errs) > 0 {
		return flagErrors(errs)
	}
	return nil
}

func (a attachFlags) removal() attach.Removal {
	return attach.Removal{Networks: a.Networks, SecurityGroups: a.SecurityGroups}
}

// networkPolicyExit gives an error of attach.ResolveNetworks its words and exit code: a network
// the policy refuses is the user's (1), a cloud that cannot tell is the environment (2).
func networkPolicyExit(err error) error {
	var refused *attach.NetworkPolicyError
	if errors.As(err, &refused) {
		lines := make([]string, len(refused.Problems))
		for i, p := range refused.Problems {
			lines[i] = fmt.Sprintf("--network[%d]: Invalid value: %q: %s", p.Index, p.ID, p.Problem)
		}
		return invalidInput(fmt.Errorf("%s\nnothing patched; --force attaches it anyway", strings.Join(lines, "\n")))
	}
	return environmentError(fmt.Errorf("nothing patched: %w", err))
}

func (a attachFlags) attachment() attach.Attachment {
	return attach.Attachment{Networks: a.Networks, SecurityGroups: a.SecurityGroups}
}

// attachmentFlagErrors prints the errors of the IDs as one line each, as flags: --network[1]:
// Invalid value: ... A missing network is an error only when one is required.
func attachmentFlagErrors(a attach.Attachment, networkRequired bool) error {
	var errs field.ErrorList
	for _, e := range a.Validate() {
		if e.Type == field.ErrorTypeRequired && e.Field == "network" && !networkRequired {
			continue
		}
		errs = append(errs, e)
	}
	if len(errs) == 0 {
		return nil
	}
	return flagErrors(errs)
}
