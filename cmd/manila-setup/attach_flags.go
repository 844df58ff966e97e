package main

import (
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/machinesets"
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
}

// attachHelp are the words that differ between the commands.
type attachHelp struct {
	objects       string // "MachineSets", "NodePools", "Cluster API objects"
	securityGroup string // the --security-group help
	force         string // the --force help
}

func (a *attachFlags) add(f *pflag.FlagSet, h attachHelp) {
	f.StringSliceVar(&a.Networks, "network", nil, "ID of the storage network to attach (repeat or comma-separate)")
	f.StringSliceVar(&a.SecurityGroups, "security-group", nil, h.securityGroup)
	f.BoolVar(&a.DryRun, "dry-run", false, "print a unified diff per object and write nothing")
	f.BoolVar(&a.Discover, "discover", false, "attach the network Manila exports on, as 'manila-setup networks discover' finds it (needs a cloud)")
	f.BoolVar(&a.Force, "force", false, h.force)
	f.StringVarP(&a.File, "filename", "f", "", "patch the "+h.objects+" of this file (- for standard input) instead of the cluster's")
	f.BoolVar(&a.InPlace, "in-place", false, "with -f: write the patched file back, keeping FILE.bak")
}

// validate checks the flags before anything is contacted: a network or --discover (with a
// cloud), the file flags, and every ID given.
func (a *attachFlags) validate(g *GlobalOptions) error {
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

func (a attachFlags) attachment() machinesets.Attachment {
	return machinesets.Attachment{Networks: a.Networks, SecurityGroups: a.SecurityGroups}
}

// attachmentFlagErrors prints the errors of the IDs as one line each, as flags: --network[1]:
// Invalid value: ... A missing network is an error only when one is required.
func attachmentFlagErrors(a machinesets.Attachment, networkRequired bool) error {
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
	return machineSetsFieldErrors(errs)
}
