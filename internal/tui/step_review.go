package tui

import (
	"fmt"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/machinesets"
)

// reviewModel is screen 5: the diff per MachineSet and the equivalent commands.
type reviewModel struct {
	loading  bool
	forKey   string
	err      string
	results  []machinesets.PatchResult
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
	r.results = msg.results
	return r
}

// changedNames are the MachineSets the patch changes.
func (r reviewModel) changedNames() []string {
	var names []string
	for _, res := range r.results {
		if res.Action == machinesets.ActionWouldPatch {
			names = append(names, res.Name)
		}
	}
	return names
}

func (r reviewModel) invalid() []machinesets.PatchResult {
	var out []machinesets.PatchResult
	for _, res := range r.results {
		if res.Action == machinesets.ActionInvalid {
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
		if !r.loading && r.err == "" && len(r.invalid()) == 0 {
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
		case machinesets.ActionWouldPatch:
			lines = append(lines, wrap("MachineSet "+res.Name+": "+describeAdded(res), w)...)
		default:
			lines = append(lines, wrapStyled(styleDim, "MachineSet "+res.Name+": "+res.Action+", "+res.Reason, w)...)
		}
	}
	for _, res := range r.invalid() {
		lines = append(lines, wrapStyled(styleErr, fmt.Sprintf("✗ MachineSet %s cannot be patched: %s. Fix its providerSpec, or go back (esc) and leave it out.", res.Name, res.Reason), w)...)
	}
	if len(changed) == 0 && len(r.invalid()) == 0 {
		lines = append(lines, styleOK.Render("Every chosen MachineSet already has the network and groups: enter replaces the machines that still lack them."))
	}
	for _, res := range r.results {
		if res.Diff == "" {
			continue
		}
		lines = append(lines, "")
		for _, l := range strings.Split(strings.TrimRight(res.Diff, "\n"), "\n") {
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
	lines = append(lines, "", styleTitle.Render("The same without this wizard:"))
	for _, c := range r.commands {
		lines = append(lines, shellLines(c, w)...)
	}
	if dryRun {
		lines = append(lines, "", styleWarn.Render("Dry run: enter walks on, but nothing is patched or rolled."))
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

func describeAdded(r machinesets.PatchResult) string {
	var parts []string
	for _, id := range r.AddedNetworks {
		parts = append(parts, "network "+id)
	}
	for _, id := range r.AddedSecurityGroups {
		parts = append(parts, "security group "+id)
	}
	return "adds " + strings.Join(parts, ", ")
}

func (r reviewModel) view(w, h int, spin string, dryRun bool) []string {
	if r.loading {
		return []string{spin + " computing the patch of each MachineSet (nothing is written)…"}
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

// commandLines are the flag-driven commands that do what the wizard is about to do.
func commandLines(conn *Connection, a machinesets.Attachment, names []string, force bool) []string {
	prefix := "manila-setup"
	if conn != nil {
		for _, f := range conn.Flags {
			prefix += " " + shellQuote(f)
		}
	}
	roll := prefix + " machinesets rollout"
	if conn != nil && conn.Cloud != "" {
		prefix += " --os-cloud " + shellQuote(conn.Cloud)
	}
	patch := prefix + " machinesets patch"
	for _, n := range a.Networks {
		patch += " --network " + n
	}
	for _, g := range a.SecurityGroups {
		patch += " --security-group " + g
	}
	if force {
		// The admin said yes to a network the guard questions; the command would refuse it.
		patch += " --force"
	}
	for _, n := range names {
		patch += " --name " + n
		roll += " --name " + n
	}
	lines := []string{"  " + patch, "  " + roll}
	if conn != nil && conn.Context != "" {
		lines = append(lines, styleDim.Render("  (both act on the kubeconfig's current context: oc config use-context "+conn.Context+")"))
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
