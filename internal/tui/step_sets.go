package tui

import (
	"fmt"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/machinesets"
)

// setsModel is screen 4: the MachineSets to attach, workers preselected, control plane excluded.
type setsModel struct {
	loading  bool
	forKey   string // the attachment the list was read for
	err      string
	sets     []machinesets.SetStatus
	cursor   int
	selected map[string]bool
	problem  string // why enter does nothing
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
	s.sets, s.err = msg.sets, ""
	s.selected = map[string]bool{}
	for _, st := range msg.sets {
		if st.Role == "worker" && selectable(st) {
			s.selected[st.Name] = true
		}
	}
	return s
}

// selectable: OpenStack MachineSets that are not control plane.
func selectable(st machinesets.SetStatus) bool {
	return !machinesets.IsControlPlane(st.Role) && st.StorageNetwork != machinesets.StateNA
}

func (s setsModel) chosen() []string {
	var names []string
	for _, st := range s.sets {
		if s.selected[st.Name] {
			names = append(names, st.Name)
		}
	}
	return names
}

func (s setsModel) key(k string) (setsModel, tea.Cmd) {
	if k == "esc" {
		return s, nav(-1)
	}
	if s.loading {
		return s, nil
	}
	s.problem = ""
	switch k {
	case "up", "k":
		s.cursor = clamp(s.cursor-1, len(s.sets))
	case "down", "j":
		s.cursor = clamp(s.cursor+1, len(s.sets))
	case " ", "x":
		if s.cursor < len(s.sets) {
			st := s.sets[s.cursor]
			if !selectable(st) {
				s.problem = fmt.Sprintf("MachineSet %s cannot be chosen: %s", st.Name, whyNot(st))
				break
			}
			sel := map[string]bool{}
			for k, v := range s.selected {
				sel[k] = v
			}
			sel[st.Name] = !sel[st.Name]
			s.selected = sel
		}
	case "enter":
		if len(s.chosen()) == 0 {
			s.problem = "choose at least one MachineSet (space), or press esc to go back"
			return s, nil
		}
		return s, nav(1)
	}
	return s, nil
}

func whyNot(st machinesets.SetStatus) string {
	if machinesets.IsControlPlane(st.Role) {
		return "control plane: never touched"
	}
	if st.Note != "" {
		return st.Note
	}
	return "it is not an OpenStack MachineSet"
}

func (s setsModel) hints() []hint {
	return []hint{{"↑/↓", "move"}, {"space", "select"}, {"enter", "review"}}
}

func (s setsModel) view(w, h int, spin string) []string {
	if s.loading {
		return []string{spin + " reading the MachineSets of openshift-machine-api…"}
	}
	if s.err != "" {
		return append(wrapStyled(styleErr, "✗ "+s.err, w), styleDim.Render("Press esc to go back, or q to quit."))
	}
	lines := []string{fmt.Sprintf("%d of %d MachineSets selected", len(s.chosen()), len(s.sets)), ""}
	nw := 4
	for _, st := range s.sets {
		nw = max(nw, len(st.Name))
	}
	nw = min(nw, max(w-46, 14))
	head := fmt.Sprintf("      %-*s %-8s %-8s %-12s %s", nw, "NAME", "ROLE", "MACHINES", "STORAGE NET", "SEC. GROUPS")
	lines = append(lines, styleDim.Render(cut(head, w)))
	listH := max(h-6, 3)
	off := window(0, s.cursor, listH, len(s.sets))
	for i := off; i < len(s.sets) && i < off+listH; i++ {
		st := s.sets[i]
		box := check(s.selected[st.Name])
		switch {
		case !selectable(st):
			box = " - "
		case s.selected[st.Name]:
			box = styleSelected.Render(box)
		}
		net := st.StorageNetwork
		switch net {
		case machinesets.StateAttached:
			net = styleOK.Render(fmt.Sprintf("%-12s", "has it"))
		case machinesets.StateMissing:
			net = fmt.Sprintf("%-12s", "missing")
		default:
			net = fmt.Sprintf("%-12s", net)
		}
		name := padRight(cutMiddle(st.Name, nw), nw)
		if i == s.cursor {
			name = styleCursor.Render(name)
		}
		row := fmt.Sprintf("%s%s %s %-8s %-8s %s %s", pointer(i == s.cursor), box, name, cut(st.Role, 8),
			fmt.Sprintf("%d/%d", st.UpToDate, st.Wanted), net, st.SecurityGroups)
		if !selectable(st) {
			row = pointer(i == s.cursor) + styleDim.Render(fmt.Sprintf(" -  %s %-8s %s", padRight(cutMiddle(st.Name, nw), nw), cut(st.Role, 8), whyNot(st)))
		}
		lines = append(lines, cut(row, w))
	}
	if len(s.sets) == 0 {
		lines = append(lines, styleWarn.Render("  no MachineSets in openshift-machine-api: nothing to attach"))
	}
	lines = append(lines, "")
	lines = append(lines, wrapStyled(styleDim, "MACHINES: up to date / replicas, as machinesets list counts them; the others are replaced in step 6", w)...)
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
