package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets/attachment"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// storageNetworkController reports StorageNetworkReachable: whether every MachineSet attaches
// its machines to the storage network, so that nodes can reach the NFS exports. The storage
// network is --storage-network or what discovery found (storageNetworks); without either, the
// attachments manila-setup recorded on the MachineSets are compared. When discovery saw the
// network's subnets, it also says what the network does to the nodes (storage_network_nodes.go):
// the findings of attach.Fitness, and the workers whose node IP lies on it or that have no
// address on it yet. It syncs when a MachineSet or a node changes (their informers' events),
// when discovery gives another answer, and every resync.
type storageNetworkController struct {
	operands
	// machineAPI tells whether the cluster has MachineSets at all (their CRD).
	machineAPI func() bool
	// machineSets lists the cached MachineSets of openshift-machine-api; synced is false until
	// their informer has listed once.
	machineSets func() (sets []runtime.Object, synced bool, err error)
	// network is the storage network: id, where it comes from (how), or why it is not known.
	network func() (id, how, why string)
	// zones are each availability zone's storage networks when Manila serves the zones on
	// different ones (network's id is "" then); nil otherwise.
	zones func() []openstack.ZoneNetworks
	// requeueAfter asks for another sync soon (the MachineSets are not cached yet).
	requeueAfter func(time.Duration)
	// shareClients is where the workers mount from (shareClientSource); classes the
	// StorageClasses the operator keeps.
	shareClients func() (shareclient.Answer, error)
	classes      func() []*storagev1.StorageClass
	// listShareClients: the driver takes a comma-separated nfs-shareClient; else the classes
	// hold one rule (shareclient.Answer.Single).
	listShareClients bool
	// candidate is the storage network as discovery saw it, with its subnets (nil when the
	// cloud has not told); nodes the cached nodes; clusterNetworks the cluster's networks from
	// its install-config (nil when unknown).
	candidate       func() *openstack.Candidate
	nodes           func() []*corev1.Node
	clusterNetworks func() []netip.Prefix
	// controlPlane is the cached ControlPlaneMachineSet cluster, nil when there is none.
	controlPlane func() *unstructured.Unstructured
	// machines lists the cached Machines of openshift-machine-api; freeAddresses counts the
	// free addresses of a network's subnets (asked only while Machines lack an address).
	machines      func() []*unstructured.Unstructured
	freeAddresses func(ctx context.Context, networkID string, maxAge time.Duration) storageCapacity
	// recorder says the storage network's warnings once as an Event; warned holds the last
	// ones said (a controller syncs one at a time).
	recorder machinery.Recorder
	warned   string
}

const storageNetworkName = "StorageNetworkController"

// newStorageNetworkController reports on the MachineSets and their Machines against the storage
// network, on the StorageClasses the operator keeps, on the storage network itself and on the
// nodes (their addresses; the install-config gives the cluster's networks).
func newStorageNetworkController(w wiring) *machinery.Controller {
	storage, crdExists, machineSets, prefix := w.storage, w.inf.CRDExists, w.inf.DynamicLister, w.profile.names.StorageClassPrefix
	c := &storageNetworkController{
		operands:         w.ops,
		listShareClients: w.profile.listShareClients,
		candidate:        storage.candidate,
		nodes:            cachedNodes(w.l.Nodes),
		clusterNetworks:  w.installConfig.clusterNetworks,
		recorder:         w.recorder,
		machineAPI:       func() bool { return crdExists("machinesets.machine.openshift.io") },
		machineSets: func() ([]runtime.Object, bool, error) {
			lister, synced := machineSets(machinery.MachineSetGVR)
			if !synced {
				return nil, false, nil
			}
			sets, err := lister.ByNamespace(machinery.MachineAPINamespace).List(labels.Everything())
			return sets, true, err
		},
		network:       storage.network,
		zones:         storage.zones,
		freeAddresses: storage.freeAddresses,
		machines: func() []*unstructured.Unstructured {
			lister, synced := machineSets(machinery.MachineGVR)
			if !synced || !crdExists("machines.machine.openshift.io") {
				return nil
			}
			objs, _ := lister.ByNamespace(machinery.MachineAPINamespace).List(labels.Everything())
			out := make([]*unstructured.Unstructured, 0, len(objs))
			for _, o := range objs {
				if u, ok := o.(*unstructured.Unstructured); ok {
					out = append(out, u)
				}
			}
			return out
		},
		controlPlane: func() *unstructured.Unstructured {
			lister, synced := machineSets(machinery.ControlPlaneMachineSetGVR)
			if !synced || !crdExists("controlplanemachinesets.machine.openshift.io") {
				return nil
			}
			obj, err := lister.ByNamespace(machinery.MachineAPINamespace).Get(machinery.ControlPlaneMachineSetName)
			if err != nil {
				return nil
			}
			u, _ := obj.(*unstructured.Unstructured)
			return u
		},
		shareClients: w.mounts.answer,
		classes: func() []*storagev1.StorageClass {
			all, _ := w.l.StorageClasses.List(machinery.ManagedSelector)
			var out []*storagev1.StorageClass
			for _, sc := range all {
				if ours(sc, prefix) {
					out = append(out, sc)
				}
			}
			sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
			return out
		},
	}
	ctrl := w.loop.Controller(storageNetworkName, c.sync, w.inf.CRDs, w.inf.StorageClasses, w.inf.ClusterConfig, w.inf.Nodes)
	c.requeueAfter = ctrl.RequeueAfter
	onMachineAPI(w.inf.OnDynamic, ctrl)
	storage.listen(ctrl.Enqueue)
	return ctrl
}

