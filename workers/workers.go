// Package workers is the one use case above the kinds of machines: attach the storage network to
// the workers of this cluster and roll them, whatever makes their machines — the Machine API's
// MachineSets (and, for those Cluster API is authoritative for, their Cluster API copies),
// Cluster API's own sets, HyperShift's NodePools, and the masters through the
// ControlPlaneMachineSet where they run workloads. The CLI commands and the wizard call it, so
// that both do the same; each kind is an adapter package of its own (machinesets, clusterapi,
// nodepools) over the model in package attach. What the wizard offers and follows is decided
// here (Offer, Select, Follows); the sentences it makes of them are its own
// (cmd/manila-setup/wizard, words*.go).
package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// Cluster is the clients of one cluster. A kind the cluster does not serve needs no client.
type Cluster struct {
	Machines machineclient.Interface
	Kube     kubernetes.Interface
	Dynamic  dynamic.Interface
	// Room checks the project's quotas for the one more master a replacement of the masters
	// makes (machinesets.ControlPlaneTarget.Room); nil: not checked.
	Room func(ctx context.Context, n openstack.ServerNeeds) ([]openstack.QuotaUse, error)
}

// Selection says what to patch or roll, per kind; a nil or empty field selects nothing of that
// kind (never everything by omission).
type Selection struct {
	// MachineSets are Machine API MachineSets (an empty Selection: every worker set). Those
	// Cluster API is authoritative for are done through their Cluster API copy.
	MachineSets *machinesets.Selection
	// ClusterAPI names Cluster API objects of clusterapi.OpenShiftNamespace:
	// "machineset/NAME", "machinedeployment/NAME".
	ClusterAPI []string
	// NodePools names NodePools as NAMESPACE/NAME.
	NodePools []string
	// ControlPlane selects the ControlPlaneMachineSet: every master is replaced by its
	// operator once its template changes.
	ControlPlane bool

	// ClusterAPIScope, when set, selects the Cluster API objects instead of ClusterAPI: of
	// another namespace, every one of a namespace, the replaced templates kept (`clusterapi
	// patch`).
	ClusterAPIScope *clusterapi.Scope
	// NodePoolScope, when set, selects the NodePools instead of NodePools: of one namespace or
	// HostedCluster (`nodepools patch`).
	NodePoolScope *nodepools.Scope
}

// write attaches (or removes) opts to every kind sel selects (force: the ControlPlaneMachineSet
// also while its masters are not at rest). The IDs are checked (and looked up in Neutron, with
// opts.Checker) once, before anything is written. It stops at the first kind that fails; the
// rows then say what was done.
func (c Cluster) write(ctx context.Context, sel Selection, opts attach.Options, force bool) (*Report, error) {
	// The NodePools take no security groups: they are checked when another kind takes them.
	networksOnly := opts.NetworksOnly
	opts.NetworksOnly = sel.MachineSets == nil && sel.clusterAPI() == nil && !sel.ControlPlane
	opts, err := opts.Check(ctx)
	if err != nil {
		return nil, err
	}
	opts.NetworksOnly = networksOnly
	if opts.Capacity != nil && !opts.DryRun && opts.Remove == nil {
		// The machines of every kind count against the same addresses: a dry pass counts them
		// all before the first kind is written.
		dry := opts
		dry.DryRun, dry.Capacity = true, opts.Capacity.Clone()
		if _, err := c.patch(ctx, sel, dry, force); err != nil {
			var refused *attach.CapacityError
			if errors.As(err, &refused) {
				return &Report{}, err
			}
		}
	}
	return c.patch(ctx, sel, opts, force)
}

// patch is write after the checks.
func (c Cluster) patch(ctx context.Context, sel Selection, opts attach.Options, force bool) (*Report, error) {
	report := &Report{}
	if sel.MachineSets != nil {
		results, err := machinesets.Patch(ctx, c.Machines, *sel.MachineSets, opts)
		report.Results = results
		if err != nil {
			return report, err
		}
		if err := c.patchCopies(ctx, report, opts); err != nil {
			return report, err
		}
	}
	if scope := sel.clusterAPI(); scope != nil {
		r, err := clusterapi.Patch(ctx, c.Dynamic, *scope, opts)
		if r != nil {
			report.Results = append(report.Results, r.Results...)
			report.Templates = append(report.Templates, r.Templates...)
		}
		if err != nil {
			return report, err
		}
	}
	if scope := sel.nodePools(); scope != nil {
		results, err := nodepools.Patch(ctx, c.Dynamic, *scope, opts)
		report.Results = append(report.Results, results...)
		if err != nil {
			return report, err
		}
	}
	if sel.ControlPlane {
		// Last: the workers are done before the masters start being replaced. Unless forced,
		// the set is checked at rest here (a cluster that got busy since the wizard offered it
		// is refused with the reason).
		target := machinesets.ControlPlaneTarget{Client: c.Machines, Operators: c.Dynamic, Room: c.Room, Force: force}
		results, err := attach.Patch(ctx, target, opts)
		report.Results = append(report.Results, results...)
		if err != nil {
			return report, err
		}
	}
	return report, nil
}

