package wizard

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/operator/health"
	"github.com/manila-setup/manila-setup/workers"
)

// verifyModel is screen 7: the driver's state, and the multi-writer check. The driver of a
// hosted cluster runs in that cluster, not on the management cluster the wizard is connected
// to: for NodePools the screen says how to check it there.
type verifyModel struct {
	fixedWords
	dryRun bool
	// checksDriver: MachineSets of this cluster were chosen (or nothing else), so its own
	// driver is read; hosted are the HostedClusters of the NodePools chosen.
	checksDriver bool
	hosted       []hostedCluster
	loaded       bool
	err          string
	status       StorageStatus
	class        int // the StorageClass the check uses
	running      bool
	cancel       context.CancelFunc // ends the running check early; it still cleans up
	quitting     bool               // quit once the running check has cleaned up
	log          []string
	result       *RWXResult
}

// hostedCluster is a HostedCluster by namespace and name (a NodePool's spec.clusterName, in
// the NodePool's namespace).
type hostedCluster struct{ namespace, name string }

// newVerifyModel checks this cluster's driver when some of chosen make its own machines (or
// nothing else does), and says how to check the others' clusters (their HostedClusters, each
// once, in order).
func newVerifyModel(dryRun bool, chosen []workers.Row) verifyModel {
	v := verifyModel{fixedWords: fixedWords(stepVerify), dryRun: dryRun}
	own := false
	for _, r := range chosen {
		if r.Joins == "" {
			own = true
			continue
		}
		hc := hostedCluster{r.Namespace, r.Joins}
		if !slices.Contains(v.hosted, hc) {
			v.hosted = append(v.hosted, hc)
		}
	}
	v.checksDriver = own || len(v.hosted) == 0
	return v
}

func storageCmd(ctx context.Context, b Backend) tea.Cmd {
	return func() tea.Msg {
		s, err := b.Storage(ctx)
		return storageMsg{s, err}
	}
}

func rwxCmd(ctx context.Context, b Backend, class string) tea.Cmd {
	return func() tea.Msg {
		ctx, cancel := context.WithCancel(ctx)
		events := make(chan tea.Msg, 256)
		go func() {
			defer cancel()
			defer close(events)
			r := b.CheckRWX(ctx, class, func(line string) {
				select {
				case events <- rwxLineMsg{line: line}:
				default:
				}
			})
			events <- rwxDoneMsg{r}
		}()
		return rwxStartedMsg{events, cancel}
	}
}

func (v verifyModel) update(s *session, msg tea.Msg, active bool) (verifyModel, tea.Cmd) {
	ctx, opts := s.ctx, s.opts
	switch msg := msg.(type) {
	case storageMsg:
		v.loaded = true
		v.err = ""
		if msg.err != nil {
			v.err = msg.err.Error()
		} else {
			v.status = msg.s
			v.class = clamp(v.class, len(v.status.StorageClasses))
		}
		// Conditions change while the driver rolls out: read them again a little later.
		return v, tea.Tick(opts.StoragePoll, func(time.Time) tea.Msg { return storagePollMsg{} })
	case storagePollMsg:
		if active {
			return v, storageCmd(ctx, opts.Backend)
		}
	case rwxStartedMsg:
		v.cancel = msg.cancel
		return v, waitEvent(msg.events)
	case rwxLineMsg:
		v.log = append(v.log, msg.line)
		return v, waitEvent(msg.events)
	case rwxDoneMsg:
		v.running, v.cancel = false, nil
		r := msg.r
		v.result = &r
		if v.quitting {
			return v, quit
		}
	}
	return v, nil
}

// The verify screen's keys.
var (
	verifyStop     = bind("q", "stop the check (it cleans up), then quit", "q", "ctrl+c")
	verifyStopping = told("", "stopping the check and deleting what it created…")
	verifyClass    = either("↑/↓", "storage class", keyUp, keyDown)
	verifyCheck    = bind("t", "multi-writer check", "t")
	verifyFinish   = bind("enter", "finish", "enter")
)

