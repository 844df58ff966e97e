package wizard

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/workers"
)

// reviewModel is screen 5: the diff per MachineSet and NodePool and the equivalent commands.
type reviewModel struct {
	loading  bool
	forKey   string
	kinds    string // what was chosen from: "MachineSet", "NodePool", "MachineSet or NodePool"
	err      string
	results  []attach.Result
	pools    []attach.Result
	capi     []attach.Result
	commands []string
	scroll   int
}

func (r reviewModel) withPlan(msg planMsg) reviewModel {
	if msg.key != r.forKey {
		return r
	}
	r.loading = false
	if msg.err != nil {
		r.err = msg.err.Error()
		return r
	}
	r.results, r.pools, r.capi = msg.results, msg.pools, msg.capi
	return r
}

// changedNames are the MachineSets the patch changes.
func (r reviewModel) changedNames() []string {
	var names []string
	for _, res := range r.results {
		if res.Action == attach.ActionWouldPatch {
			names = append(names, res.Name)
		}
	}
	return names
}

func (r reviewModel) invalid() []attach.Result {
	var out []attach.Result
	for _, res := range r.results {
		if res.Action == attach.ActionInvalid {
			out = append(out, res)
		}
	}
	return out
}

// invalidCAPI are the Cluster API objects that cannot be patched (their template is missing or
// unreadable): like invalid MachineSets, they keep the review from going on.
func (r reviewModel) invalidCAPI() []attach.Result {
	var out []attach.Result
	for _, res := range r.capi {
		if res.Action == attach.ActionInvalid {
			out = append(out, res)
		}
	}
	return out
}

func (r reviewModel) key(k string, w, h int, dryRun bool) (reviewModel, tea.Cmd) {
	last := max(len(r.content(w, dryRun))-(h-1), 0)
	switch k {
	case "esc":
		return r, nav(-1)
	case "up", "k":
		r.scroll = max(r.scroll-1, 0)
	case "down", "j":
		r.scroll++
	case "pgup", "b":
		r.scroll = max(r.scroll-(h-2), 0)
	case "pgdown", " ", "f":
		r.scroll += h - 2
	case "home", "g":
		r.scroll = 0
	case "end", "G":
		r.scroll = last
	case "enter":
		if !r.loading && r.err == "" && len(r.invalid()) == 0 && len(r.invalidCAPI()) == 0 {
			return r, nav(1)
		}
	}
	r.scroll = min(r.scroll, last)
	return r, nil
}

func (r reviewModel) hints(dryRun bool) []hint {
	next := "apply"
	if dryRun {
		next = "continue (dry run)"
	}
	return []hint{{"↑/↓ pgup/pgdn G", "scroll"}, {"enter", next}}
}

// content is the whole review, before scrolling.
func (r reviewModel) content(w int, dryRun bool) []string {
	var lines []string
	changed := r.changedNames()
	for _, res := range r.results {
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, wrap("MachineSet "+res.Name+": "+describeAdded(res)+viaCopy(res.ClusterAPI), w)...)
		default:
			lines = append(lines, wrapStyled(styleDim, "MachineSet "+res.Name+": "+res.Action+", "+res.Reason, w)...)
		}
	}
	for _, res := range r.invalid() {
		lines = append(lines, wrapStyled(styleErr, fmt.Sprintf("✗ MachineSet %s cannot be patched: %s. Fix its providerSpec, or go back (esc) and leave it out.", res.Name, res.Reason), w)...)
	}
	if len(r.results) > 0 && len(changed) == 0 && len(r.invalid()) == 0 {
		lines = append(lines, styleOK.Render("Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them."))
	}
	lines = append(lines, r.capiLines(w)...)
	lines = append(lines, r.poolLines(w)...)
	diffs := make([]string, 0, len(r.results)+len(r.capi))
	for _, res := range r.results {
		diffs = append(diffs, res.Diff)
	}
	for _, res := range r.capi {
		diffs = append(diffs, res.Diff)
	}
	for _, diff := range diffs {
		if diff == "" {
			continue
		}
		lines = append(lines, "")
		for _, l := range strings.Split(strings.TrimRight(diff, "\n"), "\n") {
			if strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---") {
				// The headers name the object; wrapped rather than cut at narrow widths.
				for _, part := range wrap(l, w) {
					lines = append(lines, colorDiff(part))
				}
				continue
			}
			lines = append(lines, colorDiff(l))
		}
	}
	for _, res := range r.pools {
		if res.Diff == "" {
			continue
		}
		lines = append(lines, "")
		for _, l := range strings.Split(strings.TrimRight(res.Diff, "\n"), "\n") {
			if strings.HasPrefix(l, "+++") || strings.HasPrefix(l, "---") {
				for _, part := range wrap(l, w) {
					lines = append(lines, colorDiff(part))
				}
				continue
			}
			lines = append(lines, colorDiff(l))
		}
	}
	lines = append(lines, "", styleTitle.Render("The same without this wizard:"))
	for _, c := range r.commands {
		lines = append(lines, shellLines(c, w)...)
	}
	if dryRun {
		lines = append(lines, "", styleWarn.Render("Dry run: enter walks on, but nothing is patched or rolled."))
	}
	return lines
}

