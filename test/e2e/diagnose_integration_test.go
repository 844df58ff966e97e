//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/diagnose"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestDiagnose runs `manila-setup diagnose` on the four cases a user brings it, on a cluster whose
// workers are real servers made by the real Machine API, with the operator (the real binary),
// the real driver's controller provisioning real shares in the loopback Manila, and kwok nodes
// whose CSINodes list the node plugins once they run, as a kubelet's do:
//
//   - a healthy pod, on a worker attached to the storage network: every check passes, exit 0;
//   - a pod on a worker that is not attached: the storage port check fails and names the
//     MachineSet to patch;
//   - the same healthy pod once its share lost its access rule: the access rule check fails and
//     gives the openstack command that adds it back;
//   - a claim on a class naming a share type Manila does not have: the claim and the class checks
//     fail, the class one naming the types Manila offers.
func TestDiagnose(t *testing.T) {
	cloud := testenv.NewCloudParallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	project, storageNet, nfsSG := tenantProject(t, cloud, "diag")
	cloudsFile, cloudName := project.CloudsFile, ostest.CloudName
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	cl := machineapi.NewCluster(t, ctx, sim, machineapi.ClusterOptions{CloudsFile: cloudsFile, Cloud: cloudName, Workers: 1})
	cli := buildCLI(t)
	kubeconfig := sim.Kubeconfig
	run := func(want int, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, cli, append(args, "--kubeconfig", kubeconfig, "--os-client-config-file", cloudsFile)...)
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != want {
			t.Fatalf("manila-setup %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out.String(), errOut.String())
		}
		return out.String()
	}

	// A second worker MachineSet, attached: made from the installer's, patched by the CLI
	// before it has a Machine, then scaled to one.
	mc := machineclient.NewForConfigOrDie(sim.Config)
	plain, err := mc.MachineV1beta1().MachineSets(machineapi.Namespace).Get(ctx, cl.MachineSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	attached := plain.DeepCopy()
	attached.ObjectMeta = metav1.ObjectMeta{Name: cl.InfraID + "-worker-storage", Namespace: plain.Namespace, Labels: plain.Labels}
	attached.Spec.Replicas = new(int32)
	attached.Spec.Selector.MatchLabels[machinectl.MachineSetLabel] = attached.Name
	attached.Spec.Template.ObjectMeta.Labels[machinectl.MachineSetLabel] = attached.Name
	if _, err := mc.MachineV1beta1().MachineSets(machineapi.Namespace).Create(ctx, attached, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	run(0, "machinesets", "patch", "--name", attached.Name, "--network", storageNet, "--security-group", nfsSG, "--os-cloud", cloudName)
	if _, err := mc.MachineV1beta1().MachineSets(machineapi.Namespace).Patch(ctx, attached.Name, types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitReady(ctx, attached.Name, 1, 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	nodeOf := func(set string) string {
		live, err := machinectl.LiveMachines(ctx, mc, machinectl.MachineSetLabel+"="+set)
		if err != nil || len(live) != 1 || live[0].Status.NodeRef == nil {
			t.Fatalf("MachineSet %s: %v, %+v", set, err, live)
		}
		return live[0].Status.NodeRef.Name
	}
	onStorage, offStorage := nodeOf(attached.Name), nodeOf(cl.MachineSet)

	// The operator and the driver.
	if out, err := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig, "--os-cloud", cloudName, "--os-client-config-file", cloudsFile).CombinedOutput(); err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	if _, err := sim.Client.AppsV1().Deployments(operator.DefaultNamespace).Patch(ctx, operator.OperatorName, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	op := startOperator(t, cli, kubeconfig)
	waitStorageClasses(t, ctx, sim, op, operator.DefaultNamespace, cloud.Seed.ShareTypes, []string{"csi-manila-cephfs-fast", "csi-manila-default"})
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: kubeconfig, ClusterID: cl.InfraID})
	alive := func() error { return errorsJoin(op.alive(), drv.Alive()) }
	keep, stopKeeping := context.WithCancel(ctx)
	defer stopKeeping()
	go testenv.KeepCSINodes(keep, sim.Client, operator.DefaultNamespace, time.Second)

	createNamespace(t, ctx, sim.Client, "app")
	pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "data", "csi-manila-default", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, sim.Client, pvc, 2*time.Minute, alive)
	share := pv.Spec.CSI.VolumeAttributes["shareID"]
	for name, node := range map[string]string{"healthy": onStorage, "stranded": offStorage} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "app"}, Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1", VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}},
			Volumes:    []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		}}
		if _, err := sim.Client.CoreV1().Pods("app").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	diagnoseJSON := func(want int, target string) *diagnose.Report {
		t.Helper()
		var r diagnose.Report
		if err := json.Unmarshal([]byte(run(want, "diagnose", target, "-n", "app", "--os-cloud", cloudName, "-o", "json")), &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}

	// 1. Healthy: every check passes, once the pod runs and the node plugins registered.
	var healthy *diagnose.Report
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var r diagnose.Report
		out, _ := exec.CommandContext(ctx, cli, "diagnose", "pod/healthy", "-n", "app", "--os-cloud", cloudName, "-o", "json",
			"--kubeconfig", kubeconfig, "--os-client-config-file", cloudsFile).Output()
		if json.Unmarshal(out, &r) != nil {
			return false, nil
		}
		healthy = &r
		return r.Count(diagnose.Passed) == len(r.Checks), nil
	})
	if err != nil {
		t.Fatalf("diagnose pod/healthy never passed every check: %v\n%+v", err, healthy)
	}
	wantChecks := []string{"pod", "claim", "class", "share", "access rule", "nfs-shareClient", "node", "storage port", "driver"}
	if got := checkNames(healthy); strings.Join(got, ",") != strings.Join(wantChecks, ",") {
		t.Errorf("diagnose pod/healthy made checks %v, want %v", got, wantChecks)
	}
	text := run(0, "diagnose", "pod/healthy", "-n", "app", "--os-cloud", cloudName)
	t.Logf("$ manila-setup diagnose pod/healthy\n%s", text)
	if !strings.Contains(text, "9 checks: 9 passed, 0 failed") || !strings.Contains(text, "storage port") {
		t.Errorf("diagnose pod/healthy:\n%s", text)
	}

	// 2. A worker not on the storage network.
	r := diagnoseJSON(1, "pod/stranded")
	port := find(t, r, "storage port")
	if port.Status != diagnose.Failed || !strings.Contains(port.Evidence, "no port on network") ||
		port.Fix != fmt.Sprintf("manila-setup machinesets patch --network %s --name %s --rollout", storageNet, cl.MachineSet) {
		t.Errorf("diagnose pod/stranded, storage port: %+v", port)
	}
	t.Logf("$ manila-setup diagnose pod/stranded\n%s", run(1, "diagnose", "pod/stranded", "-n", "app", "--os-cloud", cloudName))

	// 3. The share loses the rule that admits the attached worker.
	manila, err := testenv.ManilaClientOf(ctx, cloudsFile, cloudName)
	if err != nil {
		t.Fatal(err)
	}
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	rules, err := shareaccessrules.List(ctx, manila, share).Extract()
	if err != nil {
		t.Fatal(err)
	}
	denied := false
	for _, rule := range rules {
		if rule.AccessTo == storageSubnet {
			if err := shares.RevokeAccess(ctx, manila, share, shares.RevokeAccessOpts{AccessID: rule.ID}).ExtractErr(); err != nil {
				t.Fatal(err)
			}
			denied = true
		}
	}
	if !denied {
		t.Fatalf("share %s has no rule for %s: %+v", share, storageSubnet, rules)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		rules, err := shareaccessrules.List(ctx, manila, share).Extract()
		if err != nil {
			return false, err
		}
		for _, rule := range rules {
			if rule.AccessTo == storageSubnet {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r = diagnoseJSON(1, "pod/healthy")
	access := find(t, r, "access rule")
	if access.Status != diagnose.Failed || !strings.Contains(access.Evidence, "no ip rule admits") ||
		access.Fix != fmt.Sprintf("openstack --os-cloud %s share access create %s ip %s --access-level rw", cloudName, share, storageSubnet) {
		t.Errorf("diagnose pod/healthy without its rule, access rule: %+v", access)
	}
	if r.Count(diagnose.Failed) != 1 {
		t.Errorf("diagnose pod/healthy without its rule: %d checks failed, want only the access rule: %+v", r.Count(diagnose.Failed), r.Checks)
	}

	// 4. A class of a share type Manila does not have.
	sc, err := sim.Client.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gold := sc.DeepCopy()
	gold.ObjectMeta = metav1.ObjectMeta{Name: "manila-gold"}
	gold.Parameters["type"] = "gold"
	if _, err := sim.Client.StorageV1().StorageClasses().Create(ctx, gold, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "gold-data", "manila-gold", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The provisioner tries and fails: its warning is the claim's evidence.
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return strings.Contains(events(ctx, sim.Client, "app", "gold-data"), "ProvisioningFailed"), alive()
	})
	if err != nil {
		t.Fatalf("no ProvisioningFailed on claim gold-data: %v\n%s", err, events(ctx, sim.Client, "app", "gold-data"))
	}
	r = diagnoseJSON(1, "pvc/gold-data")
	claim, class := find(t, r, "claim"), find(t, r, "class")
	if claim.Status != diagnose.Failed || !strings.Contains(claim.Evidence, "Pending (class manila-gold); newest warning: ProvisioningFailed") {
		t.Errorf("diagnose pvc/gold-data, claim: %+v", claim)
	}
	if class.Status != diagnose.Failed || !strings.Contains(class.Evidence, `share type "gold" is not one Manila offers to the project (it offers cephfs-fast, default`) ||
		!strings.Contains(class.Fix, "share type list") {
		t.Errorf("diagnose pvc/gold-data, class: %+v", class)
	}
	t.Logf("$ manila-setup diagnose pvc/gold-data\n%s", run(1, "diagnose", "pvc/gold-data", "-n", "app", "--os-cloud", cloudName))

	// Without a cloud: what the cluster says, and what was not checked.
	text = run(0, "diagnose", "pod/healthy", "-n", "app")
	if !strings.Contains(text, "not checked") || !strings.Contains(text, "give --os-cloud") {
		t.Errorf("diagnose without a cloud:\n%s", text)
	}

	// must-gather of that cluster: what the issue lists, and no secret in any encoding.
	gathered := filepath.Join(t.TempDir(), "must-gather")
	t.Logf("$ manila-setup must-gather --os-cloud %s\n%s", cloudName, run(0, "must-gather", "--dest-dir", gathered, "--os-cloud", cloudName))
	for _, f := range []string{
		"cluster-scoped/clustercsidrivers/manila.csi.openstack.org.yaml",
		"cluster-scoped/storageclasses/csi-manila-default.yaml",
		"cluster-scoped/storageclasses/manila-gold.yaml",
		"cluster-scoped/persistentvolumes/" + pv.Name + ".yaml",
		"cluster-scoped/csinodes/" + onStorage + ".yaml",
		"namespaces/app/persistentvolumeclaims/data.yaml",
		"namespaces/openshift-machine-api/machine.openshift.io/machinesets/" + attached.Name + ".yaml",
		"namespaces/" + operator.DefaultNamespace + "/apps/daemonsets/" + operator.NodeDaemonSetName + ".yaml",
		"namespaces/" + operator.DefaultNamespace + "/apps/deployments/" + operator.OperatorName + ".yaml",
		"namespaces/" + operator.DefaultNamespace + "/core/events.yaml",
		"cloud/shares/" + share + ".yaml",
	} {
		if _, err := os.Stat(filepath.Join(gathered, f)); err != nil {
			t.Errorf("must-gather: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(gathered, "namespaces/openshift-machine-api/machine.openshift.io/machinesets/"+attached.Name+".yaml")); err != nil || !strings.Contains(string(b), "manila-setup.io/") {
		t.Errorf("must-gather: MachineSet %s without its attachment record (%v)", attached.Name, err)
	}
	if files := noSecretIn(t, gathered, project.Password); files < 20 {
		t.Errorf("must-gather: %d files", files)
	}

	// The claim goes, and the driver deletes its share, before the project is torn down.
	for _, pod := range []string{"healthy", "stranded"} {
		if err := sim.Client.CoreV1().Pods("app").Delete(ctx, pod, *metav1.NewDeleteOptions(0)); err != nil {
			t.Fatal(err)
		}
	}
	if err := sim.Client.CoreV1().PersistentVolumeClaims("app").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := shareGone(ctx, manila, share, 2*time.Minute, alive); err != nil {
		t.Fatal(err)
	}
}

func checkNames(r *diagnose.Report) []string {
	var names []string
	for _, c := range r.Checks {
		names = append(names, c.Name)
	}
	return names
}

func find(t *testing.T, r *diagnose.Report, name string) diagnose.Check {
	t.Helper()
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no %s check in %+v", name, r.Checks)
	return diagnose.Check{}
}

func errorsJoin(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
