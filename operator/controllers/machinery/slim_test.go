package machinery

import (
	"reflect"
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/attach/record"
)

func machine(rv string, extra map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": "w-0", "namespace": MachineAPINamespace, "uid": "u1", "resourceVersion": rv,
			"labels":          map[string]any{"machine.openshift.io/cluster-api-machineset": "w"},
			"annotations":     map[string]any{"machine.openshift.io/instance-state": "ACTIVE", record.Annotation: `{"networks":["n1"]}`},
			"ownerReferences": []any{map[string]any{"kind": "MachineSet", "name": "w"}},
			"managedFields":   []any{map[string]any{"manager": "machine-controller", "fieldsV1": map[string]any{"f:status": map[string]any{}}}}},
		"spec": map[string]any{"providerID": "openstack:///x", "providerSpec": map[string]any{"value": map[string]any{
			"image": "rhcos", "flavor": "m1.xlarge", "userDataSecret": map[string]any{"name": "worker-user-data"},
			"networks": []any{map[string]any{"uuid": "n1"}}, "ports": []any{map[string]any{"networkID": "n2"}},
			"securityGroups": []any{map[string]any{"name": "worker"}}}}},
		"status": map[string]any{"phase": "Running", "nodeRef": map[string]any{"name": "w-0"},
			"addresses":      []any{map[string]any{"type": "InternalIP", "address": "10.0.0.5"}, map[string]any{"type": "Hostname", "address": "w-0"}},
			"providerStatus": map[string]any{"instanceState": "ACTIVE"}, "conditions": []any{map[string]any{"type": "InstanceExists"}}},
	}}
	for k, v := range extra {
		u.Object["status"].(map[string]any)[k] = v
	}
	return u
}

