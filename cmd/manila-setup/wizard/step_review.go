package wizard

import (
	"context"
	"fmt"
	"slices"
	"strings"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/workers"
)

// reviewModel is screen 5: what the patch does to each object chosen (workers.Review), its
// diffs, and the equivalent commands.
type reviewModel struct {
	loading  bool
	forKey   string
	kinds    string // what was chosen from: "MachineSet", "NodePool", "MachineSet or NodePool"
	err      string
	results  []attach.Result
	commands []string
	scroll   int
	// fit is what the chosen network does to the nodes: its warnings are acknowledged (or
	// fixed) before enter applies.
	fit fitnessModel

	// detach: the review is of a removal (the sets screen's d), not of an attachment; see
	// step_detach.go.
	detach bool
	// risk is what stands in the way of the removal (pods on Manila volumes whose nodes it
	// replaces, nodes that could not be read): enter is refused while it is not clear, unless
	// forced (f, then y).
	risk           workers.RemovalRisk
	forcing        bool // asking whether to detach anyway
	forced         bool
	refusedEnter   bool // enter was pressed while refused: the refusal is pointed at
	forcedCommands []string
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
	r.results, r.risk = msg.results, msg.risk
	return r
}

// blocked: some object cannot be patched (its spec is broken): the review does not go on.
func (r reviewModel) blocked() bool {
	return slices.ContainsFunc(r.results, func(res attach.Result) bool { return res.Action == attach.ActionInvalid })
}

func (r reviewModel) key(k string, w, h int, dryRun bool, ctx context.Context, b Backend) (reviewModel, tea.Cmd) {
	if r.detach {
		var handled bool
		if r, handled = r.detachKey(k); handled {
			return r, nil
		}
	} else if !r.loading && r.err == "" {
		var cmd tea.Cmd
		var handled bool
		if r.fit, cmd, handled = r.fit.key(k, ctx, b, dryRun); handled {
			return r, cmd
		}
	}
	last := max(len(r.content(w, dryRun))-r.pageHeight(h), 0)
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
		if r.fit.blocks() {
			// Nothing is applied, not even in a dry run's walk, before the warnings are read.
			r.fit.nagged = true
			return r, nil
		}
		if !r.loading && r.err == "" && !r.blocked() {
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
	if r.detach {
		return r.detachHints(next)
	}
	switch {
	case r.fit.asking && dryRun:
		return []hint{{"any key", "back"}}
	case r.fit.asking:
		return []hint{{"y", "change the subnets"}, {"n or enter", "keep them"}}
	}
	hs := []hint{{"↑/↓ pgup/pgdn G", "scroll"}}
	if r.fit.blocks() {
		hs = append(hs, hint{"a", "acknowledge the warnings"})
	}
	if len(r.fit.warnings) > 0 && r.fit.fixable() {
		hs = append(hs, hint{"c", "change the subnet"})
	}
	return append(hs, hint{"enter", next})
}

// pageHeight is how many lines of the review show at once in a body of height h: under them
// the line count, and while the network has warnings, their state.
func (r reviewModel) pageHeight(h int) int {
	if r.fit.status("") != "" {
		return max(h-2, 1)
	}
	return h - 1
}

// content is the whole review, before scrolling.
func (r reviewModel) content(w int, dryRun bool) []string {
	lines := r.fit.lines(w)
	if r.detach {
		lines = append(lines, r.detachLines(w)...)
	} else {
		for _, l := range workers.Review(r.results) {
			lines = append(lines, toned(l, w)...)
		}
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
	commands := r.commands
	if r.forced {
		commands = r.forcedCommands
	}
	lines = append(lines, "", styleTitle.Render("The same without this wizard:"))
	for _, c := range commands {
		lines = append(lines, shellLines(c, w)...)
	}
	if dryRun {
		lines = append(lines, "", styleWarn.Render("Dry run: enter walks on, but nothing is patched or rolled."))
	}
	return lines
}

// toned draws a line of the use case in width w, in its tone.
func toned(l workers.Line, w int) []string {
	st := map[workers.Tone]lipgloss.Style{workers.Dim: styleDim, workers.Bad: styleErr, workers.Warn: styleWarn, workers.Good: styleOK}
	style, styled := st[l.Tone]
	switch {
	case l.Cut && styled:
		return []string{style.Render(l.Text)}
	case l.Cut:
		return []string{l.Text}
	case styled:
		return wrapStyled(style, l.Text, w)
	}
	return wrap(l.Text, w)
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

func (r reviewModel) view(w, h int, spin string, dryRun bool) []string {
	if r.loading {
		return []string{spin + " computing the patch of each " + orKind(r.kinds) + " (nothing is written)…"}
	}
	if r.err != "" {
		return append(wrapStyled(styleErr, "✗ "+r.err, w), styleDim.Render("Press esc to go back and change the choice, or q to quit."))
	}
	if r.fit.asking {
		return r.fit.question(w, h, dryRun)
	}
	if r.forcing {
		return r.forceQuestion(w, h)
	}
	all := r.content(w, dryRun)
	page := r.pageHeight(h)
	top := min(r.scroll, max(len(all)-page, 0))
	end := min(top+page, len(all))
	lines := all[top:end]
	more := fmt.Sprintf("lines %d-%d of %d", top+1, end, len(all))
	lines = lines[:len(lines):len(lines)]
	if status := r.fit.status(spin); status != "" {
		lines = append(lines, cut(status, w))
	}
	return append(lines, styleDim.Render(more))
}

func orKind(kinds string) string {
	return strings.ReplaceAll(kinds, " or ", " and ")
}

// commandLines are the flag-driven commands that do what the wizard is about to do
// (workers.Commands), and on which cluster they act.
func commandLines(conn *Connection, a attach.Attachment, sel workers.Selection, force bool) []string {
	prefix, cloud := "manila-setup", ""
	if conn != nil {
		for _, f := range conn.Flags {
			prefix += " " + workers.ShellQuote(f)
		}
		if conn.Cloud != "" {
			cloud = workers.ShellQuote(conn.Cloud)
		}
	}
	var lines []string
	for _, c := range workers.Commands(prefix, cloud, sel, a, force) {
		lines = append(lines, "  "+c)
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
