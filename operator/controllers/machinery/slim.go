package machinery

import (
	"net/netip"
	"reflect"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/attach/record"
)

// What the caches keep of the objects that come in hundreds (Machines, MachineSets, Nodes): the
// fields the rules read, nothing else. A Machine as the Machine API writes it carries its
// server's whole providerSpec (image, flavor, user data secret, tags, metadata), a
// providerStatus, conditions and annotations; kept as unstructured maps, each string and each
// map of that is a separate allocation on the heap, for every Machine, for the life of the
// operator.

// machineAPIPaths are the fields of a MachineSet or Machine that the operator's rules read
// (operator/shareclient: the attachment, the Node and the addresses; StorageNetworkReachable:
// the phase and error of a Machine without an address on the storage network, a MachineSet's
// replicas). Metadata is
// kept apart (SlimMachineAPI).
var machineAPIPaths = [][]string{
	{"spec", "state"},    // a ControlPlaneMachineSet's: only an Active one makes masters
	{"spec", "replicas"}, // a MachineSet's: the storage addresses its machines will want
	{"status", "nodeRef"},
	{"status", "phase"},
	{"status", "errorReason"},
	{"status", "errorMessage"},
}

// providerSpecPaths lead to a Machine's providerSpec and to a MachineSet's template of it.
var providerSpecPaths = [][]string{
	{"spec", "providerSpec", "value"},
	{"spec", "template", "spec", "providerSpec", "value"},
	{"spec", "template", "machines_v1beta1_machine_openshift_io", "spec", "providerSpec", "value"},
}

// roleLabel is the Machine API's role of a Machine (master, worker, infra).
const roleLabel = "machine.openshift.io/cluster-api-machine-role"

// providerSpecKeys are the parts of a providerSpec the rules read: the networks and ports (is
// the machine on the storage network: machinesets/attachment), the security groups (does its
// port there get groups: StorageNetworkReachable) and the availability zone (which zone's
// storage networks it needs, on a cloud whose zones Manila serves on networks of their own).
var providerSpecKeys = []string{"networks", "ports", "securityGroups", "availabilityZone"}

// SlimMachineAPI, the transform of the MachineSet, Machine and ControlPlaneMachineSet informers,
// keeps of such an object its identity (name, namespace, uid, resourceVersion, owners,
// deletion), its Machine role label, manila-setup's attachment record (the only annotation read),
// the providerSpec's networks, ports and security groups, the addresses that are IPs, and
// machineAPIPaths.
// Anything but an *unstructured.Unstructured (a tombstone) passes unchanged.
func SlimMachineAPI(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	slim := &unstructured.Unstructured{Object: map[string]any{}}
	slim.SetAPIVersion(u.GetAPIVersion())
	slim.SetKind(u.GetKind())
	meta, _ := u.Object["metadata"].(map[string]any)
	keptMeta := map[string]any{}
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "ownerReferences", "deletionTimestamp"} {
		if v, ok := meta[k]; ok {
			keptMeta[k] = v
		}
	}
	// The role tells a master Machine, whose owner may be none (an Inactive ControlPlaneMachineSet).
	if labels, _ := meta["labels"].(map[string]any); labels != nil {
		if v, ok := labels[roleLabel]; ok {
			keptMeta["labels"] = map[string]any{roleLabel: v}
		}
	}
	if annotations, _ := meta["annotations"].(map[string]any); annotations != nil {
		if v, ok := annotations[record.Annotation]; ok {
			keptMeta["annotations"] = map[string]any{record.Annotation: v}
		}
	}
	slim.Object["metadata"] = keptMeta
	for _, path := range providerSpecPaths {
		value, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...)
		spec, ok := value.(map[string]any)
		if !found || !ok {
			continue
		}
		kept := map[string]any{}
		for _, k := range providerSpecKeys {
			if v, ok := spec[k]; ok {
				kept[k] = v
			}
		}
		_ = unstructured.SetNestedField(slim.Object, kept, path...)
	}
	if addrs := ipAddresses(u.Object); addrs != nil {
		_ = unstructured.SetNestedField(slim.Object, addrs, "status", "addresses")
	}
	for _, path := range machineAPIPaths {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found {
			_ = unstructured.SetNestedField(slim.Object, v, path...)
		}
	}
	return slim, nil
}