// The Machine cache keeps what the rules read (the attachment, the Node, the addresses, the
// phase and error, the owners and manila-setup's record) and drops the rest.
func TestSlimMachineAPI(t *testing.T) {
	got, err := SlimMachineAPI(machine("7", map[string]any{"errorReason": "CreateError", "lastUpdated": "2026-11-27T10:00:00Z"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "machine.openshift.io/v1beta1", "kind": "Machine",
		"metadata": map[string]any{"name": "w-0", "namespace": MachineAPINamespace, "uid": "u1", "resourceVersion": "7",
			"annotations":     map[string]any{record.Annotation: `{"networks":["n1"]}`},
			"ownerReferences": []any{map[string]any{"kind": "MachineSet", "name": "w"}}},
		"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
			"networks": []any{map[string]any{"uuid": "n1"}}, "ports": []any{map[string]any{"networkID": "n2"}},
			"securityGroups": []any{map[string]any{"name": "worker"}}}}},
		"status": map[string]any{"phase": "Running", "nodeRef": map[string]any{"name": "w-0"}, "errorReason": "CreateError",
			"addresses": []any{map[string]any{"type": "InternalIP", "address": "10.0.0.5"}}},
	}
	if !reflect.DeepEqual(got.(*unstructured.Unstructured).Object, want) {
		t.Errorf("SlimMachineAPI kept\n%v\nwant\n%v", got.(*unstructured.Unstructured).Object, want)
	}
	// A MachineSet keeps its template's providerSpec the same way.
	set := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1beta1", "kind": "MachineSet",
		"metadata": map[string]any{"name": "w"},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{
			"image": "rhcos", "availabilityZone": "az1", "networks": []any{map[string]any{"uuid": "n1"}}}}}}}}}
	got, _ = SlimMachineAPI(set)
	value, _, _ := unstructured.NestedMap(got.(*unstructured.Unstructured).Object, "spec", "template", "spec", "providerSpec", "value")
	if !reflect.DeepEqual(value, map[string]any{"availabilityZone": "az1", "networks": []any{map[string]any{"uuid": "n1"}}}) {
		t.Errorf("MachineSet providerSpec kept %v", value)
	}
	// And its replicas: the storage addresses its machines will want.
	if r, _, _ := unstructured.NestedInt64(got.(*unstructured.Unstructured).Object, "spec", "replicas"); r != 3 {
		t.Errorf("MachineSet replicas kept %d, want 3", r)
	}
	// The ControlPlaneMachineSet keeps its state and its template's providerSpec; a master
	// Machine its role, by which the rules tell it without an owner.
	cpms := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "machine.openshift.io/v1", "kind": "ControlPlaneMachineSet",
		"metadata": map[string]any{"name": "cluster"},
		"spec": map[string]any{"replicas": int64(3), "state": "Active", "strategy": map[string]any{"type": "RollingUpdate"},
			"template": map[string]any{"machineType": "machines_v1beta1_machine_openshift_io", "machines_v1beta1_machine_openshift_io": map[string]any{
				"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{"flavor": "m1.xlarge", "networks": []any{map[string]any{"uuid": "n1"}}}}}}}}}}
	got, _ = SlimMachineAPI(cpms)
	wantCPMS := map[string]any{"apiVersion": "machine.openshift.io/v1", "kind": "ControlPlaneMachineSet", "metadata": map[string]any{"name": "cluster"},
		"spec": map[string]any{"replicas": int64(3), "state": "Active", "template": map[string]any{"machines_v1beta1_machine_openshift_io": map[string]any{
			"spec": map[string]any{"providerSpec": map[string]any{"value": map[string]any{"networks": []any{map[string]any{"uuid": "n1"}}}}}}}}}
	if !reflect.DeepEqual(got.(*unstructured.Unstructured).Object, wantCPMS) {
		t.Errorf("ControlPlaneMachineSet kept\n%v\nwant\n%v", got.(*unstructured.Unstructured).Object, wantCPMS)
	}
	m := machine("8", nil)
	m.SetLabels(map[string]string{"machine.openshift.io/cluster-api-machine-role": "master", "machine.openshift.io/cluster-api-machine-type": "master"})
	got, _ = SlimMachineAPI(m)
	if labels := got.(*unstructured.Unstructured).GetLabels(); !reflect.DeepEqual(labels, map[string]string{"machine.openshift.io/cluster-api-machine-role": "master"}) {
		t.Errorf("master Machine labels kept %v", labels)
	}
	gone := cache.DeletedFinalStateUnknown{Key: "x", Obj: set}
	if got, _ := SlimMachineAPI(gone); !reflect.DeepEqual(got, gone) {
		t.Errorf("tombstone changed: %+v", got)
	}
}

// An update that changed only what the caches drop wakes no controller; any change of what
// they keep does, and so does any update of another kind.
func TestUnchanged(t *testing.T) {
	slim := func(u *unstructured.Unstructured) any { o, _ := SlimMachineAPI(u); return o }
	if !unchanged(slim(machine("7", nil)), slim(machine("8", map[string]any{"lastUpdated": "later", "providerStatus": "other"}))) {
		t.Error("a Machine whose providerStatus and lastUpdated changed counts as changed")
	}
	if unchanged(slim(machine("7", nil)), slim(machine("8", map[string]any{"phase": "Deleting"}))) {
		t.Error("a Machine whose phase changed counts as unchanged")
	}
	node := func(rv, addr string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w-0", ResourceVersion: rv}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}}}
	}
	if !unchanged(node("1", "10.0.0.5"), node("2", "10.0.0.5")) {
		t.Error("a Node whose heartbeat alone changed counts as changed")
	}
	if unchanged(node("1", "10.0.0.5"), node("2", "10.0.0.6")) {
		t.Error("a Node whose address changed counts as unchanged")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	if unchanged(cm, cm) {
		t.Error("a ConfigMap update counts as unchanged: only the slimmed kinds are compared")
	}
	if !burstProne(node("1", "x")) || !burstProne(machine("1", nil)) || !burstProne(cache.DeletedFinalStateUnknown{Obj: node("1", "x")}) || burstProne(cm) {
		t.Error("burstProne: Nodes and Machine API objects, and only they")
	}
}

// An update of the operator's own object that left its spec alone (its generation) is a
// status write, coalesced; a new generation, or another kind, is not.
func TestStatusOnly(t *testing.T) {
	driver := func(gen int64, reason string) *operatorv1.ClusterCSIDriver {
		d := &operatorv1.ClusterCSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "manila.csi.openstack.org", UID: "u1", Generation: gen}}
		d.Status.Conditions = []operatorv1.OperatorCondition{{Type: "A", Status: operatorv1.ConditionTrue, Reason: reason}}
		return d
	}
	if !statusOnly(driver(2, "AsExpected"), driver(2, "Deploying")) {
		t.Error("a ClusterCSIDriver whose status alone changed is not status-only")
	}
	if statusOnly(driver(2, "AsExpected"), driver(3, "AsExpected")) {
		t.Error("a ClusterCSIDriver with a new generation (its spec changed) counts as status-only")
	}
	companion := func(gen int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(CompanionGVR.GroupVersion().WithKind("ManilaCompanion"))
		u.SetUID("u2")
		u.SetGeneration(gen)
		return u
	}
	if !statusOnly(companion(1), companion(1)) || statusOnly(companion(1), companion(2)) {
		t.Error("the companion's object: same generation is status-only, a new one is not")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	if statusOnly(cm, cm) || statusOnly(machine("1", nil), machine("2", nil)) {
		t.Error("a ConfigMap or a Machine counts as the operator's own object")
	}
}

func TestSlimVolumeSnapshotKeepsWhatTheExplainerReads(t *testing.T) {
	full := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "daily", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
			"annotations":   map[string]any{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 400)},
			"finalizers":    []any{"snapshot.storage.kubernetes.io/volumesnapshot-as-source-protection"},
			"managedFields": []any{map[string]any{"manager": "snapshot-controller"}}},
		"spec": map[string]any{"volumeSnapshotClassName": "csi-manila-standard", "source": map[string]any{"persistentVolumeClaimName": "data"}},
		"status": map[string]any{"readyToUse": false, "restoreSize": "1Gi", "creationTime": "2026-11-29T08:00:00Z",
			"boundVolumeSnapshotContentName": "snapcontent-1", "error": map[string]any{"message": "refused", "time": "2026-11-29T08:00:01Z"}},
	}}
	got, err := SlimVolumeSnapshot(full)
	if err != nil {
		t.Fatal(err)
	}
	slim := got.(*unstructured.Unstructured)
	want := map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "daily", "namespace": "shop", "uid": "u-1", "resourceVersion": "42"},
		"spec":     map[string]any{"source": map[string]any{"persistentVolumeClaimName": "data"}},
		"status":   map[string]any{"readyToUse": false, "error": map[string]any{"message": "refused"}},
	}
	if !reflect.DeepEqual(slim.Object, want) {
		t.Errorf("slim %v, want %v", slim.Object, want)
	}
}
