package wizard

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/workers"
)

// setsModel is screen 4: what makes the cluster's workers, one section per kind the cluster
// offers (workers.Offer): MachineSets, workers preselected, control plane excluded; Cluster API
// MachineSets and MachineDeployments; the NodePools of a HyperShift management cluster, the
// OpenStack ones preselected. The cursor runs over the rows of every section, in order.
type setsModel struct {
	loading bool
	forKey  string // the attachment the list was read for
	reading string // what is being read, while it is
	err     string
	offer   workers.Offer
	// inv is the inventory the offer was made from.
	inv      *workers.Inventory
	rows     []workers.Row // the rows of every section, in order
	cursor   int
	selected map[string]bool // by rowID
	problem  string          // why enter does nothing
	// detach is the rowID of the MachineSet whose attachment d takes off; "" when attaching.
	detach string
}

func (s setsModel) withSets(msg setsMsg) setsModel {
	if msg.key != s.forKey {
		return s // read for an older choice
	}
	s.loading = false
	if msg.err != nil {
		s.err = msg.err.Error()
		return s
	}
	s.offer, s.inv, s.err = msg.offer, msg.inv, ""
	s.rows = s.offer.Rows()
	s.selected = map[string]bool{}
	for _, r := range s.rows {
		if r.Selectable && r.Preselected {
			s.selected[rowID(r)] = true
		}
	}
	return s
}

// rowID tells the rows of every section apart.
func rowID(r workers.Row) string { return r.Section + " " + r.Key }

// chosen are the rows chosen, in order.
func (s setsModel) chosen() []workers.Row {
	var out []workers.Row
	for _, r := range s.rows {
		if s.selected[rowID(r)] {
			out = append(out, r)
		}
	}
	return out
}

// chosenIn counts the rows of sec chosen.
func (s setsModel) chosenIn(sec workers.Section) int {
	n := 0
	for _, r := range sec.Rows {
		if s.selected[rowID(r)] {
			n++
		}
	}
	return n
}

// The sets screen's keys.
var (
	setsReview = bind("enter", "review", "enter")
	setsDetach = bind("d", "detach", "d")
)

func (s setsModel) key(_ *session, k tea.KeyMsg) (setsModel, tea.Cmd) {
	if key.Matches(k, keyBack) {
		return s, nav(-1)
	}
	if s.loading {
		return s, nil
	}
	s.problem = ""
	switch {
	case key.Matches(k, keyUp):
		s.cursor = clamp(s.cursor-1, len(s.rows))
	case key.Matches(k, keyDown):
		s.cursor = clamp(s.cursor+1, len(s.rows))
	case key.Matches(k, keySelect):
		if s.cursor >= len(s.rows) {
			break
		}
		r := s.rows[s.cursor]
		if !r.Selectable {
			s.problem = r.What + " cannot be chosen: " + r.WhyNot
			break
		}
		sel := maps.Clone(s.selected)
		sel[rowID(r)] = !sel[rowID(r)]
		s.selected = sel
	case key.Matches(k, setsDetach):
		if s.cursor >= len(s.rows) {
			break
		}
		r := s.rows[s.cursor]
		if why := s.whyNotDetach(r); why != "" {
			s.problem = r.What + " cannot be detached here: " + why
			break
		}
		s.detach = rowID(r)
		return s, nav(1)
	case key.Matches(k, setsReview):
		s.detach = ""
		if len(s.chosen()) == 0 {
			s.problem = "choose at least one " + s.offer.Choose + " (space), or press esc to go back"
			return s, nil
		}
		return s, nav(1)
	}
	return s, nil
}

func (s setsModel) keys(*session) []key.Binding {
	bs := []key.Binding{keyMove, keySelect, setsReview}
	if s.cursor < len(s.rows) && s.whyNotDetach(s.rows[s.cursor]) == "" {
		bs = append(bs, setsDetach)
	}
	return append(bs, keyBack)
}

// title names the screen after what the cluster has to choose from.
func (s setsModel) title(ss *session) string {
	if ss.conn == nil {
		return stepTitles[stepSets]
	}
	return coalesceName(offeredTitle(s.offered(ss.conn)), stepTitles[stepSets])
}

// help adds what each kind the cluster offers changes here.
func (s setsModel) help(ss *session) string {
	if ss.conn == nil {
		return helpText[stepSets]
	}
	return helpText[stepSets] + kindsHelp(s.offered(ss.conn), stepSets)
}

// offered are the kinds the cluster of conn has to choose from: those it serves, and the
// control plane once the list read has a ControlPlaneMachineSet.
func (s setsModel) offered(conn *Connection) workers.Kinds {
	k := conn.Offered()
	k.ControlPlane = slices.ContainsFunc(s.offer.Sections, func(sec workers.Section) bool { return sec.ID == workers.SectionControlPlane })
	return k
}

