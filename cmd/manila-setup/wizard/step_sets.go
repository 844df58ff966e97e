package wizard

import (
	"fmt"
	"maps"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// setsModel is screen 4: the MachineSets to attach, workers preselected, control plane excluded;
// on a cluster that serves Cluster API also the Cluster API MachineSets and MachineDeployments
// of openshift-cluster-api; on a HyperShift management cluster also its NodePools, the OpenStack
// ones preselected. The cursor runs over the MachineSets, then the Cluster API objects, then the
// NodePools.
type setsModel struct {
	loading    bool
	forKey     string // the attachment the list was read for
	machineAPI bool   // the cluster serves MachineSets; false on a NodePools-only cluster
	err        string
	sets       []machinesets.SetStatus
	pools      []nodepools.Status
	// capi are the Cluster API objects offered on their own: not the copies of the MachineSets
	// above, which are attached through their MachineSet's row.
	capi     []clusterapi.Status
	cursor   int
	selected map[string]bool // MachineSets by name
	capiSel  map[string]bool // Cluster API objects by machineset/NAME or machinedeployment/NAME
	poolsSel map[string]bool // NodePools by NAMESPACE/NAME
	problem  string          // why enter does nothing
	notes    []string        // kinds that could not be read
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
	// The inventory already shows a MachineSet Cluster API is authoritative for with its copy's
	// state, and the copy not on its own.
	s.sets, s.capi, s.pools, s.err, s.notes = msg.sets, msg.capi, msg.pools, "", msg.notes
	s.capiSel = map[string]bool{}
	for _, c := range s.capi {
		if capiSelectable(c) {
			s.capiSel[capiKey(c)] = true
		}
	}
	s.selected = map[string]bool{}
	for _, st := range s.sets {
		if st.Role == "worker" && selectable(st) {
			s.selected[st.Name] = true
		}
	}
	// A NodePool is a hosted cluster's workers: OpenStack ones are preselected as worker
	// MachineSets are.
	s.poolsSel = map[string]bool{}
	for _, p := range msg.pools {
		if poolSelectable(p) {
			s.poolsSel[poolKey(p)] = true
		}
	}
	return s
}

// capiKey names a Cluster API object as clusterapi.Options.Names and --name take it.
func capiKey(c clusterapi.Status) string { return strings.ToLower(c.Kind) + "/" + c.Name }

// capiSelectable: those clusterapi can patch; the others say why (Note): paused, made by a
// MachineDeployment, another provider's, or their template is missing.
func capiSelectable(c clusterapi.Status) bool { return c.StorageNetwork != attach.StateNA }

// chosenCAPI are the Cluster API objects chosen, as machineset/NAME or machinedeployment/NAME.
func (s setsModel) chosenCAPI() []string {
	var names []string
	for _, c := range s.chosenCAPIStatus() {
		names = append(names, capiKey(c))
	}
	return names
}

func (s setsModel) chosenCAPIStatus() []clusterapi.Status {
	var out []clusterapi.Status
	for _, c := range s.capi {
		if s.capiSel[capiKey(c)] {
			out = append(out, c)
		}
	}
	return out
}

func poolKey(p nodepools.Status) string { return p.Namespace + "/" + p.Name }

// poolSelectable: OpenStack NodePools; the others have no additionalPorts to add to.
func poolSelectable(p nodepools.Status) bool { return p.StorageNetwork != attach.StateNA }

func poolWhyNot(p nodepools.Status) string {
	platform := p.Platform
	if platform == "" {
		platform = "none"
	}
	return "not OpenStack (" + platform + ")"
}

// chosenPools are the NodePools chosen, as NAMESPACE/NAME.
func (s setsModel) chosenPools() []string {
	var names []string
	for _, p := range s.chosenPoolStatus() {
		names = append(names, poolKey(p))
	}
	return names
}

func (s setsModel) chosenPoolStatus() []nodepools.Status {
	var out []nodepools.Status
	for _, p := range s.pools {
		if s.poolsSel[poolKey(p)] {
			out = append(out, p)
		}
	}
	return out
}

// kinds names what the screen offers: "MachineSet", "NodePool", "MachineSet or NodePool", with
// "Cluster API set" where Cluster API objects are offered.
func (s setsModel) kinds() string {
	var kinds []string
	if s.machineAPI || len(s.pools) == 0 {
		kinds = append(kinds, "MachineSet")
	}
	if len(s.capi) > 0 {
		kinds = append(kinds, "Cluster API set")
	}
	if len(s.pools) > 0 {
		kinds = append(kinds, "NodePool")
	}
	return strings.Join(kinds, " or ")
}

func (s setsModel) rows() int { return len(s.sets) + len(s.capi) + len(s.pools) }

// selectable: OpenStack MachineSets that are not control plane.
func selectable(st machinesets.SetStatus) bool {
	return !machinesets.IsControlPlane(st.Role) && st.StorageNetwork != attach.StateNA
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
		s.cursor = clamp(s.cursor-1, s.rows())
	case "down", "j":
		s.cursor = clamp(s.cursor+1, s.rows())
	case " ", "x":
		if i := s.cursor - len(s.sets); i >= 0 && i < len(s.capi) {
			c := s.capi[i]
			if !capiSelectable(c) {
				s.problem = fmt.Sprintf("Cluster API %s %s cannot be chosen: %s", c.Kind, c.Name, c.Note)
				break
			}
			sel := maps.Clone(s.capiSel)
			sel[capiKey(c)] = !sel[capiKey(c)]
			s.capiSel = sel
		}
		if i := s.cursor - len(s.sets) - len(s.capi); i >= 0 && i < len(s.pools) {
			p := s.pools[i]
			if !poolSelectable(p) {
				s.problem = fmt.Sprintf("NodePool %s cannot be chosen: %s", poolKey(p), poolWhyNot(p))
				break
			}
			sel := map[string]bool{}
			for k, v := range s.poolsSel {
				sel[k] = v
			}
			sel[poolKey(p)] = !sel[poolKey(p)]
			s.poolsSel = sel
		}
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
		if len(s.chosen()) == 0 && len(s.chosenCAPI()) == 0 && len(s.chosenPools()) == 0 {
			s.problem = "choose at least one " + s.kinds() + " (space), or press esc to go back"
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
		if !s.machineAPI {
			return []string{spin + " reading the NodePools…"}
		}
		return []string{spin + " reading the MachineSets of openshift-machine-api…"}
	}
	if s.err != "" {
		return append(wrapStyled(styleErr, "✗ "+s.err, w), styleDim.Render("Press esc to go back, or q to quit."))
	}
	if len(s.pools) > 0 || len(s.capi) > 0 || !s.machineAPI {
		return s.mixedView(w, h)
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
		case attach.StateAttached:
			net = styleOK.Render(fmt.Sprintf("%-12s", "has it"))
		case attach.StateMissing:
			net = fmt.Sprintf("%-12s", "missing")
		default:
			net = fmt.Sprintf("%-12s", net)
		}
		name := padRight(cutMiddle(st.Name, nw), nw)
		if i == s.cursor {
			name = styleCursor.Render(name)
		}
		row := fmt.Sprintf("%s%s %s %-8s %-8s %s %s", pointer(i == s.cursor), box, name, cut(st.Role, 8),
			fmt.Sprintf("%d/%d", st.UpToDate, st.Wanted), net, st.SecurityGroups) + via(st)
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
	lines = append(lines, viaLegend(s.sets, w)...)
	for _, n := range s.notes {
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

// mixedView lists what a HyperShift management cluster offers: its own MachineSets (if it
// serves any), then the NodePools of its hosted clusters, each kind under its own heading with
// its own columns. A cluster without NodePools keeps the MachineSets-only view.
func (s setsModel) mixedView(w, h int) []string {
	var counts []string
	if s.machineAPI {
		counts = append(counts, fmt.Sprintf("%d of %d MachineSets", len(s.chosen()), len(s.sets)))
	}
	if len(s.capi) > 0 {
		counts = append(counts, fmt.Sprintf("%d of %d Cluster API sets", len(s.chosenCAPI()), len(s.capi)))
	}
	if s.hasPools() {
		counts = append(counts, fmt.Sprintf("%d of %d NodePools", len(s.chosenPools()), len(s.pools)))
	}
	lines := []string{strings.Join(counts, " and ") + " selected", ""}

	nw := 4
	for _, st := range s.sets {
		nw = max(nw, len(st.Name))
	}
	for _, p := range s.pools {
		nw = max(nw, len(poolKey(p)))
	}
	for _, c := range s.capi {
		nw = max(nw, len(c.Name))
	}
	nw = min(nw, max(w-46, 14))
	var rows []string
	cursorRow := 0
	if s.machineAPI {
		rows = append(rows, styleTitle.Render(cut("MachineSets", w)),
			styleDim.Render(cut(fmt.Sprintf("      %-*s %-8s %-8s %-12s %s", nw, "NAME", "ROLE", "MACHINES", "STORAGE NET", "SEC. GROUPS"), w)))
		for i, st := range s.sets {
			if i == s.cursor {
				cursorRow = len(rows)
			}
			rows = append(rows, s.setRow(st, i == s.cursor, nw, w))
		}
		if len(s.sets) == 0 {
			rows = append(rows, styleDim.Render("  none in openshift-machine-api"))
		}
		rows = append(rows, "")
	}
	if len(s.capi) > 0 {
		rows = append(rows, styleTitle.Render(cut("Cluster API", w))+styleDim.Render(cut(" MachineSets, MachineDeployments of "+clusterapi.OpenShiftNamespace, max(w-11, 0))),
			styleDim.Render(cut(fmt.Sprintf("      %-*s %-10s %-8s %-*s %-12s %s", nw, "NAME", "KIND", "REPLICAS", capiTemplateWidth, "TEMPLATE", "STORAGE NET", "ON TEMPLATE"), w)))
		for i, c := range s.capi {
			at := len(s.sets) + i
			if at == s.cursor {
				cursorRow = len(rows)
			}
			rows = append(rows, s.capiRow(c, at == s.cursor, nw, w))
		}
		if s.hasPools() {
			rows = append(rows, "")
		}
	}
	if s.hasPools() {
		rows = append(rows, styleTitle.Render(cut("NodePools", w))+styleDim.Render(cut(" of hosted clusters (HyperShift)", max(w-9, 0))),
			styleDim.Render(cut(fmt.Sprintf("      %-*s %-14s %-8s %s", nw, "NODEPOOL", "HOSTED CLUSTER", "REPLICAS", "STORAGE NET"), w)))
		for i, p := range s.pools {
			at := len(s.sets) + len(s.capi) + i
			if at == s.cursor {
				cursorRow = len(rows)
			}
			rows = append(rows, s.poolRow(p, at == s.cursor, nw, w))
		}
		if len(s.pools) == 0 {
			rows = append(rows, styleWarn.Render(cut("  no NodePools on this cluster: nothing to attach", w)))
		}
	}

	var foot []string
	if s.machineAPI && len(s.sets) > 0 {
		foot = append(foot, wrapStyled(styleDim, "MACHINES: up to date / replicas, as machinesets list counts them; the others are replaced in step 6", w)...)
		foot = append(foot, viaLegend(s.sets, w)...)
	}
	if len(s.capi) > 0 {
		foot = append(foot, wrapStyled(styleDim, "Cluster API sets get a new template with the port; ON TEMPLATE: Machines made from the current one / all; step 6 replaces the MachineSets' others, a MachineDeployment rolls by itself", w)...)
	}
	if s.hasPools() {
		foot = append(foot, wrapStyled(styleDim, "NodePools get a port on the storage network; HyperShift rolls the change out itself (step 6 says how)", w)...)
	}
	for _, n := range s.notes {
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

// hasPools: the NodePools section is drawn, also empty on a cluster that offers nothing else.
func (s setsModel) hasPools() bool { return len(s.pools) > 0 || !s.machineAPI }

// setRow is a MachineSet's row, as the MachineSets-only view draws it.
func (s setsModel) setRow(st machinesets.SetStatus, atCursor bool, nw, w int) string {
	if !selectable(st) {
		return pointer(atCursor) + styleDim.Render(cut(fmt.Sprintf(" -  %s %-8s %s", padRight(cutMiddle(st.Name, nw), nw), cut(st.Role, 8), whyNot(st)), max(w-2, 0)))
	}
	box := check(s.selected[st.Name])
	if s.selected[st.Name] {
		box = styleSelected.Render(box)
	}
	name := padRight(cutMiddle(st.Name, nw), nw)
	if atCursor {
		name = styleCursor.Render(name)
	}
	return cut(fmt.Sprintf("%s%s %s %-8s %-8s %s %s", pointer(atCursor), box, name, cut(st.Role, 8),
		fmt.Sprintf("%d/%d", st.UpToDate, st.Wanted), netState(st.StorageNetwork), st.SecurityGroups)+via(st), w)
}

// via marks the row of a MachineSet that is attached through its Cluster API copy.
func via(st machinesets.SetStatus) string {
	if !st.ClusterAPI {
		return ""
	}
	return styleDim.Render("  via CAPI")
}

// viaLegend explains "via CAPI" when a row says it (the mark is short so that it fits at 80
// columns; the legend wraps).
func viaLegend(sets []machinesets.SetStatus, w int) []string {
	for _, st := range sets {
		if st.ClusterAPI {
			return wrapStyled(styleDim, "via CAPI: Cluster API is authoritative for it: its Cluster API copy in "+clusterapi.OpenShiftNamespace+" gets a new template with the port, and is rolled", w)
		}
	}
	return nil
}

// capiRow is a Cluster API object's row: kind, name, replicas, template, storage network,
// Machines made from that template.
func (s setsModel) capiRow(c clusterapi.Status, atCursor bool, nw, w int) string {
	name := padRight(cutMiddle(c.Name, nw), nw)
	kind := padRight(shortKind(c.Kind), 10)
	if !capiSelectable(c) {
		return pointer(atCursor) + styleDim.Render(cut(fmt.Sprintf(" -  %s %s %-8d %s", name, kind, c.Replicas, c.Note), max(w-2, 0)))
	}
	box := check(s.capiSel[capiKey(c)])
	if s.capiSel[capiKey(c)] {
		box = styleSelected.Render(box)
	}
	if atCursor {
		name = styleCursor.Render(name)
	}
	return cut(fmt.Sprintf("%s%s %s %s %-8d %s %s %s", pointer(atCursor), box, name, kind, c.Replicas,
		padRight(cutMiddle(c.Template, capiTemplateWidth), capiTemplateWidth), netState(c.StorageNetwork), fmt.Sprintf("%d/%d", c.OnTemplate, c.Machines)), w)
}

// capiTemplateWidth is the template column's: template names repeat the set's name.
const capiTemplateWidth = 20

// shortKind fits the kind in its column: in the Cluster API section a Deployment can only be a
// MachineDeployment.
func shortKind(kind string) string {
	if kind == clusterapi.KindMachineDeployment {
		return "Deployment"
	}
	return kind
}

// poolRow is a NodePool's row: NAMESPACE/NAME, its HostedCluster, replicas, storage network.
func (s setsModel) poolRow(p nodepools.Status, atCursor bool, nw, w int) string {
	name := padRight(poolLabel(p, nw), nw)
	cluster := padRight(cut(p.HostedCluster, 14), 14)
	if !poolSelectable(p) {
		return pointer(atCursor) + styleDim.Render(cut(fmt.Sprintf(" -  %s %s %-8d %s", name, cluster, p.Replicas, poolWhyNot(p)), max(w-2, 0)))
	}
	box := check(s.poolsSel[poolKey(p)])
	if s.poolsSel[poolKey(p)] {
		box = styleSelected.Render(box)
	}
	if atCursor {
		name = styleCursor.Render(name)
	}
	return cut(fmt.Sprintf("%s%s %s %s %-8d %s", pointer(atCursor), box, name, cluster, p.Replicas, netState(p.StorageNetwork)), w)
}

// poolLabel is NAMESPACE/NAME in n columns: the namespace is shortened first, as NodePools of one
// namespace differ by name (hc1-workers, hc2-workers).
func poolLabel(p nodepools.Status, n int) string {
	key := poolKey(p)
	if len([]rune(key)) <= n {
		return key
	}
	if room := n - len([]rune(p.Name)) - 1; room >= 2 {
		return cut(p.Namespace, room) + "/" + p.Name
	}
	return cutMiddle(p.Name, n)
}

// netState is a storage-network state as the list shows it.
func netState(state string) string {
	switch state {
	case attach.StateAttached:
		return styleOK.Render(fmt.Sprintf("%-12s", "has it"))
	case attach.StateMissing:
		return fmt.Sprintf("%-12s", "missing")
	}
	return fmt.Sprintf("%-12s", state)
}
