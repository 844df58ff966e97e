package workers

import (
	"cmp"
	"fmt"
	"strings"

	machinev1 "github.com/openshift/api/machine/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// Rolls says who replaces the machines of an object once it is patched.
type Rolls string

const (
	// ByRollout: manila-setup's rollout (Cluster.Roll) replaces them.
	ByRollout Rolls = "rollout"
	// ByItself: the object's own controller does (a MachineDeployment's, HyperShift for a
	// NodePool); its progress is read from its status.
	ByItself Rolls = "itself"
)

// Offer is the inventory as a screen offers it: one section per kind present, in the order
// Patch takes them, the rows of every section in that order too.
type Offer struct {
	Sections []Section
	// Choose names what one row is, for "choose at least one …": "MachineSet",
	// "MachineSet or NodePool", "MachineSet or Cluster API set".
	Choose string
	// Notes say which kinds could not be read (the others are offered).
	Notes []string
}

// Rows are the rows of every section, in order.
func (o Offer) Rows() []Row {
	var rows []Row
	for _, s := range o.Sections {
		rows = append(rows, s.Rows...)
	}
	return rows
}

// Section is the objects of one kind, with what a list of them says.
type Section struct {
	// ID names the section; Row.Section refers to it.
	ID string
	// Title heads the section; Subtitle follows it, dimmed.
	Title, Subtitle string
	// Noun is what "N of M …" counts: "MachineSets", "NodePools".
	Noun string
	// NameHeading heads the name column; Headings the other columns, formatted as the rows' Cells.
	NameHeading, Headings string
	// Empty is said in place of the rows when there are none; EmptyWarns: that is a warning
	// (there is nothing to attach), not a remark.
	Empty      string
	EmptyWarns bool
	// Plain: when it is the only section it is listed without its heading (the screen's title
	// names the kind).
	Plain bool
	Rows  []Row
}

// Cell is one column of a row, formatted (padded) as the list shows it.
type Cell struct {
	Text string
	// Good: a state that needs nothing more (the storage network is there).
	Good bool
}

// Row is one object to choose.
type Row struct {
	// Section is the ID of the row's Section.
	Section string
	// Kind, Namespace and Name are the object's, as attach.Result names them: a result is the
	// row's when all three match.
	Kind, Namespace, Name string
	// Key names the object in a Selection (Select).
	Key string
	// Scope is the namespace the listed label starts with (NAMESPACE/NAME), shortened first
	// when the label does not fit; empty: the label is the name.
	Scope string
	// What names the object in a sentence: "MachineSet x", "NodePool ns/x".
	What string
	// Cells are the columns after the name when the row can be chosen; a row that cannot keeps
	// the first Short of them, then says WhyNot.
	Cells []Cell
	Short int
	// Mark is said after the cells, dimmed ("via CAPI"); the wizard's legend explains it.
	Mark string
	// Selectable: the object can be patched; else WhyNot says why.
	Selectable bool
	WhyNot     string
	// Preselected: chosen unless the user says otherwise.
	Preselected bool
	// Rolls says who replaces its machines once patched.
	Rolls Rolls
	// Joins is the cluster its machines join when it is not this one (a NodePool's
	// HostedCluster, in its namespace).
	Joins string
	// AlwaysFollowed: a row that rolls by itself whose progress is read once the patch ran,
	// whether or not the patch changed it (HyperShift may still be rolling an earlier change);
	// else it is read only when the patch changed it.
	AlwaysFollowed bool
	// Status is the object as listed, a pointer to its kind's status (*machinesets.SetStatus,
	// *clusterapi.Status or *nodepools.Status): what the wizard's progress lines read of it.
	Status any
}

// Label is the row's name as listed.
func (r Row) Label() string {
	if r.Scope != "" {
		return r.Scope + "/" + r.Name
	}
	return r.Name
}

// Is reports whether res is the result of the row's object.
func (r Row) Is(res attach.Result) bool {
	return res.Kind == r.Kind && res.Namespace == r.Namespace && res.Name == r.Name
}

// Select is what rows choose, as Patch and Roll take it: nothing of a kind none of whose rows
// is there.
func Select(rows []Row) Selection {
	var sel Selection
	for _, r := range rows {
		switch r.Section {
		case SectionMachineSets:
			if sel.MachineSets == nil {
				sel.MachineSets = &machinesets.Selection{}
			}
			sel.MachineSets.Names = append(sel.MachineSets.Names, r.Key)
		case SectionClusterAPI:
			sel.ClusterAPI = append(sel.ClusterAPI, r.Key)
		case SectionNodePools:
			sel.NodePools = append(sel.NodePools, r.Key)
		case SectionControlPlane:
			sel.ControlPlane = true
		}
	}
	return sel
}

// Offer is the inventory as a screen offers it; served are the kinds the cluster serves (those
// the inventory was read for).
func (inv *Inventory) Offer(served Kinds) Offer {
	o := Offer{Notes: inv.Notes}
	// A kind's section is listed when the cluster serves it and has some of it; the
	// MachineSets always where served, the NodePools (empty) where nothing else can be, the
	// control plane last, where the cluster has a ControlPlaneMachineSet.
	alone := len(inv.ClusterAPI) == 0 && len(inv.NodePools) == 0 && inv.ControlPlane == nil
	if served.MachineSets {
		o.Sections = append(o.Sections, machineSetSection(inv.MachineSets, alone))
	}
	if len(inv.ClusterAPI) > 0 {
		o.Sections = append(o.Sections, clusterAPISection(inv.ClusterAPI))
	}
	if len(inv.NodePools) > 0 || !served.MachineSets {
		o.Sections = append(o.Sections, nodePoolSection(inv.NodePools))
	}
	if inv.ControlPlane != nil {
		o.Sections = append(o.Sections, controlPlaneSection(inv.ControlPlane))
	}
	var choose []string
	if served.MachineSets || len(inv.NodePools) == 0 {
		choose = append(choose, "MachineSet")
	}
	if len(inv.ClusterAPI) > 0 {
		choose = append(choose, "Cluster API set")
	}
	if len(inv.NodePools) > 0 {
		choose = append(choose, "NodePool")
	}
	if inv.ControlPlane != nil {
		choose = append(choose, machinesets.ControlPlaneKind)
	}
	o.Choose = strings.Join(choose, " or ")
	return o
}

// Rows are the rows of every kind of the inventory (as Offer lists them): what a later read
// says of objects chosen earlier.
func (inv *Inventory) Rows() []Row {
	var rows []Row
	rows = append(rows, machineSetSection(inv.MachineSets, false).Rows...)
	rows = append(rows, clusterAPISection(inv.ClusterAPI).Rows...)
	rows = append(rows, nodePoolSection(inv.NodePools).Rows...)
	if inv.ControlPlane != nil {
		rows = append(rows, controlPlaneSection(inv.ControlPlane).Rows...)
	}
	return rows
}

// The IDs of the sections, one per kind.
const (
	SectionMachineSets = "machinesets"
	SectionClusterAPI  = "clusterapi"
	SectionNodePools   = "nodepools"
	// SectionControlPlane is the ControlPlaneMachineSet's: the masters.
	SectionControlPlane = "controlplane"
)

// SectionOf is the ID of the section whose row res is the result of.
func SectionOf(res attach.Result) string {
	switch {
	case res.Kind == "NodePool":
		return SectionNodePools
	case res.Kind == machinesets.ControlPlaneKind:
		return SectionControlPlane
	case res.Namespace == machinesets.Namespace:
		return SectionMachineSets
	}
	return SectionClusterAPI
}

// machineSetSection lists the Machine API MachineSets: workers preselected, control plane never
// touched; alone: they are all the cluster offers.
func machineSetSection(sets []machinesets.SetStatus, alone bool) Section {
	s := Section{ID: SectionMachineSets, Title: "MachineSets", Noun: "MachineSets", Plain: true,
		NameHeading: "NAME", Headings: fmt.Sprintf("%-8s %-8s %-12s %s", "ROLE", "MACHINES", "STORAGE NET", "SEC. GROUPS"),
		Empty: "none in " + machinesets.Namespace}
	if alone {
		s.Empty, s.EmptyWarns = "no MachineSets in "+machinesets.Namespace+": nothing to attach", true
	}
	for _, st := range sets {
		r := Row{Section: s.ID, Kind: "MachineSet", Namespace: machinesets.Namespace, Name: st.Name, Key: st.Name,
			What: "MachineSet " + st.Name, Short: 1, Rolls: ByRollout,
			Selectable: !machinesets.IsControlPlane(st.Role) && st.StorageNetwork != attach.StateNA,
			Status:     &st,
			Cells: []Cell{{Text: fmt.Sprintf("%-8s", cutEnd(st.Role, 8))}, {Text: fmt.Sprintf("%-8s", fmt.Sprintf("%d/%d", st.UpToDate, st.Wanted))},
				stateCell(st.StorageNetwork), {Text: st.SecurityGroups}}}
		r.Preselected = r.Selectable && st.Role == "worker"
		switch {
		case machinesets.IsControlPlane(st.Role):
			r.WhyNot = "control plane: never touched"
		case st.Note != "":
			r.WhyNot = st.Note
		default:
			r.WhyNot = "it is not an OpenStack MachineSet"
		}
		if st.ClusterAPI {
			r.Mark = "via CAPI"
		}
		s.Rows = append(s.Rows, r)
	}
	return s
}

// clusterAPITemplateWidth is the template column's: template names repeat the set's name.
const clusterAPITemplateWidth = 20

// clusterAPISection lists the Cluster API MachineSets and MachineDeployments offered on their
// own; those clusterapi can patch are preselected, the others say why not (paused, made by a
// MachineDeployment, another provider's, their template missing).
func clusterAPISection(objects []clusterapi.Status) Section {
	s := Section{ID: SectionClusterAPI, Title: "Cluster API", Subtitle: "MachineSets, MachineDeployments of " + clusterapi.OpenShiftNamespace, Noun: "Cluster API sets",
		NameHeading: "NAME", Headings: fmt.Sprintf("%-10s %-8s %-*s %-12s %s", "KIND", "REPLICAS", clusterAPITemplateWidth, "TEMPLATE", "STORAGE NET", "ON TEMPLATE")}
	for _, c := range objects {
		// In this section a Deployment can only be a MachineDeployment.
		kind := c.Kind
		rolls := ByRollout
		if c.Kind == clusterapi.KindMachineDeployment {
			kind, rolls = "Deployment", ByItself
		}
		ok := c.StorageNetwork != attach.StateNA
		s.Rows = append(s.Rows, Row{Section: s.ID, Kind: c.Kind, Namespace: clusterapi.OpenShiftNamespace, Name: c.Name,
			Key: strings.ToLower(c.Kind) + "/" + c.Name, What: "Cluster API " + c.Kind + " " + c.Name,
			Cells: []Cell{{Text: fmt.Sprintf("%-10s", kind)}, {Text: fmt.Sprintf("%-8d", c.Replicas)},
				{Text: fmt.Sprintf("%-*s", clusterAPITemplateWidth, cutMiddle(c.Template, clusterAPITemplateWidth))}, stateCell(c.StorageNetwork),
				{Text: fmt.Sprintf("%d/%d", c.OnTemplate, c.Machines)}},
			Short: 2, Selectable: ok, WhyNot: c.Note, Preselected: ok, Rolls: rolls, Status: &c})
	}
	return s
}

// nodePoolSection lists the NodePools of the hosted clusters: the OpenStack ones preselected (a
// NodePool is a hosted cluster's workers), the others have no additional ports to add to.
func nodePoolSection(pools []nodepools.Status) Section {
	s := Section{ID: SectionNodePools, Title: "NodePools", Subtitle: "of hosted clusters (HyperShift)", Noun: "NodePools",
		NameHeading: "NODEPOOL", Headings: fmt.Sprintf("%-14s %-8s %s", "HOSTED CLUSTER", "REPLICAS", "STORAGE NET"),
		Empty: "no NodePools on this cluster: nothing to attach", EmptyWarns: true}
	for _, p := range pools {
		ok := p.StorageNetwork != attach.StateNA
		platform := p.Platform
		if platform == "" {
			platform = "none"
		}
		key := p.Namespace + "/" + p.Name
		s.Rows = append(s.Rows, Row{Section: s.ID, Kind: "NodePool", Namespace: p.Namespace, Name: p.Name, Key: key, Scope: p.Namespace,
			What:  "NodePool " + key,
			Cells: []Cell{{Text: fmt.Sprintf("%-14s", cutEnd(p.HostedCluster, 14))}, {Text: fmt.Sprintf("%-8d", p.Replicas)}, stateCell(p.StorageNetwork)},
			Short: 2, Selectable: ok, WhyNot: "not OpenStack (" + platform + ")", Preselected: ok, Rolls: ByItself, Joins: p.HostedCluster,
			AlwaysFollowed: true, Status: &p})
	}
	return s
}

// controlPlaneSection lists the ControlPlaneMachineSet: one row, never preselected (every
// master is replaced), its cost said in its cells. It can be chosen only where its operator
// rolls the change out by itself, at once and safely: Active, RollingUpdate, the masters and
// the ClusterOperators they lean on at rest (ControlPlaneList's Note says which is not).
func controlPlaneSection(cp *machinesets.ControlPlaneStatus) Section {
	st := *cp
	s := Section{ID: SectionControlPlane, Title: "Control plane", Subtitle: "the masters, through the " + machinesets.ControlPlaneKind + " of " + machinesets.Namespace,
		Noun: machinesets.ControlPlaneKind, NameHeading: "NAME", Headings: fmt.Sprintf("%-12s %s", "STORAGE NET", "IF CHOSEN")}
	cost := fmt.Sprintf("replaces the %d masters, one at a time", st.Replicas)
	if st.StorageNetwork == attach.StateAttached && st.SecurityGroups == attach.StateAttached {
		cost = fmt.Sprintf("nothing to change: %d of %d masters on the template", st.OnNetworks, st.Masters)
	}
	r := Row{Section: s.ID, Kind: machinesets.ControlPlaneKind, Namespace: machinesets.Namespace, Name: st.Name,
		Key: strings.ToLower(machinesets.ControlPlaneKind) + "/" + st.Name, What: machinesets.ControlPlaneKind + " " + st.Name,
		Cells: []Cell{stateCell(st.StorageNetwork), {Text: cost}}, Short: 1, Rolls: ByItself, Status: &st}
	switch {
	case st.StorageNetwork == attach.StateNA || st.State != string(machinev1.ControlPlaneMachineSetStateActive) ||
		st.Strategy != string(machinev1.RollingUpdate) && st.Strategy != string(machinev1.OnDelete):
		// Not an OpenStack template, Inactive, Recreate: the Note has ControlPlaneSafety's words.
		r.WhyNot = cmp.Or(st.Note, "its state is "+st.State+", its strategy "+st.Strategy)
	case st.Strategy == string(machinev1.OnDelete):
		r.WhyNot = "strategy OnDelete: the masters are replaced only when their Machines are deleted; run `manila-setup controlplane patch --rollout` to patch it and replace them one at a time"
	case st.Note != "":
		r.WhyNot = st.Note
	default:
		r.Selectable = true
	}
	s.Rows = append(s.Rows, r)
	return s
}

// stateCell is a storage-network state as the lists show it.
func stateCell(state string) Cell {
	switch state {
	case attach.StateAttached:
		return Cell{Text: fmt.Sprintf("%-12s", "has it"), Good: true}
	case attach.StateMissing:
		return Cell{Text: fmt.Sprintf("%-12s", "missing")}
	}
	return Cell{Text: fmt.Sprintf("%-12s", state)}
}

// cutEnd shortens s to n characters, ending in … when something was cut.
func cutEnd(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	return string(r[:n-1]) + "…"
}

// cutMiddle shortens s to n characters by leaving out its middle, where names that share a
// prefix and differ at the end stay apart.
func cutMiddle(s string, n int) string {
	r := []rune(s)
	if len(r) <= n || n < 5 {
		return cutEnd(s, n)
	}
	tail := n / 2
	head := n - tail - 1
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}
