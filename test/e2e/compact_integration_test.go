//go:build integration

package e2e

import (
	"context"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestCompactJourney: a compact cluster (three schedulable masters, real servers made by the
// real Machine API under the installer's ControlPlaneMachineSet, no workers) gets Manila the way
// a user does it, with the real binaries:
//  1. `controlplane patch --discover --security-group <nfs> --rollout` attaches the network
//     Manila exports on to the set's template and replaces the masters one at a time (the
//     control-plane-machine-set rules of test/machineapi/controlplane), checking the first new
//     one; every master's server then has a port on the storage network;
//  2. the operator (`operator install`, then `operator start`) counts the masters, which run
//     workloads, where the workers of another cluster would be: its classes admit the storage
//     subnet, and StorageNetworkReachable says the set attaches them;
//  3. the real driver provisions a claim whose share's access rules, read back from Manila, admit
//     every master's storage address; deleting the claim deletes the share.
func TestCompactJourney(t *testing.T) {
	cloud := testenv.NewCloudParallel(t)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	project, storageNet, nfsSG := tenantProject(t, cloud, "compact")
	cloudsFile, cloudName := project.CloudsFile, ostest.CloudName

	sim := testenv.NewSimCluster(t, testenv.SimOptions{})
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloudsFile, Cloud: cloudName, Compact: true})
	t.Logf("compact cluster, 3 masters Ready, at %s", time.Since(t0).Round(time.Second))

	// 1. The masters get the storage network.
	cli := buildCLI(t)
	kubeconfig := sim.Kubeconfig
	flags := []string{"--kubeconfig", kubeconfig, "--os-cloud", cloudName, "--os-client-config-file", cloudsFile}
	t1 := time.Now()
	fewestReady := watchReadyMasters(ctx, sim)
	out, err := exec.CommandContext(ctx, cli, append([]string{"controlplane", "patch", "--discover", "--security-group", nfsSG, "--rollout",
		"--poll-interval", "2s", "--timeout", "15m"}, flags...)...).CombinedOutput()
	if fewest := fewestReady(); fewest < 2 {
		t.Errorf("during the masters' replacement only %d master Nodes were Ready at one point, want never fewer than 2", fewest)
	} else {
		t.Logf("during the masters' replacement, at least %d master Nodes were Ready at every look (every 500 ms)", fewest)
	}
	if err != nil || !strings.Contains(string(out), "3/3 masters on the template  every master (3) is on the template and ready") ||
		!strings.Contains(string(out), ": check passed (") {
		t.Fatalf("controlplane patch --rollout: %v\n%s\nmachine-api-openstack log:\n%s", err, out, cl.Log(40))
	}
	t.Logf("masters attached and replaced in %s:\n%s", time.Since(t1).Round(time.Second), out)
	mc := machineclient.NewForConfigOrDie(sim.Config)
	masters, err := mc.MachineV1beta1().Machines(machineapi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: machinectl.RoleLabel + "=master"})
	if err != nil {
		t.Fatal(err)
	}
	var serverIDs []string
	for _, m := range masters.Items {
		if m.DeletionTimestamp != nil {
			continue
		}
		if m.Spec.ProviderID == nil {
			t.Fatalf("master %s has no providerID", m.Name)
		}
		serverIDs = append(serverIDs, strings.TrimPrefix(*m.Spec.ProviderID, machineapi.ProviderIDPrefix))
	}
	osc, err := openstack.Connect(ctx, openstack.Config{Cloud: cloudName, CloudsFile: cloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	storagePorts, err := osc.Ports(ctx, openstack.PortFilter{NetworkIDs: []string{storageNet}, DeviceIDs: serverIDs})
	if err != nil {
		t.Fatal(err)
	}
	var masterStorageIPs []netip.Addr
	for _, p := range storagePorts {
		masterStorageIPs = append(masterStorageIPs, p.FixedIPs...)
	}
	if len(serverIDs) != 3 || len(storagePorts) != 3 || len(masterStorageIPs) != 3 {
		t.Fatalf("%d masters, %d ports with %d addresses on the storage network, want 3 of each: %+v", len(serverIDs), len(storagePorts), len(masterStorageIPs), storagePorts)
	}

	// 2. The operator counts the masters.
	out, err = exec.CommandContext(ctx, cli, append([]string{"operator", "install"}, flags...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	names := operator.NamesFor(platform.ModeDriver)
	if _, err := sim.Client.AppsV1().Deployments(names.Namespace).Patch(ctx, names.Operator, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, cli, kubeconfig, "--mode", string(platform.ModeDriver))
	secretNS := operator.DefaultNamespace
	classes := waitStorageClasses(t, ctx, sim, op, secretNS, cloud.Seed.ShareTypes, []string{names.StorageClassPrefix + "cephfs-fast", names.StorageClassPrefix + "default"})
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	for _, sc := range classes {
		if sc.Parameters["nfs-shareClient"] != storageSubnet {
			t.Errorf("StorageClass %s: nfs-shareClient %q, want the storage subnet %s, where the masters mount from", sc.Name, sc.Parameters["nfs-shareClient"], storageSubnet)
		}
	}
	var condStatus operatorv1.ConditionStatus
	var msg string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		condStatus, msg = driverCondition(ctx, sim, operator.ConditionStorageNetworkReachable)
		return condStatus == operatorv1.ConditionTrue && strings.Contains(msg, "the ControlPlaneMachineSet cluster attaches the masters, which run workloads") &&
			strings.Contains(msg, "all 3 workers have an address in the storage subnets"), nil
	}); err != nil {
		t.Fatalf("StorageNetworkReachable never said that the set attaches the three masters: %v\n%s %s\n%s", err, condStatus, msg, op.tail())
	}

	// 3. A claim: its share admits the masters' storage addresses.
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, ClusterID: cl.InfraID})
	manila, err := testenv.ManilaClientOf(ctx, cloudsFile, cloudName)
	if err != nil {
		t.Fatal(err)
	}
	alive := func() error {
		if err := op.alive(); err != nil {
			return err
		}
		return drv.Alive()
	}
	createNamespace(t, ctx, sim.Client, "app")
	class := names.StorageClassPrefix + "default"
	pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "data", class, "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, sim.Client, pvc, 2*time.Minute, alive)
	share := checkShare(t, ctx, manila, pv, "default", storageSubnet, 1).ID
	admitted := shareAdmitsAll(t, ctx, manila, share, masterStorageIPs)
	if err := sim.Client.CoreV1().PersistentVolumeClaims("app").Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := shareGone(ctx, manila, share, 2*time.Minute, alive); err != nil {
		t.Fatal(err)
	}
	t.Logf("compact journey %s; the share's rules %v admit the masters' storage addresses %v", time.Since(t0).Round(time.Second), admitted, masterStorageIPs)
}

