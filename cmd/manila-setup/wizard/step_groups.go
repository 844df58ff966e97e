package wizard

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/charmbracelet/bubbles/key"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// groupsModel is screen 3: the security groups the new ports get, suggested ones first.
type groupsModel struct {
	fixedWords
	loading  bool
	err      string
	rows     []groupRow
	cursor   int
	selected map[string]bool // by ID
	rules    bool            // show the rules of the group under the cursor

	dest  netip.Addr // an export address of the chosen network (zero: none known)
	proto string     // NFS or CEPHFS
}

// waitingGroups is the groups screen waiting for the groups to be read, with what was selected.
func waitingGroups(selected map[string]bool) groupsModel {
	return groupsModel{fixedWords: fixedWords(stepGroups), loading: true, selected: selected}
}

type groupRow struct {
	g         openstack.SecurityGroup
	suggested bool
	why       string
}

// newGroupsModel ranks the groups for the chosen network: those whose egress rules alone let
// the share protocol reach the export address come first.
func newGroupsModel(groups []openstack.SecurityGroup, errText string, cand *openstack.Candidate, selected map[string]bool) groupsModel {
	g := groupsModel{fixedWords: fixedWords(stepGroups), err: errText, proto: "NFS", selected: map[string]bool{}}
	for id, on := range selected {
		if on {
			g.selected[id] = true
		}
	}
	if cand != nil && len(cand.Exports) > 0 {
		g.dest = cand.Exports[0].Address
		for _, e := range cand.Exports {
			if e.Preferred {
				g.dest = e.Address
				break
			}
		}
	}
	for _, sg := range groups {
		v := openstack.CheckEgress([]openstack.SecurityGroup{sg}, true, g.dest, g.proto)
		row := groupRow{g: sg, suggested: v.Allowed}
		if v.Allowed {
			row.why = fmt.Sprintf("allows %s egress%s", g.proto, toAddr(g.dest))
		} else {
			row.why = fmt.Sprintf("no egress rule for %s%s", g.proto, toAddr(g.dest))
		}
		g.rows = append(g.rows, row)
	}
	// Suggested first; among them, groups made for the purpose (not "default", whose open
	// egress also lets everything else out) first.
	slices.SortStableFunc(g.rows, func(a, b groupRow) int {
		if a.suggested != b.suggested {
			if a.suggested {
				return -1
			}
			return 1
		}
		if da, db := a.g.Name == "default", b.g.Name == "default"; da != db {
			if db {
				return -1
			}
			return 1
		}
		return strings.Compare(a.g.Name, b.g.Name)
	})
	// Drop selections of groups that no longer exist.
	for id := range g.selected {
		if !slices.ContainsFunc(g.rows, func(r groupRow) bool { return r.g.ID == id }) {
			delete(g.selected, id)
		}
	}
	return g
}

func toAddr(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return " to " + a.String()
}

// chosen returns the selected IDs in the order shown.
func (g groupsModel) chosen() []string {
	var ids []string
	for _, r := range g.rows {
		if g.selected[r.g.ID] {
			ids = append(ids, r.g.ID)
		}
	}
	return ids
}

// The groups screen's keys.
var (
	groupsRules = bind("r", "rules", "r")
	groupsNext  = bind("enter", "next", "enter")
)

func (g groupsModel) key(_ *session, k tea.KeyMsg) (groupsModel, tea.Cmd) {
	if g.loading {
		if key.Matches(k, keyBack) {
			return g, nav(-1)
		}
		return g, nil
	}
	switch {
	case key.Matches(k, keyUp):
		g.cursor = clamp(g.cursor-1, len(g.rows))
	case key.Matches(k, keyDown):
		g.cursor = clamp(g.cursor+1, len(g.rows))
	case key.Matches(k, keySelect):
		if g.cursor < len(g.rows) {
			id := g.rows[g.cursor].g.ID
			sel := map[string]bool{}
			for k, v := range g.selected {
				sel[k] = v
			}
			sel[id] = !sel[id]
			g.selected = sel
		}
	case key.Matches(k, groupsRules):
		g.rules = !g.rules
	case key.Matches(k, groupsNext):
		return g, nav(1)
	case key.Matches(k, keyBack):
		return g, nav(-1)
	}
	return g, nil
}

func (g groupsModel) keys(*session) []key.Binding {
	return []key.Binding{keyMove, keySelect, groupsRules, groupsNext, keyBack}
}

func (groupsModel) grabs(*session) grab { return grabNone }

