package wizard

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/charmbracelet/bubbles/spinner"
	tea "github.com/charmbracelet/bubbletea"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/workers"
)

// IDs of the fake cloud.
const (
	fakeStorageNet = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	fakeTenantNet  = "1a2b3c4d-0000-4000-8000-000000000001"
	fakeDecoyNet   = "1a2b3c4d-0000-4000-8000-000000000002"
	fakeNFSGroup   = "77c0a1d2-1111-4111-8111-111111111111"
	fakeDefaultSG  = "77c0a1d2-2222-4222-8222-222222222222"
	fakeBlockSG    = "77c0a1d2-3333-4333-8333-333333333333"
)

// fakeBackend answers at once from fixed data and records what was written.
type fakeBackend struct {
	mu         sync.Mutex
	connectErr error
	connects   int
	nets       []openstack.Network
	discovery  *openstack.Discovery
	groups     []openstack.SecurityGroup
	sets       []machinesets.SetStatus
	patchErr   error
	patched    []string // "dry:" prefix for dry runs
	rolled     []string
	rolloutErr error
	// rolloutGate, when set, holds the rollout until it is closed or the context ends.
	rolloutGate chan struct{}
	storage     StorageStatus
	rwx         RWXResult

	// A HyperShift management cluster: it serves NodePools (pools); noMachineAPI, it serves no
	// MachineSets at all.
	hyperShift   bool
	noMachineAPI bool
	pools        []nodepools.Status
	poolsPatched []string // NAMESPACE/NAME, "dry:" prefix for dry runs
	poolPatchErr error
	storageReads int
	connectNote  string // Connection.Note
	// rwxGate, when set, holds the multi-writer check until its context ends.
	rwxGate chan struct{}

	// A cluster that serves Cluster API: capi are its MachineSets and MachineDeployments in
	// openshift-cluster-api (the copies of Machine API MachineSets among them).
	clusterAPI  bool
	capi        []clusterapi.Status
	capiPatched []string // machineset/NAME or machinedeployment/NAME, "dry:" prefix for dry runs
	capiRolled  []string
	capiListErr error // ClusterAPI answers it

	// subnetDenied are the subnets the user's role may not change (another project's, as the
	// admin's shared network is): UpdateSubnet refuses them as Neutron does.
	subnetDenied  map[string]bool
	subnetUpdates []openstack.SubnetUpdate // the changes made
	networkReads  int

	// removed are the MachineSets Remove took the record's entries off, "dry:" prefix for dry
	// runs; mounts are the pods RemovalRisk answers, mountChecks how often it was asked.
	removed     []string
	mounts      []attach.Mount
	mountChecks int

	// controlPlane is the cluster's ControlPlaneMachineSet (nil: none), cpPatched what Patch did
	// to it ("dry" for dry runs).
	controlPlane *machinesets.ControlPlaneStatus
	cpPatched    []string
}

