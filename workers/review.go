package workers

import (
	"fmt"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
)

// Tone is how a line of text is to be read.
type Tone int

const (
	Plain Tone = iota
	Dim        // a remark
	Bad        // keeps from going on
	Warn       // to check
	Good       // nothing left to do
)

// Line is one sentence of a screen.
type Line struct {
	Text string
	Tone Tone
	// Cut: one line, cut rather than wrapped at narrow widths.
	Cut bool
}

// SectionOf is the ID of the section whose row res is the result of.
func SectionOf(res attach.Result) string {
	switch {
	case res.Kind == "NodePool":
		return SectionNodePools
	case res.Namespace == machinesets.Namespace:
		return SectionMachineSets
	}
	return SectionClusterAPI
}

// Review says what the results of a dry run of Patch would do, kind by kind, in the order of
// the sections: what each object gets, what keeps one from being patched (Bad), what to check.
func Review(results []attach.Result) []Line {
	by := map[string][]attach.Result{}
	for _, r := range results {
		by[SectionOf(r)] = append(by[SectionOf(r)], r)
	}
	var lines []Line
	lines = append(lines, machineSetReview(by[SectionMachineSets])...)
	lines = append(lines, clusterAPIReview(by[SectionClusterAPI])...)
	return append(lines, nodePoolReview(by[SectionNodePools])...)
}

// DescribeAdded says what a patch adds: "adds network ID, security group ID".
func DescribeAdded(r attach.Result) string {
	return "adds " + strings.Join(r.Added(), ", ")
}

// machineSetReview: what each Machine API MachineSet gets (through its Cluster API copy where
// Cluster API is authoritative for it), and those whose providerSpec cannot be patched.
func machineSetReview(results []attach.Result) []Line {
	var lines, invalid []Line
	changed := false
	for _, res := range results {
		switch res.Action {
		case attach.ActionWouldPatch:
			changed = true
			via := ""
			if res.ClusterAPI {
				// The diff that follows is of the copy and its new template.
				via = " (via its Cluster API copy in " + clusterapi.OpenShiftNamespace + ": a new OpenStackMachineTemplate)"
			}
			lines = append(lines, Line{Text: "MachineSet " + res.Name + ": " + DescribeAdded(res) + via})
		default:
			lines = append(lines, Line{Text: "MachineSet " + res.Name + ": " + res.Action + ", " + res.Reason, Tone: Dim})
		}
		if res.Action == attach.ActionInvalid {
			invalid = append(invalid, Line{Text: fmt.Sprintf("✗ MachineSet %s cannot be patched: %s. Fix its providerSpec, or go back (esc) and leave it out.", res.Name, res.Reason), Tone: Bad})
		}
	}
	lines = append(lines, invalid...)
	if len(results) > 0 && !changed && len(invalid) == 0 {
		lines = append(lines, Line{Text: "Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them.", Tone: Good, Cut: true})
	}
	return lines
}

// clusterAPIReview: the new template of each Cluster API object, and who replaces its Machines.
func clusterAPIReview(results []attach.Result) []Line {
	var lines []Line
	for _, res := range results {
		name := "Cluster API " + res.Kind + " " + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, Line{Text: fmt.Sprintf("%s: new OpenStackMachineTemplate %s (from %s), %s", name, res.Template, res.OldTemplate, DescribeAdded(res))})
		case attach.ActionInvalid:
			lines = append(lines, Line{Text: fmt.Sprintf("✗ %s cannot be patched: %s. Fix it, or go back (esc) and leave it out.", name, res.Reason), Tone: Bad})
		default:
			lines = append(lines, Line{Text: name + ": " + res.Action + ", " + res.Reason, Tone: Dim})
		}
		if res.Warning != "" {
			lines = append(lines, Line{Text: "! " + res.Warning, Tone: Warn})
		}
	}
	return lines
}

// nodePoolReview: the port each NodePool gets, and, once for all of them, that the security
// groups chosen are not added there: the attachment goes on without them.
func nodePoolReview(results []attach.Result) []Line {
	var lines []Line
	var warned []string
	for _, res := range results {
		name := res.Namespace + "/" + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, Line{Text: "NodePool " + name + " (HostedCluster " + res.HostedCluster + "): adds a port on network " + strings.Join(res.AddedNetworks, ", ")})
		default:
			lines = append(lines, Line{Text: "NodePool " + name + ": " + res.Action + ", " + res.Reason, Tone: Dim})
		}
		if res.Warning != "" {
			warned = append(warned, name)
		}
	}
	if len(warned) > 0 {
		lines = append(lines, Line{Text: "! The security groups chosen are not added to NodePool " + strings.Join(warned, ", ") +
			": a NodePool's additional ports take none of their own. NFS to the export addresses must be allowed by the security groups its HostedCluster gives the nodes, or the port's portSecurityPolicy set to Disabled. The port is added all the same.", Tone: Warn})
	}
	return lines
}

// Commands are the commands of the CLI that do what sel selects, kind by kind: its patch and,
// where manila-setup replaces the machines, its rollout. prefix is the program with its global
// flags; cloud is the --os-cloud the patches take (already quoted), or empty.
func Commands(prefix, cloud string, sel Selection, a attach.Attachment, force bool) []string {
	patch := prefix
	if cloud != "" {
		patch += " --os-cloud " + cloud
	}
	var networks, groups string
	for _, n := range a.Networks {
		networks += " --network " + n
	}
	for _, g := range a.SecurityGroups {
		groups += " --security-group " + g
	}
	// The admin said yes to a network the guard questions; the commands would refuse it.
	forced := ""
	if force {
		forced = " --force"
	}
	rolls := Rollouts(prefix, sel)
	var lines []string
	if sel.MachineSets != nil && len(sel.MachineSets.Names) > 0 {
		line := patch + " machinesets patch" + networks + groups + forced
		for _, n := range sel.MachineSets.Names {
			line += " --name " + n
		}
		lines = append(lines, line, rolls[0])
		rolls = rolls[1:]
	}
	if len(sel.ClusterAPI) > 0 {
		line := patch + " clusterapi patch" + networks + groups + forced
		for _, n := range sel.ClusterAPI {
			line += " --name " + n
		}
		lines = append(lines, line)
		lines = append(lines, rolls...)
	}
	if len(sel.NodePools) > 0 {
		// No --security-group: a NodePool's port takes none, the review says so instead.
		line := patch + " nodepools patch" + networks + forced
		for _, p := range sel.NodePools {
			line += " --name " + ShellQuote(p)
		}
		lines = append(lines, line)
	}
	return lines
}

// Rollouts are the commands that replace the machines of what sel selects that manila-setup
// rolls (the others roll by themselves): what resumes a rollout that was stopped.
func Rollouts(prefix string, sel Selection) []string {
	var lines []string
	if sel.MachineSets != nil && len(sel.MachineSets.Names) > 0 {
		line := prefix + " machinesets rollout"
		for _, n := range sel.MachineSets.Names {
			line += " --name " + n
		}
		lines = append(lines, line)
	}
	sets := ""
	for _, n := range sel.ClusterAPI {
		// A MachineDeployment rolls by itself; only standalone MachineSets are rolled.
		if strings.HasPrefix(n, "machineset/") {
			sets += " --name " + n
		}
	}
	if sets != "" {
		lines = append(lines, prefix+" clusterapi rollout"+sets)
	}
	return lines
}

// ShellQuote quotes a word for a POSIX shell when it needs it, as the commands this package
// prints for copying are quoted.
func ShellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
