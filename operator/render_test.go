package operator

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/runtime"
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
	if !args["--health-address=127.0.0.1:8443"] || !args["--probe-address=$(POD_IP):8444"] {
		t.Errorf("args %v: want metrics on loopback and probes on the pod IP", c.Args)
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
	if len(c.Ports) != 1 || c.Ports[0].Name != "probes" || c.Ports[0].ContainerPort != 8444 {
		t.Errorf("ports %+v, want probes 8444", c.Ports)
	}
}
