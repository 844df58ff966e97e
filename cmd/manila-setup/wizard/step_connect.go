package wizard

import (
	"context"
	"fmt"
	"slices"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"
)

// connectModel is screen 1: which cloud and which cluster, checked in the background.
type connectModel struct {
	fixedWords
	loaded  bool
	targets Targets
	focus   int // 0: clouds, 1: contexts
	cloud   int
	kctx    int

	seq      int  // numbers the checks, so a late answer for an old choice is ignored
	checking bool // a check is running
	checked  string
	conn     *Connection
	err      string
}

func newConnectModel() connectModel { return connectModel{fixedWords: fixedWords(stepConnect)} }

// withTargets shows the choices and checks the preselected ones right away.
func (c connectModel) withTargets(t Targets, ctx context.Context, b Backend) (connectModel, tea.Cmd) {
	c.loaded, c.targets = true, t
	c.cloud = max(slices.Index(t.Clouds, t.Cloud), 0)
	c.kctx = max(slices.Index(t.Contexts, t.Context), 0)
	if len(t.Clouds) == 0 || len(t.Contexts) == 0 {
		return c, nil
	}
	return c.check(ctx, b)
}

func (c connectModel) choice() (string, string) {
	var cloud, kctx string
	if c.cloud < len(c.targets.Clouds) {
		cloud = c.targets.Clouds[c.cloud]
	}
	if c.kctx < len(c.targets.Contexts) {
		kctx = c.targets.Contexts[c.kctx]
	}
	return cloud, kctx
}

func (c connectModel) check(ctx context.Context, b Backend) (connectModel, tea.Cmd) {
	cloud, kctx := c.choice()
	c.seq++
	c.checking, c.conn, c.err = true, nil, ""
	c.checked = cloud + "\x00" + kctx
	return c, connectCmd(ctx, b, c.seq, cloud, kctx)
}

func (c connectModel) withResult(conn Connection, err error) connectModel {
	c.checking = false
	if err != nil {
		c.err = err.Error()
		return c
	}
	c.conn = &conn
	return c
}

// ready: the current choice was checked and works.
func (c connectModel) ready() bool {
	cloud, kctx := c.choice()
	return c.conn != nil && c.checked == cloud+"\x00"+kctx
}

// The connect screen's keys.
var (
	connectSwitch = bind("tab", "cloud/cluster", "tab", "shift+tab", "left", "right", "h", "l")
	connectMove   = either("↑/↓", "choose", keyUp, keyDown)
	connectRetry  = bind("r", "retry", "r")
	connectNext   = bind("enter", "next", "enter")
	connectCheck  = bind("enter", "check", "enter")
)

func (c connectModel) key(s *session, k tea.KeyMsg) (connectModel, tea.Cmd) {
	if !c.loaded {
		return c, nil
	}
	switch {
	case key.Matches(k, connectSwitch):
		c.focus = 1 - c.focus
	case key.Matches(k, keyUp):
		c = c.move(-1)
	case key.Matches(k, keyDown):
		c = c.move(1)
	case key.Matches(k, connectRetry):
		if !c.checking && len(c.targets.Clouds) > 0 && len(c.targets.Contexts) > 0 {
			return c.check(s.ctx, s.backend())
		}
	case key.Matches(k, connectNext):
		switch {
		case c.ready():
			return c, nav(1)
		case !c.checking && len(c.targets.Clouds) > 0 && len(c.targets.Contexts) > 0:
			return c.check(s.ctx, s.backend())
		}
	}
	return c, nil
}

func (c connectModel) move(d int) connectModel {
	if c.focus == 0 {
		c.cloud = clamp(c.cloud+d, len(c.targets.Clouds))
	} else {
		c.kctx = clamp(c.kctx+d, len(c.targets.Contexts))
	}
	return c
}

func clamp(i, n int) int {
	if i >= n {
		i = n - 1
	}
	return max(i, 0)
}

func (c connectModel) keys(*session) []key.Binding {
	bs := []key.Binding{connectMove, connectSwitch}
	switch {
	case !c.loaded || len(c.targets.Clouds) == 0 || len(c.targets.Contexts) == 0:
	case c.ready():
		bs = append(bs, connectNext)
	case c.err != "":
		bs = append(bs, connectRetry)
	default:
		bs = append(bs, connectCheck)
	}
	return bs
}

func (connectModel) grabs(*session) grab { return grabNone }

// update takes the choices of clouds.yaml and the kubeconfig, and the answers of the checks.
func (c connectModel) update(s *session, msg tea.Msg, _ bool) (connectModel, tea.Cmd) {
	switch msg := msg.(type) {
	case targetsMsg:
		return c.withTargets(msg.t, s.ctx, s.backend())
	case connectedMsg:
		if msg.seq == c.seq {
			return c.withResult(msg.conn, msg.err), nil
		}
	}
	return c, nil
}

