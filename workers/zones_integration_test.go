//go:build integration

package workers

import (
	"context"
	"errors"
	"strings"
	"testing"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestApplyRefusesAnotherZonesNetwork: on the loopback cloud of the zones shape (a Manila back
// end per availability zone, each exporting on its own storage network), a cluster with a
// worker MachineSet in az1 and one in az2. Attaching az1's storage network to both is refused,
// naming the az2 set and both zones, and nothing is written; --dry-run notes it; --force
// attaches it with a warning; az1's set alone takes it without a word.
func TestApplyRefusesAnotherZonesNetwork(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "zones")
	ctx := context.Background()
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: testenv.CloudDemo, CloudsFile: cloud.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	api := testenv.NewAPIServer(t)
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := machineclient.NewForConfigOrDie(api.Config)
	for _, zone := range []string{"az1", "az2"} {
		ms := machinectl.MachineSet("zoned", "worker", "zoned-worker-"+zone, 1, machinectl.WorkerProviderSpec("zoned", zone))
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := Cluster{Machines: mc, Kube: api.Client}
	az1 := cloud.Seed.Networks["storage"]
	request := func(names ...string) Request {
		return Request{Selection: Selection{MachineSets: &machinesets.Selection{Names: names}},
			Attachment: attach.Attachment{Networks: []string{az1}}, Cloud: osc, By: "test"}
	}
	attached := func(name string) bool {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(ms.Spec.Template.Spec.ProviderSpec.Value.Raw), az1)
	}

	_, err = c.Apply(ctx, request())
	var refused *attach.NetworkPolicyError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 {
		t.Fatalf("az1's network for both zones' sets: %v, want one refusal", err)
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{"zoned-worker-az2", "availability zone az2", "for az1 only", az1} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if attached("zoned-worker-az1") || attached("zoned-worker-az2") {
		t.Fatal("a refused patch wrote a MachineSet")
	}

	dry := request()
	dry.DryRun = true
	report, err := c.Apply(ctx, dry)
	if err != nil || len(report.Refused) != 1 || !strings.Contains(strings.Join(report.Notes, "\n"), "would be refused") {
		t.Fatalf("--dry-run: %v, refused %v, notes %q", err, report.Refused, report.Notes)
	}

	report, err = c.Apply(ctx, request("zoned-worker-az1"))
	if err != nil || len(report.Warnings) != 0 && strings.Contains(strings.Join(report.Warnings, "\n"), "zone") {
		t.Fatalf("az1's set alone: %v, warnings %q", err, report.Warnings)
	}
	if !attached("zoned-worker-az1") || attached("zoned-worker-az2") {
		t.Fatal("az1's set alone: not written as asked")
	}

	forced := request("zoned-worker-az2")
	forced.Force = true
	report, err = c.Apply(ctx, forced)
	if err != nil || !strings.Contains(strings.Join(report.Warnings, "\n"), "zoned-worker-az2 makes its machines in availability zone az2") {
		t.Fatalf("--force: %v, warnings %q", err, report.Warnings)
	}
	if !attached("zoned-worker-az2") {
		t.Fatal("--force did not write az2's set")
	}
}

// TestApplyDiscoverGivesEachZoneItsNetworks: on the zones cloud (az1's back ends export on
// storage and storage-az1-fast, az2's on storage-az2), --discover gives the az1 set both of
// az1's networks and the az2 set az2's, in one Apply; a set that names no zone, or a zone where
// Manila exports nothing, is refused by name before anything is written.
func TestApplyDiscoverGivesEachZoneItsNetworks(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "zones")
	ctx := context.Background()
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: testenv.CloudDemo, CloudsFile: cloud.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	api := testenv.NewAPIServer(t)
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinesets.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mc := machineclient.NewForConfigOrDie(api.Config)
	for _, zone := range []string{"az1", "az2", "", "az3"} {
		ms := machinectl.MachineSet("zoned", "worker", "zoned-worker-"+zone, 1, machinectl.WorkerProviderSpec("zoned", zone))
		if zone == "" {
			ms.Name = "zoned-worker-nozone"
		}
		if _, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Create(ctx, ms, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c := Cluster{Machines: mc, Kube: api.Client}
	az1, az1fast, az2 := cloud.Seed.Networks["storage"], cloud.Seed.MoreStorageNetworks["storage-az1-fast"].ID, cloud.Seed.MoreStorageNetworks["storage-az2"].ID
	if az1fast == "" || az2 == "" {
		t.Fatalf("the zones cloud's seed lacks its further storage networks: %+v", cloud.Seed.MoreStorageNetworks)
	}
	request := func(names ...string) Request {
		return Request{Selection: Selection{MachineSets: &machinesets.Selection{Names: names}}, Discover: true, Cloud: osc, By: "test"}
	}
	networksOf := func(name string) string {
		ms, err := mc.MachineV1beta1().MachineSets(machinesets.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
	}

	for _, names := range [][]string{{"zoned-worker-az1", "zoned-worker-nozone"}, {"zoned-worker-az2", "zoned-worker-az3"}} {
		_, err := c.Apply(ctx, request(names...))
		var zoneErr *ZoneError
		if !errors.As(err, &zoneErr) || len(zoneErr.Problems) != 1 {
			t.Fatalf("%v: %v, want one ZoneError problem", names, err)
		}
		t.Logf("refused: %v", err)
		if !strings.Contains(err.Error(), names[1]) || !strings.Contains(err.Error(), `az2: "storage-az2"`) {
			t.Errorf("%q does not name %s and each zone's networks", err, names[1])
		}
		for _, n := range names {
			if spec := networksOf(n); strings.Contains(spec, az1) || strings.Contains(spec, az2) {
				t.Fatalf("a refused request wrote %s", n)
			}
		}
	}

	report, err := c.Apply(ctx, request("zoned-worker-az1", "zoned-worker-az2"))
	if err != nil {
		t.Fatal(err)
	}
	if len(report.Zones) != 2 || report.Zones[0].Zone != "az1" || report.Zones[1].Zone != "az2" {
		t.Fatalf("report's zones: %+v", report.Zones)
	}
	for _, r := range report.Results {
		t.Logf("%s (zone %s): %s %v", r.Name, r.Zone, r.Action, r.AddedNetworks)
	}
	spec1, spec2 := networksOf("zoned-worker-az1"), networksOf("zoned-worker-az2")
	if !strings.Contains(spec1, az1) || !strings.Contains(spec1, az1fast) || strings.Contains(spec1, az2) {
		t.Errorf("az1's set: want %s and %s, not %s: %s", az1, az1fast, az2, spec1)
	}
	if !strings.Contains(spec2, az2) || strings.Contains(spec2, az1) || strings.Contains(spec2, az1fast) {
		t.Errorf("az2's set: want %s only: %s", az2, spec2)
	}
	report, err = c.Apply(ctx, request("zoned-worker-az1", "zoned-worker-az2"))
	if err != nil || len(report.Results) != 2 || report.Results[0].Action != attach.ActionUnchanged || report.Results[1].Action != attach.ActionUnchanged {
		t.Fatalf("again: %v, %+v, want both unchanged", err, report.Results)
	}
}