// ipAddresses are the entries of a Machine's status.addresses that hold an IP address: the
// rules look for the addresses in a subnet, and skip the Hostname and InternalDNS entries the
// provider adds beside them.
func ipAddresses(obj map[string]any) []any {
	all, _, _ := unstructured.NestedFieldNoCopy(obj, "status", "addresses")
	list, _ := all.([]any)
	var out []any
	for _, a := range list {
		m, _ := a.(map[string]any)
		if s, _ := m["address"].(string); s != "" {
			if _, err := netip.ParseAddr(s); err == nil {
				out = append(out, a)
			}
		}
	}
	return out
}

// unchanged tells an update event that changed nothing the cache keeps but the resourceVersion:
// a Node's heartbeat or image list, a Machine's providerStatus or conditions, once the
// transforms above have dropped them. Only the slimmed kinds are compared; any other object
// counts as changed.
func unchanged(oldObj, newObj any) bool {
	switch n := newObj.(type) {
	case *corev1.Node:
		o, ok := oldObj.(*corev1.Node)
		return ok && o.Name == n.Name && o.UID == n.UID && o.DeletionTimestamp.Equal(n.DeletionTimestamp) &&
			reflect.DeepEqual(o.Labels, n.Labels) && reflect.DeepEqual(o.Spec.Taints, n.Spec.Taints) &&
			reflect.DeepEqual(o.Status.Addresses, n.Status.Addresses)
	case *unstructured.Unstructured:
		o, ok := oldObj.(*unstructured.Unstructured)
		if !ok || !isMachineAPI(n) {
			return false
		}
		return reflect.DeepEqual(withoutResourceVersion(o.Object), withoutResourceVersion(n.Object))
	}
	return false
}

// statusOnly tells an update of the operator's own kind of object (the ClusterCSIDriver, the
// ManilaCompanion) that left its spec alone: its generation is the same.
func statusOnly(oldObj, newObj any) bool {
	switch n := newObj.(type) {
	case *operatorv1.ClusterCSIDriver:
		o, ok := oldObj.(*operatorv1.ClusterCSIDriver)
		return ok && o.UID == n.UID && o.Generation == n.Generation
	case *unstructured.Unstructured:
		o, ok := oldObj.(*unstructured.Unstructured)
		return ok && n.GroupVersionKind().Group == CompanionGVR.Group && o.GetUID() == n.GetUID() &&
			o.GetGeneration() == n.GetGeneration() && n.GetGeneration() != 0
	}
	return false
}

// withoutResourceVersion is a shallow copy of obj whose metadata lacks resourceVersion (the
// cached object is not changed).
func withoutResourceVersion(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	if meta, ok := obj["metadata"].(map[string]any); ok {
		m := make(map[string]any, len(meta))
		for k, v := range meta {
			if k != "resourceVersion" {
				m[k] = v
			}
		}
		out["metadata"] = m
	}
	return out
}

// isMachineAPI tells an object of the Machine API (the operator watches its MachineSets and
// Machines).
func isMachineAPI(u *unstructured.Unstructured) bool {
	return u.GroupVersionKind().Group == MachineGVR.Group
}

// burstProne tells the objects that change by the hundred when workers are scaled or replaced
// (Nodes, Machines, MachineSets): their events are coalesced (Controller.EventHandler).
func burstProne(obj any) bool {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	switch o := obj.(type) {
	case *corev1.Node:
		return true
	case *unstructured.Unstructured:
		return isMachineAPI(o)
	}
	return false
}

// volumeSnapshotPaths are the fields of a VolumeSnapshot the operator reads: which claim it is
// of, and whether it was taken or refused.
var volumeSnapshotPaths = [][]string{
	{"spec", "source", "persistentVolumeClaimName"},
	{"status", "readyToUse"},
	{"status", "error", "message"},
}

// SlimVolumeSnapshot keeps of a VolumeSnapshot its name, namespace, uid and resourceVersion and
// volumeSnapshotPaths: the users' snapshots, of every namespace, are cached whole otherwise
// (annotations, managedFields, the status's times and sizes), for fields never read.
func SlimVolumeSnapshot(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	slim := &unstructured.Unstructured{Object: map[string]any{}}
	slim.SetAPIVersion(u.GetAPIVersion())
	slim.SetKind(u.GetKind())
	slim.SetName(u.GetName())
	slim.SetNamespace(u.GetNamespace())
	slim.SetUID(u.GetUID())
	slim.SetResourceVersion(u.GetResourceVersion())
	for _, path := range volumeSnapshotPaths {
		if v, found, _ := unstructured.NestedFieldNoCopy(u.Object, path...); found {
			_ = unstructured.SetNestedField(slim.Object, v, path...)
		}
	}
	return slim, nil
}
