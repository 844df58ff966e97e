package wizard

import (
	"fmt"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"
	"github.com/charmbracelet/x/ansi"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/workers"
)

// reviewModel is screen 5: what the patch does to each object chosen (reviewLines), its
// diffs, and the equivalent commands.
type reviewModel struct {
	loading  bool
	forKey   string
	kinds    string // what was chosen from: "MachineSet", "NodePool", "MachineSet or NodePool"
	chosen   []workers.Row
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

// The review's keys.
var (
	reviewPageUp   = bind("pgup", "page up", "pgup", "b")
	reviewPageDown = bind("pgdn", "page down", "pgdown", " ", "f")
	reviewScroll   = either("↑/↓ pgup/pgdn G", "scroll", keyUp, keyDown, reviewPageUp, reviewPageDown, keyTop, keyBottom)
	reviewApply    = bind("enter", "apply", "enter")
	reviewDry      = bind("enter", "continue (dry run)", "enter")
)

func (r reviewModel) key(s *session, k tea.KeyMsg) (reviewModel, tea.Cmd) {
	dryRun, w, h := s.opts.DryRun, s.width, s.height
	if r.detach {
		var handled bool
		if r, handled = r.detachKey(k); handled {
			return r, nil
		}
	} else if !r.loading && r.err == "" {
		var cmd tea.Cmd
		var handled bool
		if r.fit, cmd, handled = r.fit.key(k, s.ctx, s.backend(), dryRun); handled {
			return r, cmd
		}
	}
	last := max(len(r.content(w, dryRun))-r.pageHeight(h), 0)
	switch {
	case key.Matches(k, keyBack):
		return r, nav(-1)
	case key.Matches(k, keyUp):
		r.scroll = max(r.scroll-1, 0)
	case key.Matches(k, keyDown):
		r.scroll++
	case key.Matches(k, reviewPageUp):
		r.scroll = max(r.scroll-(h-2), 0)
	case key.Matches(k, reviewPageDown):
		r.scroll += h - 2
	case key.Matches(k, keyTop):
		r.scroll = 0
	case key.Matches(k, keyBottom):
		r.scroll = last
	case key.Matches(k, reviewApply):
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

// next is enter's binding: apply, detach, or walk on in a dry run.
func (r reviewModel) next(dryRun bool) key.Binding {
	switch {
	case dryRun:
		return reviewDry
	case r.detach:
		return detachApply
	}
	return reviewApply
}

func (r reviewModel) keys(s *session) []key.Binding {
	next := r.next(s.opts.DryRun)
	if r.detach {
		return r.detachKeys(next)
	}
	if bs := r.fit.keys(s.opts.DryRun); bs != nil {
		return bs // a question: any key answers it
	}
	bs := []key.Binding{reviewScroll}
	if r.fit.blocks() {
		bs = append(bs, fitAck)
	}
	if len(r.fit.warnings) > 0 && r.fit.fixable() {
		bs = append(bs, fitChange)
	}
	return append(bs, next, keyBack)
}

func (reviewModel) title(*session) string { return stepTitles[stepReview] }

// help adds, while the network has warnings, how they are dealt with, and what each kind the
// cluster offers changes here.
func (r reviewModel) help(s *session) string {
	text := helpText[stepReview]
	if len(r.fit.warnings) > 0 {
		text += " " + reviewWarningsHelp
	}
	if s.conn != nil {
		text += kindsHelp(s.offered(), stepReview)
	}
	return text
}

func (reviewModel) grabs(*session) grab { return grabNone }

// update takes the plan of the patch, and what the change of the subnets did.
func (r reviewModel) update(_ *session, msg tea.Msg, _ bool) (reviewModel, tea.Cmd) {
	switch msg := msg.(type) {
	case planMsg:
		return r.withPlan(msg), nil
	case fixedMsg:
		r.fit, r.scroll = r.fit.withFixed(msg), 0 // to the outcome, at the top
	}
	return r, nil
}

// enter computes the patch of what the sets screen chose (or the removal of what d chose); the
// acknowledgement of the network's warnings carries over when they are the same.
func (r reviewModel) enter(s *session) (reviewModel, tea.Cmd) {
	sets := s.screens.sets
	if rows := sets.detaching(); rows != nil {
		return reviewDetach(s, rows)
	}
	chosen := sets.chosen()
	want := s.attachment()
	forKey := attachmentKey(want)
	for _, row := range chosen {
		forKey += "|" + rowID(row)
	}
	sel := workers.Select(chosen)
	network := s.screens.network
	r = reviewModel{loading: true, forKey: forKey, kinds: sets.offer.Choose, chosen: chosen, commands: commandLines(s.conn, want, sel, network.needsForce(want.Networks)),
		fit: newFitnessModel(network.chosen(), r.fit)}
	return r, planCmd(s.ctx, s.backend(), forKey, want, sel)
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
		for _, l := range reviewLines(r.results, r.chosen) {
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

// toned draws a line of a screen in width w, in its tone.
func toned(l screenLine, w int) []string {
	st := map[tone]lipgloss.Style{toneDim: styleDim, toneBad: styleErr, toneWarn: styleWarn, toneGood: styleOK}
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

func (r reviewModel) view(s *session) []string {
	w, h, spin, dryRun := s.width, s.height, s.spin, s.opts.DryRun
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
// (equivalentCommands), and on which cluster they act.
func commandLines(conn *Connection, a attach.Attachment, sel workers.Selection, force bool) []string {
	prefix, cloud := "manila-setup", ""
	if conn != nil {
		for _, f := range conn.Flags {
			prefix += " " + shellQuote(f)
		}
		if conn.Cloud != "" {
			cloud = shellQuote(conn.Cloud)
		}
	}
	var lines []string
	for _, c := range equivalentCommands(prefix, cloud, sel, a, force) {
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
