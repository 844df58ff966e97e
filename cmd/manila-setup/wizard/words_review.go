package wizard

import (
	"fmt"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/workers"
)

// The review's words: what a dry run's results say, kind by kind, and the commands of the CLI
// that do what the wizard is about to do.

// tone is how a line of text is to be read.
type tone int

const (
	tonePlain tone = iota
	toneDim        // a remark
	toneBad        // keeps from going on
	toneWarn       // to check
	toneGood       // nothing left to do
)

// screenLine is one sentence of a screen.
type screenLine struct {
	Text string
	Tone tone
	// Cut: one line, cut rather than wrapped at narrow widths.
	Cut bool
}

// reviewLines say what the results of a dry run of Patch would do, kind by kind, in the order
// of the sections: what each object gets, what keeps one from being patched (toneBad), what to
// check. chosen are the rows the results are of, as listed (what the control plane's cost is
// counted from).
func reviewLines(results []attach.Result, chosen []workers.Row) []screenLine {
	by := map[string][]attach.Result{}
	for _, r := range results {
		by[workers.SectionOf(r)] = append(by[workers.SectionOf(r)], r)
	}
	var lines []screenLine
	lines = append(lines, machineSetReview(by[workers.SectionMachineSets])...)
	lines = append(lines, clusterAPIReview(by[workers.SectionClusterAPI])...)
	lines = append(lines, nodePoolReview(by[workers.SectionNodePools])...)
	return append(lines, controlPlaneReview(by[workers.SectionControlPlane], chosen)...)
}

// describeAdded says what a patch adds: "adds network ID, security group ID".
func describeAdded(r attach.Result) string {
	return "adds " + strings.Join(r.Added(), ", ")
}

// machineSetReview: what each Machine API MachineSet gets (through its Cluster API copy where
// Cluster API is authoritative for it), and those whose providerSpec cannot be patched.
func machineSetReview(results []attach.Result) []screenLine {
	var lines, invalid []screenLine
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
			lines = append(lines, screenLine{Text: "MachineSet " + res.Name + ": " + describeAdded(res) + via})
		default:
			lines = append(lines, screenLine{Text: "MachineSet " + res.Name + ": " + res.Action + ", " + res.Reason, Tone: toneDim})
		}
		if res.Action == attach.ActionInvalid {
			invalid = append(invalid, screenLine{Text: fmt.Sprintf("✗ MachineSet %s cannot be patched: %s. Fix its providerSpec, or go back (esc) and leave it out.", res.Name, res.Reason), Tone: toneBad})
		}
	}
	lines = append(lines, invalid...)
	if len(results) > 0 && !changed && len(invalid) == 0 {
		lines = append(lines, screenLine{Text: "Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them.", Tone: toneGood, Cut: true})
	}
	return lines
}

// clusterAPIReview: the new template of each Cluster API object, and who replaces its Machines.
func clusterAPIReview(results []attach.Result) []screenLine {
	var lines []screenLine
	for _, res := range results {
		name := "Cluster API " + res.Kind + " " + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, screenLine{Text: fmt.Sprintf("%s: new OpenStackMachineTemplate %s (from %s), %s", name, res.Template, res.OldTemplate, describeAdded(res))})
		case attach.ActionInvalid:
			lines = append(lines, screenLine{Text: fmt.Sprintf("✗ %s cannot be patched: %s. Fix it, or go back (esc) and leave it out.", name, res.Reason), Tone: toneBad})
		default:
			lines = append(lines, screenLine{Text: name + ": " + res.Action + ", " + res.Reason, Tone: toneDim})
		}
		if res.Warning != "" {
			lines = append(lines, screenLine{Text: "! " + res.Warning, Tone: toneWarn})
		}
	}
	return lines
}

// nodePoolReview: the port each NodePool gets, and, once for all of them, that the security
// groups chosen are not added there: the attachment goes on without them.
func nodePoolReview(results []attach.Result) []screenLine {
	var lines []screenLine
	var warned []string
	for _, res := range results {
		name := res.Namespace + "/" + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, screenLine{Text: "NodePool " + name + " (HostedCluster " + res.HostedCluster + "): adds a port on network " + strings.Join(res.AddedNetworks, ", ")})
		default:
			lines = append(lines, screenLine{Text: "NodePool " + name + ": " + res.Action + ", " + res.Reason, Tone: toneDim})
		}
		if res.Warning != "" {
			warned = append(warned, name)
		}
	}
	if len(warned) > 0 {
		lines = append(lines, screenLine{Text: "! The security groups chosen are not added to NodePool " + strings.Join(warned, ", ") +
			": a NodePool's additional ports take none of their own. NFS to the export addresses must be allowed by the security groups its HostedCluster gives the nodes, or the port's portSecurityPolicy set to Disabled. The port is added all the same.", Tone: toneWarn})
	}
	return lines
}

// controlPlaneReview: what the ControlPlaneMachineSet's template gets and, always, what that
// costs: every master replaced. Its warnings follow, but for the strategy's next step, which
// the cost already says.
func controlPlaneReview(results []attach.Result, chosen []workers.Row) []screenLine {
	var lines []screenLine
	for _, res := range results {
		name := machinesets.ControlPlaneKind + " " + res.Name
		cost := controlPlaneCost(res, chosen)
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, screenLine{Text: name + ": " + describeAdded(res) + "; " + cost})
		case attach.ActionInvalid:
			lines = append(lines, screenLine{Text: fmt.Sprintf("✗ %s cannot be patched: %s. Fix its template, or go back (esc) and leave it out.", name, res.Reason), Tone: toneBad})
		default:
			lines = append(lines, screenLine{Text: name + ": " + res.Action + ", " + res.Reason + "; this patch replaces no master", Tone: toneDim})
		}
		for _, w := range strings.Split(res.Warning, "; ") {
			if w != "" && !strings.HasPrefix(w, "strategy ") {
				lines = append(lines, screenLine{Text: "! " + w, Tone: toneWarn})
			}
		}
	}
	return lines
}

// controlPlaneCost is what patching the set of res costs, from its row as listed: "replaces
// the 3 masters one at a time (its operator, RollingUpdate)".
func controlPlaneCost(res attach.Result, chosen []workers.Row) string {
	for _, r := range chosen {
		if st, ok := r.Status.(*machinesets.ControlPlaneStatus); ok && st != nil && r.Is(res) {
			return fmt.Sprintf("replaces the %d masters one at a time (its operator, %s)", st.Replicas, st.Strategy)
		}
	}
	return "replaces every master one at a time (its operator)"
}

// equivalentCommands are the commands of the CLI that do what sel selects, kind by kind: its
// patch and, where manila-setup replaces the machines, its rollout. prefix is the program with
// its global flags; cloud is the --os-cloud the patches take (already quoted), or empty.
func equivalentCommands(prefix, cloud string, sel workers.Selection, a attach.Attachment, force bool) []string {
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
	rolls := rolloutCommands(prefix, sel)
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
			line += " --name " + shellQuote(p)
		}
		lines = append(lines, line)
	}
	if sel.ControlPlane {
		// controlplane rollout follows the operator's replacement of the masters until every
		// one is on the template.
		lines = append(lines, patch+" controlplane patch"+networks+groups+forced, prefix+" controlplane rollout")
	}
	return lines
}

// rolloutCommands are the commands of the CLI that replace the machines of what sel selects
// that manila-setup rolls (the others roll by themselves): what resumes a rollout that was
// stopped.
func rolloutCommands(prefix string, sel workers.Selection) []string {
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

// shellQuote quotes a word for a POSIX shell when it needs it, as the commands the wizard
// prints for copying are quoted.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