func (c *storageNetworkController) sync(ctx context.Context, _ *machinery.Controller) error {
	spec := c.spec()
	if spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	if spec.ManagementState == operatorv1.Removed {
		// No condition: the one this controller wrote goes away with its apply.
		return c.applyStatus(ctx, storageNetworkName, machinery.NewStatus())
	}
	sets, status, reason, msg := c.verdict()
	id, _, _ := c.network()
	notAttached := len(setsNotAttached(sets, id))
	if zones := c.zoneNetworks(); id == "" && zones != nil {
		_, _, _, notAttached = zonesVerdict(sets, zones)
	}
	MachineSetsNotAttached.Set(float64(notAttached))
	if status == operatorv1.ConditionTrue {
		status, reason, msg = classesVerdict(c.shareClients, c.classes(), msg, c.listShareClients)
	}
	unaddressed, short := 0, int64(0)
	if cand := c.candidate(); cand != nil {
		report := judgeStorageNetwork(cand.Network, sets, c.clusterNetworks(), c.nodes())
		c.addMachines(ctx, &report, cand.Network.ID, sets)
		unaddressed = len(report.unaddressed)
		short = report.short
		status, reason, msg = report.apply(status, reason, msg)
		c.warnOnce(report)
	}
	if status == operatorv1.ConditionTrue {
		status, reason, msg = exportsVerdict(c.candidate(), status, reason, msg)
	}
	MachinesWithoutStorageAddress.Set(float64(unaddressed))
	StorageAddressesShort.Set(float64(short))
	return c.applyStatus(ctx, storageNetworkName, machinery.NewStatus().WithConditions(
		machinery.Condition(operator.ConditionStorageNetworkReachable, status, reason, msg)))
}

// addMachines adds to the report the Machines that attach the storage network but got no
// address on it for lack of free addresses, and the addresses the attached MachineSets still
// want beyond the free ones (a scale-up past the subnet, said before any Machine fails). The
// free addresses are counted (Neutron, at most once a minute) only when some Machine failed
// without one or some set wants addresses.
func (c *storageNetworkController) addMachines(ctx context.Context, r *storageReport, id string, sets []*unstructured.Unstructured) {
	if c.machines == nil || len(r.subnets) == 0 {
		return
	}
	machines := c.machines()
	failed := failedWithoutStorageAddress(machines, id, r.subnets)
	wanted := addressesWanted(sets, machines, id, r.subnets)
	klog.V(4).Infof("storage network %s: %d MachineSets, %d Machines, %d failed without a storage address, %d storage addresses wanted", id, len(sets), len(machines), len(failed), wanted.total)
	if len(failed) == 0 && wanted.total == 0 {
		return
	}
	if c.freeAddresses != nil {
		r.capacity = c.freeAddresses(ctx, id, capacityPeriod)
		if free := r.capacity.free(); free >= 0 && wanted.total > free {
			r.capacity = c.freeAddresses(ctx, id, shortRecount)
		}
		if n := r.capacity.free(); n >= 0 {
			StorageSubnetFreeAddresses.Set(float64(n))
		}
	}
	r.unaddressed = withoutAddress(failed, r.capacity)
	if free := r.capacity.free(); free >= 0 && wanted.total > free {
		r.wanted, r.short = wanted, wanted.total-free
	}
}

