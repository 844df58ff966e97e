package machinery

import (
	"context"
	"fmt"
	"io"
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
	"k8s.io/client-go/tools/cache"
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

type discardEvents struct{}

func (discardEvents) Eventf(string, string, ...any)                            {}
func (discardEvents) Warningf(string, string, ...any)                          {}
func (discardEvents) WarningOn(corev1.ObjectReference, string, string, ...any) {}

// classWriter is a Writer whose StorageClass cache holds cached, against a server that answers
// every request with the object it was sent and counts them.
func classWriter(t testing.TB, cached ...*storagev1.StorageClass) (*Writer, *Informers, *atomic.Int64) {
	t.Helper()
	requests := &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	kube, err := NewClients(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	inf := &Informers{StorageClasses: cache.NewSharedIndexInformer(&cache.ListWatch{}, &storagev1.StorageClass{}, 0, cache.Indexers{})}
	for _, sc := range cached {
		if err := inf.StorageClasses.GetIndexer().Add(sc); err != nil {
			t.Fatal(err)
		}
	}
	return NewWriter(kube, inf, WriterOptions{FieldManager: "test", Recorder: discardEvents{}}), inf, requests
}

func class(name, rv, param string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: map[string]string{"app": "x"}},
		Provisioner: "manila.csi.openstack.org", Parameters: map[string]string{"type": param}}
}

// An object found up to date is not copied or compared again while neither the cache nor what
// is required changed; a change of either is written, however it came.
func TestApplyRemembersWhatIsUpToDate(t *testing.T) {
	w, inf, requests := classWriter(t, class("c", "1", "default"))
	required := class("c", "", "default")
	for i := range 2 {
		if _, err := w.Apply(context.Background(), required); err != nil {
			t.Fatal(err)
		}
		if n := requests.Load(); n != 0 {
			t.Fatalf("apply %d of what the cache shows: %d requests, want none", i+1, n)
		}
	}
	if _, ok := w.upToDate.Load(objectKey{gvk: storagev1.SchemeGroupVersion.WithKind("StorageClass"), name: "c"}); !ok {
		t.Fatal("the writer did not remember the class it found up to date")
	}
	if !w.UpToDate(required) {
		t.Fatal("UpToDate: false for the class just applied, unchanged since")
	}
	if w.UpToDate(class("c", "", "new")) || w.UpToDate(class("d", "", "default")) {
		t.Fatal("UpToDate: true for a class required otherwise, or not in the cache")
	}
	// Someone else changed the class: the cache has another resourceVersion.
	if err := inf.StorageClasses.GetIndexer().Update(class("c", "2", "other")); err != nil {
		t.Fatal(err)
	}
	if w.UpToDate(required) {
		t.Fatal("UpToDate: true for a class someone else changed")
	}
	if _, err := w.Apply(context.Background(), required); err != nil {
		t.Fatal(err)
	}
	if n := requests.Load(); n == 0 {
		t.Fatal("a class someone else changed was not written again")
	}
	// The operator requires something else of a class the cache shows unchanged.
	if err := inf.StorageClasses.GetIndexer().Update(class("c", "3", "default")); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Apply(context.Background(), required); err != nil {
		t.Fatal(err)
	}
	before := requests.Load()
	if _, err := w.Apply(context.Background(), class("c", "", "new")); err != nil {
		t.Fatal(err)
	}
	if requests.Load() == before {
		t.Fatal("a class whose required parameters changed was not written")
	}
}

// BenchmarkApplyUpToDate is the steady state of every resync: 200 StorageClasses the cache
// shows as required, applied again.
func BenchmarkApplyUpToDate(b *testing.B) {
	var cached, required []*storagev1.StorageClass
	for i := range 200 {
		name := fmt.Sprintf("csi-manila-%d", i)
		cached = append(cached, class(name, "1", name))
		required = append(required, class(name, "", name))
	}
	w, _, requests := classWriter(b, cached...)
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range required {
			if _, err := w.Apply(context.Background(), r); err != nil {
				b.Fatal(err)
			}
		}
	}
	if requests.Load() != 0 {
		b.Fatalf("%d requests", requests.Load())
	}
}