// enter: the connect screen is the first; nothing comes before it.
func (c connectModel) enter(*session) (connectModel, tea.Cmd) { return c, nil }

func (c connectModel) view(s *session) []string {
	w, h, spin := s.width, s.height, s.spin
	if !c.loaded {
		return []string{spin + " reading clouds.yaml and the kubeconfig…"}
	}
	t := c.targets
	col := max((w-4)/2, 20)
	left := []string{styleTitle.Render("Cloud") + styleDim.Render(" (clouds.yaml)")}
	if t.CloudsFile != "" {
		left = append(left, styleDim.Render(cut(t.CloudsFile, col)))
	}
	right := []string{styleTitle.Render("Cluster") + styleDim.Render(" (kubeconfig context)")}
	if t.Kubeconfig != "" {
		right = append(right, styleDim.Render(cut(t.Kubeconfig, col)))
	}
	listH := max(h-9, 3)
	left = append(left, pickList(t.Clouds, c.cloud, c.focus == 0, listH, col)...)
	right = append(right, pickList(t.Contexts, c.kctx, c.focus == 1, listH, col)...)
	if t.CloudsErr != "" {
		left = append(left, wrapStyled(styleErr, t.CloudsErr, col)...)
	}
	if t.ContextsErr != "" {
		right = append(right, wrapStyled(styleErr, t.ContextsErr, col)...)
	}
	lines := columns(left, right, col, w)
	lines = append(lines, "")
	switch {
	case c.checking:
		cloud, kctx := c.choice()
		lines = append(lines, fmt.Sprintf("%s checking cloud %q and cluster %q…", spin, cloud, kctx))
	case c.err != "":
		lines = append(lines, wrapStyled(styleErr, "✗ "+c.err, w)...)
		lines = append(lines, styleDim.Render("Fix it, then press r to check again (or choose another cloud or cluster)."))
	case c.ready():
		cn := c.conn
		lines = append(lines, styleOK.Render("✓ ")+fmt.Sprintf("cloud %s (region %s) as %s", cn.Cloud, orNone(cn.Region), cn.Identity))
		cluster := fmt.Sprintf("cluster %s (context %s): %s", cn.Cluster, cn.Context, clusterHas(cn))
		if !cn.HyperShift {
			lines = append(lines, styleOK.Render("✓ ")+cluster)
		} else {
			// Two kinds make a longer line: wrapped, not cut, so that the NodePools show.
			for i, l := range wrap(cluster, w-2) {
				mark := "  "
				if i == 0 {
					mark = styleOK.Render("✓ ")
				}
				lines = append(lines, mark+l)
			}
		}
		if cn.Note != "" {
			lines = append(lines, wrapStyled(styleWarn, "! "+cn.Note, w)...)
		}
		lines = append(lines, styleDim.Render("Press enter to continue."))
	case c.conn != nil || c.checked != "":
		lines = append(lines, styleDim.Render("The choice changed: press enter to check it."))
	}
	return lines
}

// clusterHas says what the wizard can attach on the cluster: MachineSets, NodePools or both.
func clusterHas(cn *Connection) string {
	switch {
	case !cn.HyperShift:
		return countOf(cn.MachineSets, "MachineSet")
	case !cn.MachineAPI:
		return countOf(cn.NodePools, "NodePool") + " (HyperShift management cluster, no MachineSets)"
	}
	return countOf(cn.MachineSets, "MachineSet") + ", " + countOf(cn.NodePools, "NodePool") + " (HyperShift management cluster)"
}

func orNone(s string) string {
	if s == "" {
		return "(any)"
	}
	return s
}

func pickList(items []string, cur int, focused bool, h, w int) []string {
	if len(items) == 0 {
		return []string{styleDim.Render("  (none)")}
	}
	off := window(0, cur, h, len(items))
	var out []string
	for i := off; i < len(items) && i < off+h; i++ {
		line := "  " + items[i]
		if i == cur {
			if focused {
				line = pointer(true) + styleCursor.Render(items[i])
			} else {
				line = "• " + items[i]
			}
		}
		out = append(out, cut(line, w))
	}
	return out
}

func wrapStyled(st interface{ Render(...string) string }, s string, w int) []string {
	var out []string
	for _, l := range wrap(s, w) {
		out = append(out, st.Render(l))
	}
	return out
}

// columns puts two blocks side by side, each col cells wide; in less than 60 cells it stacks them.
func columns(left, right []string, col, w int) []string {
	if w < 60 {
		return append(append(left, ""), right...)
	}
	n := max(len(left), len(right))
	out := make([]string, 0, n)
	for i := 0; i < n; i++ {
		var l, r string
		if i < len(left) {
			l = cut(left[i], col)
		}
		if i < len(right) {
			r = right[i]
		}
		out = append(out, padRight(l, col)+"  "+r)
	}
	return out
}

// countOf writes "1 MachineSet", "3 MachineSets".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