// verdict judges the MachineSets (returned sorted by name) against the storage network.
func (c *storageNetworkController) verdict() ([]*unstructured.Unstructured, operatorv1.ConditionStatus, string, string) {
	if !c.machineAPI() {
		return nil, operatorv1.ConditionUnknown, "NoMachineAPI", "the cluster has no MachineSets to check"
	}
	objs, synced, err := c.machineSets()
	if !synced || err != nil {
		c.requeueAfter(time.Second)
		return nil, operatorv1.ConditionUnknown, "Checking", "reading MachineSets"
	}
	id, how, why := c.network()
	var cp *unstructured.Unstructured
	if c.controlPlane != nil && mastersRunWorkloads(c.nodes()) {
		cp = c.controlPlane()
	}
	if len(objs) == 0 {
		if cp != nil && id != "" {
			status, reason, msg := controlPlaneVerdict(cp, id, how)
			return nil, status, reason, msg
		}
		return nil, operatorv1.ConditionUnknown, "NoMachineSets", "no MachineSets in " + machinery.MachineAPINamespace
	}
	sets := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			sets = append(sets, u)
		}
	}
	sort.Slice(sets, func(i, j int) bool { return sets[i].GetName() < sets[j].GetName() })
	if zones := c.zoneNetworks(); id == "" && zones != nil {
		status, reason, msg, _ := zonesVerdict(sets, zones)
		return sets, status, reason, msg
	}
	status, reason, msg := storageNetworkVerdict(sets, id, how, why)
	if cp != nil && id != "" {
		cpStatus, cpReason, cpMsg := controlPlaneVerdict(cp, id, how)
		if cpStatus == operatorv1.ConditionFalse {
			if status == operatorv1.ConditionFalse {
				return sets, status, reason, cpMsg + ". " + msg
			}
			return sets, cpStatus, cpReason, cpMsg + ". " + msg
		}
		msg += "; " + cpMsg
	}
	return sets, status, reason, msg
}

// mastersRunWorkloads tells a cluster whose masters run workload pods (a compact cluster's, or
// untainted ones): their pods mount shares too.
func mastersRunWorkloads(nodes []*corev1.Node) bool {
	for _, n := range nodes {
		if shareclient.ControlPlaneNode(n) && shareclient.RunsWorkloads(n) {
			return true
		}
	}
	return false
}

// controlPlaneVerdict judges the ControlPlaneMachineSet of masters that run workloads: its
// template must give new masters a port on the storage network, as a MachineSet's must. Only an
// Active set makes masters; an inactive one is said, not judged.
func controlPlaneVerdict(cp *unstructured.Unstructured, id, how string) (operatorv1.ConditionStatus, string, string) {
	const name = "the ControlPlaneMachineSet " + machinery.ControlPlaneMachineSetName
	if state, _, _ := unstructured.NestedString(cp.Object, "spec", "state"); state != "Active" {
		return operatorv1.ConditionTrue, "AsExpected", fmt.Sprintf("the masters run workloads; %s is not Active, so it does not replace them (attach them with manila-setup controlplane patch once it is)", name)
	}
	value, _, _ := unstructured.NestedFieldNoCopy(cp.Object, "spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value")
	m, _ := value.(map[string]any)
	if !attachment.SpecOf(m).HasNetwork(id) {
		return operatorv1.ConditionFalse, reasonControlPlaneNotAttached,
			fmt.Sprintf("the masters run workloads, but %s does not attach them to the storage network %s (%s), so pods on the masters cannot mount Manila shares: run manila-setup controlplane patch", name, id, how)
	}
	return operatorv1.ConditionTrue, "AsExpected", fmt.Sprintf("%s attaches the masters, which run workloads, to the storage network %s (%s)", name, id, how)
}

// reasonControlPlaneNotAttached: masters run workloads without the storage network.
const reasonControlPlaneNotAttached = "ControlPlaneNotAttached"

