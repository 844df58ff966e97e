package operator

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/operator/platform"
)

// The rendered operator Deployment probes the health endpoint on the pod IP, which the kubelet
// can reach, while metrics stay on loopback.
func TestRenderedOperatorProbes(t *testing.T) {
	out, err := Render(RenderOptions{Namespace: "ns1", OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	var d *appsv1.Deployment
	for _, u := range objs {
		if u.GetKind() == "Deployment" {
			d = &appsv1.Deployment{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
				t.Fatal(err)
			}
		}
	}
	if d == nil {
		t.Fatal("no Deployment rendered")
	}
	c := d.Spec.Template.Spec.Containers[0]
	args := map[string]bool{}
	for _, a := range c.Args {
		args[a] = true
	}
	if !args["--health-address=127.0.0.1:8443"] || !args["--probe-address=$(POD_IP):8444"] ||
		!args["--metrics-address=$(POD_IP):9443"] || !args["--metrics-cert-dir=/var/run/secrets/serving-cert"] {
		t.Errorf("args %v: want plain HTTP on loopback, probes on the pod IP, and metrics over HTTPS on the pod IP with service-ca's certificate", c.Args)
	}
	podIP := false
	for _, e := range c.Env {
		podIP = podIP || (e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP")
	}
	if !podIP {
		t.Errorf("no POD_IP from status.podIP in the env")
	}
	for name, p := range map[string]*struct{ path string }{"liveness": {"/healthz"}, "readiness": {"/readyz"}} {
		probe := c.LivenessProbe
		if name == "readiness" {
			probe = c.ReadinessProbe
		}
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != p.path || probe.HTTPGet.Port.String() != "probes" {
			t.Errorf("%s probe: %+v, want httpGet %s on port probes", name, probe, p.path)
		}
	}
	if len(c.Ports) != 2 || c.Ports[0].Name != "probes" || c.Ports[0].ContainerPort != 8444 ||
		c.Ports[1].Name != "metrics" || c.Ports[1].ContainerPort != 9443 {
		t.Errorf("ports %+v, want probes 8444 and metrics 9443", c.Ports)
	}
}

// The rendered operands built from source are the versions the scripts build and the tests run
// (test/env/csi/build.sh: the driver and provisioner the end-to-end tests run as processes;
// test/env/node/operands.sh: the other images of the real node), both from the module
// test/env/binaries, which requires them at those versions; every default image pins a version.
func TestOperandsAreTheTestedVersions(t *testing.T) {
	built := map[string]string{}
	for _, script := range []string{"../test/env/csi/build.sh", "../test/env/node/operands.sh"} {
		b, err := os.ReadFile(script)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`(?m)^([A-Z_]+)_(VERSION|MODULE)=(\S+)`).FindAllStringSubmatch(string(b), -1) {
			built[m[1]+"_"+m[2]] = m[3]
		}
	}
	scripts := map[string]string{
		"DRIVER_IMAGE":          "PLUGIN",
		"PROVISIONER_IMAGE":     "PROVISIONER",
		"SNAPSHOTTER_IMAGE":     "SNAPSHOTTER",
		"RESIZER_IMAGE":         "RESIZER",
		"KUBE_RBAC_PROXY_IMAGE": "RBAC_PROXY",
	}
	binariesMod, err := os.ReadFile("../test/env/binaries/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for _, o := range Operands {
		if err := CheckImageReference(o.Reference()); err != nil {
			t.Errorf("%s: %v", o.Env, err)
		}
		prefix, ok := scripts[o.Env]
		if !ok {
			if o.Module != "" {
				t.Errorf("%s names module %s, but no script builds it", o.Env, o.Module)
			}
			continue
		}
		tested++
		mod, ver := built[prefix+"_MODULE"], built[prefix+"_VERSION"]
		if mod == "" || ver == "" || o.Module != mod || o.Version != ver {
			t.Errorf("%s renders %s %s (module %s), but the scripts build and test %s %q %q", o.Env, o.Repository, o.Version, o.Module, prefix, mod, ver)
		}
		// The scripts build from test/env/binaries, whose go.mod must require that very version.
		if !regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(o.Module+" "+o.Version) + `\s*$`).Match(binariesMod) {
			t.Errorf("%s renders %s %s, but test/env/binaries/go.mod does not require that version", o.Env, o.Module, o.Version)
		}
	}
	if tested != len(scripts) {
		t.Errorf("compared %d operands with the scripts, want %d", tested, len(scripts))
	}
	env := DefaultImages.ImageEnv()
	for _, o := range Operands {
		if *env[o.Env] != o.Reference() {
			t.Errorf("DefaultImages %s = %s, want %s", o.Env, *env[o.Env], o.Reference())
		}
	}
}

func TestCheckImageReference(t *testing.T) {
	for ref, ok := range map[string]bool{
		"quay.io/team/manila-setup-operator:v1.2.0":                                               true,
		"localhost:5000/team/manila-setup-operator:1":                                             true,
		"quay.io/team/op@sha256:0c4f2f4a8e3b1d6c9e7a5b2f8d1c3e6a9b4d7f0e2c5a8b1d4e7f0a3c6b9d2e5f": true,
		"quay.io/team/manila-setup-operator:latest":                                               false,
		"quay.io/team/manila-setup-operator":                                                      false,
		"localhost:5000/team/manila-setup-operator":                                               false,
	} {
		if err := CheckImageReference(ref); (err == nil) != ok {
			t.Errorf("CheckImageReference(%q) = %v, want ok=%v", ref, err, ok)
		}
	}
	if ref, err := OperatorImage("quay.io/team/", "v1.2.0"); err != nil || ref != "quay.io/team/manila-setup-operator:v1.2.0" {
		t.Errorf("OperatorImage = %q, %v", ref, err)
	}
	for _, v := range []string{"", "dev", "latest"} {
		if _, err := OperatorImage("quay.io/team", v); err == nil {
			t.Errorf("OperatorImage(version %q) accepted", v)
		}
	}
}

// With CredentialsRequest, the cloud-credential operator is asked for exactly the Secret the
// operator reads, in its namespace, as an OpenStack request.
func TestRenderCredentialsRequest(t *testing.T) {
	out, err := Render(RenderOptions{Namespace: "ns1", OperatorImage: "example.test/op:1", Images: testImages, CredentialsRequest: true})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	var found int
	for _, u := range objs {
		if u.GetKind() != "CredentialsRequest" {
			continue
		}
		found++
		ref, _, _ := unstructured.NestedStringMap(u.Object, "spec", "secretRef")
		kind, _, _ := unstructured.NestedString(u.Object, "spec", "providerSpec", "kind")
		if ref["name"] != CredentialsSecretName || ref["namespace"] != "ns1" || kind != "OpenStackProviderSpec" || u.GetNamespace() != "openshift-cloud-credential-operator" {
			t.Errorf("CredentialsRequest %s/%s: secretRef %v, providerSpec kind %q", u.GetNamespace(), u.GetName(), ref, kind)
		}
	}
	if found != 1 {
		t.Errorf("%d CredentialsRequests rendered, want 1", found)
	}
	plain, err := Render(RenderOptions{Namespace: "ns1", OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "CredentialsRequest") {
		t.Error("a CredentialsRequest rendered without being asked for")
	}
}

// TestRenderMachineNetworks: --machine-network reaches the operator's arguments, and only them;
// a value that is not a CIDR is refused with its index.
func TestRenderMachineNetworks(t *testing.T) {
	base := RenderOptions{OperatorImage: "quay.io/example/manila-setup-operator:v1", Images: DefaultImages}
	plain, err := Render(base)
	if err != nil {
		t.Fatal(err)
	}
	with := base
	with.MachineNetworks = []string{"10.196.0.0/16", "192.0.2.0/24"}
	got, err := Render(with)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(got)
	if err != nil {
		t.Fatal(err)
	}
	plainObjs, err := Objects(plain)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != len(plainObjs) {
		t.Fatalf("%d objects, want %d", len(objs), len(plainObjs))
	}
	for i, u := range objs {
		if u.GetKind() != "Deployment" {
			if !reflect.DeepEqual(u.Object, plainObjs[i].Object) {
				t.Errorf("%s %s changed", u.GetKind(), u.GetName())
			}
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		args := containers[0].(map[string]any)["args"].([]any)
		if last := args[len(args)-1]; last != "--machine-network=10.196.0.0/16,192.0.2.0/24" {
			t.Errorf("operator args %v: want --machine-network last", args)
		}
		plainContainers, _, _ := unstructured.NestedSlice(plainObjs[i].Object, "spec", "template", "spec", "containers")
		if n := len(plainContainers[0].(map[string]any)["args"].([]any)); n != len(args)-1 {
			t.Errorf("operator args %v: want the %d of the plain render and --machine-network", args, n)
		}
	}
	bad := base
	bad.MachineNetworks = []string{"10.0.0.0/8", "all"}
	if _, err := Render(bad); err == nil || !strings.Contains(err.Error(), `--machine-network[1]: Invalid value: "all"`) {
		t.Errorf("Render with a bad CIDR: %v", err)
	}
}

// The companion comes with what lets Prometheus scrape it and alert on what it finds, in its
// own namespace: the same Service, ServiceMonitor and PrometheusRule the driver-mode operator
// keeps for itself, the Service selecting the companion's pod, which serves /metrics over HTTPS.
func TestRenderCompanionMonitoring(t *testing.T) {
	out, err := Render(RenderOptions{Mode: platform.ModeCompanion, OperatorImage: "example.test/op:1"})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Objects(out)
	if err != nil {
		t.Fatal(err)
	}
	names := NamesFor(platform.ModeCompanion)
	found := map[string]*unstructured.Unstructured{}
	for _, u := range objs {
		found[u.GetKind()+"/"+u.GetName()] = u
	}
	for _, want := range []string{"Service/manila-csi-driver-operator-metrics", "ServiceMonitor/manila-csi-driver-operator-monitor",
		"PrometheusRule/manila-csi-driver-operator", "Role/manila-csi-driver-prometheus", "RoleBinding/manila-csi-driver-prometheus"} {
		if u := found[want]; u == nil {
			t.Errorf("no %s rendered for the companion", want)
		} else if u.GetNamespace() != names.Namespace {
			t.Errorf("%s in namespace %s, want %s", want, u.GetNamespace(), names.Namespace)
		}
	}
	if svc := found["Service/manila-csi-driver-operator-metrics"]; svc != nil {
		sel, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if sel["name"] != names.Operator {
			t.Errorf("the metrics Service selects %v, want name=%s", sel, names.Operator)
		}
	}
	dep := found["Deployment/"+names.Operator]
	if dep == nil {
		t.Fatal("no companion Deployment")
	}
	containers, _, _ := unstructured.NestedSlice(dep.Object, "spec", "template", "spec", "containers")
	c, _ := containers[0].(map[string]any)
	got, _, _ := unstructured.NestedStringSlice(c, "args")
	if !slices.Contains(got, "--metrics-address=$(POD_IP):9443") || !slices.Contains(got, "--metrics-cert-dir=/var/run/secrets/serving-cert") {
		t.Errorf("companion args %v: want /metrics over HTTPS on the pod IP", got)
	}
}
