package operator

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/assets"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// testImages are sentinels: any other image in a rendered manifest did not come from the env.
var testImages = Images{
	Driver: "example.test/driver:1", NFSDriver: "example.test/nfs:1", Provisioner: "example.test/provisioner:1",
	Snapshotter: "example.test/snapshotter:1", Resizer: "example.test/resizer:1", LivenessProbe: "example.test/liveness:1",
	NodeDriverRegistrar: "example.test/registrar:1", KubeRBACProxy: "example.test/kube-rbac-proxy:1",
}

func testVars() map[string]string {
	v := map[string]string{"NAMESPACE": "openshift-cluster-csi-drivers", "LOG_LEVEL": "2", "CLUSTER_ID": "test-cluster", "OPERATOR_NAME": "manila-csi-driver-operator", "RUNTIME_CONFIG": `{"nfs":{"matchExportLocationAddress":"10.0.0.0/24"}}`,
		// What the operator renders without an APIServer (plain Kubernetes) or with the default.
		"TLS_MIN_VERSION": "VersionTLS12", "TLS_CIPHER_SUITES": strings.Join(tlsprofile.Intermediate().CipherSuites, ",")}
	im := testImages
	for k, p := range im.ImageEnv() {
		v[k] = *p
	}
	return v
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./operator -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s (run with -update if the change is intended):\n%s", name, path, diffLines(string(want), string(got)))
	}
}

func diffLines(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + strconv.Itoa(i+1) + ":\n- " + x + "\n+ " + y
		}
	}
	return ""
}

func driverAssets(t *testing.T) []string {
	t.Helper()
	top, err := assets.List(".")
	if err != nil {
		t.Fatal(err)
	}
	rbac, err := assets.List("rbac")
	if err != nil {
		t.Fatal(err)
	}
	return append(top, rbac...)
}

func TestGoldenDriverAssets(t *testing.T) {
	for _, name := range driverAssets(t) {
		b, err := assets.Render(name, testVars())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		golden(t, strings.ReplaceAll(name, "/", "_"), b)
	}
}

func TestGoldenOperatorRender(t *testing.T) {
	out, err := Render(RenderOptions{Namespace: DefaultNamespace, OperatorImage: "example.test/manila-setup:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "operator-render.yaml", out)
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, o := range objs {
		kinds = append(kinds, o.GetKind())
	}
	for _, want := range []string{"CustomResourceDefinition", "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "Deployment", "ClusterCSIDriver"} {
		if !strings.Contains(strings.Join(kinds, ","), want) {
			t.Errorf("render has no %s (kinds: %v)", want, kinds)
		}
	}
	if kinds[0] != "CustomResourceDefinition" {
		t.Errorf("the CRD must come first, got %s", kinds[0])
	}
	if strings.Contains(string(out), "${") {
		t.Errorf("render left a placeholder")
	}
}

// The embedded CRD must be the one of the openshift/api version go.mod pins.
func TestEmbeddedCRDMatchesModule(t *testing.T) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatalf("go env GOMODCACHE: %v", err)
	}
	mod := strings.TrimSpace(string(out))
	b, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var version string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "github.com/openshift/api" {
			version = f[1]
		}
	}
	path := filepath.Join(mod, "github.com/openshift/api@"+version, "operator/v1/zz_generated.crd-manifests/0000_50_csi-driver_01_clustercsidrivers-Default.crd.yaml")
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("openshift/api %s not in the module cache: %v", version, err)
	}
	got, _ := assets.ReadFile("operator/00_clustercsidrivers.crd.yaml")
	if !bytes.Equal(got, want) {
		t.Errorf("assets/operator/00_clustercsidrivers.crd.yaml differs from %s: copy it again", path)
	}
}

// unstructuredAssets are the driver's manifests of kinds this module has no Go type for: CRDs
// that may or may not be installed (ReadUnstructuredAsset reads them).
var unstructuredAssets = map[string]bool{
	"servicemonitor.yaml": true, "operator_servicemonitor.yaml": true, "prometheusrule.yaml": true, "volumesnapshotclass.yaml": true,
}