// warnOnce records the storage network's warnings as a Warning Event when they differ from
// those last recorded: the condition keeps saying them, the Event says when they appeared.
func (c *storageNetworkController) warnOnce(r storageReport) {
	w := r.warningsMessage()
	if w == c.warned {
		return
	}
	c.warned = w
	if w != "" && c.recorder != nil {
		c.recorder.Warningf("StorageNetworkWarnings", "%s", w)
	}
}

// cachedNodes lists the nodes of the cache (machinery.Informers.Nodes: labels and addresses).
func cachedNodes(l cache.GenericLister) func() []*corev1.Node {
	return func() []*corev1.Node {
		objs, err := l.List(machinery.Everything)
		if err != nil {
			return nil
		}
		out := make([]*corev1.Node, 0, len(objs))
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok {
				out = append(out, n)
			}
		}
		return out
	}
}

// storageNetworks is the storage network as given (--storage-network) or as the last
// discovery found it. The Manila controller runs discovery with its OpenStack client;
// onChange tells the storage network controller.
type storageNetworks struct {
	given string

	mu       sync.Mutex
	at       time.Time
	src      ManilaSource
	ranking  *openstack.Ranking
	err      error
	onChange []func()
	// capNet, capAt and capLast are the last count of a network's free addresses
	// (freeAddresses).
	capNet  string
	capAt   time.Time
	capLast storageCapacity
}

// listen adds f to what is called when discovery gives another answer.
func (s *storageNetworks) listen(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onChange = append(s.onChange, f)
}

// due reports whether discovery should run: at the first check with new credentials (src),
// then every period, and again after a failure. With --storage-network it runs too, for the subnets Manila exports in,
// which the StorageClasses' nfs-shareClient follows (exportSubnets).
func (s *storageNetworks) due(src ManilaSource, period time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A failed discovery is tried again at the next check, not a period later: the
	// StorageClasses wait on its answer.
	return s.src != src || s.err != nil || time.Since(s.at) >= period
}

// discovered records the result of a discovery. A failed discovery keeps the last answer that
// came: a Manila or Neutron blip in the middle of one must not take the export subnet out of the
// driver's runtime configuration, nor the storage subnets out of the StorageClasses' clients
// (immutable: they would be re-created), while every volume still mounts as before.
func (s *storageNetworks) discovered(src ManilaSource, ranking *openstack.Ranking, err error) {
	before, beforeHow, beforeWhy := s.network()
	beforeNet := s.candidateNetwork()
	s.mu.Lock()
	s.at, s.src, s.err = time.Now(), src, err
	if err == nil {
		s.ranking = ranking
	}
	notify := s.onChange
	s.mu.Unlock()
	// Another answer is another network, or the same one changed: its subnets, what they hand
	// out, its port security.
	if id, how, why := s.network(); id != before || how != beforeHow || why != beforeWhy || !reflect.DeepEqual(s.candidateNetwork(), beforeNet) {
		for _, f := range notify {
			f()
		}
	}
}

// network is the Neutron network Manila exports on: --storage-network, else what discovery's
// ranking names by the rule every command of manila-setup uses
// ((*openstack.Ranking).StorageNetwork: real evidence, no tie). how says where it comes from;
// why, when id is "", why it is not known.
func (s *storageNetworks) network() (id, how, why string) {
	if s.given != "" {
		return s.given, "given by --storage-network", ""
	}
	s.mu.Lock()
	ranking, err, ran := s.ranking, s.err, !s.at.IsZero()
	s.mu.Unlock()
	if err != nil && ranking != nil {
		// The last answer stands (discovered); the condition says it is an earlier one. The
		// error itself is logged where discovery runs: its text would change the message at
		// every failed try.
		id, how, why = storageNetworkFrom(ranking, nil, ran)
		if id != "" {
			how += " (at an earlier discovery: the latest one failed)"
		}
		return id, how, why
	}
	return storageNetworkFrom(ranking, err, ran)
}

