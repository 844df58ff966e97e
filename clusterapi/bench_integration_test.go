//go:build integration

package clusterapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/kubeconfig"
	"github.com/manila-setup/manila-setup/test/testenv"
)

const fleetSize = 200

// newCAPIFleet makes n standalone Cluster API MachineSets, each with its own template and one
// running Machine made from it (so that no replaced template is unused), and returns a client
// rate-limited as the CLI's, counting its requests.
func newCAPIFleet(tb testing.TB, n int) (dynamic.Interface, *requests) {
	tb.Helper()
	ctx := context.Background()
	api := testenv.NewAPIServer(tb)
	if err := api.InstallClusterAPICRDs(); err != nil {
		tb.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		tb.Fatal(err)
	}
	cfg := rest.CopyConfig(api.Config)
	cfg.QPS, cfg.Burst = kubeconfig.DefaultQPS, kubeconfig.DefaultBurst
	admin := dynamic.NewForConfigOrDie(cfg)
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("ostest-8x2kq-worker-%03d", i)
		if _, err := admin.Resource(TemplateGVR).Namespace(ns).Create(ctx, template(name, nil, nil), metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
		if _, err := admin.Resource(MachineSetGVR).Namespace(ns).Create(ctx, set(KindMachineSet, name, TemplateKind, name, nil), metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
		if _, err := admin.Resource(OpenStackMachineGVR).Namespace(ns).Create(ctx, machine(name+"-m0", name), metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	// One read of each first, so that the apiserver's watch caches are warm: a cold cache
	// answers the first LIST with 429 "storage is (re)initializing" and client-go retries.
	for _, gvr := range []schema.GroupVersionResource{MachineSetGVR, MachineDeploymentGVR, TemplateGVR, OpenStackMachineGVR} {
		if _, err := admin.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	counter := &requests{counts: map[string]int{}}
	cfg.WrapTransport = counter.wrap
	return dynamic.NewForConfigOrDie(cfg), counter
}

// TestPatch200ClusterAPIMachineSets holds the target of docs/performance.md: one template
// CREATE and one set PATCH per changed set, on top of a fixed number of LISTs; a second run
// writes nothing.
func TestPatch200ClusterAPIMachineSets(t *testing.T) {
	dyn, counter := newCAPIFleet(t, fleetSize)
	ctx := context.Background()
	scope, opts := Scope{Namespace: ns}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{nfsGroup}}}
	counter.take()
	start := time.Now()
	report, err := Patch(ctx, dyn, scope, opts)
	wall := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	c := counter.take()
	// LISTs: sets, deployments, templates; then, to prune, templates, sets, deployments and
	// OpenStackMachines (every old template has its Machine: none is deleted).
	if len(report.Results) != fleetSize || c["POST openstackmachinetemplates"] != fleetSize || c["PATCH machinesets"] != fleetSize || c["LIST machinesets"] != 2 ||
		c["LIST openstackmachinetemplates"] != 2 || c["LIST openstackmachines"] != 1 || total(c) != 2*fleetSize+7 {
		t.Errorf("patching %d Cluster API MachineSets: %d results, requests %v", fleetSize, len(report.Results), c)
	}
	t.Logf("patch %d Cluster API MachineSets: %d requests %v in %s", fleetSize, total(c), c, wall.Round(time.Millisecond))

	start = time.Now()
	if _, err := Patch(ctx, dyn, scope, opts); err != nil {
		t.Fatal(err)
	}
	c = counter.take()
	if c["POST openstackmachinetemplates"]+c["PATCH machinesets"]+c["DELETE openstackmachinetemplates"] != 0 {
		t.Errorf("second run wrote: %v", c)
	}
	t.Logf("second run (nothing to do): %d requests %v in %s", total(c), c, time.Since(start).Round(time.Millisecond))
}

// BenchmarkPatch200ClusterAPIMachineSets measures patching 200 Cluster API MachineSets on
// envtest. Each iteration attaches a new network, so every set changes every time.
//
//	go test -tags integration -run '^$' -bench Patch200ClusterAPI -benchtime 3x ./clusterapi/
func BenchmarkPatch200ClusterAPIMachineSets(b *testing.B) {
	dyn, counter := newCAPIFleet(b, fleetSize)
	ctx := context.Background()
	seq := 0
	counter.take()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		seq++
		scope, opts := Scope{Namespace: ns, KeepTemplates: true}, attach.Options{Attachment: attach.Attachment{Networks: []string{fmt.Sprintf("%08x-0000-4000-8000-000000000000", seq)}}}
		if _, err := Patch(ctx, dyn, scope, opts); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	c := counter.take()
	b.ReportMetric(float64(total(c))/float64(b.N), "requests/op")
	b.ReportMetric(float64(c["POST openstackmachinetemplates"])/float64(b.N), "creates/op")
	b.ReportMetric(float64(c["PATCH machinesets"])/float64(b.N), "patches/op")
}
