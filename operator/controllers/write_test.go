package controllers

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// Every asset the operator applies has a row in kindTable, found from the decoded object.
func TestEveryAssetHasAKind(t *testing.T) {
	vars := map[string]string{"NAMESPACE": "ns", "LOG_LEVEL": "2", "CLUSTER_ID": "c", "RUNTIME_CONFIG": "{}", "OPERATOR_NAME": "manila-csi-driver-operator",
		"TLS_MIN_VERSION": "VersionTLS12", "TLS_CIPHER_SUITES": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
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
		k, err := machinery.KindOf(obj)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if k.Client == nil || k.Informer == nil || k.UpToDate == nil {
			t.Errorf("%s: row %s lacks a client, an informer or a comparison", f, k.GVK)
		}
	}
	for _, ca := range conditionalAssets {
		u, err := operator.ReadUnstructuredAsset(ca.file, vars)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := machinery.KindOf(u); err != nil {
			t.Errorf("%s: %v", ca.file, err)
		}
	}
	for _, k := range machinery.Kinds {
		if k.Namespaced != (k.GVK.Kind != "ClusterRole" && k.GVK.Kind != "ClusterRoleBinding" && k.GVK.Kind != "CSIDriver" &&
			k.GVK.Kind != "StorageClass" && k.GVK.Kind != "VolumeSnapshotClass") {
			t.Errorf("%s: namespaced %v", k.GVK.Kind, k.Namespaced)
		}
	}
}

var testImagesForUnit = operator.Images{
	Driver: "d:1", NFSDriver: "n:1", Provisioner: "p:1", Snapshotter: "s:1", Resizer: "r:1", LivenessProbe: "l:1",
	NodeDriverRegistrar: "g:1", KubeRBACProxy: "k:1",
}

// Workloads: the generation the operator last wrote decides whether someone else changed the
// spec (restored, taking over their fields), the spec hash whether the operator's own changed.
func TestWorkloadComparison(t *testing.T) {
	k := workloadNodeService.kind
	cached := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", Generation: 3,
		Annotations: map[string]string{machinery.SpecHashAnnotation: "h", "deprecated.daemonset.template.generation": "3"}}}
	req := func(gen int64, hash string) runtime.Object {
		return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "n", Namespace: "ns", Generation: gen, Annotations: map[string]string{machinery.SpecHashAnnotation: hash}}}
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
		if got := k.UpToDate(cached, c.req); got != c.upToDate {
			t.Errorf("%s: upToDate %v", c.name, got)
		}
		if got := k.Drifted(cached, c.req); got != c.drifted {
			t.Errorf("%s: drifted %v", c.name, got)
		}
	}
}