func TestAssetsRules(t *testing.T) {
	allowed := map[string]bool{}
	im := testImages
	for _, p := range im.ImageEnv() {
		allowed[*p] = true
	}
	for _, name := range driverAssets(t) {
		if unstructuredAssets[name] {
			continue
		}
		obj, err := ReadAsset(name, testVars())
		if err != nil {
			t.Fatalf("%s does not decode: %v", name, err)
		}
		switch o := obj.(type) {
		case *rbacv1.ClusterRole:
			checkRules(t, name, o.Rules)
		case *rbacv1.Role:
			checkRules(t, name, o.Rules)
		case *appsv1.Deployment:
			checkPod(t, name, &o.Spec.Template.Spec, allowed)
		case *appsv1.DaemonSet:
			checkPod(t, name, &o.Spec.Template.Spec, allowed)
			ru := o.Spec.UpdateStrategy.RollingUpdate
			if o.Spec.UpdateStrategy.Type != appsv1.RollingUpdateDaemonSetStrategyType || ru == nil || ru.MaxUnavailable == nil || *ru.MaxUnavailable != intstr.FromString("10%") {
				t.Errorf("%s: want RollingUpdate with maxUnavailable 10%%", name)
			}
			if len(o.Spec.Template.Spec.NodeSelector) > 0 || len(o.Spec.Template.Spec.Tolerations) != 1 || o.Spec.Template.Spec.Tolerations[0].Operator != corev1.TolerationOpExists {
				t.Errorf("%s: a node plugin must run on every node (no node selector, tolerate everything)", name)
			}
		}
	}
	// The operator's own RBAC follows the same rules.
	out, err := Render(RenderOptions{OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range assets.SplitDocuments(out) {
		var r struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &r); err != nil {
			t.Fatal(err)
		}
		checkRules(t, "operator "+r.Kind, r.Rules)
	}
}

func checkRules(t *testing.T, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	for i, r := range rules {
		for _, list := range [][]string{r.Verbs, r.Resources, r.APIGroups, r.ResourceNames} {
			for _, v := range list {
				if v == "*" {
					t.Errorf("%s: rules[%d] uses \"*\"", name, i)
				}
			}
		}
	}
}

func checkPod(t *testing.T, name string, spec *corev1.PodSpec, allowed map[string]bool) {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: container %s has no CPU or memory request", name, c.Name)
		}
		if !allowed[c.Image] {
			t.Errorf("%s: container %s image %q does not come from an image variable", name, c.Name, c.Image)
		}
	}
}

func TestManilaPluginFlags(t *testing.T) {
	for _, name := range []string{"controller.yaml", "node.yaml"} {
		b, _ := assets.Render(name, testVars())
		for _, want := range []string{"--share-protocol-selector=NFS", "--fwdendpoint=unix://"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s lacks %s", name, want)
			}
		}
	}
	b, _ := assets.Render("controller.yaml", testVars())
	for _, c := range []string{"csi-provisioner", "csi-snapshotter", "csi-resizer", "csi-liveness-probe", "provisioner-kube-rbac-proxy", "snapshotter-kube-rbac-proxy", "resizer-kube-rbac-proxy"} {
		if !bytes.Contains(b, []byte("name: "+c+"\n")) {
			t.Errorf("controller.yaml lacks container %s", c)
		}
	}
}

func TestRenderRejectsMissingValues(t *testing.T) {
	v := testVars()
	delete(v, "DRIVER_IMAGE")
	if _, err := assets.Render("node.yaml", v); err == nil || !strings.Contains(err.Error(), "DRIVER_IMAGE") {
		t.Errorf("want an error naming DRIVER_IMAGE, got %v", err)
	}
	if _, err := ImagesFromEnv(func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "NFS_DRIVER_IMAGE") {
		t.Errorf("ImagesFromEnv: want an error naming the missing variables, got %v", err)
	}
}