// chosenKeys are the keys of the rows of section chosen on the sets screen.
func chosenKeys(s setsModel, section string) []string {
	var keys []string
	for _, r := range s.chosen() {
		if r.Section == section {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

func subnet(name, cidr, netID string) openstack.Subnet {
	// A subnet fit to be a node's second NIC: DHCP on, no gateway, no DNS announced.
	return openstack.Subnet{ID: name + "-id", Name: name, NetworkID: netID, CIDR: netip.MustParsePrefix(cidr), IPVersion: 4, DHCP: true, DNS: []string{"0.0.0.0"}}
}

func newFakeBackend() *fakeBackend {
	storage := openstack.Network{ID: fakeStorageNet, Name: "storage", Shared: true, Subnets: []openstack.Subnet{subnet("storage-subnet", "10.0.0.0/24", fakeStorageNet)}}
	tenant := openstack.Network{ID: fakeTenantNet, Name: "tenant", Subnets: []openstack.Subnet{subnet("tenant-subnet", "10.196.0.0/16", fakeTenantNet)}}
	decoy := openstack.Network{ID: fakeDecoyNet, Name: "decoy", Subnets: []openstack.Subnet{subnet("decoy-subnet", "192.168.50.0/24", fakeDecoyNet)}}
	nets := []openstack.Network{decoy, storage, tenant}
	cand := openstack.Candidate{
		Network: storage, Score: 105, Confidence: openstack.ConfidenceHigh, Shares: 1,
		Reasons: []string{"1 share is exported on it", "export addresses 10.0.0.10 (preferred), 10.0.0.20 in subnet storage-subnet (10.0.0.0/24)"},
		Exports: []openstack.NetworkExport{
			{Address: netip.MustParseAddr("10.0.0.10"), Subnet: "storage-subnet", CIDR: netip.MustParsePrefix("10.0.0.0/24"), Shares: 1, Preferred: true},
			{Address: netip.MustParseAddr("10.0.0.20"), Subnet: "storage-subnet", CIDR: netip.MustParsePrefix("10.0.0.0/24"), Shares: 1},
		},
	}
	return &fakeBackend{
		nets:      nets,
		discovery: &openstack.Discovery{Cloud: "mycloud", Networks: nets, Ranking: openstack.Ranking{Candidates: []openstack.Candidate{cand}}},
		groups: []openstack.SecurityGroup{
			{ID: fakeDefaultSG, Name: "default", Rules: []openstack.Rule{{Direction: "egress", EtherType: "IPv4"}}},
			{ID: fakeBlockSG, Name: "block-egress"},
			{ID: fakeNFSGroup, Name: "nfs", Rules: []openstack.Rule{{Direction: "egress", EtherType: "IPv4", Protocol: "tcp", PortMin: 2049, PortMax: 2049, RemoteIPPrefix: "10.0.0.0/24"}}},
		},
		sets: []machinesets.SetStatus{
			{Name: "ostest-x7k2p-infra-0", Role: "infra", Replicas: 2, Wanted: 2, ReadyReplicas: 2, StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 2, UpToDate: 2},
			{Name: "ostest-x7k2p-master", Role: "master", Replicas: 3, Wanted: 3, ReadyReplicas: 3, StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 3, UpToDate: 3},
			{Name: "ostest-x7k2p-worker-0", Role: "worker", Replicas: 2, Wanted: 2, ReadyReplicas: 2, StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Machines: 2, UpToDate: 2},
			{Name: "ostest-x7k2p-worker-1", Role: "worker", Replicas: 1, Wanted: 1, ReadyReplicas: 1, StorageNetwork: attach.StateAttached, SecurityGroups: attach.StateAttached, Machines: 1, UpToDate: 0},
		},
		storage: StorageStatus{Driver: true, Conditions: []Condition{
			{Type: "ManilaDriverControllerServiceControllerAvailable", Status: "True", Reason: "AsExpected"},
			{Type: "ManilaDriverControllerServiceControllerDegraded", Status: "False"},
		}, StorageClasses: []string{"csi-manila-default"}},
		rwx: RWXResult{StorageClass: "csi-manila-default", Namespace: "manila-setup-rwx-check-abcde", Nodes: [2]string{"worker-a", "worker-b"},
			Lines: [2][]string{{"writer-1 on worker-a line 1", "writer-2 on worker-b line 1"}, {"writer-1 on worker-a line 1", "writer-2 on worker-b line 1"}},
			OK:    true, CleanedUp: true},
	}
}

func (f *fakeBackend) Targets() Targets {
	return Targets{Clouds: []string{"mycloud", "other"}, CloudsFile: "/home/me/.config/openstack/clouds.yaml", Cloud: "mycloud",
		Kubeconfig: "/home/me/ocp/auth/kubeconfig", Contexts: []string{"admin", "dev"}, Context: "admin"}
}

func (f *fakeBackend) Connect(_ context.Context, cloud, kctx string) (Connection, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.connects++
	if f.connectErr != nil {
		return Connection{}, f.connectErr
	}
	return Connection{Cloud: cloud, Region: "RegionOne", Identity: `user "demo", project "demo"`, Cluster: "https://api.ostest.example.com:6443", Context: kctx,
		Served:        workers.Served{MachineAPI: !f.noMachineAPI, MachineSets: len(f.sets), HyperShift: f.hyperShift, NodePools: len(f.pools), Note: f.connectNote, ClusterAPI: f.clusterAPI},
		NodeAddresses: []netip.Addr{netip.MustParseAddr("10.196.0.11"), netip.MustParseAddr("10.196.0.12")}}, nil
}

// newManagementBackend is a HyperShift management cluster on OpenStack: hosted clusters hc1
// (two OpenStack NodePools, one already attached), hc2 (an InPlace one) and hc3 (KubeVirt, not
// OpenStack); with machineAPI, also the management cluster's own MachineSets.
func newManagementBackend(machineAPI bool) *fakeBackend {
	f := newFakeBackend()
	f.hyperShift = true
	f.pools = []nodepools.Status{
		{Namespace: "clusters", Name: "hc1-gpu", HostedCluster: "hc1", Platform: "OpenStack", Replicas: 1, CurrentNodes: 1, UpgradeType: "Replace", StorageNetwork: attach.StateAttached,
			Conditions: []nodepools.Condition{{Type: "Ready", Status: "True", Reason: "AsExpected"}}},
		{Namespace: "clusters", Name: "hc1-workers", HostedCluster: "hc1", Platform: "OpenStack", Replicas: 3, CurrentNodes: 3, UpgradeType: "Replace", StorageNetwork: attach.StateMissing,
			Conditions: []nodepools.Condition{{Type: "Ready", Status: "True", Reason: "AsExpected"}}},
		{Namespace: "clusters", Name: "hc2-workers", HostedCluster: "hc2", Platform: "OpenStack", Replicas: 2, CurrentNodes: 2, UpgradeType: "InPlace", StorageNetwork: attach.StateMissing},
		{Namespace: "clusters", Name: "hc3-kubevirt", HostedCluster: "hc3", Platform: "KubeVirt", Replicas: 2, CurrentNodes: 2, UpgradeType: "Replace", StorageNetwork: attach.StateNA, Note: "not OpenStack"},
	}
	if !machineAPI {
		f.noMachineAPI, f.sets = true, nil
	}
	return f
}

func (f *fakeBackend) Discover(context.Context) (*openstack.Discovery, error) {
	return f.discovery, nil
}

func (f *fakeBackend) SecurityGroups(context.Context) ([]openstack.SecurityGroup, error) {
	return f.groups, nil
}

// Inventory answers as workers.Cluster.Inventory does, from the fake's lists.
func (f *fakeBackend) Inventory(_ context.Context, _ attach.Attachment, kinds workers.Kinds) (*workers.Inventory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var l workers.Listed
	if kinds.MachineSets {
		l.MachineSets = f.sets
	}
	if kinds.ClusterAPI {
		l.ClusterAPI, l.ClusterAPIErr = append([]clusterapi.Status(nil), f.capi...), f.capiListErr
	}
	if kinds.NodePools {
		l.NodePools = append([]nodepools.Status(nil), f.pools...)
	}
	if kinds.ControlPlane && f.controlPlane != nil {
		cp := *f.controlPlane
		l.ControlPlane = &cp
	}
	return workers.Assemble(kinds, l)
}

// Apply answers as workers.Cluster.Apply does: an attachment as Patch below; a removal checks
// the mounts (RemovalRisk) before it writes, refused unless forced, and a dry run returns the
// risk with the rows.
func (f *fakeBackend) Apply(ctx context.Context, req workers.Request) (*workers.Report, error) {
	if req.Remove == nil {
		results, err := f.Patch(ctx, req.Attachment, req.Selection, req.DryRun)
		return &workers.Report{Results: results}, err
	}
	report := &workers.Report{}
	risk, err := f.RemovalRisk(ctx, req.Selection, nil)
	if err != nil {
		return report, err
	}
	report.Risk = &risk
	warnings, err := risk.Verdict(req.Force, "")
	if err != nil && !req.DryRun {
		return report, err
	}
	report.Warnings = warnings
	report.Results, err = f.Remove(ctx, req.Selection, req.DryRun)
	return report, err
}

// Patch answers as workers.Cluster.Patch does: the MachineSets, the Cluster API objects, the
// NodePools, one after the other, stopping at the first that fails.
func (f *fakeBackend) Patch(ctx context.Context, a attach.Attachment, sel workers.Selection, dryRun bool) ([]attach.Result, error) {
	var out []attach.Result
	if sel.MachineSets != nil {
		r, err := f.patchSets(ctx, a, sel.MachineSets.Names, dryRun)
		if out = append(out, r...); err != nil {
			return out, err
		}
	}
	if len(sel.ClusterAPI) > 0 {
		r, err := f.patchCAPI(ctx, a, sel.ClusterAPI, dryRun)
		if out = append(out, r...); err != nil {
			return out, err
		}
	}
	if len(sel.NodePools) > 0 {
		r, err := f.patchPools(ctx, a, sel.NodePools, dryRun)
		if out = append(out, r...); err != nil {
			return out, err
		}
	}
	if sel.ControlPlane {
		out = append(out, f.patchControlPlane(a, dryRun))
	}
	return out, nil
}

// patchControlPlane answers as attach.Patch over machinesets.ControlPlaneTarget does; a real
// patch makes the set read as its operator then has it: the template attached, the first new
// master made.
func (f *fakeBackend) patchControlPlane(a attach.Attachment, dryRun bool) attach.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	cp := f.controlPlane
	r := attach.Result{Kind: machinesets.ControlPlaneKind, Namespace: machinesets.Namespace, Name: cp.Name, Role: "master"}
	if cp.StorageNetwork == attach.StateAttached && cp.SecurityGroups == attach.StateAttached {
		r.Action, r.Reason = attach.ActionUnchanged, "already attached"
		f.cpPatched = append(f.cpPatched, "unchanged")
		return r
	}
	r.Action, r.AddedNetworks, r.AddedSecurityGroups = attach.ActionPatched, a.Networks, a.SecurityGroups
	r.Warning = fmt.Sprintf("strategy RollingUpdate: the control-plane-machine-set operator now replaces the %d masters one at a time (a new master first, then the old one goes)", cp.Replicas)
	if dryRun {
		r.Action = attach.ActionWouldPatch
		r.Diff = fmt.Sprintf("--- ControlPlaneMachineSet cluster spec.template.machines_v1beta1_machine_openshift_io.spec.providerSpec.value\n+++ ControlPlaneMachineSet cluster spec.template.machines_v1beta1_machine_openshift_io.spec.providerSpec.value (patched)\n@@ -8,6 +8,9 @@\n networks:\n - filter: {}\n   subnets:\n   - filter:\n       tags: openshiftClusterID=ostest-x7k2p\n+- noAllowedAddressPairs: true\n+  uuid: %s\n securityGroups:\n - filter: {}\n   name: ostest-x7k2p-master\n", a.Networks[0])
		f.cpPatched = append(f.cpPatched, "dry")
		return r
	}
	f.cpPatched = append(f.cpPatched, "patched")
	next := *cp
	next.StorageNetwork, next.SecurityGroups, next.OnNetworks, next.UpdatedReplicas = attach.StateAttached, attach.StateAttached, 1, 1
	next.Note = "its masters are not at rest (replicas 4 of 3, updated 1, ready 3, unavailable 0): an update is under way or a master is missing"
	f.controlPlane = &next
	return r
}

// newControlPlaneBackend is a cluster whose masters run workloads beside its workers: its
// worker and infra MachineSets and its ControlPlaneMachineSet, Active, RollingUpdate, at rest.
func newControlPlaneBackend() *fakeBackend {
	f := newFakeBackend()
	f.sets = slices.DeleteFunc(f.sets, func(st machinesets.SetStatus) bool { return st.Role == "master" })
	f.controlPlane = &machinesets.ControlPlaneStatus{Name: "cluster", State: "Active", Strategy: "RollingUpdate", Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3,
		StorageNetwork: attach.StateMissing, SecurityGroups: attach.StateMissing, Masters: 3, OnNetworks: 3}
	return f
}

// Roll answers as workers.Cluster.Roll does: the MachineSets, then the Cluster API MachineSets.
func (f *fakeBackend) Roll(ctx context.Context, sel workers.Selection, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error) {
	var out []rollout.SetProgress
	if sel.MachineSets != nil {
		r, err := f.rollSets(ctx, sel.MachineSets.Names, progress)
		if out = append(out, r...); err != nil {
			return out, err
		}
	}
	if len(sel.ClusterAPI) > 0 {
		r, err := f.rollCAPI(ctx, sel.ClusterAPI, progress)
		out = append(out, r...)
		return out, err
	}
	return out, nil
}

func (f *fakeBackend) patchSets(_ context.Context, a attach.Attachment, names []string, dryRun bool) ([]attach.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	var out []attach.Result
	for _, n := range names {
		tag := n
		if dryRun {
			tag = "dry:" + n
		}
		f.patched = append(f.patched, tag)
		r := attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: n, Role: "worker", Action: attach.ActionPatched, AddedNetworks: a.Networks, AddedSecurityGroups: a.SecurityGroups}
		if slices.ContainsFunc(f.sets, func(st machinesets.SetStatus) bool { return st.Name == n && st.ClusterAPI }) {
			// As clusterapi.PatchCopies puts it: the copy's result in the MachineSet's row.
			r.ClusterAPI = true
			if dryRun {
				r.Action, r.Diff = attach.ActionWouldPatch, fakeTemplateDiff("MachineSet", n, a.Networks[0])
			}
			out = append(out, r)
			continue
		}
		if n == "ostest-x7k2p-worker-1" {
			out = append(out, attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: n, Role: "worker", Action: attach.ActionUnchanged, Reason: "already attached"})
			continue
		}
		if dryRun {
			r.Action = attach.ActionWouldPatch
			r.Diff = fmt.Sprintf("--- MachineSet %[1]s spec.template.spec.providerSpec.value\n+++ MachineSet %[1]s spec.template.spec.providerSpec.value (patched)\n@@ -10,6 +10,9 @@\n networks:\n - filter: {}\n   subnets:\n   - filter:\n       tags: openshiftClusterID=ostest-x7k2p\n+- noAllowedAddressPairs: true\n+  uuid: %[2]s\n securityGroups:\n - filter: {}\n   name: ostest-x7k2p-worker\n", n, a.Networks[0])
		}
		out = append(out, r)
	}
	return out, nil
}

