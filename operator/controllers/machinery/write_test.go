package machinery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync/atomic"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
)

// The apply body holds what the operator sets and nothing the apiserver keeps: no status, no
// server-side metadata, no nulls (which an apply would make the operator own).
func TestApplyBody(t *testing.T) {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns", Generation: 7, ResourceVersion: "9", UID: "u",
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{SpecHashAnnotation: "h"}},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To(int32(2)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{Replicas: 2},
	}
	k, err := KindOf(d)
	if err != nil {
		t.Fatal(err)
	}
	u, err := applyBody(d, k)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "c", "namespace": "ns", "labels": map[string]any{"app": "x"}, "annotations": map[string]any{SpecHashAnnotation: "h"}},
		"spec": map[string]any{"replicas": int64(2), "strategy": map[string]any{},
			"template": map[string]any{"metadata": map[string]any{}, "spec": map[string]any{"containers": []any{map[string]any{"name": "a", "image": "i", "resources": map[string]any{}}}}}},
	}
	if !reflect.DeepEqual(u.Object, want) {
		t.Errorf("apply body:\n got %v\nwant %v", u.Object, want)
	}

}

// A key of the driver Secret the operator does not set is others' to remove only by taking over.
func TestSecretDrift(t *testing.T) {
	k, _ := KindOf(&corev1.Secret{})
	cached := &corev1.Secret{Data: map[string][]byte{"os-password": []byte("p"), "os-userName": []byte("u")}}
	req := &corev1.Secret{Data: map[string][]byte{"os-applicationCredentialID": []byte("a"), "os-userName": []byte("u")}}
	if k.UpToDate(cached, req) || !k.Drifted(cached, req) {
		t.Errorf("a rotation from password to application credential: upToDate %v, drifted %v", k.UpToDate(cached, req), k.Drifted(cached, req))
	}
	if !k.UpToDate(cached, cached) || k.Drifted(cached, cached) {
		t.Errorf("same data: upToDate %v, drifted %v", k.UpToDate(cached, cached), k.Drifted(cached, cached))
	}
}

func TestDropNulls(t *testing.T) {
	got := dropNulls(map[string]any{"a": nil, "b": map[string]any{"c": nil, "d": 1}, "e": []any{map[string]any{"f": nil}}})
	want := map[string]any{"b": map[string]any{"d": 1}, "e": []any{map[string]any{}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("dropNulls = %v", got)
	}
}

// The share-type-gone annotation is patched onto a StorageClass by name. A class of that name
// may be the platform's once it took over, so the patch, like every other write, is made only
// while the sync's gate is open; and a writer restricted to other kinds makes none.
func TestPatchStorageClassAnnotationsGate(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if r.Method != http.MethodPatch || r.URL.Path != "/apis/storage.k8s.io/v1/storageclasses/csi-manila-default" {
			t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"storage.k8s.io/v1","kind":"StorageClass","metadata":{"name":"csi-manila-default"},"provisioner":"manila.csi.openstack.org"}`))
	}))
	defer srv.Close()
	kube, err := NewClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(kube, nil, WriterOptions{Namespace: "ns", FieldManager: "test"})
	now := "2026-01-01T00:00:00Z"
	ann := map[string]*string{"manila.csi.openstack.org/share-type-gone": &now}

	open, closed := WithGate(context.Background(), func() bool { return true }), WithGate(context.Background(), func() bool { return false })
	if err := w.PatchStorageClassAnnotations(closed, "csi-manila-default", ann); err != ErrSteppedAside {
		t.Errorf("with the gate closed: %v, want %v", err, ErrSteppedAside)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("with the gate closed: %d requests, want none", n)
	}
	if err := w.PatchStorageClassAnnotations(open, "csi-manila-default", ann); err != nil {
		t.Errorf("with the gate open: %v", err)
	}
	if err := w.PatchStorageClassAnnotations(context.Background(), "csi-manila-default", ann); err != nil {
		t.Errorf("without a gate: %v", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("with the gate open and without one: %d requests, want 2", n)
	}

	secretsOnly := NewWriter(kube, nil, WriterOptions{Namespace: "ns", FieldManager: "test", Kinds: []schema.GroupVersionKind{corev1.SchemeGroupVersion.WithKind("Secret")}})
	if err := secretsOnly.PatchStorageClassAnnotations(open, "csi-manila-default", ann); err == nil {
		t.Error("a writer of Secrets only patched a StorageClass")
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("a writer of Secrets only: %d requests in all, want 2", n)
	}
}

// A writer restricted to some kinds (a companion's: StorageClasses) refuses the others before
// any request.
func TestWriterKinds(t *testing.T) {
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.Error(w, "unexpected", http.StatusInternalServerError)
	}))
	defer srv.Close()
	kube, err := NewClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	w := NewWriter(kube, nil, WriterOptions{Namespace: "ns", FieldManager: "test", Kinds: []schema.GroupVersionKind{storagev1.SchemeGroupVersion.WithKind("StorageClass")}})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	if _, err := w.Apply(context.Background(), secret); err == nil {
		t.Error("a StorageClass writer applied a Secret")
	}
	if err := w.DeleteIfPresent(context.Background(), secret); err != nil {
		t.Errorf("DeleteIfPresent of a Secret not in the cache: %v", err)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests, want none", n)
	}
}
