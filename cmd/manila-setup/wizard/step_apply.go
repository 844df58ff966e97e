package wizard

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/progress"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
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

// applyModel is screen 6: patch, then replace the machines, one bar per MachineSet. NodePools
// are patched only (HyperShift replaces their machines): their progress is read from their
// status while the screen is shown.
type applyModel struct {
	phase   string
	chosen  []workers.Row // the rows chosen on the sets screen
	names   []string      // MachineSets rolled
	want    attach.Attachment
	patched []attach.Result
	// pools are the NodePools chosen, as last read; poolsPatched what their patch did.
	pools          []nodepools.Status
	poolsPatched   []attach.Result
	poolsErr       string // the last progress read failed
	deploymentsErr string // the last read of the MachineDeployments' progress failed
	// capi are the Cluster API objects chosen; capiPatched what their patch did. Their
	// standalone MachineSets are rolled after the Machine API ones, in the same bars.
	capi        []clusterapi.Status
	capiPatched []attach.Result
	order       []string
	sets        map[string]rollout.SetProgress
	started     time.Time
	now         time.Time
	ended       time.Time
	err         string

	confirmStop bool
	stopping    bool
	cancel      context.CancelFunc
	events      <-chan tea.Msg
}

// startApply begins with the patch (or, in a dry run, with nothing at all).
func startApply(ctx context.Context, b Backend, want attach.Attachment, chosen []workers.Row, inv *workers.Inventory, dryRun bool, now time.Time) (applyModel, tea.Cmd) {
	var names []string
	var capi []clusterapi.Status
	var pools []nodepools.Status
	for _, r := range chosen {
		switch r.Section {
		case workers.SectionMachineSets:
			names = append(names, r.Name)
		case workers.SectionClusterAPI:
			if i := slices.IndexFunc(inv.ClusterAPI, func(c clusterapi.Status) bool { return c.Kind == r.Kind && c.Name == r.Name }); i >= 0 {
				capi = append(capi, inv.ClusterAPI[i])
			}
		case workers.SectionNodePools:
			if i := slices.IndexFunc(inv.NodePools, func(p nodepools.Status) bool { return poolKey(p) == r.Key }); i >= 0 {
				pools = append(pools, inv.NodePools[i])
			}
		}
	}
	a := applyModel{chosen: chosen, names: names, want: want, capi: capi, pools: pools, started: now, now: now, sets: map[string]rollout.SetProgress{}}
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
	return a, tea.Batch(func() tea.Msg {
		results, err := b.Patch(ctx, want, workers.Select(chosen), false)
		return patchedMsg{results: results, err: err}
	}, clockTick())
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

// capiSets are the standalone Cluster API MachineSets chosen, which the wizard rolls; their
// names cannot clash with the Machine API ones (a Cluster API MachineSet of a Machine API
// MachineSet's name is its copy, never offered on its own).
func (a applyModel) capiSets() []string {
	var names []string
	for _, c := range a.capi {
		if c.Kind == clusterapi.KindMachineSet {
			names = append(names, c.Name)
		}
	}
	return names
}

func poolKey(p nodepools.Status) string { return p.Namespace + "/" + p.Name }

// capiKey names a Cluster API object as clusterapi.Options.Names and --name take it.
func capiKey(c clusterapi.Status) string { return strings.ToLower(c.Kind) + "/" + c.Name }

func (a applyModel) poolNames() []string {
	names := make([]string, len(a.pools))
	for i, p := range a.pools {
		names[i] = poolKey(p)
	}
	return names
}

// poolsCmd reads the NodePools' progress once.
func poolsCmd(ctx context.Context, b Backend, want attach.Attachment) tea.Cmd {
	return func() tea.Msg {
		inv, err := b.Inventory(ctx, want, workers.Kinds{NodePools: true})
		if err != nil {
			return poolsMsg{err: err}
		}
		return poolsMsg{pools: inv.NodePools}
	}
}

// deploymentsCmd reads the Cluster API objects once, for the progress of the patched
// MachineDeployments.
func deploymentsCmd(ctx context.Context, b Backend, want attach.Attachment) tea.Cmd {
	return func() tea.Msg {
		inv, err := b.Inventory(ctx, want, workers.Kinds{ClusterAPI: true})
		if err != nil {
			return deploymentsMsg{err: err}
		}
		return deploymentsMsg{capi: inv.ClusterAPI}
	}
}

// deploymentsPatched reports whether a MachineDeployment got a new template, whose rollout the
// screen then follows.
func (a applyModel) deploymentsPatched() bool {
	return slices.ContainsFunc(a.capiPatched, func(r attach.Result) bool {
		return r.Kind == clusterapi.KindMachineDeployment && r.Action == attach.ActionPatched
	})
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

// update takes the results of the patch, the rollout and the NodePools' progress; active: the
// screen is shown, so the NodePools are read again.
func (a applyModel) update(msg tea.Msg, ctx context.Context, opts Options, active bool) (applyModel, tea.Cmd) {
	b := opts.Backend
	switch msg := msg.(type) {
	case clockMsg:
		a.now = time.Time(msg)
		if a.running() {
			return a, clockTick()
		}
	case poolsMsg:
		a.poolsErr = ""
		if msg.err != nil {
			a.poolsErr = msg.err.Error()
		}
		for i, p := range a.pools {
			for _, fresh := range msg.pools {
				if poolKey(fresh) == poolKey(p) {
					a.pools[i] = fresh
				}
			}
		}
		return a, tea.Tick(opts.NodePoolPoll, func(time.Time) tea.Msg { return poolsPollMsg{} })
	case poolsPollMsg:
		if active {
			return a, poolsCmd(ctx, b, a.want)
		}
	case deploymentsMsg:
		a.deploymentsErr = ""
		if msg.err != nil {
			a.deploymentsErr = msg.err.Error()
		}
		for i, c := range a.capi {
			for _, fresh := range msg.capi {
				if fresh.Kind == c.Kind && fresh.Name == c.Name {
					a.capi[i] = fresh
				}
			}
		}
		return a, tea.Tick(opts.NodePoolPoll, func(time.Time) tea.Msg { return deploymentsPollMsg{} })
	case deploymentsPollMsg:
		if active {
			return a, deploymentsCmd(ctx, b, a.want)
		}
	case patchedMsg:
		a.patched, a.capiPatched, a.poolsPatched = byKind(msg.results)
		if msg.err != nil {
			a.phase, a.err, a.ended = applyFailed, msg.err.Error(), a.now
			return a, nil
		}
		var follow tea.Cmd
		if len(a.pools) > 0 {
			// The pools are copied so that the reads do not change the chosen ones' slice.
			a.pools = append([]nodepools.Status(nil), a.pools...)
			follow = poolsCmd(ctx, b, a.want)
		}
		if a.deploymentsPatched() {
			// Copied, as the pools are, before the reads replace entries.
			a.capi = append([]clusterapi.Status(nil), a.capi...)
			follow = tea.Batch(follow, deploymentsCmd(ctx, b, a.want))
		}
		if a.stopping {
			a.phase, a.ended = applyStopped, a.now
			return a, follow
		}
		if len(a.order) == 0 {
			// NodePools and MachineDeployments only: HyperShift and Cluster API do the rest.
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
	return strings.Join(workers.Rollouts("manila-setup", workers.Select(a.rolled())), "` and `")
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
		switch {
		case len(a.capi) > 0:
			o.Summary = a.capiSummary()
		case len(a.pools) == 0:
			o.Summary = fmt.Sprintf("Attached network %s to MachineSets %s; their machines were replaced.", strings.Join(a.want.Networks, ", "), strings.Join(a.names, ", "))
		case len(a.names) == 0:
			o.Summary = fmt.Sprintf("Attached network %s to NodePools %s; HyperShift rolls the change out itself: watch `%s`.", strings.Join(a.want.Networks, ", "), strings.Join(a.poolNames(), ", "), a.watchCommand())
		default:
			o.Summary = fmt.Sprintf("Attached network %s to MachineSets %s (their machines were replaced) and to NodePools %s; HyperShift rolls the NodePools out itself: watch `%s`.",
				strings.Join(a.want.Networks, ", "), strings.Join(a.names, ", "), strings.Join(a.poolNames(), ", "), a.watchCommand())
		}
	case applyStopped:
		o.Interrupted, o.Err = true, nil
		o.Summary = "The rollout was stopped: " + a.stoppedSummary() + "."
	case applyFailed:
		o.Applied = len(a.patched) > 0 || len(a.poolsPatched) > 0
		o.Summary = "The attachment did not finish: " + a.err
	}
	return o
}

// capiSummary is the closing sentence when Cluster API objects were chosen: what was attached
// to which kind, and who replaced or replaces its machines.
func (a applyModel) capiSummary() string {
	var parts []string
	if len(a.names) > 0 {
		parts = append(parts, "MachineSets "+strings.Join(a.names, ", ")+" (their machines were replaced)")
	}
	if sets := a.capiSets(); len(sets) > 0 {
		parts = append(parts, "Cluster API MachineSets "+strings.Join(sets, ", ")+" (their Machines were replaced)")
	}
	var deployments []string
	for _, c := range a.capi {
		if c.Kind == clusterapi.KindMachineDeployment {
			deployments = append(deployments, c.Name)
		}
	}
	if len(deployments) > 0 {
		parts = append(parts, "MachineDeployments "+strings.Join(deployments, ", ")+" (Cluster API replaces their Machines itself: watch `oc get machinedeployments -n "+clusterapi.OpenShiftNamespace+"`)")
	}
	if len(a.pools) > 0 {
		parts = append(parts, "NodePools "+strings.Join(a.poolNames(), ", ")+" (HyperShift rolls them out itself: watch `"+a.watchCommand()+"`)")
	}
	return fmt.Sprintf("Attached network %s to %s.", strings.Join(a.want.Networks, ", "), strings.Join(parts, "; "))
}

// capiLines say what the patch did to the chosen MachineDeployments, who replaces their
// Machines and how far that is; the standalone MachineSets have their bars.
func (a applyModel) capiLines(w int) []string {
	var lines []string
	if a.deploymentsErr != "" {
		lines = append(lines, wrapStyled(styleWarn, "the MachineDeployments' progress could not be read: "+a.deploymentsErr, w)...)
	}
	for _, c := range a.capi {
		if c.Kind != clusterapi.KindMachineDeployment {
			continue
		}
		name := "MachineDeployment " + c.Name
		i := slices.IndexFunc(a.capiPatched, func(r attach.Result) bool { return r.Kind == c.Kind && r.Name == c.Name })
		switch {
		case a.phase == applyDry:
			lines = append(lines, wrap(name+": dry run, would get a new template with the port (if it lacks one)", w)...)
		case i < 0:
			lines = append(lines, cut(name+": waiting for the patch", w))
		case a.capiPatched[i].Action == attach.ActionPatched:
			r := a.capiPatched[i]
			lines = append(lines, wrap(fmt.Sprintf("%s: patched, makes its Machines from OpenStackMachineTemplate %s (was %s)", name, r.Template, r.OldTemplate), w)...)
			lines = append(lines, wrapStyled(styleDim, "  Cluster API replaces its Machines itself (its rolling update); watch: oc get machinedeployment -n "+clusterapi.OpenShiftNamespace+" "+c.Name, w)...)
			if c.Template == r.Template {
				// Read since the patch: how far the rolling update is.
				lines = append(lines, wrap(fmt.Sprintf("  now: %d of %d Machines made from %s", c.OnTemplate, c.Replicas, r.Template), w)...)
			}
		default:
			r := a.capiPatched[i]
			lines = append(lines, wrap(name+": "+r.Action+", "+r.Reason, w)...)
		}
	}
	return lines
}

// watchCommand follows the chosen NodePools: those of one namespace, or all.
func (a applyModel) watchCommand() string {
	ns := ""
	for _, p := range a.pools {
		if ns != "" && p.Namespace != ns {
			return "oc get nodepools -A"
		}
		ns = p.Namespace
	}
	if len(a.pools) == 1 {
		return "oc get nodepool -n " + ns + " " + a.pools[0].Name
	}
	return "oc get nodepools -n " + ns
}

func (a applyModel) key(k string) (applyModel, tea.Cmd) {
	if a.running() {
		switch {
		case a.confirmStop && (k == "y" || k == "Y"):
			a.confirmStop, a.stopping = false, true
			cancel := a.cancel
			if cancel == nil {
				return a, nil // still patching: the rollout is never started once stopping is set
			}
			return a, func() tea.Msg { cancel(); return nil }
		case a.confirmStop && (k == "n" || k == "N" || k == "esc"):
			a.confirmStop = false
		case k == "ctrl+c" || k == "q":
			a.confirmStop = !a.stopping
		}
		return a, nil
	}
	switch k {
	case "enter":
		if a.phase == applyDone || a.phase == applyDry {
			return a, nav(1)
		}
	}
	return a, nil
}

func (a applyModel) hints() []hint {
	switch {
	case a.confirmStop:
		return []hint{{"y", "stop"}, {"n", "keep going"}}
	case a.running():
		return []hint{{"ctrl+c", "stop"}}
	case a.phase == applyDone, a.phase == applyDry:
		return []hint{{"enter", "verify"}}
	}
	return nil
}

func (a applyModel) view(w, h int, spin string) []string {
	elapsed := a.now.Sub(a.started)
	if !a.running() && !a.ended.IsZero() {
		elapsed = a.ended.Sub(a.started)
	}
	var lines []string
	switch a.phase {
	case applyPatching:
		patching := slices.Clone(a.names)
		for _, c := range a.capi {
			patching = append(patching, capiKey(c))
		}
		lines = append(lines, spin+" patching "+strings.Join(append(patching, a.poolNames()...), ", ")+"…")
	case applyRolling:
		if a.stopping {
			lines = append(lines, spin+" stopping after the current step…")
		} else {
			lines = append(lines, spin+" replacing machines, one at a time, without losing capacity")
		}
	case applyDone:
		switch {
		case len(a.capi) > 0:
			lines = append(lines, wrapStyled(styleOK, "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", w)...)
		case len(a.pools) == 0:
			lines = append(lines, styleOK.Render("✓ every chosen MachineSet was patched and its machines replaced"))
		case len(a.names) == 0:
			lines = append(lines, wrapStyled(styleOK, "✓ every chosen NodePool has its port on the storage network; HyperShift rolls the change out itself (below)", w)...)
		default:
			lines = append(lines, wrapStyled(styleOK, "✓ every chosen MachineSet was patched and its machines replaced; every chosen NodePool has its port, HyperShift rolls it out itself (below)", w)...)
		}
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
	pools := append(a.capiLines(w), a.poolLines(w, false)...)
	if len(a.order) > 0 && len(pools) > budget/2 {
		pools = append(a.capiLines(w), a.poolLines(w, true)...) // the MachineSets' bars keep their room
	}
	if len(a.order) == 0 {
		return append(append(lines, pools...), confirm...)
	}
	if len(pools) > 0 {
		pools = append([]string{""}, pools...) // apart from the MachineSets
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

// poolLines say, per chosen NodePool, what its patch did and what HyperShift is doing about it
// (read from its status), with the command that follows it; compact: one line each, and the
// command once.
func (a applyModel) poolLines(w int, compact bool) []string {
	var lines []string
	for _, p := range a.pools {
		key := poolKey(p)
		res, patched := a.poolResult(key)
		switch {
		case a.phase == applyDry:
			lines = append(lines, wrap("NodePool "+key+": dry run, would get its port (if it lacks one)", w)...)
			continue
		case a.phase == applyPatching, !patched:
			lines = append(lines, cut("NodePool "+key+": waiting for the patch", w))
			continue
		case compact:
			lines = append(lines, cut("NodePool "+key+": "+res.Action+" · "+poolProgress(p), w))
			continue
		}
		head := "NodePool " + key + ": " + res.Action + ", " + res.Reason
		if res.Action == attach.ActionPatched {
			head = "NodePool " + key + ": patched, adds a port on network " + strings.Join(res.AddedNetworks, ", ")
			lines = append(lines, wrap(head, w)...)
			lines = append(lines, wrapStyled(styleDim, "  "+rollsHow(p), w)...)
		} else {
			lines = append(lines, wrap(head, w)...)
		}
		lines = append(lines, wrapStyled(styleDim, "  now: "+poolProgress(p), w)...)
		lines = append(lines, styleDim.Render(cut("  watch: oc get nodepool -n "+p.Namespace+" "+p.Name, w)))
	}
	if compact && len(a.poolsPatched) > 0 {
		lines = append(lines, styleDim.Render(cut("  HyperShift rolls them out itself; watch: "+a.watchCommand(), w)))
	}
	if a.poolsErr != "" && len(a.pools) > 0 {
		lines = append(lines, wrapStyled(styleWarn, "  reading the NodePools' progress failed: "+a.poolsErr, w)...)
	}
	return lines
}

// poolResult is what the patch did to one NodePool, if it was patched yet.
func (a applyModel) poolResult(key string) (attach.Result, bool) {
	for _, r := range a.poolsPatched {
		if r.Namespace+"/"+r.Name == key {
			return r, true
		}
	}
	return attach.Result{}, false
}

// rollsHow says what HyperShift does with a platform change of p, as its upgradeType says
// (HyperShift's NodePool lifecycle: InPlace NodePools apply platform changes to new nodes only).
func rollsHow(p nodepools.Status) string {
	switch p.UpgradeType {
	case "InPlace":
		return "upgradeType InPlace: only machines created from now on get the port, the running ones keep theirs until they are replaced"
	case "Replace":
		return "HyperShift replaces its machines (upgradeType Replace)"
	}
	return "HyperShift rolls the change out as its upgradeType says"
}

// poolProgress is a NodePool's state as its status tells it: its nodes, and what it is updating
// or why it is not ready.
func poolProgress(p nodepools.Status) string {
	text := fmt.Sprintf("%d of %d nodes", p.CurrentNodes, p.Replicas)
	for _, c := range p.Conditions {
		if c.Status == "True" && c.Type != "Ready" && strings.HasPrefix(c.Type, "Updating") {
			return text + " · " + c.Type + ": " + coalesceName(c.Message, c.Reason)
		}
	}
	for _, c := range p.Conditions {
		if c.Type != "Ready" {
			continue
		}
		if c.Status == "True" {
			return text + " · Ready"
		}
		return text + " · not Ready: " + coalesceName(c.Message, c.Reason)
	}
	return text + " · HyperShift has not reported its state yet"
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
	for _, r := range a.patched {
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
	for _, r := range a.patched {
		if r.Action == attach.ActionPatched && describeAdded(r) != describeAdded(first) {
			same = false
		}
	}
	if same {
		return wrapStyled(styleDim, fmt.Sprintf("patched %d MachineSets (%s): %s", len(names), strings.Join(names, ", "), describeAdded(first)), w)
	}
	var lines []string
	for _, r := range a.patched {
		if r.Action == attach.ActionPatched {
			lines = append(lines, wrapStyled(styleDim, "patched "+r.Name+": "+describeAdded(r), w)...)
		}
	}
	return lines
}

// byKind splits the rows of a patch as the screens show them: the Machine API MachineSets
// (with their Cluster API copies), the Cluster API objects, the NodePools.
func byKind(results []attach.Result) (sets, capi, pools []attach.Result) {
	for _, r := range results {
		switch {
		case r.Kind == "NodePool":
			pools = append(pools, r)
		case r.Namespace == machinesets.Namespace:
			sets = append(sets, r)
		default:
			capi = append(capi, r)
		}
	}
	return sets, capi, pools
}

func describeAdded(r attach.Result) string {
	return "adds " + strings.Join(r.Added(), ", ")
}
