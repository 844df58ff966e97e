package workers

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/inuse"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// A removal takes the storage network off machines by replacing them: a MachineDeployment or a
// NodePool at once, a MachineSet through its rollout. The new machines have no port on that
// network, so a pod that mounts a Manila volume there loses it. RemovalRisk is the one check
// of that, for every kind: the commands and the wizard ask it and say its answer; --force turns
// its refusal into warnings, the same way for every kind.

// Removal is what a removal is about to replace.
type Removal struct {
	// Planned are the rows of the removal's dry run, of any kind (nil: nothing is written, only
	// rolled, as by `machinesets rollout`).
	Planned []attach.Result
	// MachineSets are the Machine API sets that will be rolled afterwards (nil: none).
	MachineSets *machinesets.Selection
}

// RemovalRisk is what stands in the way of a removal.
type RemovalRisk struct {
	// Mounts are the pods on the nodes of the replaced machines that use Manila volumes.
	Mounts []attach.Mount
	// Unseen are nodes whose pods could not be read (a workload or hosted cluster), and why.
	Unseen []Unseen
	// Checked says what was read and found clear, where that is worth saying (hosted clusters).
	Checked string
}

// Unseen is a group of replaced machines whose nodes could not be read.
type Unseen struct {
	// What names the objects whose machines are replaced, and what the removal does to them.
	What string
	// Why their nodes could not be read.
	Why string
}

// Clear says nothing stands in the way.
func (r RemovalRisk) Clear() bool { return len(r.Mounts) == 0 && len(r.Unseen) == 0 }

// Verdict is the answer to the user: nil when clear; with force, the warnings to print (one
// line each) and nil; without, the refusal (*attach.MountedError or *UnseenError), whose words
// end with done (what was changed before it; "" is nothing).
func (r RemovalRisk) Verdict(force bool, done string) (warnings []string, err error) {
	if r.Clear() {
		return nil, nil
	}
	if !force {
		if len(r.Mounts) > 0 {
			return nil, &attach.MountedError{Mounts: r.Mounts, Done: done}
		}
		return nil, &UnseenError{Unseen: r.Unseen, Done: done}
	}
	for _, m := range r.Mounts {
		warnings = append(warnings, fmt.Sprintf("--force: replacing the machine of node %s although a pod there uses a Manila volume: %s", m.Node, m))
	}
	for _, u := range r.Unseen {
		warnings = append(warnings, fmt.Sprintf("--force: removing anyway from %s; %s", u.What, u.Why))
	}
	return warnings, nil
}

// UnseenError refuses a removal whose replaced machines' nodes could not be read: pods there
// may use Manila volumes over the network it takes off, out of sight.
type UnseenError struct {
	Unseen []Unseen
	// Done says what was changed before the refusal; "" is nothing.
	Done string
}

func (e *UnseenError) Error() string {
	lines := make([]string, len(e.Unseen))
	for i, u := range e.Unseen {
		lines[i] = fmt.Sprintf("  %s; %s", u.What, u.Why)
	}
	return fmt.Sprintf("refusing to remove the storage network: it replaces the machines of the objects below, and pods on them may use Manila volumes over that network, in clusters manila-setup could not read:\n%s\nCheck there that no pod on those nodes uses a PersistentVolume of %s, then run again with --force; %s",
		strings.Join(lines, "\n"), attach.ManilaDriver, cmp.Or(e.Done, "nothing was changed"))
}

// RemovalRisk finds the pods that the removal would cut off from their Manila volumes, kind by
// kind: the nodes of the Machine API Machines its rollout replaces, those of the masters when
// it changes the ControlPlaneMachineSet, those of the Cluster API
// Machines of the sets and deployments it changes (in the openshift-machine-api namespace; in
// another they are a workload cluster's, unseen), and, in each hosted cluster, those of the
// NodePools it changes (read with HyperShift's admin kubeconfig; unseen when that fails).
func (c Cluster) RemovalRisk(ctx context.Context, r Removal) (RemovalRisk, error) {
	var risk RemovalRisk
	var nodes []string
	if r.MachineSets != nil {
		var planned []attach.Result
		for _, res := range r.Planned {
			if SectionOf(res) == SectionMachineSets {
				planned = append(planned, res)
			}
		}
		found, err := machinesets.RemovalNodes(ctx, c.Machines, *r.MachineSets, planned)
		if err != nil {
			return risk, err
		}
		nodes = append(nodes, found...)
	}
	if slices.ContainsFunc(r.Planned, func(res attach.Result) bool { return SectionOf(res) == SectionControlPlane && res.Writes() }) {
		// Its operator replaces every master once the template changes.
		found, err := machinesets.ControlPlaneNodes(ctx, c.Machines)
		if err != nil {
			return risk, err
		}
		nodes = append(nodes, found...)
	}
	byNamespace := map[string][]attach.Result{}
	var pools []nodepools.Pool
	described := map[nodepools.Pool]string{}
	for _, res := range r.Planned {
		switch SectionOf(res) {
		case SectionClusterAPI:
			byNamespace[res.Namespace] = append(byNamespace[res.Namespace], res)
		case SectionNodePools:
			if res.Writes() {
				p := nodepools.Pool{Namespace: res.Namespace, Name: res.Name, HostedCluster: res.HostedCluster}
				pools = append(pools, p)
				described[p] = res.Change()
			}
		}
	}
	for ns, planned := range byNamespace {
		found, elsewhere, err := clusterapi.RemovalNodes(ctx, c.Dynamic, ns, planned)
		if err != nil {
			return risk, err
		}
		if elsewhere != "" {
			risk.Unseen = append(risk.Unseen, Unseen{What: fmt.Sprintf("the Cluster API sets and deployments of namespace %s", ns), Why: elsewhere})
		}
		nodes = append(nodes, found...)
	}
	if len(nodes) > 0 {
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		mounts, err := inuse.ManilaMounts(ctx, c.Kube, nodes)
		if err != nil {
			return risk, err
		}
		risk.Mounts = mounts
	}
	if len(pools) > 0 {
		mounts, unseen := nodepools.HostedMounts(ctx, c.Dynamic, pools)
		risk.Mounts = append(risk.Mounts, mounts...)
		for _, u := range unseen {
			risk.Unseen = append(risk.Unseen, Unseen{
				What: fmt.Sprintf("NodePool %s/%s (HostedCluster %s): %s", u.Pool.Namespace, u.Pool.Name, u.Pool.HostedCluster, described[u.Pool]),
				Why:  "its hosted cluster could not be read: " + u.Reason,
			})
		}
		if len(mounts) == 0 && len(unseen) == 0 {
			risk.Checked = fmt.Sprintf("checked: no pod on the nodes of %d NodePool(s) uses a Manila volume (read in their hosted clusters)", len(pools))
		}
	}
	return risk, nil
}
