package wizard

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

// The apply screen's words once the patch ran: the progress of what rolls by itself, the line
// that says all is done, and the closing sentence.

// followedSection is what the apply screen knows, once the patch ran, of the chosen rows of one
// section that roll by themselves: what progressLines say of them.
type followedSection struct {
	// Section is the rows' section ID.
	Section string
	// Rows are the section's chosen rows that roll by themselves, as last read.
	Rows []workers.Row
	// Results are the patch's (each row finds its own); none while it runs.
	Results []attach.Result
	// Dry: a dry run, nothing was patched. Compact: one line per row where the kind can.
	Dry, Compact bool
	// Err: the last read of their progress failed.
	Err string
}

// progressLines say, kind by kind, what the patch did to the rows of f and how far the rollout
// their own controller does is, as last read, with the command that follows it.
func progressLines(f followedSection) []screenLine {
	switch f.Section {
	case workers.SectionClusterAPI:
		return machineDeploymentProgress(f)
	case workers.SectionNodePools:
		return nodePoolProgress(f)
	case workers.SectionControlPlane:
		return controlPlaneProgress(f)
	}
	return nil
}

// pending is the line of a row of f named name whose patch has no result to tell: in a dry
// run, what it would get (would); before the patch answers (ok false), that it waits. nil once
// its result is there.
func pending(f followedSection, name, would string, ok bool) *screenLine {
	switch {
	case f.Dry:
		return &screenLine{Text: name + ": dry run, " + would}
	case !ok:
		return &screenLine{Text: name + ": waiting for the patch", Cut: true}
	}
	return nil
}

// listedStatus is the status row r was listed with, of its kind's type T; blank where the row
// has none (a row chosen before its kind was read).
func listedStatus[T any](r workers.Row, blank T) *T {
	if s, ok := r.Status.(*T); ok && s != nil {
		return s
	}
	return &blank
}

// machineDeploymentProgress: the new template of each chosen MachineDeployment, who replaces
// its Machines, and how many are made from that template.
func machineDeploymentProgress(f followedSection) []screenLine {
	var lines []screenLine
	if f.Err != "" {
		lines = append(lines, screenLine{Text: "the MachineDeployments' progress could not be read: " + f.Err, Tone: toneWarn})
	}
	for _, r := range f.Rows {
		c := listedStatus(r, clusterapi.Status{Kind: r.Kind, Name: r.Name})
		name := "MachineDeployment " + r.Name
		res, ok := workers.ResultOf(r, f.Results)
		if l := pending(f, name, "would get a new template with the port (if it lacks one)", ok); l != nil {
			lines = append(lines, *l)
			continue
		}
		switch {
		case res.Action == attach.ActionPatched:
			lines = append(lines, screenLine{Text: fmt.Sprintf("%s: patched, makes its Machines from OpenStackMachineTemplate %s (was %s)", name, res.Template, res.OldTemplate)},
				screenLine{Text: "  Cluster API replaces its Machines itself (its rolling update); watch: oc get machinedeployment -n " + clusterapi.OpenShiftNamespace + " " + r.Name, Tone: toneDim})
			if c.Template == res.Template {
				// Read since the patch: how far the rolling update is.
				lines = append(lines, screenLine{Text: fmt.Sprintf("  now: %d of %d Machines made from %s", c.OnTemplate, c.Replicas, res.Template)})
			}
		default:
			lines = append(lines, screenLine{Text: name + ": " + res.Action + ", " + res.Reason})
		}
	}
	return lines
}

// controlPlaneWatch is the command that follows the masters' replacement, and oc's.
const controlPlaneWatch = "manila-setup controlplane list (or oc get controlplanemachineset -n " + machinesets.Namespace + " " + machinesets.ControlPlaneName + ")"

