package wizard

import (
	"context"
	"strings"
	"time"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/workers"
)

// Detaching: d on the sets screen takes off a MachineSet what its record says manila-setup
// attached, through the screens of attaching: the review shows the removal's diff, enter
// patches and rolls as `machinesets patch --remove --rollout` does. While pods on the machines
// to replace use Manila volumes the review refuses, as that command does without --force; f
// then y detaches anyway.

// The keys of a removal's review.
var (
	detachApply   = bind("enter", "detach", "enter")
	detachForce   = bind("f", "detach anyway", "f")
	detachForceOK = bind("y", "detach anyway", keyYes.Keys()...)
	detachNo      = told("n or enter", "no")
)

// detachKey handles the review's keys of a removal; handled: no other handling is wanted.
func (r reviewModel) detachKey(k tea.KeyMsg) (reviewModel, bool) {
	if r.forcing {
		// Only an explicit yes forces; anything else is the default, no.
		r.forcing = false
		if key.Matches(k, detachForceOK) {
			r.forced, r.refusedEnter = true, false
		}
		return r, true
	}
	if r.loading || r.err != "" {
		return r, false
	}
	switch {
	case key.Matches(k, detachForce) && r.refused():
		r.forcing = true
		return r, true
	case key.Matches(k, detachApply) && r.refused():
		r.refusedEnter, r.scroll = true, 0 // to the refusal, at the top
		return r, true
	}
	return r, false
}

// refused: pods on the machines to replace use Manila volumes, and the user has not forced.
func (r reviewModel) refused() bool { return !r.risk.Clear() && !r.forced }

// detachKeys are the keys of a removal's review; next is enter's.
func (r reviewModel) detachKeys(next key.Binding) []key.Binding {
	if r.forcing {
		return []key.Binding{detachForceOK, detachNo}
	}
	bs := []key.Binding{reviewScroll}
	if r.refused() {
		return append(bs, detachForce, keyBack)
	}
	return append(bs, next, keyBack)
}

// reviewDetach shows what detaching rows takes off them: the same review as attaching, of the
// removal, with the commands that do the same.
func reviewDetach(s *session, rows []workers.Row) (reviewModel, tea.Cmd) {
	forKey := "detach|" + rowID(rows[0])
	sel := workers.Select(rows)
	r := reviewModel{loading: true, forKey: forKey, kinds: "MachineSet", detach: true,
		commands: detachCommandLines(s.conn, rows, false), forcedCommands: detachCommandLines(s.conn, rows, true)}
	return r, detachPlanCmd(s.ctx, s.backend(), forKey, sel)
}

// detachLines say what the removal takes off each MachineSet and, while refused, why.
func (r reviewModel) detachLines(w int) []string {
	var lines []string
	if _, err := r.risk.Verdict(false, ""); err != nil {
		for _, l := range strings.Split(err.Error(), "\n") {
			if r.forced {
				lines = append(lines, wrapStyled(styleDim, l, w)...)
			} else {
				lines = append(lines, wrapStyled(styleErr, l, w)...)
			}
		}
		switch {
		case r.forced:
			lines = append(lines, wrapStyled(styleWarn, "! Forced: enter detaches and replaces these machines anyway.", w)...)
		case r.refusedEnter:
			lines = append(lines, wrapStyled(styleWarn, "Not detached. Press esc to go back, or f to detach anyway (asked again).", w)...)
		default:
			lines = append(lines, wrapStyled(styleDim, "Press esc to go back, or f to detach anyway (asked again).", w)...)
		}
		lines = append(lines, "")
	}
	for _, res := range r.results {
		if res.Action == attach.ActionWouldPatch {
			what := "its attachment record only"
			if removed := res.Removed(); len(removed) > 0 {
				what = "removes " + strings.Join(removed, ", ")
			}
			lines = append(lines, wrap("MachineSet "+res.Name+": "+what+" (as its record says manila-setup attached them; what was added by hand stays)", w)...)
			continue
		}
		lines = append(lines, wrapStyled(styleDim, "MachineSet "+res.Name+": "+res.Action+", "+res.Reason, w)...)
	}
	return lines
}

// forceQuestion is the second confirmation of a forced detach.
func (r reviewModel) forceQuestion(w, h int) []string {
	nodes := map[string]bool{}
	var pods []string
	for _, m := range r.risk.Mounts {
		nodes[m.Node] = true
		pods = append(pods, "  "+m.String())
	}
	for _, u := range r.risk.Unseen {
		pods = append(pods, "  "+u.What+"; "+u.Why)
	}
	question := "Detach anyway? The machines of these nodes are replaced although pods there use Manila volumes:"
	if len(r.risk.Unseen) > 0 {
		question = "Detach anyway? These machines are replaced although pods on them use Manila volumes, or may, out of sight:"
	}
	var lines []string
	lines = append(lines, wrapStyled(styleWarn, question, w)...)
	for _, p := range pods {
		lines = append(lines, cut(p, w))
	}
	lines = append(lines, "")
	lines = append(lines, wrap("Their pods are evicted, and the new machines have no port on the storage network: rescheduled there, they cannot mount those volumes. This is `--force` of the command.", w)...)
	lines = append(lines, "", styleWarn.Render("y: detach anyway   n or enter: no"))
	if len(lines) > h {
		lines = append(lines[:max(h-1, 0)], styleWarn.Render("y: detach anyway   n or enter: no"))
	}
	return lines
}

// detachCommandLines are the commands that detach rows without the wizard (force: --force).
func detachCommandLines(conn *Connection, rows []workers.Row, force bool) []string {
	cmd := "manila-setup"
	if conn != nil {
		for _, f := range conn.Flags {
			cmd += " " + shellQuote(f)
		}
		if conn.Cloud != "" {
			cmd += " --os-cloud " + shellQuote(conn.Cloud)
		}
	}
	cmd += " machinesets patch --remove"
	for _, r := range rows {
		cmd += " --name " + shellQuote(r.Name)
	}
	cmd += " --rollout"
	if force {
		cmd += " --force"
	}
	lines := []string{"  " + cmd}
	if conn != nil && conn.Context != "" {
		lines = append(lines, styleDim.Render("  (it acts on the kubeconfig's current context: oc config use-context "+conn.Context+")"))
	}
	return lines
}

// startDetach begins the removal, then the rollout of attaching: the check of the mounts
// again (pods may have come since the review; forced, its findings are only warnings), the
// patch, the machines replaced.
func startDetach(ctx context.Context, b Backend, rows []workers.Row, force, dryRun bool, now time.Time) (applyModel, tea.Cmd) {
	sel := workers.Select(rows)
	a, cmd := startWith(attach.Attachment{}, rows, dryRun, now, func() tea.Msg {
		return patchedOf(b.Apply(ctx, detachRequest(sel, force, false)))
	})
	a.detach = true
	return a, cmd
}

// detachSummary is the closing sentence of a finished detach: what was removed from which set.
func (a applyModel) detachSummary() string {
	var parts []string
	for _, res := range a.results {
		if removed := res.Removed(); len(removed) > 0 {
			parts = append(parts, strings.Join(removed, ", ")+" from MachineSet "+res.Name)
		}
	}
	if len(parts) == 0 {
		return "Detached: nothing recorded was left to remove; the machines were replaced where they still had it."
	}
	return "Detached " + strings.Join(parts, "; ") + "; the machines were replaced."
}