func (v verifyModel) key(s *session, k tea.KeyMsg) (verifyModel, tea.Cmd) {
	if v.running {
		if key.Matches(k, verifyStop) && !v.quitting {
			// Stop the check, let it delete what it created, then quit.
			v.quitting = true
			if cancel := v.cancel; cancel != nil {
				return v, func() tea.Msg { cancel(); return nil }
			}
		}
		return v, nil
	}
	switch {
	case key.Matches(k, keyUp):
		v.class = clamp(v.class-1, len(v.status.StorageClasses))
	case key.Matches(k, keyDown):
		v.class = clamp(v.class+1, len(v.status.StorageClasses))
	case key.Matches(k, verifyCheck):
		if v.dryRun || len(v.status.StorageClasses) == 0 {
			return v, nil
		}
		v.running, v.log, v.result = true, nil, nil
		return v, rwxCmd(s.ctx, s.backend(), v.status.StorageClasses[v.class])
	case key.Matches(k, verifyFinish):
		return v, quit // finishing is quitting
	}
	return v, nil
}

func (v verifyModel) keys(*session) []key.Binding {
	if v.running {
		if v.quitting {
			return []key.Binding{verifyStopping}
		}
		return []key.Binding{verifyStop}
	}
	bs := []key.Binding{}
	if !v.checksDriver {
		return append(bs, verifyFinish)
	}
	if len(v.status.StorageClasses) > 1 {
		bs = append(bs, verifyClass)
	}
	if !v.dryRun && len(v.status.StorageClasses) > 0 {
		bs = append(bs, verifyCheck)
	}
	return append(bs, verifyFinish)
}

// grabs: a running check takes every key; q and ctrl+c stop it, and it cleans up before the
// wizard quits.
func (v verifyModel) grabs(*session) grab {
	if v.running {
		return grabAll
	}
	return grabNone
}

// enter reads the driver's state, where it runs on this cluster.
func (verifyModel) enter(s *session) (verifyModel, tea.Cmd) {
	v := newVerifyModel(s.opts.DryRun, s.screens.apply.chosen)
	if !v.checksDriver {
		return v, nil // the driver of a hosted cluster is not on this cluster: nothing to read here
	}
	return v, storageCmd(s.ctx, s.backend())
}

func (v verifyModel) view(s *session) []string {
	w, h, spin := s.width, s.height, s.spin
	if !v.checksDriver {
		return v.hostedLines(w)
	}
	if !v.loaded {
		return []string{spin + " reading the ClusterCSIDriver manila.csi.openstack.org and the StorageClasses…"}
	}
	lines := v.driverLines(w, h, spin)
	if len(v.hosted) > 0 {
		lines = append(append(lines, ""), v.hostedLines(w)...)
	}
	return lines
}

// hostedLines say where the driver of the NodePools' hosted clusters is checked, with the
// commands, one hosted cluster after the other.
func (v verifyModel) hostedLines(w int) []string {
	lines := []string{styleTitle.Render("Hosted clusters")}
	lines = append(lines, wrap("The Manila CSI driver of a hosted cluster runs in that cluster, not on this management cluster, so it is not read here. Once HyperShift has replaced the NodePools' machines, check it from each hosted cluster:", w)...)
	for _, hc := range v.hosted {
		file := hc.name + ".kubeconfig"
		lines = append(lines,
			cut(fmt.Sprintf("  hcp create kubeconfig --namespace %s --name %s > %s", shellQuote(hc.namespace), shellQuote(hc.name), shellQuote(file)), w),
			cut("  manila-setup --kubeconfig "+shellQuote(file)+" operator status", w))
	}
	return lines
}

