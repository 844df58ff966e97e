package wizard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/workers"
)

// Phases of the apply screen.
const (
	applyPatching = "patching"
	applyRolling  = "rolling"
	applyDone     = "done"
	applyFailed   = "failed"
	applyStopped  = "stopped"
	applyDry      = "dry run"
)

// applyModel is screen 6: patch, then replace the machines, one bar per set the wizard rolls.
// The rows that roll by themselves (their own controller replaces the machines) are patched
// only: their progress is read from the inventory while the screen is shown.
type applyModel struct {
	phase   string
	chosen  []workers.Row // the rows chosen on the sets screen
	want    attach.Attachment
	results []attach.Result // what the patch did, one per object
	// itself are the chosen rows that roll by themselves, as last read; follow the sections
	// whose progress is read again, followErr what the last read of each said when it failed.
	itself    []workers.Row
	follow    []string
	followErr map[string]string
	order     []string
	sets      map[string]rollout.SetProgress
	started   time.Time
	now       time.Time
	ended     time.Time
	err       string

	// detach: the patch is a removal (startDetach).
	detach bool

	confirmStop bool
	stopping    bool
	cancel      context.CancelFunc
	events      <-chan tea.Msg
}

// startApply begins with the patch (or, in a dry run, with nothing at all).
func startApply(ctx context.Context, b Backend, want attach.Attachment, chosen []workers.Row, dryRun bool, now time.Time) (applyModel, tea.Cmd) {
	return startWith(want, chosen, dryRun, now, func() tea.Msg {
		report, err := b.Apply(ctx, attachRequest(want, workers.Select(chosen), false))
		return patchedOf(report, err)
	})
}

// patchedOf is the message of an Apply's answer.
func patchedOf(report *workers.Report, err error) patchedMsg {
	if report == nil {
		return patchedMsg{err: err}
	}
	return patchedMsg{results: report.Results, err: err}
}

// startWith begins with patch, a command that answers patchedMsg (in a dry run, with nothing).
func startWith(want attach.Attachment, chosen []workers.Row, dryRun bool, now time.Time, patch tea.Cmd) (applyModel, tea.Cmd) {
	a := applyModel{chosen: chosen, want: want, started: now, now: now, sets: map[string]rollout.SetProgress{}, followErr: map[string]string{}}
	for _, r := range chosen {
		if r.Rolls == workers.ByItself {
			a.itself = append(a.itself, r)
		}
	}
	for _, r := range a.rolled() {
		a.order = append(a.order, r.Name)
		a.sets[r.Name] = rollout.SetProgress{Name: r.Name, State: rollout.Pending, Phase: "waiting for the patch"}
	}
	if dryRun {
		a.phase, a.ended = applyDry, now
		for _, n := range a.order {
			a.sets[n] = rollout.SetProgress{Name: n, State: "dry run", Phase: "would be patched (if it lacks something) and rolled"}
		}
		return a, nil
	}
	a.phase = applyPatching
	return a, tea.Batch(patch, clockTick())
}

// rolled are the rows chosen whose machines the wizard replaces, in the order it does; their
// names cannot clash (a Cluster API MachineSet of a Machine API MachineSet's name is its copy,
// never offered on its own).
func (a applyModel) rolled() []workers.Row {
	var rows []workers.Row
	for _, r := range a.chosen {
		if r.Rolls == workers.ByRollout {
			rows = append(rows, r)
		}
	}
	return rows
}

// followCmd reads the rows of the sections followed once, each section on its own: a section
// whose read fails keeps its rows as they were, and says why.
func followCmd(ctx context.Context, b Backend, want attach.Attachment, sections []string) tea.Cmd {
	return func() tea.Msg {
		msg := followMsg{errs: map[string]string{}}
		for _, sec := range sections {
			inv, err := b.Inventory(ctx, want, workers.Reads(sec))
			switch {
			case err != nil:
				msg.errs[sec] = err.Error()
			case inv != nil:
				msg.rows = append(msg.rows, inv.Rows()...)
			}
		}
		return msg
	}
}