func (setsModel) grabs(*session) grab { return grabNone }

// update takes the inventory read for the screen's choice.
func (s setsModel) update(_ *session, msg tea.Msg, _ bool) (setsModel, tea.Cmd) {
	if msg, ok := msg.(setsMsg); ok {
		return s.withSets(msg), nil
	}
	return s, nil
}

// enter reads what the cluster has for the network and groups chosen; the same choice as before
// keeps the list and the user's selection.
func (s setsModel) enter(ss *session) (setsModel, tea.Cmd) {
	want := ss.attachment()
	forKey := attachmentKey(want)
	if s.forKey == forKey && !s.loading && s.err == "" {
		return s, nil
	}
	conn := Connection{Served: workers.Served{MachineAPI: true}}
	if ss.conn != nil {
		conn = *ss.conn
	}
	kinds := conn.Kinds()
	s = setsModel{loading: true, forKey: forKey, reading: readingText(kinds)}
	return s, setsCmd(ss.ctx, ss.backend(), forKey, want, kinds)
}

// recorded is what manila-setup attached to the MachineSet of r, from its record; nil for
// another kind, or a set without a record.
func (s setsModel) recorded(r workers.Row) *attach.Record {
	if r.Section != workers.SectionMachineSets || s.inv == nil {
		return nil
	}
	for _, st := range s.inv.MachineSets {
		if st.Name == r.Name {
			return st.Recorded
		}
	}
	return nil
}

// whyNotDetach says why d does not detach r; "" when it does: a MachineSet the wizard can
// patch whose record names something manila-setup attached. What the user added by hand is
// never taken off, so a set without a record has nothing to detach.
func (s setsModel) whyNotDetach(r workers.Row) string {
	rec := s.recorded(r)
	switch {
	case r.Section == workers.SectionControlPlane:
		return "the wizard detaches MachineSets; use `manila-setup controlplane patch --remove`"
	case r.Section != workers.SectionMachineSets:
		return "the wizard detaches MachineSets; use `manila-setup clusterapi patch --remove` or `manila-setup nodepools patch --remove`"
	case !r.Selectable:
		return r.WhyNot
	case r.Mark != "":
		return "Cluster API is authoritative for it: use `manila-setup clusterapi patch --remove --name " + r.Name + "`"
	case rec == nil || len(rec.Networks)+len(rec.SecurityGroups) == 0:
		return "it has no attachment record (annotation " + attach.Annotation + "): nothing manila-setup attached to remove"
	}
	return ""
}

// detaching is the row d chose to detach, alone; nil when attaching.
func (s setsModel) detaching() []workers.Row {
	for _, r := range s.rows {
		if s.detach != "" && rowID(r) == s.detach {
			return []workers.Row{r}
		}
	}
	return nil
}

func (s setsModel) view(ss *session) []string {
	w, h, spin := ss.width, ss.height, ss.spin
	if s.loading {
		return []string{spin + " " + s.reading}
	}
	if s.err != "" {
		return append(wrapStyled(styleErr, "✗ "+s.err, w), styleDim.Render("Press esc to go back, or q to quit."))
	}
	if secs := s.offer.Sections; len(secs) == 1 && secs[0].Plain {
		return s.plainView(secs[0], w, h)
	}
	return s.mixedView(w, h)
}

// nameWidth is the name column's: the longest name, within what the width leaves.
func (s setsModel) nameWidth(w int) int {
	nw := 4
	for _, r := range s.rows {
		nw = max(nw, len(r.Label()))
	}
	return min(nw, max(w-46, 14))
}

// heading is the column headings of sec's rows.
func heading(sec workers.Section, nw, w int) string {
	return styleDim.Render(cut("      "+padRight(sec.NameHeading, nw)+" "+sec.Headings, w))
}

// empty is what sec says without rows.
func empty(sec workers.Section, w int) string {
	if sec.EmptyWarns {
		return styleWarn.Render(cut("  "+sec.Empty, w))
	}
	return styleDim.Render(cut("  "+sec.Empty, w))
}

// plainView lists the only section the cluster offers, without its heading.
func (s setsModel) plainView(sec workers.Section, w, h int) []string {
	lines := []string{fmt.Sprintf("%d of %d %s selected", s.chosenIn(sec), len(s.rows), sec.Noun), ""}
	nw := s.nameWidth(w)
	lines = append(lines, heading(sec, nw, w))
	listH := max(h-6, 3)
	off := window(0, s.cursor, listH, len(s.rows))
	for i := off; i < len(s.rows) && i < off+listH; i++ {
		lines = append(lines, s.row(s.rows[i], i == s.cursor, nw, w))
	}
	if len(s.rows) == 0 {
		lines = append(lines, empty(sec, w))
	}
	lines = append(lines, "")
	for _, l := range legend(sec) {
		lines = append(lines, wrapStyled(styleDim, l, w)...)
	}
	for _, n := range s.offer.Notes {
		lines = append(lines, wrapStyled(styleWarn, "note: "+n, w)...)
	}
	if s.problem != "" {
		lines = append(lines, wrapStyled(styleWarn, s.problem, w)...)
	}
	return lines
}