// viaCopy says that a MachineSet is patched through its Cluster API copy: the diff that follows
// is of the copy and its new template.
func viaCopy(clusterAPI bool) string {
	if !clusterAPI {
		return ""
	}
	return " (via its Cluster API copy in " + clusterapi.OpenShiftNamespace + ": a new OpenStackMachineTemplate)"
}

// capiLines say what the patch does to each chosen Cluster API object: a new template, and who
// replaces its Machines.
func (r reviewModel) capiLines(w int) []string {
	var lines []string
	for _, res := range r.capi {
		name := "Cluster API " + res.Kind + " " + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, wrap(fmt.Sprintf("%s: new OpenStackMachineTemplate %s (from %s), %s", name, res.Template, res.OldTemplate, describeAdded(res)), w)...)
		case attach.ActionInvalid:
			lines = append(lines, wrapStyled(styleErr, fmt.Sprintf("✗ %s cannot be patched: %s. Fix it, or go back (esc) and leave it out.", name, res.Reason), w)...)
		default:
			lines = append(lines, wrapStyled(styleDim, name+": "+res.Action+", "+res.Reason, w)...)
		}
		if res.Warning != "" {
			lines = append(lines, wrapStyled(styleWarn, "! "+res.Warning, w)...)
		}
	}
	return lines
}

// poolLines say what the patch does to each chosen NodePool, and, once for all of them, that
// the security groups chosen are not added there: the attachment goes on without them.
func (r reviewModel) poolLines(w int) []string {
	var lines, warned []string
	for _, res := range r.pools {
		name := res.Namespace + "/" + res.Name
		switch res.Action {
		case attach.ActionWouldPatch:
			lines = append(lines, wrap("NodePool "+name+" (HostedCluster "+res.HostedCluster+"): adds a port on network "+strings.Join(res.AddedNetworks, ", "), w)...)
		default:
			lines = append(lines, wrapStyled(styleDim, "NodePool "+name+": "+res.Action+", "+res.Reason, w)...)
		}
		if res.Warning != "" {
			warned = append(warned, name)
		}
	}
	if len(warned) > 0 {
		lines = append(lines, wrapStyled(styleWarn, "! The security groups chosen are not added to NodePool "+strings.Join(warned, ", ")+
			": a NodePool's additional ports take none of their own. NFS to the export addresses must be allowed by the security groups its HostedCluster gives the nodes, or the port's portSecurityPolicy set to Disabled. The port is added all the same.", w)...)
	}
	return lines
}

func colorDiff(l string) string {
	switch {
	case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		return styleTitle.Render(l)
	case strings.HasPrefix(l, "+"):
		return styleAdd.Render(l)
	case strings.HasPrefix(l, "-"):
		return styleDel.Render(l)
	case strings.HasPrefix(l, "@@"):
		return styleHunk.Render(l)
	}
	return l
}

func describeAdded(r attach.Result) string {
	return "adds " + strings.Join(r.Added(), ", ")
}

