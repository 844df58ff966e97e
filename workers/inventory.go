package workers

import (
	"context"
	"fmt"
	"slices"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// Kinds says which kinds of machines a cluster serves, so which to read.
type Kinds struct {
	MachineSets, ClusterAPI, NodePools bool
	// ControlPlane: the ControlPlaneMachineSet, which changes the masters (read where the
	// Machine API is served; a cluster without one offers no control plane).
	ControlPlane bool
}

// Inventory is what makes the cluster's workers, as the wizard offers it: one row per object
// to choose. A MachineSet Cluster API is authoritative for carries its Cluster API copy's state
// (the copy is what its machines follow, and what Patch and Roll work on), and the copy is not
// offered on its own.
type Inventory struct {
	MachineSets []machinesets.SetStatus
	// ClusterAPI are the Cluster API objects of clusterapi.OpenShiftNamespace offered on their
	// own: MachineDeployments and the MachineSets that are no Machine API MachineSet's copy.
	ClusterAPI []clusterapi.Status
	NodePools  []nodepools.Status
	// ControlPlane is the ControlPlaneMachineSet; nil when the cluster has none (or it was not
	// read).
	ControlPlane *machinesets.ControlPlaneStatus
	// Notes say which kinds could not be read (the others are offered).
	Notes []string
}

// Listed is what one read of each kind returned.
type Listed struct {
	MachineSets    []machinesets.SetStatus
	MachineSetsErr error
	ClusterAPI     []clusterapi.Status
	ClusterAPIErr  error
	NodePools      []nodepools.Status
	NodePoolsErr   error
	// ControlPlane is nil when the cluster has no ControlPlaneMachineSet.
	ControlPlane    *machinesets.ControlPlaneStatus
	ControlPlaneErr error
}

// Inventory reads the kinds of kinds, how far each object has want (else what was recorded on
// it), and assembles them (Assemble).
func (c Cluster) Inventory(ctx context.Context, want attach.Attachment, kinds Kinds) (*Inventory, error) {
	var l Listed
	if kinds.MachineSets {
		l.MachineSets, l.MachineSetsErr = machinesets.List(ctx, c.Machines, want)
	}
	if kinds.ClusterAPI {
		l.ClusterAPI, l.ClusterAPIErr = clusterapi.List(ctx, c.Dynamic, clusterapi.OpenShiftNamespace, want)
	}
	if kinds.NodePools {
		l.NodePools, l.NodePoolsErr = nodepools.List(ctx, c.Dynamic, "", "", want)
	}
	if kinds.ControlPlane {
		// The ClusterOperators the masters' replacement leans on are read too: the set is
		// offered only when they are at rest (its Note says which is not).
		l.ControlPlane, l.ControlPlaneErr = machinesets.ControlPlaneList(ctx, c.Machines, c.Dynamic, want)
	}
	return Assemble(kinds, l)
}

// Assemble turns the reads into the inventory. The MachineSets must be read when the cluster
// serves them; the Cluster API objects, NodePools and the ControlPlaneMachineSet are offered beside them, so when they
// cannot be read the rest still is, with a note saying what is missing and why (when nothing else
// was read there is nothing to offer: an error).
func Assemble(kinds Kinds, l Listed) (*Inventory, error) {
	inv := &Inventory{}
	if kinds.MachineSets && l.MachineSetsErr != nil {
		return nil, l.MachineSetsErr
	}
	if kinds.ClusterAPI && l.ClusterAPIErr != nil {
		if !kinds.MachineSets && !kinds.NodePools {
			return nil, l.ClusterAPIErr // nothing else to offer
		}
		l.ClusterAPI = nil
		inv.Notes = append(inv.Notes, fmt.Sprintf("the Cluster API objects of %s could not be read, so they are not offered (nor the MachineSets attached through them): %v", clusterapi.OpenShiftNamespace, l.ClusterAPIErr))
	}
	if kinds.NodePools && l.NodePoolsErr != nil {
		if !kinds.MachineSets && !kinds.ClusterAPI {
			return nil, l.NodePoolsErr // nothing else to offer
		}
		l.NodePools = nil
		inv.Notes = append(inv.Notes, fmt.Sprintf("the NodePools could not be read, so they are not offered: %v", l.NodePoolsErr))
	}
	if kinds.ControlPlane && l.ControlPlaneErr != nil {
		if !kinds.MachineSets && !kinds.ClusterAPI && !kinds.NodePools {
			return nil, l.ControlPlaneErr // nothing else to offer
		}
		l.ControlPlane = nil
		inv.Notes = append(inv.Notes, fmt.Sprintf("the %s could not be read, so the control plane is not offered: %v", machinesets.ControlPlaneKind, l.ControlPlaneErr))
	}
	inv.MachineSets = viaCopies(l.MachineSets, l.ClusterAPI)
	inv.ClusterAPI = withoutCopies(l.ClusterAPI, l.MachineSets)
	inv.NodePools = l.NodePools
	inv.ControlPlane = l.ControlPlane
	return inv, nil
}

// viaCopies gives each MachineSet Cluster API is authoritative for the state of its Cluster API
// copy. Without a copy it stays n/a, saying so.
func viaCopies(sets []machinesets.SetStatus, capi []clusterapi.Status) []machinesets.SetStatus {
	if sets == nil {
		return nil
	}
	out := make([]machinesets.SetStatus, len(sets))
	for i, st := range sets {
		out[i] = st
		if !st.ClusterAPI {
			continue
		}
		j := slices.IndexFunc(capi, func(c clusterapi.Status) bool { return c.Kind == clusterapi.KindMachineSet && c.Name == st.Name })
		if j < 0 {
			out[i].Note = fmt.Sprintf("Cluster API is authoritative for it, and its Cluster API copy %s/%s cannot be read: check that the cluster serves machinesets.cluster.x-k8s.io and that the copy exists", clusterapi.OpenShiftNamespace, st.Name)
			continue
		}
		c := capi[j]
		out[i].StorageNetwork, out[i].SecurityGroups, out[i].Machines, out[i].UpToDate, out[i].Wanted = c.StorageNetwork, c.SecurityGroups, c.Machines, c.OnTemplate, int(c.Replicas)
		out[i].Note = ""
		if c.StorageNetwork == attach.StateNA {
			out[i].Note = "its Cluster API copy: " + c.Note
		}
	}
	return out
}

// withoutCopies leaves out the Cluster API MachineSets that share their name with a Machine API
// MachineSet: the copies OpenShift's migration keeps, shown once, on the Machine API row.
func withoutCopies(capi []clusterapi.Status, sets []machinesets.SetStatus) []clusterapi.Status {
	var out []clusterapi.Status
	for _, c := range capi {
		if c.Kind == clusterapi.KindMachineSet && slices.ContainsFunc(sets, func(st machinesets.SetStatus) bool { return st.Name == c.Name }) {
			continue
		}
		out = append(out, c)
	}
	return out
}