func clockTick() tea.Cmd {
	return tea.Tick(time.Second, func(t time.Time) tea.Msg { return clockMsg(t) })
}

// rolloutCmd runs the rollout of sel in the background; its progress comes back through events.
func rolloutCmd(ctx context.Context, b Backend, sel workers.Selection) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithCancel(ctx)
		events := make(chan tea.Msg, 1024)
		go func() {
			defer close(events)
			progress := func(p rollout.SetProgress) {
				select {
				case events <- progressMsg{p: p}:
				default: // the screen is behind; the next update carries the state anyway
				}
			}
			results, err := b.Roll(ctx, sel, progress)
			events <- rolloutDoneMsg{results, err}
		}()
		return rolloutStartedMsg{events: events, cancel: cancel}
	}
}

func waitEvent(events <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-events
		if !ok {
			return nil
		}
		switch m := msg.(type) {
		case progressMsg:
			m.events = events
			return m
		case rwxLineMsg:
			m.events = events
			return m
		}
		return msg
	}
}

func (a applyModel) running() bool { return a.phase == applyPatching || a.phase == applyRolling }

// update takes the results of the patch, the rollout and the progress of the rows that roll by
// themselves; active: the screen is shown, so those rows are read again.
func (a applyModel) update(s *session, msg tea.Msg, active bool) (applyModel, tea.Cmd) {
	ctx, opts, b := s.ctx, s.opts, s.backend()
	switch msg := msg.(type) {
	case clockMsg:
		a.now = time.Time(msg)
		if a.running() {
			return a, clockTick()
		}
	case followMsg:
		// Copied so that the reads do not change an earlier model's slice.
		a.itself = slices.Clone(a.itself)
		a.followErr = map[string]string{}
		for _, sec := range a.follow {
			if err, ok := msg.errs[sec]; ok {
				a.followErr[sec] = err
				continue
			}
			for i, r := range a.itself {
				if r.Section != sec {
					continue
				}
				if j := slices.IndexFunc(msg.rows, func(f workers.Row) bool { return f.Section == r.Section && f.Key == r.Key }); j >= 0 {
					a.itself[i] = msg.rows[j]
				}
			}
		}
		return a, tea.Tick(opts.NodePoolPoll, func(time.Time) tea.Msg { return followPollMsg{} })
	case followPollMsg:
		if active && len(a.follow) > 0 {
			return a, followCmd(ctx, b, a.want, a.follow)
		}
	case patchedMsg:
		a.results = msg.results
		if msg.err != nil {
			a.phase, a.err, a.ended = applyFailed, msg.err.Error(), a.now
			return a, nil
		}
		var followed []workers.Row
		for _, r := range a.itself {
			if workers.Follows(r, a.results) {
				followed = append(followed, r)
			}
		}
		a.follow = workers.Sections(followed)
		var follow tea.Cmd
		if len(a.follow) > 0 {
			follow = followCmd(ctx, b, a.want, a.follow)
		}
		if a.stopping {
			a.phase, a.ended = applyStopped, a.now
			return a, follow
		}
		if len(a.order) == 0 {
			// Rows that roll by themselves only: their controllers do the rest.
			a.phase, a.ended = applyDone, a.now
			return a, follow
		}
		for _, n := range a.order {
			a.sets[n] = rollout.SetProgress{Name: n, State: rollout.Pending, Phase: "waiting for its turn"}
		}
		a.phase = applyRolling
		return a, tea.Batch(rolloutCmd(ctx, b, workers.Select(a.rolled())), follow)
	case rolloutStartedMsg:
		a.cancel, a.events = msg.cancel, msg.events
		return a, waitEvent(msg.events)
	case progressMsg:
		if _, ok := a.sets[msg.p.Name]; !ok {
			a.order = append(a.order, msg.p.Name)
		}
		a.sets[msg.p.Name] = msg.p
		return a, waitEvent(msg.events)
	case rolloutDoneMsg:
		for _, p := range msg.results {
			if _, ok := a.sets[p.Name]; ok {
				a.sets[p.Name] = p
			}
		}
		a.ended, a.confirmStop = a.now, false
		switch {
		case msg.err == nil:
			a.phase = applyDone
		case errors.Is(msg.err, context.Canceled):
			a.phase = applyStopped
		default:
			a.phase, a.err = applyFailed, msg.err.Error()
		}
	}
	return a, nil
}