// fakeTemplateDiff is the diff clusterapi's dry run shows for a set of kind named name.
func fakeTemplateDiff(kind, name, network string) string {
	return fmt.Sprintf("--- OpenStackMachineTemplate openshift-cluster-api/%[2]s-tmpl spec.template.spec\n+++ OpenStackMachineTemplate openshift-cluster-api/%[2]s-tmpl spec.template.spec (patched)\n@@ -1,3 +1,6 @@\n flavor: m1.large\n+ports:\n+- {}\n+- description: Manila storage network (manila-setup)\n+  network:\n+    id: %[3]s\n--- %[1]s openshift-cluster-api/%[2]s spec.template.spec.infrastructureRef\n+++ %[1]s openshift-cluster-api/%[2]s spec.template.spec.infrastructureRef (patched)\n@@ -1,2 +1,2 @@\n kind: OpenStackMachineTemplate\n-name: %[2]s-tmpl\n+name: %[2]s-tmpl-manila-0a1b2c3d\n", kind, name, network)
}

// patchCAPI answers as clusterapi.Patch does for the names it is given.
func (f *fakeBackend) patchCAPI(_ context.Context, a attach.Attachment, names []string, dryRun bool) ([]attach.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	var out []attach.Result
	for i, c := range f.capi {
		key := strings.ToLower(c.Kind) + "/" + c.Name
		if !slices.Contains(names, key) {
			continue
		}
		tag := key
		if dryRun {
			tag = "dry:" + key
		}
		f.capiPatched = append(f.capiPatched, tag)
		r := attach.Result{Name: c.Name, Kind: c.Kind, Namespace: clusterapi.OpenShiftNamespace, Template: c.Template}
		switch {
		case c.StorageNetwork == attach.StateAttached:
			r.Action, r.Reason = attach.ActionUnchanged, "its template already has a port on every storage network and every security group"
		default:
			r.Action, r.AddedNetworks, r.AddedSecurityGroups = attach.ActionPatched, a.Networks, a.SecurityGroups
			r.OldTemplate, r.Template = c.Template, c.Template+"-manila-0a1b2c3d"
			if dryRun {
				r.Action, r.Diff = attach.ActionWouldPatch, fakeTemplateDiff(c.Kind, c.Name, a.Networks[0])
			} else {
				// As the cluster then reads: the new template, none of the Machines made from it yet.
				f.capi[i].Template, f.capi[i].OnTemplate, f.capi[i].StorageNetwork = r.Template, 0, attach.StateAttached
			}
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeBackend) rollCAPI(_ context.Context, names []string, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error) {
	var out []rollout.SetProgress
	for _, n := range names {
		name := strings.TrimPrefix(n, "machineset/")
		p := rollout.SetProgress{Name: name, State: rollout.Done, Replaced: 1, Total: 1, Phase: "every Machine has the template's networks"}
		progress(p)
		out = append(out, p)
	}
	f.mu.Lock()
	f.capiRolled = append(f.capiRolled, names...)
	f.mu.Unlock()
	return out, nil
}

// patchPools answers as nodepools.Patch does; a real patch makes the pool's status say that
// HyperShift is rolling its new machine template out.
func (f *fakeBackend) patchPools(_ context.Context, a attach.Attachment, names []string, dryRun bool) ([]attach.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.poolPatchErr != nil {
		return nil, f.poolPatchErr
	}
	var out []attach.Result
	for i, p := range f.pools {
		key := p.Namespace + "/" + p.Name
		if !slices.Contains(names, key) {
			continue
		}
		if dryRun {
			f.poolsPatched = append(f.poolsPatched, "dry:"+key)
		} else {
			f.poolsPatched = append(f.poolsPatched, key)
		}
		r := attach.Result{Kind: "NodePool", Name: p.Name, Namespace: p.Namespace, HostedCluster: p.HostedCluster}
		switch {
		case p.StorageNetwork == attach.StateNA:
			r.Action, r.Reason = attach.ActionSkipped, "platform "+p.Platform+", not OpenStack"
		case p.StorageNetwork == attach.StateAttached:
			r.Action, r.Reason = attach.ActionUnchanged, "already attached"
		case dryRun:
			r.Action, r.AddedNetworks = attach.ActionWouldPatch, a.Networks
			r.Diff = fmt.Sprintf("--- NodePool %[1]s spec.platform.openstack\n+++ NodePool %[1]s spec.platform.openstack (patched)\n@@ -1 +1,5 @@\n+additionalPorts:\n+- description: %[3]s\n+  network:\n+    id: %[2]s\n flavor: m1.xlarge\n", key, a.Networks[0], nodepools.PortDescription)
		default:
			r.Action, r.AddedNetworks = attach.ActionPatched, a.Networks
			f.pools[i].StorageNetwork = attach.StateAttached
			if p.UpgradeType == "Replace" {
				f.pools[i].CurrentNodes = p.Replicas - 1
				f.pools[i].Conditions = []nodepools.Condition{
					{Type: "UpdatingPlatformMachineTemplate", Status: "True", Reason: "AsExpected", Message: "platform machine template update in progress. Target template: " + p.Name + "-8d6f1b2c"},
					{Type: "Ready", Status: "False", Reason: "WaitingForAvailableMachines", Message: "Minimum availability requires 3 replicas, current 2 available"},
				}
			}
		}
		if len(a.SecurityGroups) > 0 && p.StorageNetwork != attach.StateNA {
			r.Warning = "NodePool " + key + ": security groups " + a.SecurityGroups[0] + " were not added: a NodePool's additional ports take none of their own"
		}
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeBackend) rollSets(ctx context.Context, names []string, progress func(rollout.SetProgress)) ([]rollout.SetProgress, error) {
	var out []rollout.SetProgress
	for _, n := range names {
		progress(rollout.SetProgress{Name: n, State: rollout.Running, Replaced: 0, Total: 2, Phase: "waiting for new Machine " + n + "-abcde to become a Ready Node"})
	}
	if f.rolloutGate != nil {
		select {
		case <-f.rolloutGate:
		case <-ctx.Done():
			return nil, fmt.Errorf("rollout interrupted: %w", ctx.Err())
		}
	}
	f.mu.Lock()
	f.rolled = append(f.rolled, names...)
	f.mu.Unlock()
	for _, n := range names {
		p := rollout.SetProgress{Name: n, State: rollout.Done, Replaced: 2, Total: 2, Phase: "every Machine has the template's networks"}
		progress(p)
		out = append(out, p)
	}
	return out, f.rolloutErr
}

// Remove answers as workers.Cluster.Patch does with attach.Options.Remove for the MachineSets:
// what each set's record names goes, a set without a record is unchanged.
func (f *fakeBackend) Remove(_ context.Context, sel workers.Selection, dryRun bool) ([]attach.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.patchErr != nil {
		return nil, f.patchErr
	}
	var out []attach.Result
	for _, n := range sel.MachineSets.Names {
		i := slices.IndexFunc(f.sets, func(st machinesets.SetStatus) bool { return st.Name == n })
		r := attach.Result{Kind: "MachineSet", Namespace: machinesets.Namespace, Name: n, Role: "worker", Action: attach.ActionUnchanged, Reason: "no attachment record"}
		if i < 0 || f.sets[i].Recorded == nil {
			out = append(out, r)
			continue
		}
		rec := f.sets[i].Recorded
		r.Action, r.Reason, r.RemovedNetworks, r.RemovedSecurityGroups = attach.ActionPatched, "", rec.Networks, rec.SecurityGroups
		tag := n
		if dryRun {
			tag, r.Action = "dry:"+n, attach.ActionWouldPatch
			r.Diff = fmt.Sprintf("--- MachineSet %[1]s spec.template.spec.providerSpec.value\n+++ MachineSet %[1]s spec.template.spec.providerSpec.value (patched)\n@@ -10,9 +10,6 @@\n networks:\n - filter: {}\n-- noAllowedAddressPairs: true\n-  uuid: %[2]s\n securityGroups:\n", n, rec.Networks[0])
		}
		f.removed = append(f.removed, tag)
		out = append(out, r)
	}
	return out, nil
}

func (f *fakeBackend) RemovalRisk(context.Context, workers.Selection, []attach.Result) (workers.RemovalRisk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mountChecks++
	return workers.RemovalRisk{Mounts: f.mounts}, nil
}

// UpdateSubnet changes the fake's copy of the subnet as Neutron would, never what the wizard
// already read: the wizard sees the change only by reading the network again.
func (f *fakeBackend) UpdateSubnet(_ context.Context, u openstack.SubnetUpdate) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subnetDenied[u.SubnetID] {
		return &openstack.Error{Kind: openstack.KindForbidden, Service: "Neutron", Message: "updating subnet " + u.SubnetID +
			`: project "demo" can see the subnet but may not change it (Neutron answered 403 Forbidden): it belongs to project admin-project-id; its owner or the cloud's administrator can make the change`}
	}
	nets := slices.Clone(f.nets)
	for i := range nets {
		subs := slices.Clone(nets[i].Subnets)
		for j, s := range subs {
			if s.ID != u.SubnetID {
				continue
			}
			if u.NoGateway {
				s.Gateway = netip.Addr{}
			}
			if u.NoDNS {
				s.DNS = []string{"0.0.0.0"}
			}
			if u.DropDefaultRoutes {
				s.HostRoutes = slices.DeleteFunc(slices.Clone(s.HostRoutes), func(r openstack.Route) bool { return r.Destination.Bits() == 0 })
			}
			subs[j] = s
			f.subnetUpdates = append(f.subnetUpdates, u)
		}
		nets[i].Subnets = subs
	}
	f.nets = nets
	return nil
}

func (f *fakeBackend) Network(_ context.Context, id string) (openstack.Network, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.networkReads++
	for _, n := range f.nets {
		if n.ID == id {
			return n, nil
		}
	}
	return openstack.Network{}, &openstack.Error{Kind: openstack.KindNotFound, Service: "Neutron", Message: "no network " + id}
}

func (f *fakeBackend) Storage(context.Context) (StorageStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.storageReads++
	return f.storage, nil
}

func (f *fakeBackend) CheckRWX(ctx context.Context, sc string, report func(string)) RWXResult {
	report("namespace " + f.rwx.Namespace + " created")
	if f.rwxGate != nil {
		select {
		case <-f.rwxGate:
		case <-ctx.Done():
			return RWXResult{StorageClass: sc, Namespace: f.rwx.Namespace, Problem: "interrupted before the writers finished", CleanedUp: true}
		}
	}
	return f.rwx
}

var errFake = errors.New("fake failure")

// ---- driving a model without a terminal ----

// keyMsg turns "enter", "esc", "space", "up", "ctrl+c" or plain text into a key press.
func keyMsg(s string) tea.KeyMsg {
	switch s {
	case "enter":
		return tea.KeyMsg{Type: tea.KeyEnter}
	case "esc":
		return tea.KeyMsg{Type: tea.KeyEscape}
	case "space":
		return tea.KeyMsg{Type: tea.KeySpace, Runes: []rune{' '}}
	case "up":
		return tea.KeyMsg{Type: tea.KeyUp}
	case "down":
		return tea.KeyMsg{Type: tea.KeyDown}
	case "tab":
		return tea.KeyMsg{Type: tea.KeyTab}
	case "backspace":
		return tea.KeyMsg{Type: tea.KeyBackspace}
	case "ctrl+c":
		return tea.KeyMsg{Type: tea.KeyCtrlC}
	}
	return tea.KeyMsg{Type: tea.KeyRunes, Runes: []rune(s)}
}

// driver runs a model without a terminal: it executes the commands Update returns and feeds
// their messages back. Commands that take longer than a few milliseconds (ticks, polls, a held
// rollout) are kept pending; settle collects their answers later, dropping the ticks.
type driver struct {
	t       testing.TB
	m       Model
	pending []chan tea.Msg
}

func (d *driver) run(cmd tea.Cmd) {
	d.t.Helper()
	queue := []tea.Cmd{cmd}
	for n := 0; len(queue) > 0; n++ {
		if n > 10000 {
			d.t.Fatal("runaway commands")
		}
		c := queue[0]
		queue = queue[1:]
		if c == nil {
			continue
		}
		ch := make(chan tea.Msg, 1)
		go func() { ch <- c() }()
		var msg tea.Msg
		select {
		case msg = <-ch:
		case <-time.After(40 * time.Millisecond):
			d.pending = append(d.pending, ch)
			continue
		}
		queue = append(queue, d.feed(msg)...)
	}
}

func (d *driver) feed(msg tea.Msg) []tea.Cmd {
	switch msg := msg.(type) {
	case nil, tea.QuitMsg:
	case tea.BatchMsg:
		return msg
	default:
		next, c := d.m.Update(msg)
		d.m = next.(Model)
		return []tea.Cmd{c}
	}
	return nil
}

// settle waits up to timeout for pending commands and feeds what they return, except ticks.
func (d *driver) settle(timeout time.Duration) {
	d.t.Helper()
	deadline := time.After(timeout)
	for len(d.pending) > 0 {
		for i := 0; i < len(d.pending); i++ {
			select {
			case msg := <-d.pending[i]:
				d.pending = append(d.pending[:i], d.pending[i+1:]...)
				i--
				switch msg.(type) {
				case spinner.TickMsg, clockMsg, storagePollMsg, followPollMsg:
					continue
				}
				for _, c := range d.feed(msg) {
					d.run(c)
				}
			default:
			}
		}
		select {
		case <-deadline:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func (d *driver) press(keys ...string) {
	d.t.Helper()
	for _, k := range keys {
		next, cmd := d.m.Update(keyMsg(k))
		d.m = next.(Model)
		d.run(cmd)
	}
}

// start returns a driver whose model has done Init at w x h.
func start(t testing.TB, b Backend, dry bool, w, h int) *driver {
	t.Helper()
	m := New(Options{Backend: b, DryRun: dry, Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
	next, _ := m.Update(tea.WindowSizeMsg{Width: w, Height: h})
	d := &driver{t: t, m: next.(Model)}
	d.run(d.m.Init())
	return d
}
