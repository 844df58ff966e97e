package controllers

import (
	"errors"
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

var machineGVR = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}

// errMachinesNotCached: the MachineSets or Machines are not cached yet, so where the workers
// mount from cannot be told; the caller waits rather than write an answer it would soon undo.
var errMachinesNotCached = errors.New("reading MachineSets and Machines")

// shareClients applies the one rule of where the workers mount from (operator/shareclient) to
// what the operator sees: the machine networks, the storage network's export subnets (from
// discovery), the MachineSets of openshift-machine-api (attached or not) and the Machines they
// made, with their addresses.
func (o *Operator) shareClients() (shareclient.Answer, error) {
	nets, err := o.machineNetworks()
	if err != nil {
		return shareclient.Answer{}, err
	}
	var facts shareclient.Facts
	for _, n := range nets {
		if p, err := netip.ParsePrefix(strings.TrimSpace(n)); err == nil {
			facts.MachineNetworks = append(facts.MachineNetworks, p.Masked())
		}
	}
	storageID := ""
	if o.storage != nil {
		facts.ExportSubnets = o.storage.exportSubnets()
		storageID, _, _ = o.storage.network()
	}
	var sets, machines []*unstructured.Unstructured
	if o.crdExists("machinesets.machine.openshift.io") {
		if sets, err = o.cachedMachineAPI(machineSetGVR); err != nil {
			return shareclient.Answer{}, err
		}
	}
	if o.crdExists("machines.machine.openshift.io") {
		if machines, err = o.cachedMachineAPI(machineGVR); err != nil {
			return shareclient.Answer{}, err
		}
	}
	facts.Sets, facts.Machines = shareclient.FromMachineAPI(sets, machines, storageID)
	return shareclient.Decide(facts)
}

// onMachineAPI syncs ctrl when a MachineSet or a Machine of openshift-machine-api changes.
func onMachineAPI(o *Operator, ctrl *controller) {
	enqueue := func(any) { ctrl.queue.Add(queueKey) }
	for _, gvr := range []schema.GroupVersionResource{machineSetGVR, machineGVR} {
		o.onDynamic(gvr, cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue})
	}
}

// cachedMachineAPI lists a Machine API resource of openshift-machine-api from its informer,
// sorted by name.
func (o *Operator) cachedMachineAPI(gvr schema.GroupVersionResource) ([]*unstructured.Unstructured, error) {
	lister, synced := o.dynamicLister(gvr)
	if !synced {
		return nil, errMachinesNotCached
	}
	objs, err := lister.ByNamespace(machineAPINamespace).List(everything)
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

// shareClientList tells whether the driver that serves the classes takes a comma-separated
// nfs-shareClient: the operator's own (cloud-provider-openstack v1.35.0 and later) does; the
// platform's, beside which the companion runs, may be older, so the companion writes one CIDR.
func (o *Operator) shareClientList() bool {
	return !o.companion()
}

// machineNetworks are the CIDRs the nodes' primary addresses come from: --machine-network, else
// the install-config kept in kube-system/cluster-config-v1.
func (o *Operator) machineNetworks() ([]string, error) {
	if len(o.cfg.MachineNetworks) > 0 {
		return o.cfg.MachineNetworks, nil
	}
	cm, err := o.lister.clusterConfig.ConfigMaps(clusterConfigNS).Get(clusterConfigName)
	if err != nil {
		return nil, fmt.Errorf("the machine network CIDRs (for the StorageClasses' nfs-shareClient) are unknown: ConfigMap %s/%s not found; start the operator with --machine-network", clusterConfigNS, clusterConfigName)
	}
	cidrs, err := operator.MachineNetworksFromInstallConfig([]byte(cm.Data["install-config"]))
	if err != nil {
		return nil, fmt.Errorf("ConfigMap %s/%s: %v; start the operator with --machine-network", clusterConfigNS, clusterConfigName, err)
	}
	return cidrs, nil
}
