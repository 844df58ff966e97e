package controllers

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// errMachinesNotCached: the MachineSets or Machines are not cached yet, so where the workers
// mount from cannot be told; the caller waits rather than write an answer it would soon undo.
var errMachinesNotCached = errors.New("reading MachineSets and Machines")

// shareClientSource tells where the workers mount from, for the StorageClasses'
// nfs-shareClient (the Manila controller), StorageNetworkReachable (the storage network
// controller) and the lint. Whether the driver serving the classes takes a comma-separated
// list (the operator's own, cloud-provider-openstack v1.35.0 and later, does; the platform's,
// beside which the companion runs, may be older, so the companion writes one CIDR) is decided
// with the mode, in start.go.
type shareClientSource struct {
	// given are the machine networks of --machine-network; else the install-config says.
	given         []string
	installConfig *installConfigs
	// storage is the storage network and its export subnets, as discovery found them.
	storage *storageNetworks
	// crdExists and machineAPI read the CRDs and the Machine API resources from the caches.
	crdExists  func(name string) bool
	machineAPI func(schema.GroupVersionResource) (cache.GenericLister, bool)
	// nodes are the cached Nodes: which masters run workloads (shareclient.RunsWorkloads).
	nodes func() []*corev1.Node
}

// answer applies the one rule of where the workers mount from (operator/shareclient) to what
// the operator sees: the machine networks, the storage network's export subnets (from
// discovery), the MachineSets of openshift-machine-api (attached or not) and the Machines they
// made, with their addresses.
func (s *shareClientSource) answer() (shareclient.Answer, error) {
	nets, err := s.machineNetworks()
	if err != nil {
		return shareclient.Answer{}, err
	}
	var facts shareclient.Facts
	for _, n := range nets {
		if p, err := netip.ParsePrefix(strings.TrimSpace(n)); err == nil {
			facts.MachineNetworks = append(facts.MachineNetworks, p.Masked())
		}
	}
	var storageIDs []string
	if s.storage != nil {
		facts.ExportSubnets = s.storage.exportSubnets()
		storageIDs = s.storage.networkIDs()
	}
	var in shareclient.MachineAPI
	if s.crdExists("machinesets.machine.openshift.io") {
		if in.MachineSets, err = s.cached(machinery.MachineSetGVR); err != nil {
			return shareclient.Answer{}, err
		}
	}
	if s.crdExists("machines.machine.openshift.io") {
		if in.Machines, err = s.cached(machinery.MachineGVR); err != nil {
			return shareclient.Answer{}, err
		}
	}
	if s.crdExists("controlplanemachinesets.machine.openshift.io") {
		sets, err := s.cached(machinery.ControlPlaneMachineSetGVR)
		if err != nil {
			return shareclient.Answer{}, err
		}
		for _, u := range sets {
			if u.GetName() == machinery.ControlPlaneMachineSetName {
				in.ControlPlane = u
			}
		}
	}
	if s.nodes != nil {
		in.RunsWorkloads = workloadNodes(s.nodes())
	}
	facts.Sets, facts.Machines = shareclient.FromMachineAPI(in, storageIDs...)
	return shareclient.Decide(facts)
}

// workloadNodes tells by name the Nodes that run workload pods (shareclient.RunsWorkloads).
func workloadNodes(nodes []*corev1.Node) func(string) bool {
	runs := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		runs[n.Name] = shareclient.RunsWorkloads(n)
	}
	return func(name string) bool { return runs[name] }
}

// dynamicEvents registers an event handler on the informer of a resource whose CRD may appear
// at run time (machinery.Informers.OnDynamic).
type dynamicEvents func(schema.GroupVersionResource, cache.ResourceEventHandler)

// onMachineAPI syncs ctrl when a MachineSet, a Machine or the ControlPlaneMachineSet of
// openshift-machine-api changes.
func onMachineAPI(on dynamicEvents, ctrl *machinery.Controller) {
	for _, gvr := range []schema.GroupVersionResource{machinery.MachineSetGVR, machinery.MachineGVR, machinery.ControlPlaneMachineSetGVR} {
		on(gvr, ctrl.EventHandler())
	}
}

// cached lists a Machine API resource of openshift-machine-api from its informer, sorted by
// name.
func (s *shareClientSource) cached(gvr schema.GroupVersionResource) ([]*unstructured.Unstructured, error) {
	lister, synced := s.machineAPI(gvr)
	if !synced {
		return nil, errMachinesNotCached
	}
	objs, err := lister.ByNamespace(machinery.MachineAPINamespace).List(machinery.Everything)
	if err != nil {
		return nil, err
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, obj := range objs {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

// machineNetworks are the CIDRs the nodes' primary addresses come from: --machine-network, else
// the install-config kept in kube-system/cluster-config-v1.
func (s *shareClientSource) machineNetworks() ([]string, error) {
	if len(s.given) > 0 {
		return s.given, nil
	}
	const ns, name = machinery.ClusterConfigNamespace, machinery.ClusterConfigName
	ic, found := s.installConfig.parsed()
	if !found {
		return nil, fmt.Errorf("the machine network CIDRs (for the StorageClasses' nfs-shareClient) are unknown: ConfigMap %s/%s not found; start the operator with --machine-network", ns, name)
	}
	if ic.err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %v; start the operator with --machine-network", ns, name, ic.err)
	}
	return ic.machine, nil
}