// resumeCommand is the command that resumes the rollout of the chosen sets.
func (a applyModel) resumeCommand() string {
	return strings.Join(rolloutCommands("manila-setup", workers.Select(a.rolled())), "` and `")
}

// stoppedSummary says how far the stopped rollout got and how to resume it.
func (a applyModel) stoppedSummary() string {
	replaced, total := 0, 0
	for _, n := range a.order {
		if p, ok := a.sets[n]; ok && p.State != rollout.Skipped {
			replaced += p.Replaced
			total += p.Total
		}
	}
	if total == 0 {
		return "nothing was replaced (MachineSets patched: their new machines get the network). Run `" + a.resumeCommand() + "` (or the wizard) to replace the machines"
	}
	return fmt.Sprintf("%d of %d machines replaced; the ones already replaced stay. Run `%s` (or the wizard) to resume where it stopped", replaced, total, a.resumeCommand())
}

// outcome is how the screen ended; zero while it has not.
func (a applyModel) outcome() Outcome {
	o := Outcome{Applied: true}
	if a.err != "" {
		o.Err = errors.New(a.err)
	}
	switch a.phase {
	case applyPatching, applyRolling, applyDry, "":
		return Outcome{}
	case applyDone:
		o.Summary = summaryOf(a.want.Networks, a.chosen)
		if a.detach {
			o.Summary = a.detachSummary()
		}
	case applyStopped:
		o.Interrupted, o.Err = true, nil
		o.Summary = "The rollout was stopped: " + a.stoppedSummary() + "."
	case applyFailed:
		o.Applied = len(a.results) > 0
		o.Summary = "The attachment did not finish: " + a.err
		if a.detach {
			o.Summary = "The detach did not finish: " + a.err
		}
	}
	return o
}

// itselfLines say, section by section, what the patch did to the chosen rows that roll by
// themselves and how far their rollout is; compact: as short as each kind can.
func (a applyModel) itselfLines(w int, compact bool) []string {
	var lines []string
	for _, sec := range workers.Sections(a.itself) {
		f := followedSection{Section: sec, Results: a.results, Dry: a.phase == applyDry, Compact: compact, Err: a.followErr[sec]}
		for _, r := range a.itself {
			if r.Section == sec {
				f.Rows = append(f.Rows, r)
			}
		}
		for _, l := range progressLines(f) {
			lines = append(lines, drawn(l, w)...)
		}
	}
	return lines
}

// drawn is a line of a screen in width w, in its tone; a Cut line is cut here.
func drawn(l screenLine, w int) []string {
	if l.Cut {
		l.Text = cut(l.Text, w)
	}
	return toned(l, w)
}

// The apply screen's keys.
var (
	applyStop     = bind("ctrl+c or q", "stop", "ctrl+c", "q")
	applyStopYes  = bind("y", "stop", keyYes.Keys()...)
	applyStopNo   = bind("n", "keep going", "n", "N", "esc")
	applyToVerify = bind("enter", "verify", "enter")
)

func (a applyModel) key(_ *session, k tea.KeyMsg) (applyModel, tea.Cmd) {
	if a.running() {
		switch {
		case a.confirmStop && key.Matches(k, applyStopYes):
			a.confirmStop, a.stopping = false, true
			cancel := a.cancel
			if cancel == nil {
				return a, nil // still patching: the rollout is never started once stopping is set
			}
			return a, func() tea.Msg { cancel(); return nil }
		case a.confirmStop && key.Matches(k, applyStopNo):
			a.confirmStop = false
		case key.Matches(k, applyStop):
			a.confirmStop = !a.stopping
		}
		return a, nil
	}
	if key.Matches(k, applyToVerify) && (a.phase == applyDone || a.phase == applyDry) {
		return a, nav(1)
	}
	return a, nil
}

