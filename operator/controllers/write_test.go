package controllers

import (
	"reflect"
	"testing"

	"github.com/manila-setup/manila-setup/operator"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// Every asset the operator applies has a row in kindTable, found from the decoded object.
func TestEveryAssetHasAKind(t *testing.T) {
	vars := map[string]string{"NAMESPACE": "ns", "LOG_LEVEL": "2", "CLUSTER_ID": "c", "RUNTIME_CONFIG": "{}"}
	im := testImagesForUnit
	for k, p := range im.ImageEnv() {
		vars[k] = *p
	}
	files := append([]string{"csidriver.yaml", "controller.yaml", "node.yaml", "node_nfs.yaml"}, StaticAssets...)
	for _, f := range files {
		obj, err := operator.ReadAsset(f, vars)
		if err != nil {
			t.Fatal(err)
		}
		k, err := kindOf(obj)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if k.client == nil || k.informer == nil || k.upToDate == nil {
			t.Errorf("%s: row %s lacks a client, an informer or a comparison", f, k.gvk)
		}
	}
	for _, ca := range conditionalAssets {
		u, err := operator.ReadUnstructuredAsset(ca.file, vars)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kindOf(u); err != nil {
			t.Errorf("%s: %v", ca.file, err)
		}
	}
	for _, k := range kindTable {
		if k.namespaced != (k.gvk.Kind != "ClusterRole" && k.gvk.Kind != "ClusterRoleBinding" && k.gvk.Kind != "CSIDriver" &&
			k.gvk.Kind != "StorageClass" && k.gvk.Kind != "VolumeSnapshotClass") {
			t.Errorf("%s: namespaced %v", k.gvk.Kind, k.namespaced)
		}
	}
}

var testImagesForUnit = operator.Images{
	Driver: "d:1", NFSDriver: "n:1", Provisioner: "p:1", Snapshotter: "s:1", Resizer: "r:1", LivenessProbe: "l:1",
	NodeDriverRegistrar: "g:1", KubeRBACProxy: "k:1",
}

// The apply body holds what the operator sets and nothing the apiserver keeps: no status, no
// server-side metadata, no nulls (which an apply would make the operator own).
func TestApplyBody(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 7, ResourceVersion: "9", UID: "u",
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{specHashAnnotation: "h"}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 2},
	}
	k, err := kindOf(d)
	if err != nil {
		t.Fatal(err)
	}
	u, err := applyBody(d, k)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "labels": map[string]any{"app": "x"}, "annotations": map[string]any{specHashAnnotation: "h"}},
		"spec": map[string]any{"replicas": int64(2), "strategy": map[string]any{},
			"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": "i", "resources": map[string]any{}}}}}},
	}
	if !reflect.DeepEqual(u.Object, want) {
		t.Errorf("apply body:\n got %v\nwant %v", u.Object, want)
	}

}

// Workloads: the generation the operator last wrote decides whether someone else changed the
// spec (restored, taking over their fields), the spec hash whether the operator's own changed.
func TestWorkloadComparison(t *testing.T) {
	k := workloadNodeService.kind
	cached := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", Generation: 3,
		Annotations: map[string]string{specHashAnnotation: "h", "deprecated.daemonset.template.generation": "3"}}}
	req := func(gen int64, hash string) runtime.Object {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", Generation: gen, Annotations: map[string]string{specHashAnnotation: hash}}}
	}
	for _, c := range []struct {
		name              string
		req               runtime.Object
		upToDate, drifted bool
	}{
		{"as written", req(3, "h"), true, false},
		{"changed by someone else", req(2, "h"), false, true},
		{"new assets", req(3, "h2"), false, false},
		{"generation unknown", req(-1, "h"), false, true},
	} {
		if got := k.upToDate(cached, c.req); got != c.upToDate {
			t.Errorf("%s: upToDate %v", c.name, got)
		}
		if got := k.drifted(cached, c.req); got != c.drifted {
			t.Errorf("%s: drifted %v", c.name, got)
		}
	}
}

// A key of the driver Secret the operator does not set is others' to remove only by taking over.
func TestSecretDrift(t *testing.T) {
	k, _ := kindOf(&corev1.Secret{})
	cached := &corev1.Secret{Data: map[string][]byte{"os-password": []byte("p"), "os-userName": []byte("u")}}
	req := &corev1.Secret{Data: map[string][]byte{"os-applicationCredentialID": []byte("a"), "os-userName": []byte("u")}}
	if k.upToDate(cached, req) || !k.drifted(cached, req) {
		t.Errorf("a rotation from password to application credential: upToDate %v, drifted %v", k.upToDate(cached, req), k.drifted(cached, req))
	}
	if !k.upToDate(cached, cached) || k.drifted(cached, cached) {
		t.Errorf("same data: upToDate %v, drifted %v", k.upToDate(cached, cached), k.drifted(cached, cached))
	}
}

func TestDropNulls(t *testing.T) {
	got := dropNulls(map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": 1}, "e": []any{map[string]any{"f": nil}}})
	want := map[string]any{"b": map[string]any{"d": 1}, "e": []any{map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dropNulls = %v", got)
	}
}