// controlPlaneProgress: what the patch did to the ControlPlaneMachineSet, who replaces the
// masters, and how many are on the template once read since the patch (its template has the
// network); compact: one line.
func controlPlaneProgress(f followedSection) []screenLine {
	var lines []screenLine
	if f.Err != "" {
		lines = append(lines, screenLine{Text: "the control plane's progress could not be read: " + f.Err, Tone: toneWarn})
	}
	for _, r := range f.Rows {
		cp := listedStatus(r, machinesets.ControlPlaneStatus{Name: r.Name})
		name := machinesets.ControlPlaneKind + " " + r.Name
		now := ""
		if cp.StorageNetwork == attach.StateAttached {
			now = fmt.Sprintf("now: %d of %d masters on the template", cp.OnNetworks, cp.Masters)
		}
		res, ok := workers.ResultOf(r, f.Results)
		if l := pending(f, name, "its template would get the network (if it lacks it), and its operator would replace the masters one at a time", ok); l != nil {
			lines = append(lines, *l)
			continue
		}
		switch {
		case f.Compact:
			lines = append(lines, screenLine{Text: name + ": " + res.Action + " · " + cmp.Or(now, "its operator replaces the masters one at a time"), Cut: true})
		case res.Action == attach.ActionPatched:
			lines = append(lines, screenLine{Text: name + ": patched, " + describeAdded(res)},
				screenLine{Text: fmt.Sprintf("  the control-plane-machine-set operator replaces the masters one at a time (%s); watch: %s", cmp.Or(cp.Strategy, "RollingUpdate"), controlPlaneWatch), Tone: toneDim})
			if now != "" {
				lines = append(lines, screenLine{Text: "  " + now})
			}
		default:
			lines = append(lines, screenLine{Text: name + ": " + res.Action + ", " + res.Reason})
		}
	}
	return lines
}

// nodePoolProgress: per chosen NodePool, what its patch did and what HyperShift is doing about
// it (read from its status), with the command that follows it; compact: one line each, and the
// command once.
func nodePoolProgress(f followedSection) []screenLine {
	var lines []screenLine
	patched := false
	for _, r := range f.Rows {
		p := listedStatus(r, nodepools.Status{Namespace: r.Namespace, Name: r.Name})
		name := "NodePool " + r.Key
		res, ok := workers.ResultOf(r, f.Results)
		patched = patched || ok
		if l := pending(f, name, "would get its port (if it lacks one)", ok); l != nil {
			lines = append(lines, *l)
			continue
		}
		if f.Compact {
			lines = append(lines, screenLine{Text: name + ": " + res.Action + " · " + nodePoolNow(*p), Cut: true})
			continue
		}
		if res.Action == attach.ActionPatched {
			lines = append(lines, screenLine{Text: name + ": patched, adds a port on network " + strings.Join(res.AddedNetworks, ", ")},
				screenLine{Text: "  " + nodePoolRollsHow(*p), Tone: toneDim})
		} else {
			lines = append(lines, screenLine{Text: name + ": " + res.Action + ", " + res.Reason})
		}
		lines = append(lines, screenLine{Text: "  now: " + nodePoolNow(*p), Tone: toneDim},
			screenLine{Text: "  watch: oc get nodepool -n " + r.Namespace + " " + r.Name, Tone: toneDim, Cut: true})
	}
	if f.Compact && patched {
		lines = append(lines, screenLine{Text: "  HyperShift rolls them out itself; watch: " + nodePoolWatch(f.Rows), Tone: toneDim, Cut: true})
	}
	if f.Err != "" && len(f.Rows) > 0 {
		lines = append(lines, screenLine{Text: "  reading the NodePools' progress failed: " + f.Err, Tone: toneWarn})
	}
	return lines
}

// nodePoolWatch is the command that follows the NodePools of rows: those of one namespace, or
// all.
func nodePoolWatch(rows []workers.Row) string {
	ns := ""
	for _, r := range rows {
		if ns != "" && r.Namespace != ns {
			return "oc get nodepools -A"
		}
		ns = r.Namespace
	}
	if len(rows) == 1 {
		return "oc get nodepool -n " + ns + " " + rows[0].Name
	}
	return "oc get nodepools -n " + ns
}