func (a applyModel) keys(*session) []key.Binding {
	switch {
	case a.confirmStop:
		return []key.Binding{applyStopYes, applyStopNo}
	case a.running():
		return []key.Binding{applyStop}
	case a.phase == applyDone, a.phase == applyDry:
		return []key.Binding{applyToVerify}
	}
	return nil
}

func (applyModel) title(*session) string { return stepTitles[stepApply] }

// help adds what each kind the cluster offers changes here.
func (applyModel) help(s *session) string {
	if s.conn == nil {
		return helpText[stepApply]
	}
	return helpText[stepApply] + kindsHelp(s.offered(), stepApply)
}

// grabs: while machines are replaced, q and ctrl+c ask whether to stop, and the question takes
// every key.
func (a applyModel) grabs(*session) grab {
	switch {
	case a.running() && a.confirmStop:
		return grabAll
	case a.running():
		return grabQuit
	}
	return grabNone
}

// enter patches what the review showed, then rolls it (or, for d on the sets screen, removes
// it).
func (applyModel) enter(s *session) (applyModel, tea.Cmd) {
	if s.screens.review.detach {
		return startDetach(s.ctx, s.backend(), s.screens.sets.detaching(), s.screens.review.forced, s.opts.DryRun, s.opts.Now())
	}
	return startApply(s.ctx, s.backend(), s.attachment(), s.screens.sets.chosen(), s.opts.DryRun, s.opts.Now())
}

func (a applyModel) view(s *session) []string {
	w, h, spin := s.width, s.height, s.spin
	elapsed := a.now.Sub(a.started)
	if !a.running() && !a.ended.IsZero() {
		elapsed = a.ended.Sub(a.started)
	}
	var lines []string
	switch a.phase {
	case applyPatching:
		var patching []string
		for _, r := range a.chosen {
			patching = append(patching, r.Key)
		}
		lines = append(lines, spin+" patching "+strings.Join(patching, ", ")+"…")
	case applyRolling:
		if a.stopping {
			lines = append(lines, spin+" stopping after the current step…")
		} else {
			lines = append(lines, spin+" replacing machines, one at a time, without losing capacity")
		}
	case applyDone:
		lines = append(lines, toned(doneLine(a.chosen), w)...)
	case applyDry:
		lines = append(lines, styleWarn.Render("Dry run: nothing was patched and no machine was replaced."))
	case applyStopped:
		lines = append(lines, wrapStyled(styleWarn, "Stopped: "+a.stoppedSummary()+".", w)...)
	case applyFailed:
		lines = append(lines, wrapStyled(styleErr, "✗ "+a.err, w)...)
	}
	lines = append(lines, styleDim.Render(fmt.Sprintf("elapsed %s", elapsed.Truncate(time.Second))), "")

	// The stop question must always be on screen; the sets get what height is left.
	var confirm []string
	if a.confirmStop {
		confirm = append([]string{""}, wrapStyled(styleWarn, "Stop the rollout? The machine being replaced finishes its step; machines already replaced stay. Running the wizard or `manila-setup machinesets rollout` again resumes. y: stop, n: keep going", w)...)
	}
	patched := a.patchedLines(w)
	budget := h - len(lines) - len(confirm)
	pools := a.itselfLines(w, false)
	if len(a.order) > 0 && len(pools) > budget/2 {
		pools = a.itselfLines(w, true) // the bars keep their room
	}
	if len(a.order) == 0 {
		return append(append(lines, pools...), confirm...)
	}
	if len(pools) > 0 {
		pools = append([]string{""}, pools...) // apart from the bars
	}
	sets := a.setLines(w, budget-len(patched)-len(pools))
	if len(sets)+len(patched)+len(pools) > budget {
		patched = nil
	}
	lines = append(lines, sets...)
	lines = append(lines, patched...)
	lines = append(lines, pools...)
	return append(lines, confirm...)
}