func (r reviewModel) view(w, h int, spin string, dryRun bool) []string {
	if r.loading {
		return []string{spin + " computing the patch of each " + orKind(r.kinds) + " (nothing is written)…"}
	}
	if r.err != "" {
		return append(wrapStyled(styleErr, "✗ "+r.err, w), styleDim.Render("Press esc to go back and change the choice, or q to quit."))
	}
	all := r.content(w, dryRun)
	top := min(r.scroll, max(len(all)-(h-1), 0))
	end := min(top+h-1, len(all))
	lines := all[top:end]
	more := fmt.Sprintf("lines %d-%d of %d", top+1, end, len(all))
	return append(lines[:len(lines):len(lines)], styleDim.Render(more))
}

func orKind(kinds string) string {
	if kinds == "" {
		return "MachineSet"
	}
	return strings.ReplaceAll(kinds, " or ", " and ")
}

// commandLines are the flag-driven commands that do what the wizard is about to do: for
// MachineSets a patch and a rollout, for NodePools (NAMESPACE/NAME) a patch, as HyperShift rolls
// them itself.
func commandLines(conn *Connection, a attach.Attachment, sel workers.Selection, force bool) []string {
	var names []string
	if sel.MachineSets != nil {
		names = sel.MachineSets.Names
	}
	capi, pools := sel.ClusterAPI, sel.NodePools
	prefix := "manila-setup"
	if conn != nil {
		for _, f := range conn.Flags {
			prefix += " " + shellQuote(f)
		}
	}
	roll := prefix + " machinesets rollout"
	capiRoll := prefix + " clusterapi rollout"
	if conn != nil && conn.Cloud != "" {
		prefix += " --os-cloud " + shellQuote(conn.Cloud)
	}
	var networks string
	for _, n := range a.Networks {
		networks += " --network " + n
	}
	// The admin said yes to a network the guard questions; the commands would refuse it.
	forced := ""
	if force {
		forced = " --force"
	}
	var lines []string
	if len(names) > 0 {
		patch := prefix + " machinesets patch" + networks
		for _, g := range a.SecurityGroups {
			patch += " --security-group " + g
		}
		patch += forced
		for _, n := range names {
			patch += " --name " + n
			roll += " --name " + n
		}
		lines = append(lines, "  "+patch, "  "+roll)
	}
	if len(capi) > 0 {
		patch := prefix + " clusterapi patch" + networks
		for _, g := range a.SecurityGroups {
			patch += " --security-group " + g
		}
		patch += forced
		sets := false
		for _, n := range capi {
			patch += " --name " + n
			// A MachineDeployment rolls by itself; only standalone MachineSets are rolled.
			if strings.HasPrefix(n, "machineset/") {
				capiRoll += " --name " + n
				sets = true
			}
		}
		lines = append(lines, "  "+patch)
		if sets {
			lines = append(lines, "  "+capiRoll)
		}
	}
	if len(pools) > 0 {
		// No --security-group: a NodePool's port takes none, the review says so instead.
		patch := prefix + " nodepools patch" + networks + forced
		for _, p := range pools {
			patch += " --name " + shellQuote(p)
		}
		lines = append(lines, "  "+patch)
	}
	if conn != nil && conn.Context != "" {
		which := "all act"
		switch len(lines) {
		case 1:
			which = "it acts"
		case 2:
			which = "both act"
		}
		lines = append(lines, styleDim.Render("  ("+which+" on the kubeconfig's current context: oc config use-context "+conn.Context+")"))
	}
	return lines
}

// shellQuote quotes a word for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellLines breaks a command line before its flags, with shell continuations, so that what is
// copied from the screen still runs.
func shellLines(cmd string, w int) []string {
	if ansi.StringWidth(cmd) <= w || !strings.HasPrefix(cmd, "  manila-setup") {
		return []string{cmd}
	}
	parts := strings.Split(cmd, " --")
	var lines []string
	cur := parts[0]
	for _, p := range parts[1:] {
		next := cur + " --" + p
		if ansi.StringWidth(next)+2 > w {
			lines = append(lines, cur+" \\")
			cur = "      --" + p
			continue
		}
		cur = next
	}
	return append(lines, cur)
}