// nodePoolRollsHow says what HyperShift does with a platform change of p, as its upgradeType
// says (HyperShift's NodePool lifecycle: InPlace NodePools apply platform changes to new nodes
// only).
func nodePoolRollsHow(p nodepools.Status) string {
	switch p.UpgradeType {
	case "InPlace":
		return "upgradeType InPlace: only machines created from now on get the port, the running ones keep theirs until they are replaced"
	case "Replace":
		return "HyperShift replaces its machines (upgradeType Replace)"
	}
	return "HyperShift rolls the change out as its upgradeType says"
}

// nodePoolNow is a NodePool's state as its status tells it: its nodes, and what it is updating
// or why it is not ready.
func nodePoolNow(p nodepools.Status) string {
	text := fmt.Sprintf("%d of %d nodes", p.CurrentNodes, p.Replicas)
	for _, c := range p.Conditions {
		if c.Status == "True" && c.Type != "Ready" && strings.HasPrefix(c.Type, "Updating") {
			return text + " · " + c.Type + ": " + cmp.Or(c.Message, c.Reason)
		}
	}
	for _, c := range p.Conditions {
		if c.Type != "Ready" {
			continue
		}
		if c.Status == "True" {
			return text + " · Ready"
		}
		return text + " · not Ready: " + cmp.Or(c.Message, c.Reason)
	}
	return text + " · HyperShift has not reported its state yet"
}

// controlPlaneReplaced is what the closing words say of the ControlPlaneMachineSet's masters.
const controlPlaneReplaced = "the ControlPlaneMachineSet's masters are replaced by its operator, one at a time"

// doneLine is what the apply screen says once every chosen row is patched and the rows it rolls
// are rolled; the control plane, when chosen, after the other kinds.
func doneLine(rows []workers.Row) screenLine {
	others, cp := apartFromControlPlane(rows)
	switch {
	case len(cp) == 0:
		return workersDoneLine(rows)
	case len(others) == 0:
		return screenLine{Text: "✓ the ControlPlaneMachineSet was patched; " + controlPlaneReplaced + " (below)", Tone: toneGood}
	}
	l := workersDoneLine(others)
	l.Text, l.Cut = l.Text+"; "+controlPlaneReplaced+" (below)", false
	return l
}

// apartFromControlPlane splits rows into the control plane's and the others.
func apartFromControlPlane(rows []workers.Row) (others, cp []workers.Row) {
	for _, r := range rows {
		if r.Section == workers.SectionControlPlane {
			cp = append(cp, r)
		} else {
			others = append(others, r)
		}
	}
	return others, cp
}

// workersDoneLine is doneLine for rows without the control plane.
func workersDoneLine(rows []workers.Row) screenLine {
	g := rowsByKindOf(rows)
	switch {
	case len(g.capiSets)+len(g.deployments) > 0:
		return screenLine{Text: "✓ every chosen set was patched and the MachineSets' machines replaced; a MachineDeployment's are replaced by Cluster API itself (below)", Tone: toneGood}
	case len(g.pools) == 0:
		return screenLine{Text: "✓ every chosen MachineSet was patched and its machines replaced", Tone: toneGood, Cut: true}
	case len(g.sets) == 0:
		return screenLine{Text: "✓ every chosen NodePool has its port on the storage network; HyperShift rolls the change out itself (below)", Tone: toneGood}
	}
	return screenLine{Text: "✓ every chosen MachineSet was patched and its machines replaced; every chosen NodePool has its port, HyperShift rolls it out itself (below)", Tone: toneGood}
}