// setLines draws a progress bar per MachineSet, with its current phase under it. When they do
// not fit in height, finished and pending sets lose their phase line, then only the sets being
// rolled (or failed) are drawn and the others are counted on one line.
func (a applyModel) setLines(w, height int) []string {
	nameW := 10
	for _, n := range a.order {
		nameW = max(nameW, min(len(n), 34))
	}
	barW := max(min(w-nameW-22, 40), 10)
	bar := progress.New(progress.WithWidth(barW), progress.WithoutPercentage(), progress.WithSolidFill("#5fafff"))
	active := func(p rollout.SetProgress) bool {
		return p.State == rollout.Running || p.State == rollout.Failed
	}
	draw := func(n string, withPhase bool) []string {
		p := a.sets[n]
		if a.phase == applyStopped && (p.State == rollout.Running || p.State == rollout.Pending) {
			// The rollout no longer runs: say where it stopped, not what it was waiting for.
			if p.State == rollout.Pending {
				p.Phase = "not started"
			} else {
				p.Phase = fmt.Sprintf("stopped after %d of %d replaced", p.Replaced, p.Total)
			}
			p.State = "stopped"
		}
		frac := 0.0
		if p.Total > 0 {
			frac = float64(p.Replaced) / float64(p.Total)
		}
		if p.State == rollout.Done || p.State == rollout.UpToDate {
			frac = 1
		}
		counts := fmt.Sprintf("%d/%d", p.Replaced, p.Total)
		out := []string{cut(fmt.Sprintf("%-*s %s %-7s %s", nameW, cut(n, nameW), bar.ViewAs(frac), counts, p.State), w)}
		if withPhase && p.Phase != "" {
			st := styleDim
			if p.State == rollout.Failed {
				st = styleErr
			}
			out = append(out, st.Render(cut("  "+p.Phase, w)))
		}
		return out
	}
	for _, compact := range []bool{false, true} {
		var lines []string
		for _, n := range a.order {
			lines = append(lines, draw(n, !compact || active(a.sets[n]))...)
		}
		if len(lines) <= height {
			return lines
		}
	}
	var lines []string
	done, pending := 0, 0
	for _, n := range a.order {
		p := a.sets[n]
		switch {
		case active(p):
			lines = append(lines, draw(n, true)...)
		case p.State == rollout.Done || p.State == rollout.UpToDate:
			done++
		default:
			pending++
		}
	}
	return append(lines, styleDim.Render(cut(fmt.Sprintf("… and %d more MachineSets: %d finished, %d waiting", done+pending, done, pending), w)))
}

// patchedLines says what was patched: one line for all when every MachineSet got the same
// change, else one per MachineSet.
func (a applyModel) patchedLines(w int) []string {
	var names []string
	var first attach.Result
	var patched []attach.Result
	for _, r := range a.results {
		if workers.UnderBars(r) {
			patched = append(patched, r)
		}
	}
	for _, r := range patched {
		if r.Action == attach.ActionPatched {
			if len(names) == 0 {
				first = r
			}
			names = append(names, r.Name)
		}
	}
	switch len(names) {
	case 0:
		return nil
	case 1:
		return wrapStyled(styleDim, "patched "+names[0]+": "+describeAdded(first), w)
	}
	same := true
	for _, r := range patched {
		if r.Action == attach.ActionPatched && describeAdded(r) != describeAdded(first) {
			same = false
		}
	}
	if same {
		return wrapStyled(styleDim, fmt.Sprintf("patched %d MachineSets (%s): %s", len(names), strings.Join(names, ", "), describeAdded(first)), w)
	}
	var lines []string
	for _, r := range patched {
		if r.Action == attach.ActionPatched {
			lines = append(lines, wrapStyled(styleDim, "patched "+r.Name+": "+describeAdded(r), w)...)
		}
	}
	return lines
}
