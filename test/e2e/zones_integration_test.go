//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestJourneyOnTwoZones: on the loopback cloud of two availability zones (Nova has a compute
// host in az1 and one in az2; Manila a back end in each, exporting on storage-az1 and
// storage-az2, and a second one in az1 exporting on storage-az1-fast), an installer-shaped
// cluster with a worker MachineSet per zone, made by the real Machine API.
// `machinesets patch --discover --rollout` gives each zone's set the networks Manila exports on in
// its zone, and the replaced Machines are servers of their set's zone whose ports are on those
// networks and on no other zone's.
func TestJourneyOnTwoZones(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "zones")
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	project := ostest.NewProject(t, cloud, "zones")
	nfsSG := project.CreateSecurityGroup("nfs", true)
	project.AllowIngress(nfsSG, "tcp:2049", "tcp:111", "udp:111")
	// What discovery learns each zone's networks from: the project's shares in each zone.
	shareAZ1 := project.CreateSharesIn("az1", 1, "default", "az1")[0]
	project.CreateSharesIn("az2", 1, "default", "az2")
	project.CreateSharesIn("fast", 1, "fast", "az1")
	cloudsFile, cloudName := project.CloudsFile, ostest.CloudName
	az1, az2 := cloud.Seed.Networks["storage"], cloud.Seed.MoreStorageNetworks["storage-az2"].ID
	az1fast := cloud.Seed.MoreStorageNetworks["storage-az1-fast"].ID
	want := map[string][]string{"az1": {az1, az1fast}, "az2": {az2}}

	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloudsFile, Cloud: cloudName, Workers: 1, Zones: []string{"az1", "az2"}})
	t.Logf("cluster with a worker in az1 and one in az2 Ready at %s", time.Since(t0).Round(time.Second))
	mc := machineclient.NewForConfigOrDie(sim.Config)
	zoneOf := map[string]string{cl.MachineSets[0]: "az1", cl.MachineSets[1]: "az2"}
	before := map[string]bool{}
	for set := range zoneOf {
		for _, m := range liveMachinesOf(t, ctx, mc, set) {
			before[m.Name] = true
		}
	}

	cli := buildCLI(t)
	t1 := time.Now()
	out, err := exec.CommandContext(ctx, cli, "machinesets", "patch", "--discover", "--security-group", nfsSG, "--rollout",
		"--poll-interval", "1s", "--timeout", "10m", "--kubeconfig", sim.Kubeconfig, "--os-cloud", cloudName, "--os-client-config-file", cloudsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("machinesets patch --discover --rollout: %v\n%s\nmachine-api-openstack log:\n%s", err, out, cl.Log(40))
	}
	for _, line := range []string{
		"discovered: availability zone az1: network \"storage-az1\" (" + az1 + "), for MachineSet " + cl.MachineSets[0],
		"discovered: availability zone az1: network \"storage-az1-fast\" (" + az1fast + "), for MachineSet " + cl.MachineSets[0],
		"discovered: availability zone az2: network \"storage-az2\" (" + az2 + "), for MachineSet " + cl.MachineSets[1],
	} {
		if !strings.Contains(string(out), line) {
			t.Errorf("the output does not say %q:\n%s", line, out)
		}
	}
	t.Logf("patched and rolled both zones' sets in %s:\n%s", time.Since(t1).Round(time.Second), out)

	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: cloudName, CloudsFile: cloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	allStorage := []string{az1, az1fast, az2}
	nodeIn := map[string]string{}
	for set, zone := range zoneOf {
		live := liveMachinesOf(t, ctx, mc, set)
		if len(live) != 1 || before[live[0].Name] {
			t.Fatalf("MachineSet %s: Machines %v after the rollout, want one new one", set, machineNames(live))
		}
		m := live[0]
		id := strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix)
		srv, err := servers.Get(ctx, cl.Clients.Compute, id).Extract()
		if err != nil {
			t.Fatal(err)
		}
		if srv.AvailabilityZone != zone {
			t.Errorf("Machine %s of %s: server in zone %q, want %s", m.Name, set, srv.AvailabilityZone, zone)
		}
		node, err := sim.Client.CoreV1().Nodes().Get(ctx, m.Status.NodeRef.Name, metav1.GetOptions{})
		if err != nil || node.Labels[corev1.LabelTopologyZone] != zone {
			t.Errorf("Node of Machine %s: %v, zone label %q, want %s", m.Name, err, node.Labels[corev1.LabelTopologyZone], zone)
		}
		ports, err := osc.Ports(ctx, openstack.PortFilter{NetworkIDs: allStorage, DeviceIDs: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		var on []string
		for _, p := range ports {
			on = append(on, p.NetworkID)
		}
		slices.Sort(on)
		wanted := slices.Sorted(slices.Values(want[zone]))
		if !slices.Equal(on, wanted) {
			t.Errorf("Machine %s (zone %s): storage ports on %v, want %v", m.Name, zone, on, wanted)
		}
		t.Logf("Machine %s: server %s in %s, storage ports on %v", m.Name, id, srv.AvailabilityZone, on)
		nodeIn[zone] = m.Status.NodeRef.Name
	}

	// A claim on az1's share (a static volume), mounted by a pod in each zone.
	createNamespace(t, ctx, sim.Client, "app")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-az1"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "app", Name: "data"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: operator.DriverName, VolumeHandle: shareAZ1, VolumeAttributes: map[string]string{"shareID": shareAZ1}}},
		},
	}
	if _, err := sim.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := rwxClaim("app", "data", "", "1Gi")
	pvc.Spec.VolumeName = pv.Name
	if _, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, sim.Client, pvc, time.Minute, func() error { return nil })
	diagnoseZone := func(zone string) diagnose.Check {
		t.Helper()
		name := "app-" + zone
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"}, Spec: corev1.PodSpec{
			NodeName:   nodeIn[zone],
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		}}
		if _, err := sim.Client.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.CommandContext(ctx, cli, "diagnose", "pod/"+name, "-n", "app", "-o", "json", "--kubeconfig", sim.Kubeconfig,
			"--os-cloud", cloudName, "--os-client-config-file", cloudsFile).Output()
		var report diagnose.Report
		if err := json.Unmarshal(out, &report); err != nil {
			t.Fatalf("diagnose pod/%s: %v\n%s", name, err, out)
		}
		var zoneCheck *diagnose.Check
		for i, c := range report.Checks {
			if c.Name == "storage port" && c.Status != diagnose.Passed {
				t.Errorf("diagnose pod/%s: the Node of %s is attached to its zone's networks, but: %+v", name, zone, c)
			}
			if c.Name == "zone" {
				zoneCheck = &report.Checks[i]
			}
		}
		if zoneCheck == nil {
			t.Fatalf("diagnose pod/%s has no zone check: %s", name, out)
		}
		return *zoneCheck
	}
	if c := diagnoseZone("az1"); c.Status != diagnose.Passed {
		t.Errorf("pod of az1 on az1's share: %+v", c)
	}
	c := diagnoseZone("az2")
	if c.Status != diagnose.Failed || !strings.Contains(c.Evidence, "availability zone az2, and the share is in zone az1") ||
		!strings.Contains(c.Evidence, `"storage-az1" (`+az1+") (zone az1)") || !strings.Contains(c.Fix, "availability: az2") {
		t.Errorf("pod of az2 on az1's share: %+v", c)
	}
	t.Logf("diagnose, pod of az2 on az1's share: %s; fix: %s", c.Evidence, c.Fix)
}

// liveMachinesOf are the Machines of a MachineSet that are not being deleted.
func liveMachinesOf(t *testing.T, ctx context.Context, mc machineclient.Interface, set string) []machinev1beta1.Machine {
	t.Helper()
	live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+set)
	if err != nil {
		t.Fatal(err)
	}
	return live
}

func machineNames(ms []machinev1beta1.Machine) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return names
}
