package machinery

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// The node cache keeps the labels and addresses, and drops the rest of a Node's weight.
func TestSlimNode(t *testing.T) {
	full := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1", ResourceVersion: "7", Labels: map[string]string{"node-role.kubernetes.io/worker": ""},
			Annotations: map[string]string{"a": "b"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{ProviderID: "openstack:///x"},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.196.0.5"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.5"}},
			Capacity:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			Images:    []corev1.ContainerImage{{Names: []string{"quay.io/x"}, SizeBytes: 1}},
		},
	}
	got, err := slimNode(full)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "u1", ResourceVersion: "7", Labels: full.Labels},
		Status:     corev1.NodeStatus{Addresses: full.Status.Addresses},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("slimNode kept %+v, want %+v", got, want)
	}
	// A tombstone passes unchanged.
	gone := cache.DeletedFinalStateUnknown{Key: "w1", Obj: full}
	if got, _ := slimNode(gone); !reflect.DeepEqual(got, gone) {
		t.Errorf("tombstone changed: %+v", got)
	}
}