// exportSubnet is the CIDR of the subnet the storage network's shares are exported in (the
// preferred export's, else the one with the most shares), for the driver's runtime
// configuration; "" when discovery did not find the storage network's exports.
//
// The driver matches one CIDR only (its runtime configuration's matchExportLocationAddress), and
// a share whose export locations are all outside it fails to mount. So when the network exports
// on several subnets, the CIDR is the smallest prefix covering all of them, as long as it holds
// no export address of another network that discovery saw (a prefix that took in another
// network's exports could pick an export the workers do not reach); else the preferred subnet.
//
// Only exports of a family the shares' rules can admit count: the driver grants no IPv6 rule
// (shareclient.DriverGrantsIPv6), so on a network that exports on an IPv4 and an IPv6 subnet
// (the director's StorageNFS) the node plugin must mount the IPv4 export, even when Manila
// prefers the IPv6 one; a mount of it would be refused.
func (s *storageNetworks) exportSubnet() string {
	best := s.candidate()
	if best == nil {
		return s.zonesExportSubnet()
	}
	if len(best.Exports) == 0 {
		return ""
	}
	exports := grantable(best.Exports)
	var subnets []netip.Prefix
	for _, e := range exports {
		if e.CIDR.IsValid() && !slices.Contains(subnets, e.CIDR.Masked()) {
			subnets = append(subnets, e.CIDR.Masked())
		}
	}
	oneFamily := !slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Addr().Is4() != subnets[0].Addr().Is4() })
	if len(subnets) > 1 && oneFamily {
		covering := shareclient.Covering(subnets)
		if !s.othersExportIn(covering, best.Network.ID) && covering.Bits() > 0 {
			return covering.String()
		}
	}
	pick := exports[0]
	for _, e := range exports[1:] {
		if e.Preferred && !pick.Preferred || e.Preferred == pick.Preferred && e.Shares > pick.Shares {
			pick = e
		}
	}
	if !pick.CIDR.IsValid() {
		return ""
	}
	return pick.CIDR.Masked().String()
}

// reasonIPv6ExportPreferred: Manila prefers an IPv6 export of the storage network, which the
// driver cannot stage.
const reasonIPv6ExportPreferred = "IPv6ExportPreferred"

// exportsVerdict judges the storage network's exports against what the driver can stage. The
// driver (cloud-provider-openstack v1.35.0) cannot read a bracketed IPv6 export location while
// it matches a share's exports to the runtime configuration: NodeStage fails ("IP '[...]' in
// export location path ... is invalid") unless a preferred IPv4 export comes first. So when
// some share prefers an IPv6 export while the network also exports on IPv4, the workers cannot
// mount those shares, although every class and rule is right: said here, before a pod fails.
func exportsVerdict(c *openstack.Candidate, status operatorv1.ConditionStatus, reason, msg string) (operatorv1.ConditionStatus, string, string) {
	if c == nil || shareclient.DriverGrantsIPv6 {
		return status, reason, msg
	}
	var v6 []string
	v4 := false
	for _, e := range c.Exports {
		switch {
		case e.Address.Unmap().Is4():
			v4 = true
		case e.Preferred:
			v6 = append(v6, e.Address.String())
		}
	}
	if !v4 || len(v6) == 0 {
		return status, reason, msg
	}
	return operatorv1.ConditionFalse, reasonIPv6ExportPreferred, fmt.Sprintf("Manila prefers the IPv6 export %s of the storage network %s for some shares: the Manila CSI driver cannot stage a share whose preferred export is IPv6 (NodeStage fails: IP '[%s]' in export location path ... is invalid), so pods cannot mount those shares; have the back end list and prefer its IPv4 export address. %s",
		strings.Join(v6, ", "), c.Network.ID, v6[0], msg)
}

// grantable keeps the exports of the families the driver grants rules for: without IPv6 rules
// the IPv4 exports, as long as there is one (with none, all of them: the claims then fail on
// Manila's refusal of the IPv6 rule, which says why).
func grantable(exports []openstack.NetworkExport) []openstack.NetworkExport {
	if shareclient.DriverGrantsIPv6 {
		return exports
	}
	var v4 []openstack.NetworkExport
	for _, e := range exports {
		if e.Address.Unmap().Is4() {
			v4 = append(v4, e)
		}
	}
	if len(v4) == 0 {
		return exports
	}
	return v4
}

// othersExportIn tells whether a network other than the given ones has an export address
// inside the prefix, as the last discovery found them.
func (s *storageNetworks) othersExportIn(p netip.Prefix, networks ...string) bool {
	s.mu.Lock()
	ranking := s.ranking
	s.mu.Unlock()
	if ranking == nil {
		return true
	}
	for _, c := range ranking.Candidates {
		if slices.ContainsFunc(networks, func(n string) bool { return neutronid.Equal(c.Network.ID, n) }) {
			continue
		}
		for _, e := range c.Exports {
			if p.Contains(e.Address) {
				return true
			}
		}
	}
	return false
}