// update ranks the groups once they are read, if the screen waits for them.
func (g groupsModel) update(s *session, msg tea.Msg, shown bool) (groupsModel, tea.Cmd) {
	if _, ok := msg.(groupsMsg); ok && shown {
		return newGroupsModel(s.groups, s.groupsErr, s.screens.network.chosenCandidate(), g.selected), nil
	}
	return g, nil
}

// enter ranks the groups for the network chosen, keeping what was selected before; until they
// are read the screen waits.
func (g groupsModel) enter(s *session) (groupsModel, tea.Cmd) {
	if s.groups != nil || s.groupsErr != "" {
		return newGroupsModel(s.groups, s.groupsErr, s.screens.network.chosenCandidate(), g.selected), nil
	}
	return waitingGroups(g.selected), nil
}

func (g groupsModel) view(s *session) []string {
	w, h, spin := s.width, s.height, s.spin
	if g.loading {
		return []string{spin + " reading the project's security groups…"}
	}
	var lines []string
	if g.err != "" {
		lines = append(lines, wrapStyled(styleErr, "✗ "+g.err, w)...)
		lines = append(lines, styleDim.Render("Press enter to go on without security groups, or esc to go back."))
	}
	lines = append(lines, fmt.Sprintf("%d selected of %d  ", len(g.chosen()), len(g.rows))+styleDim.Render("suggested first: they let "+g.proto+" out"+toAddr(g.dest)))
	var below []string
	if g.rules && g.cursor < len(g.rows) {
		sg := g.rows[g.cursor].g
		below = append(below, styleTitle.Render("Rules of "+coalesceName(sg.Name, sg.ID)))
		for _, r := range sg.Rules {
			below = append(below, "  "+describeRule(r))
		}
		if len(sg.Rules) == 0 {
			below = append(below, styleDim.Render("  no rules: nothing is allowed"))
		}
	}
	if sel := g.selectedGroups(); len(sel) > 0 {
		v := openstack.CheckEgress(sel, true, g.dest, g.proto)
		st := styleOK
		if !v.Allowed {
			st = styleWarn
		}
		below = append(below, wrapStyled(st, "together: "+v.Summary, w)...)
	} else {
		below = append(below, wrapStyled(styleDim, "none selected: the new ports get only the groups the MachineSets already list", w)...)
	}
	listH := max(h-len(lines)-len(below)-1, 3)
	off := window(0, g.cursor, listH, len(g.rows))
	for i := off; i < len(g.rows) && i < off+listH; i++ {
		r := g.rows[i]
		why := styleDim.Render(r.why)
		if r.suggested {
			why = styleOK.Render("suggested: " + r.why)
		}
		name := fmt.Sprintf("%-22s", cut(coalesceName(r.g.Name, r.g.ID), 22))
		if i == g.cursor {
			name = styleCursor.Render(name)
		}
		box := check(g.selected[r.g.ID])
		if g.selected[r.g.ID] {
			box = styleSelected.Render(box)
		}
		lines = append(lines, cut(pointer(i == g.cursor)+box+" "+name+" "+why, w))
	}
	if len(g.rows) == 0 && g.err == "" {
		lines = append(lines, styleDim.Render("  the project has no security groups"))
	}
	return append(append(lines, ""), below...)
}

func (g groupsModel) selectedGroups() []openstack.SecurityGroup {
	var out []openstack.SecurityGroup
	for _, r := range g.rows {
		if g.selected[r.g.ID] {
			out = append(out, r.g)
		}
	}
	return out
}

// describeRule words one rule: egress tcp 2049 to 10.0.0.0/24 (IPv4).
func describeRule(r openstack.Rule) string {
	proto := r.Protocol
	if proto == "" {
		proto = "any protocol"
	}
	ports := ""
	switch {
	case r.PortMin == 0 && r.PortMax == 0:
	case r.PortMin == r.PortMax:
		ports = fmt.Sprintf(" port %d", r.PortMin)
	default:
		ports = fmt.Sprintf(" ports %d-%d", r.PortMin, r.PortMax)
	}
	remote := "anywhere"
	switch {
	case r.RemoteIPPrefix != "":
		remote = r.RemoteIPPrefix
	case r.RemoteGroupID != "":
		remote = "members of group " + r.RemoteGroupID
	}
	dir := "to"
	if r.Direction == "ingress" {
		dir = "from"
	}
	return fmt.Sprintf("%-7s %s%s %s %s (%s)", r.Direction, proto, ports, dir, remote, r.EtherType)
}