// patchCopies attaches, through clusterapi.Patch, the Cluster API copies of the MachineSets of
// the report that Cluster API is authoritative for, and puts each copy's result in its
// MachineSet's row: one row per MachineSet either way.
func (c Cluster) patchCopies(ctx context.Context, report *Report, opts attach.Options) error {
	var names []string
	for _, r := range report.Results {
		if r.ClusterAPI {
			names = append(names, "machineset/"+r.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	ns := clusterapi.OpenShiftNamespace
	copies, err := clusterapi.Patch(ctx, c.Dynamic, clusterapi.Scope{Namespace: ns, Names: names, Kinds: []string{clusterapi.KindMachineSet}}, opts)
	if err != nil {
		return fmt.Errorf("the Machine API MachineSets are done; their Cluster API copies in %s: %w", ns, err)
	}
	byName := map[string]attach.Result{}
	for _, r := range copies.Results {
		byName[r.Name] = r
	}
	for i, r := range report.Results {
		c, ok := byName[r.Name]
		if !r.ClusterAPI || !ok {
			continue
		}
		row := c
		row.Kind, row.Namespace, row.Role, row.ClusterAPI = r.Kind, r.Namespace, r.Role, true
		row.Template, row.OldTemplate, row.Rolls = "", "", ""
		switch {
		case c.OldTemplate != "":
			row.Warning = joinSentences(row.Warning, fmt.Sprintf("MachineSet %s: Cluster API is authoritative for it: its Cluster API copy in %s now makes its machines from OpenStackMachineTemplate %s (was %s); %s", r.Name, ns, c.Template, c.OldTemplate, c.Rolls))
		case c.Reason != "":
			row.Reason = "Cluster API copy in " + ns + ": " + c.Reason
		}
		report.Results[i] = row
	}
	report.Templates = append(report.Templates, copies.Templates...)
	return nil
}

// Roll replaces the machines of what sel selects that lack what their template now says: the
// Machine API MachineSets (those Cluster API is authoritative for through their Cluster API
// copy, after the others), then the standalone Cluster API MachineSets. NodePools roll by
// themselves (HyperShift), the masters too (the control-plane-machine-set operator). opts.Progress gets every change, one line per set.
func (c Cluster) Roll(ctx context.Context, sel Selection, opts rollout.Options) ([]rollout.SetProgress, error) {
	var all []rollout.SetProgress
	if sel.MachineSets != nil {
		progress := opts.Progress
		mopts := opts
		// A set Cluster API is authoritative for is rolled after the others, through its
		// Cluster API copy: its line waits for that rather than saying skipped.
		mopts.Progress = func(sp rollout.SetProgress) {
			if sp.ClusterAPI && sp.State == rollout.Skipped {
				sp.State, sp.Phase = rollout.Pending, "waiting for its turn (through its Cluster API copy)"
			}
			if progress != nil {
				progress(sp)
			}
		}
		results, err := machinesets.Rollout(ctx, c.Machines, c.Kube, *sel.MachineSets, mopts)
		if err == nil {
			results, err = c.rollCopies(ctx, results, opts)
		}
		all = append(all, results...)
		if err != nil {
			return all, err
		}
	}
	if scope := sel.clusterAPI(); scope != nil {
		results, err := clusterapi.Rollout(ctx, c.Dynamic, scope.Namespace, scope.Names, opts)
		all = append(all, results...)
		if err != nil {
			return all, err
		}
	}
	return all, nil
}

// rollCopies rolls, through clusterapi.Rollout, the Cluster API copies of the MachineSets of
// results that Cluster API is authoritative for, reporting their progress (marked ClusterAPI),
// and puts their final state in their MachineSet's row: one line per MachineSet either way.
func (c Cluster) rollCopies(ctx context.Context, results []rollout.SetProgress, opts rollout.Options) ([]rollout.SetProgress, error) {
	var names []string
	for _, r := range results {
		if r.ClusterAPI {
			names = append(names, r.Name)
		}
	}
	if len(names) == 0 {
		return results, nil
	}
	ns := clusterapi.OpenShiftNamespace
	progress := opts.Progress
	opts.Progress = func(sp rollout.SetProgress) {
		sp.ClusterAPI = true
		if progress != nil {
			progress(sp)
		}
	}
	copies, err := clusterapi.Rollout(ctx, c.Dynamic, ns, names, opts)
	for _, cp := range copies {
		if i := slices.IndexFunc(results, func(r rollout.SetProgress) bool { return r.ClusterAPI && r.Name == cp.Name }); i >= 0 {
			cp.ClusterAPI = true
			results[i] = cp
		}
	}
	var selection *attach.SelectionError
	if errors.As(err, &selection) {
		return results, fmt.Errorf("the Machine API MachineSets are rolled; their Cluster API copies in %s: %w", ns, err)
	}
	return results, err
}

func joinSentences(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