// summaryOf is the closing sentence once the rows are patched and rolled: what networks were
// attached to which kind, and who replaced or replaces its machines; the control plane, when
// chosen, last.
func summaryOf(networks []string, rows []workers.Row) string {
	others, cp := apartFromControlPlane(rows)
	if len(cp) == 0 {
		return workersSummary(networks, rows)
	}
	set := machinesets.ControlPlaneKind + " " + cp[0].Name
	if len(others) == 0 {
		return fmt.Sprintf("Attached network %s to %s; %s: watch `manila-setup controlplane list`.", strings.Join(networks, ", "), set, controlPlaneReplaced)
	}
	return fmt.Sprintf("%s The network was also attached to %s: %s (watch `manila-setup controlplane list`).", workersSummary(networks, others), set, controlPlaneReplaced)
}

// workersSummary is summaryOf for rows without the control plane.
func workersSummary(networks []string, rows []workers.Row) string {
	g := rowsByKindOf(rows)
	nets := strings.Join(networks, ", ")
	switch {
	case len(g.capiSets)+len(g.deployments) > 0:
	case len(g.pools) == 0:
		return fmt.Sprintf("Attached network %s to MachineSets %s; their machines were replaced.", nets, strings.Join(g.sets, ", "))
	case len(g.sets) == 0:
		return fmt.Sprintf("Attached network %s to NodePools %s; HyperShift rolls the change out itself: watch `%s`.", nets, strings.Join(rowKeys(g.pools), ", "), nodePoolWatch(g.pools))
	default:
		return fmt.Sprintf("Attached network %s to MachineSets %s (their machines were replaced) and to NodePools %s; HyperShift rolls the NodePools out itself: watch `%s`.",
			nets, strings.Join(g.sets, ", "), strings.Join(rowKeys(g.pools), ", "), nodePoolWatch(g.pools))
	}
	var parts []string
	parts = append(parts, machineSetParts(g.sets)...)
	parts = append(parts, clusterAPIParts(g.capiSets, g.deployments)...)
	parts = append(parts, nodePoolParts(g.pools)...)
	return fmt.Sprintf("Attached network %s to %s.", nets, strings.Join(parts, "; "))
}

// rowsByKind are the chosen rows by what the closing words say of them.
type rowsByKind struct {
	sets, capiSets, deployments []string
	pools                       []workers.Row
}

func rowsByKindOf(rows []workers.Row) rowsByKind {
	var g rowsByKind
	for _, r := range rows {
		switch {
		case r.Section == workers.SectionMachineSets:
			g.sets = append(g.sets, r.Name)
		case r.Section == workers.SectionClusterAPI && r.Kind == clusterapi.KindMachineDeployment:
			g.deployments = append(g.deployments, r.Name)
		case r.Section == workers.SectionClusterAPI:
			g.capiSets = append(g.capiSets, r.Name)
		case r.Section == workers.SectionNodePools:
			g.pools = append(g.pools, r)
		}
	}
	return g
}

func rowKeys(rows []workers.Row) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key
	}
	return out
}

// machineSetParts: what the summary says of the Machine API MachineSets.
func machineSetParts(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	return []string{"MachineSets " + strings.Join(names, ", ") + " (their machines were replaced)"}
}

// clusterAPIParts: what the summary says of the Cluster API MachineSets and MachineDeployments.
func clusterAPIParts(sets, deployments []string) []string {
	var parts []string
	if len(sets) > 0 {
		parts = append(parts, "Cluster API MachineSets "+strings.Join(sets, ", ")+" (their Machines were replaced)")
	}
	if len(deployments) > 0 {
		parts = append(parts, "MachineDeployments "+strings.Join(deployments, ", ")+" (Cluster API replaces their Machines itself: watch `oc get machinedeployments -n "+clusterapi.OpenShiftNamespace+"`)")
	}
	return parts
}

// nodePoolParts: what the summary says of the NodePools.
func nodePoolParts(pools []workers.Row) []string {
	if len(pools) == 0 {
		return nil
	}
	return []string{"NodePools " + strings.Join(rowKeys(pools), ", ") + " (HyperShift rolls them out itself: watch `" + nodePoolWatch(pools) + "`)"}
}