// exportSubnets are the CIDRs of every subnet of the storage network that holds an export
// address, as the last discovery found them; nil when it did not.
func (s *storageNetworks) exportSubnets() []netip.Prefix {
	best := s.candidate()
	if best == nil {
		return s.zonesExportSubnets()
	}
	return best.ExportSubnets()
}

// candidate is discovery's entry for the storage network: the one --storage-network names,
// else the one discovery's rule names; nil when there is none.
func (s *storageNetworks) candidate() *openstack.Candidate {
	s.mu.Lock()
	ranking := s.ranking
	s.mu.Unlock()
	if ranking == nil {
		return nil
	}
	if s.given != "" {
		for i := range ranking.Candidates {
			if neutronid.Equal(ranking.Candidates[i].Network.ID, s.given) {
				return &ranking.Candidates[i]
			}
		}
		return nil
	}
	best, err := ranking.StorageNetwork()
	if err != nil {
		return nil
	}
	return best
}

// candidateNetwork is the storage network as the last discovery saw it, nil when it did not.
func (s *storageNetworks) candidateNetwork() *openstack.Network {
	if c := s.candidate(); c != nil {
		return &c.Network
	}
	return nil
}

// storageNetworkFrom applies the storage network rule to the result of a discovery.
func storageNetworkFrom(ranking *openstack.Ranking, discoveryErr error, ran bool) (id, how, why string) {
	switch {
	case !ran:
		return "", "", "discovery has not run yet"
	case discoveryErr != nil:
		return "", "", "discovery failed: " + discoveryErr.Error()
	}
	best, err := ranking.StorageNetwork()
	if err != nil {
		why = err.Error()
		var sne *openstack.StorageNetworkError
		if errors.As(err, &sne) && len(sne.Tied) > 1 {
			why += " with --storage-network"
		}
		return "", "", why
	}
	return best.Network.ID, fmt.Sprintf("found by discovery with %s confidence: %s", best.Confidence, best.Network.Label()), ""
}

// storageNetworkVerdict judges the MachineSets (sorted by name) against the storage network id
// (how: where it comes from), or when id is "" (why: why it is not known) against the
// attachments manila-setup recorded on them.
func storageNetworkVerdict(sets []*unstructured.Unstructured, id, how, why string) (operatorv1.ConditionStatus, string, string) {
	const fix = "run manila-setup networks attach"
	if id != "" {
		if missing := setsNotAttached(sets, id); len(missing) > 0 {
			return operatorv1.ConditionFalse, "MachineSetsNotAttached",
				fmt.Sprintf("MachineSets %s do not attach their machines to the storage network %s (%s), so their nodes cannot mount Manila shares: %s",
					strings.Join(missing, ", "), id, how, fix)
		}
		return operatorv1.ConditionTrue, "AsExpected",
			fmt.Sprintf("every MachineSet (%d) attaches its machines to the storage network %s (%s)", len(sets), id, how)
	}

	// The storage network is not known: rely on what manila-setup recorded when it attached,
	// as `manila-setup machinesets list` does: the record names the networks, the providerSpec
	// must still have them.
	var with, without, stale []string
	recorded := map[string]bool{}
	for _, u := range sets {
		r := record.Parse(u.GetAnnotations())
		if r == nil || len(r.Networks) == 0 {
			without = append(without, u.GetName())
			continue
		}
		attached := true
		for _, n := range r.Networks {
			recorded[n] = true
			attached = attached && machineSetAttached(u, n)
		}
		if attached {
			with = append(with, u.GetName())
		} else {
			stale = append(stale, u.GetName())
		}
	}
	nets := slices.Sorted(maps.Keys(recorded))
	switch {
	case len(with) == 0 && len(stale) == 0:
		return operatorv1.ConditionUnknown, "StorageNetworkUnknown",
			fmt.Sprintf("the storage network is not known (%s) and no MachineSet records an attachment by manila-setup: %s", why, fix)
	case len(stale) > 0:
		return operatorv1.ConditionFalse, "MachineSetsNotAttached",
			fmt.Sprintf("MachineSets %s record an attachment by manila-setup to the networks %s that their providerSpec no longer has, so their new nodes may not mount Manila shares: %s",
				strings.Join(stale, ", "), strings.Join(nets, ", "), fix)
	case len(without) > 0:
		return operatorv1.ConditionFalse, "MachineSetsNotAttached",
			fmt.Sprintf("MachineSets %s have no storage network attachment, unlike %s (networks %s), so their nodes may not mount Manila shares: %s",
				strings.Join(without, ", "), strings.Join(with, ", "), strings.Join(nets, ", "), fix)
	}
	return operatorv1.ConditionTrue, "AttachedByManilaSetup",
		fmt.Sprintf("every MachineSet (%d) attaches its machines to the networks %s that manila-setup recorded attaching (the storage network itself is not known: %s)",
			len(sets), strings.Join(nets, ", "), why)
}

