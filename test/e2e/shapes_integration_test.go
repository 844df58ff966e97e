//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
	"github.com/manila-setup/manila-setup/workers"
)

// TestJourneyOnTheDirectorLayout walks the journey on a cloud laid out as the director deploys
// Manila with CephFS through NFS-Ganesha (test/env/openstack/shape.sh): the storage network is
// StorageNFS, 172.17.5.0/24 plus an IPv6 subnet fd00:fd00:fd00:7000::/64, each share exported on
// 172.17.5.10 (preferred) and [fd00:fd00:fd00:7000::10]; the cluster's machine network is
// dual-stack. What a cloud of this shape broke, and what is checked here:
//
//   - discovery, fitness and diagnose read the bracketed IPv6 export location;
//   - the workers' storage ports get an address on both subnets;
//   - the StorageClasses admit the IPv4 storage subnet and nothing wider: not the IPv6 subnet
//     (the driver grants rules at a Manila microversion that refuses IPv6 ip rules) and not the
//     0.0.0.0/0 that covering 10.196.0.0/16 and 172.17.5.0/24 would give;
//   - a claim binds, and its share's rules admit exactly the storage subnet;
//   - the node plugin, with the operator's runtime configuration, mounts the IPv4 export, and
//     two workers' kernels with both addresses mount it and read each other's lines;
//   - with the IPv6 export preferred instead, the driver (v1.35.0) cannot stage the share at
//     all, diagnose explains its words, and the operator's StorageNetworkReachable says so;
//   - diagnose passes every check for a pod on an attached worker;
func TestJourneyOnTheDirectorLayout(t *testing.T) {
	cloud := testenv.NewShapedCloudParallel(t, "director")
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	project := ostest.NewProject(t, cloud, "director")
	storageNet := cloud.Seed.Networks["storage"]
	nfsSG := project.CreateSecurityGroup("nfs", true)
	project.AllowIngress(nfsSG, "tcp:2049", "tcp:111", "udp:111")
	project.CreateShares("data", 1)
	cloudsFile, cloudName := project.CloudsFile, ostest.CloudName
	storageV4 := netip.MustParsePrefix(cloud.Seed.Subnets["storage-subnet"].CIDR)
	storageV6 := netip.MustParsePrefix(cloud.Seed.Subnets["storage-subnet-2"].CIDR)
	if !storageV4.Addr().Is4() || !storageV6.Addr().Is6() {
		t.Fatalf("the director cloud's storage subnets %s and %s: want IPv4 then IPv6", storageV4, storageV6)
	}

	// Discovery finds StorageNFS from the shares' export locations, IPv6 one included.
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: cloudName, CloudsFile: cloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	disc, err := osc.Discover(ctx, openstack.DiscoverOptions{SecurityGroupIDs: []string{nfsSG}})
	if err != nil {
		t.Fatal(err)
	}
	best := disc.Best()
	if best == nil || best.Network.ID != storageNet || best.Network.Name != "StorageNFS" {
		t.Fatalf("discovery found %+v, want StorageNFS (%s)", best, storageNet)
	}
	t.Logf("discovered %s: %s", best.Network.Name, strings.Join(best.Reasons, "; "))

	// A dual-stack cluster, installed without the storage network.
	installConfig, err := os.ReadFile("testdata/install-config-dualstack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloudsFile, Cloud: cloudName, Workers: 2,
		MachineNetworkV6: cloud.Seed.Subnets["tenant-subnet-v6"].CIDR, InstallConfig: installConfig})
	mc := machineclient.NewForConfigOrDie(sim.Config)
	results, err := machinesets.Patch(ctx, mc, machinesets.Selection{}, attach.Options{
		Attachment: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{nfsSG}},
		Checker:    attach.NeutronChecker{Client: osc}, By: "manila-setup e2e",
	})
	if err != nil || len(results) != 1 || results[0].Action != attach.ActionPatched {
		t.Fatalf("machinesets.Patch: %v, %+v", err, results)
	}
	progress, err := machinesets.Rollout(ctx, mc, sim.Client, machinesets.Selection{}, rollout.Options{MaxSurge: 1, PollInterval: 500 * time.Millisecond, Timeout: 10 * time.Minute,
		Canary: workers.NewCanary(ctx, sim.Client, osc), Progress: func(p rollout.SetProgress) {}})
	if err != nil || len(progress) != 1 || progress[0].State != rollout.Done || progress[0].Replaced != 2 {
		t.Fatalf("machinesets.Rollout: %v, %+v", err, progress)
	}
	live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+cl.MachineSet)
	if err != nil {
		t.Fatal(err)
	}
	var serverIDs, nodes []string
	for _, m := range live {
		if m.Spec.ProviderID == nil || m.Status.NodeRef == nil {
			t.Fatalf("Machine %s has no server or no Node", m.Name)
		}
		serverIDs = append(serverIDs, strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix))
		nodes = append(nodes, m.Status.NodeRef.Name)
	}
	storagePorts, err := osc.Ports(ctx, openstack.PortFilter{NetworkIDs: []string{storageNet}, DeviceIDs: serverIDs})
	if err != nil {
		t.Fatal(err)
	}
	var workersV4 []netip.Addr
	for _, p := range storagePorts {
		var v4, v6 int
		for _, a := range p.FixedIPs {
			switch {
			case storageV4.Contains(a):
				v4++
				workersV4 = append(workersV4, a)
			case storageV6.Contains(a):
				v6++
			}
		}
		if v4 != 1 || v6 != 1 {
			t.Errorf("storage port %s has addresses %v: want one in %s and one in %s", p.ID, p.FixedIPs, storageV4, storageV6)
		}
	}
	if len(storagePorts) != 2 || len(workersV4) != 2 {
		t.Fatalf("the 2 workers have %d storage ports with %d IPv4 addresses: %+v", len(storagePorts), len(workersV4), storagePorts)
	}
	t.Logf("2 dual-stack workers attached to StorageNFS and rolled in %s: %+v", time.Since(t0).Round(time.Second), storagePorts)

	// The operator: classes that admit the IPv4 storage subnet, nothing wider.
	cli := buildCLI(t)
	kubeconfig := sim.Kubeconfig
	if out, err := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", cloudName, "--os-client-config-file", cloudsFile).CombinedOutput(); err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	if _, err := sim.Client.AppsV1().Deployments(operator.DefaultNamespace).Patch(ctx, operator.OperatorName, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, cli, kubeconfig)
	classes := waitStorageClasses(t, ctx, sim, op, operator.DefaultNamespace, cloud.Seed.ShareTypes, []string{"csi-manila-cephfs-fast", "csi-manila-default"})
	for _, sc := range classes {
		if got := sc.Parameters["nfs-shareClient"]; got != storageV4.String() {
			t.Errorf("StorageClass %s: nfs-shareClient %q, want the IPv4 storage subnet %s only", sc.Name, got, storageV4)
		}
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return storageNetworkReachable(ctx, t, sim), op.alive()
	}); err != nil {
		t.Fatalf("StorageNetworkReachable never True: %v\n%s", err, op.tail())
	}

	// A claim binds; its share admits exactly the storage subnet.
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, ClusterID: cl.InfraID})
	alive := func() error { return errorsJoin(op.alive(), drv.Alive()) }
	manila, err := testenv.ManilaClientOf(ctx, cloudsFile, cloudName)
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, ctx, sim.Client, "app")
	pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "data", "csi-manila-default", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, sim.Client, pvc, 2*time.Minute, alive)
	share := checkShare(t, ctx, manila, pv, "default", storageV4.String(), 1)
	admitted := shareAdmitsAll(t, ctx, manila, share.ID, workersV4)
	t.Logf("claim data: Bound, share %s, rules %v, exports %v", share.ID, admitted, preferredExport(t, ctx, manila, share.ID))

	// The node plugin with the operator's runtime configuration picks the IPv4 export, the one
	// the rules admit; the workers' kernels mount it.
	vc := nodeStagesOnTheStorageNetwork(t, ctx, sim, pv, storageV4.String(), "")
	workersWriteOneShare(t, ctx, cloud.NFS(t), cl.Clients.Network, []netip.Prefix{storageV4, storageV6}, storagePorts, vc)

	// diagnose, for a pod on an attached worker: every check passes.
	keep, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	go testenv.KeepCSINodes(keep, sim.Client, operator.DefaultNamespace, time.Second)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "app"}, Spec: corev1.PodSpec{
		NodeName:   nodes[0],
		Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
		Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}}
	if _, err := sim.Client.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var report diagnose.Report
	var out []byte
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		out, _ = exec.CommandContext(ctx, cli, "diagnose", "pod/app", "-n", "app", "--os-cloud", cloudName, "-o", "json",
			"--kubeconfig", kubeconfig, "--os-client-config-file", cloudsFile).Output()
		report = diagnose.Report{}
		return json.Unmarshal(out, &report) == nil && report.Count(diagnose.Passed) == len(report.Checks), alive()
	}); err != nil {
		text, _ := exec.CommandContext(ctx, cli, "diagnose", "pod/app", "-n", "app", "--os-cloud", cloudName,
			"--kubeconfig", kubeconfig, "--os-client-config-file", cloudsFile).CombinedOutput()
		t.Fatalf("diagnose pod/app on the director layout never passed every check: %v\n%s", err, text)
	}
	if names := checkNames(&report); !slices.Contains(names, "storage port") {
		t.Errorf("diagnose pod/app made checks %v, want a storage port check", names)
	}
	// storageclasses check reads the same exports and rules, the bracketed one included: the
	// classes and the claim's share are fine.
	if out, err := exec.CommandContext(ctx, cli, "storageclasses", "check", "--kubeconfig", kubeconfig,
		"--os-cloud", cloudName, "--os-client-config-file", cloudsFile).CombinedOutput(); err != nil {
		t.Errorf("storageclasses check on the director layout: %v\n%s", err, out)
	} else {
		t.Logf("$ manila-setup storageclasses check\n%s", out)
	}

	// The same share with its IPv6 export preferred, as a back end may report it (Manila's
	// database: no API sets it): the driver cannot read the bracketed address while it matches
	// exports to the runtime configuration, and fails the stage; diagnose reads its words.
	preferIPv6(t, ctx, cloud, share.ID)
	if pref := preferredExport(t, ctx, manila, share.ID); !strings.HasPrefix(pref, "[") {
		t.Fatalf("the share's preferred export after the change: %s, want the bracketed IPv6 one", pref)
	}
	config := fmt.Sprintf(`{"nfs":{"matchExportLocationAddress":%q}}`, storageV4)
	if vc, err := nodeStage(t, ctx, sim, pv, config); err == nil || !strings.Contains(err.Error(), "in export location path") || diagnose.ExplainMountError(err.Error()) == "" {
		t.Errorf("NodeStage of a share whose IPv6 export is preferred: %v, %v; want the driver's refusal of the bracketed address, which diagnose explains", vc, err)
	} else {
		t.Logf("with the IPv6 export preferred, the driver v1.35.0 refuses the stage: %s\ndiagnose: %s", firstLine(err.Error()), diagnose.ExplainMountError(err.Error()))
	}
	// The operator says so before any pod fails, at its next discovery (every 10 resyncs).
	var condition string
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		status, reason, msg := conditionOf(ctx, t, sim, operator.ConditionStorageNetworkReachable)
		condition = fmt.Sprintf("%s %s: %s", status, reason, msg)
		return status == "False" && reason == "IPv6ExportPreferred", op.alive()
	}); err != nil {
		t.Errorf("StorageNetworkReachable with a share preferring its IPv6 export: %s (%v)", condition, err)
	} else {
		t.Logf("StorageNetworkReachable: %s", condition)
	}
	preferIPv6(t, ctx, cloud, share.ID) // and back

	// The claim goes, and its share with it.
	if err := sim.Client.CoreV1().Pods("app").Delete(ctx, "app", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := sim.Client.CoreV1().PersistentVolumeClaims("app").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := shareGone(ctx, manila, share.ID, 2*time.Minute, alive); err != nil {
		t.Fatal(err)
	}
	t.Logf("director layout journey in %s", time.Since(t0).Round(time.Second))
}

// preferIPv6 swaps which export location of the share Manila marks preferred, in Manila's
// database (the cloud's state folder): a share of the director cloud has two, so the preferred
// IPv4 one becomes the IPv6 one, and back on a second call.
func preferIPv6(t *testing.T, ctx context.Context, cloud *testenv.Cloud, share string) {
	t.Helper()
	db := filepath.Join(filepath.Dir(cloud.CloudsFile), "manila", "manila.sqlite")
	q := fmt.Sprintf(`UPDATE share_instance_export_locations_metadata SET value = CASE value WHEN '1' THEN '0' ELSE '1' END
		WHERE key = 'preferred' AND deleted = 0 AND export_location_id IN (SELECT l.id FROM share_instance_export_locations l
		JOIN share_instances i ON i.id = l.share_instance_id WHERE i.share_id = '%s' AND l.deleted = 0);`, share)
	if out, err := exec.CommandContext(ctx, "sqlite3", "-cmd", ".timeout 30000", db, q).CombinedOutput(); err != nil {
		t.Fatalf("sqlite3 %s: %v\n%s", db, err, out)
	}
}

// firstLine is the first line of s.
func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}