// cutMiddle shortens a name to n columns by leaving out its middle: MachineSet names share their
// cluster prefix and differ at the end (worker-0, worker-1), which must stay visible.
func cutMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 5 {
		return cut(s, n)
	}
	tail := n / 2
	head := n - tail - 1
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// mixedView lists every section the cluster offers, each under its own heading with its own
// columns.
func (s setsModel) mixedView(w, h int) []string {
	var counts []string
	for _, sec := range s.offer.Sections {
		counts = append(counts, fmt.Sprintf("%d of %d %s", s.chosenIn(sec), len(sec.Rows), sec.Noun))
	}
	lines := []string{strings.Join(counts, " and ") + " selected", ""}

	nw := s.nameWidth(w)
	var rows []string
	cursorRow, at := 0, 0
	for i, sec := range s.offer.Sections {
		title := styleTitle.Render(cut(sec.Title, w))
		if sec.Subtitle != "" {
			title += styleDim.Render(cut(" "+sec.Subtitle, max(w-len(sec.Title), 0)))
		}
		rows = append(rows, title, heading(sec, nw, w))
		for _, r := range sec.Rows {
			if at == s.cursor {
				cursorRow = len(rows)
			}
			rows = append(rows, s.row(r, at == s.cursor, nw, w))
			at++
		}
		if len(sec.Rows) == 0 {
			rows = append(rows, empty(sec, w))
		}
		if i < len(s.offer.Sections)-1 {
			rows = append(rows, "")
		}
	}

	var foot []string
	for _, sec := range s.offer.Sections {
		for _, l := range legend(sec) {
			foot = append(foot, wrapStyled(styleDim, l, w)...)
		}
	}
	for _, n := range s.offer.Notes {
		foot = append(foot, wrapStyled(styleWarn, "note: "+n, w)...)
	}
	if s.problem != "" {
		foot = append(foot, wrapStyled(styleWarn, s.problem, w)...)
	}
	listH := max(h-len(lines)-len(foot)-1, 3)
	if len(rows) > listH {
		// Short of room: every row before the explanations, which help (?) repeats.
		foot = nil
		if s.problem != "" {
			foot = wrapStyled(styleWarn, s.problem, w)
		}
		listH = max(h-len(lines)-len(foot), 3)
	}
	// The headings scroll with the rows; the cursor's row stays on screen.
	off := window(0, cursorRow, listH, len(rows))
	lines = append(lines, rows[off:min(off+listH, len(rows))]...)
	if len(foot) > 0 {
		lines = append(lines, "")
	}
	return append(lines, foot...)
}

// row is one row of the list: its box, its name in nw columns, its cells; a row that cannot be
// chosen says why instead of its last cells.
func (s setsModel) row(r workers.Row, atCursor bool, nw, w int) string {
	name := padRight(label(r, nw), nw)
	if !r.Selectable {
		text := " -  " + name
		for _, c := range r.Cells[:min(r.Short, len(r.Cells))] {
			text += " " + c.Text
		}
		return pointer(atCursor) + styleDim.Render(cut(text+" "+r.WhyNot, max(w-2, 0)))
	}
	chosen := s.selected[rowID(r)]
	box := check(chosen)
	if chosen {
		box = styleSelected.Render(box)
	}
	if atCursor {
		name = styleCursor.Render(name)
	}
	text := pointer(atCursor) + box + " " + name
	for _, c := range r.Cells {
		if c.Good {
			text += " " + styleOK.Render(c.Text)
		} else {
			text += " " + c.Text
		}
	}
	if r.Mark != "" {
		text += styleDim.Render("  " + r.Mark)
	}
	return cut(text, w)
}

// label is a row's name in n columns: a NAMESPACE/NAME label loses its namespace first, as the
// objects of one namespace differ by name (hc1-workers, hc2-workers).
func label(r workers.Row, n int) string {
	if r.Scope == "" {
		return cutMiddle(r.Name, n)
	}
	full := r.Label()
	if len([]rune(full)) <= n {
		return full
	}
	if room := n - len([]rune(r.Name)) - 1; room >= 2 {
		return cut(r.Scope, room) + "/" + r.Name
	}
	return cutMiddle(r.Name, n)
}