// driverCondition is the message of a condition of the ClusterCSIDriver, with its status.
func driverCondition(ctx context.Context, sim *testenv.SimCluster, typ string) (operatorv1.ConditionStatus, string) {
	d, err := operatorclient.NewForConfigOrDie(sim.Config).OperatorV1().ClusterCSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{})
	if err != nil {
		return "", err.Error()
	}
	for _, c := range d.Status.Conditions {
		if c.Type == typ {
			return c.Status, c.Message
		}
	}
	return "", "no condition " + typ
}

// watchReadyMasters counts the Ready master Nodes every 500 ms until the returned function is
// called, which returns the fewest seen (-1 if no look succeeded).
func watchReadyMasters(ctx context.Context, sim *testenv.SimCluster) func() int {
	ctx, stop := context.WithCancel(ctx)
	fewest := make(chan int, 1)
	go func() {
		low := -1
		_ = wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			nodes, err := sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/master"})
			if err != nil {
				return false, nil
			}
			ready := 0
			for i := range nodes.Items {
				if testenv.NodeReady(&nodes.Items[i]) {
					ready++
				}
			}
			if low < 0 || ready < low {
				low = ready
			}
			return false, nil
		})
		fewest <- low
	}()
	return func() int {
		stop()
		return <-fewest
	}
}