func (v verifyModel) driverLines(w, h int, spin string) []string {
	var lines []string
	if v.err != "" {
		lines = append(lines, wrapStyled(styleErr, "✗ "+v.err, w)...)
	}
	lines = append(lines, styleTitle.Render("ClusterCSIDriver manila.csi.openstack.org"))
	switch {
	case !v.status.Driver:
		lines = append(lines, wrapStyled(styleWarn, "  not found: the Manila CSI driver operator is not installed. Install it (docs/operator.md), then come back; the network attachment itself is done.", w)...)
	case len(v.status.Conditions) == 0:
		lines = append(lines, "  "+spin+" no conditions yet: the operator has not reported")
	}
	lines = append(lines, v.conditionLines(w, spin)...)
	lines = append(lines, "", styleTitle.Render("StorageClasses"))
	if len(v.status.StorageClasses) == 0 {
		lines = append(lines, styleDim.Render("  none yet: the operator creates csi-manila-<share type> once the driver is available"))
	}
	for i, sc := range v.status.StorageClasses {
		lines = append(lines, cut(pointer(i == v.class && len(v.status.StorageClasses) > 1)+sc, w))
	}
	lines = append(lines, "")
	switch {
	case v.dryRun:
		lines = append(lines, styleDim.Render("Dry run: the multi-writer check creates a volume and pods, so it is not offered."))
	case v.running:
		lines = append(lines, spin+" multi-writer check on "+v.status.StorageClasses[v.class]+":")
		for _, l := range lastN(v.log, max(h-len(lines)-1, 2)) {
			lines = append(lines, styleDim.Render(cut("  "+l, w)))
		}
	case v.result != nil:
		lines = append(lines, v.resultLines(w)...)
	case len(v.status.StorageClasses) > 0:
		lines = append(lines, wrap("Press t for the multi-writer check: a ReadWriteMany PVC with two writer pods on different nodes, both writing to and reading the same file; everything is deleted afterwards.", w)...)
	}
	if v.status.Driver {
		lines = append(lines, wrapStyled(styleDim, "A pod that does not mount its volume later: manila-setup diagnose pod/NAME -n NAMESPACE", w)...)
	}
	return lines
}

// conditionLines shows what needs attention: the conditions that are not as they should be (not
// Available, Degraded, Progressing) and the informative ones; the healthy rest is one line, so
// the screen fits 80x24 with a dozen controllers.
func (v verifyModel) conditionLines(w int, spin string) []string {
	var lines []string
	healthy, bad := 0, 0
	for _, c := range v.status.Conditions {
		// One rule with `operator status` (operator/health): informative conditions are always
		// shown with their message, marked when they carry a verdict; the rest only when wrong.
		mark, st := "•", styleDim
		verdict := health.Judge(c)
		switch {
		case health.Informative(c.Type):
			switch verdict {
			case health.Bad:
				mark, st = "✗", styleErr
			case health.Info:
				if c.Status == "True" && c.Type != "ManilaControllerDisabled" {
					mark, st = "✓", styleOK
				}
			}
		case verdict == health.Progressing:
			mark, st = spin, styleWarn
		case verdict == health.Good:
			healthy++
			continue
		default:
			mark, st = "✗", styleErr
			bad++
		}
		text := fmt.Sprintf("  %s %s=%s", mark, c.Type, c.Status)
		if c.Reason != "" {
			text += " (" + c.Reason + ")"
		}
		lines = append(lines, st.Render(cut(text, w)))
		if c.Message != "" {
			lines = append(lines, wrapStyled(styleDim, "      "+c.Message, w)...)
		}
	}
	if healthy > 0 {
		summary := fmt.Sprintf("  ✓ %d other conditions as expected", healthy)
		if bad == 0 {
			summary = fmt.Sprintf("  ✓ %d conditions as expected: every controller Available, none Degraded", healthy)
		}
		lines = append([]string{styleOK.Render(cut(summary, w))}, lines...)
	}
	return lines
}

func (v verifyModel) resultLines(w int) []string {
	r := v.result
	var lines []string
	switch {
	case r.OK:
		lines = append(lines, wrapStyled(styleOK, fmt.Sprintf("✓ both writers (nodes %s and %s) read each other's lines from one volume of %s", r.Nodes[0], r.Nodes[1], r.StorageClass), w)...)
	case r.Simulated:
		lines = append(lines, wrapStyled(styleWarn, "~ multi-writer check on "+r.StorageClass+": "+r.Problem, w)...)
	default:
		lines = append(lines, wrapStyled(styleErr, "✗ multi-writer check on "+r.StorageClass+": "+r.Problem, w)...)
	}
	for i := 0; i < 2; i++ {
		if len(r.Lines[i]) == 0 {
			continue
		}
		lines = append(lines, fmt.Sprintf("  writer %d on %s:", i+1, orNone(r.Nodes[i])))
		for _, l := range r.Lines[i] {
			lines = append(lines, cut("    "+l, w))
		}
	}
	if r.CleanedUp {
		lines = append(lines, styleDim.Render(cut("  cleaned up: namespace "+r.Namespace+" deleted", w)))
	} else if r.Cleanup != "" {
		lines = append(lines, wrapStyled(styleWarn, "  "+r.Cleanup, w)...)
	}
	return lines
}

func lastN(s []string, n int) []string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