// setsNotAttached are the MachineSets whose providerSpec gives their machines no port on the
// storage network id; none while it is not known ("").
func setsNotAttached(sets []*unstructured.Unstructured, id string) []string {
	if id == "" {
		return nil
	}
	var out []string
	for _, u := range sets {
		if !machineSetAttached(u, id) {
			out = append(out, u.GetName())
		}
	}
	return out
}

// machineSetAttached reports whether the MachineSet's machines get a port on the network, by
// the rule the CLI uses (attachment.Spec: networks[] or ports[] of the providerSpec). What
// manila-setup recorded in its annotation does not count here: a record says what was once
// attached, the providerSpec what new machines get.
func machineSetAttached(u *unstructured.Unstructured, networkID string) bool {
	value, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "template", "spec", "providerSpec", "value")
	m, _ := value.(map[string]any)
	return attachment.SpecOf(m).HasNetwork(networkID)
}

// classesVerdict: the network being attached is half of reaching the exports; the other half is
// the share's access rule, which the StorageClasses' nfs-shareClient becomes. True stays True
// only when every class the operator keeps admits every network the workers mount from
// (shareclient); the message says what the classes admit and why.
//
// Where the driver takes one rule only (list false) and no prefix covers the workers' networks
// without admitting addresses outside them, the classes hold the storage subnet
// (shareclient.Answer.Single): the networks it leaves out are named, not counted as missing.
func classesVerdict(shareClients func() (shareclient.Answer, error), classes []*storagev1.StorageClass, attachedMsg string, list bool) (operatorv1.ConditionStatus, string, string) {
	answer, err := shareClients()
	if err != nil {
		return operatorv1.ConditionUnknown, "Checking", attachedMsg + "; where the workers mount from is not known yet: " + err.Error()
	}
	if len(classes) == 0 {
		return operatorv1.ConditionTrue, "AsExpected", fmt.Sprintf("%s; the workers mount from %s (%s)", attachedMsg, shareclient.Join(answer.Clients), answer.Reason)
	}
	left := answer.Left(list)
	var wrong []string
	var missing []netip.Prefix
	values := map[string]bool{}
	for _, sc := range classes {
		v := sc.Parameters["nfs-shareClient"]
		values[v] = true
		rules, err := shareclient.ParseValue(v)
		m := slices.DeleteFunc(shareclient.Missing(rules, answer.Clients), func(p netip.Prefix) bool { return slices.Contains(left, p) })
		if err != nil || len(m) > 0 {
			wrong = append(wrong, sc.Name)
			for _, p := range m {
				if !slices.Contains(missing, p) {
					missing = append(missing, p)
				}
			}
		}
	}
	if len(wrong) > 0 {
		return operatorv1.ConditionFalse, "StorageClassesExcludeWorkers",
			fmt.Sprintf("StorageClasses %s do not admit %s, where the workers mount from (%s), so shares made from them refuse those nodes; the operator recreates them",
				strings.Join(wrong, ", "), shareclient.Join(missing), answer.Reason)
	}
	narrowed := ""
	if len(left) > 0 {
		narrowed = fmt.Sprintf("; the driver takes one rule per share, and a rule covering %s would admit addresses outside the cluster's networks: the shares admit %s only, so workers that mount from %s (not attached yet) cannot mount shares made until they are",
			shareclient.Join(answer.Clients), answer.Single(), shareclient.Join(left))
	}
	return operatorv1.ConditionTrue, "AsExpected", fmt.Sprintf("%s; the StorageClasses admit %s to their shares: %s%s",
		attachedMsg, strings.Join(slices.Sorted(maps.Keys(values)), " and "), answer.Reason, narrowed)
}
