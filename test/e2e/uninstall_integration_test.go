//go:build integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestUninstall runs `manila-setup operator uninstall` on clusters where `operator install`
// ran and the operator deployed what it deploys: in driver mode everything ours goes, the
// operator first, and nothing else is written; with a volume of the driver it refuses, then
// --keep-driver removes only the operator and --force the rest but the StorageClass the volume
// names; beside the platform's Manila operator only the companion's objects go; on a cluster
// that only looks like plain Kubernetes, with the platform's operator Deployment there, nothing
// is written at all. The audit log is the witness: every write of the CLI is a delete of an
// object labelled ours.
func TestUninstall(t *testing.T) {
	cloud := testenv.NewCloud(t)
	cli := buildCLI(t)

	t.Run("driver mode", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		sim, op := installedDriver(t, ctx, cli, cloud)
		// What is not ours, including a StorageClass of the Manila driver made by hand.
		userClass := userObjects(t, ctx, sim)
		ours := labelledOurs(t, ctx, sim.Config)
		t.Logf("%d objects labelled manila-setup's after install and the operator's first syncs", len(ours))
		before := time.Now()

		// --dry-run: the plan, every delete a server-side dry run, nothing written.
		code, out, _ := runUninstall(t, ctx, cli, sim.Kubeconfig, "--dry-run")
		t.Logf("$ manila-setup operator uninstall --dry-run\n%s", out)
		if code != 0 || !strings.Contains(out, "deployment/"+operator.DefaultNamespace+"/"+operator.OperatorName+": would be deleted (dry run)") ||
			!strings.Contains(out, "would be deleted (dry run: nothing was)") {
			t.Errorf("--dry-run: exit %d:\n%s", code, out)
		}
		if w := cliWrites(t, sim.APIServer, before); len(w) != 0 {
			t.Errorf("--dry-run wrote: %v", w)
		}
		if err := op.alive(); err != nil {
			t.Fatal(err)
		}
		if got := labelledOurs(t, ctx, sim.Config); len(got) != len(ours) {
			t.Errorf("after --dry-run %d objects labelled ours, before %d", len(got), len(ours))
		}

		// The real run, -o json: the operator stops when its Deployment goes (its pod would).
		endWatch := stopOperatorWhenDeleted(ctx, sim, op, operator.DefaultNamespace, operator.OperatorName)
		t0 := time.Now()
		code, stdout, stderr := runUninstall(t, ctx, cli, sim.Kubeconfig, "-o", "json")
		t.Logf("$ manila-setup operator uninstall -o json (%s)\n%s%s", time.Since(t0).Round(time.Millisecond), stdout, stderr)
		if code != 0 {
			t.Fatalf("uninstall: exit %d", code)
		}
		endWatch()
		var report deploy.UninstallReport
		if err := json.Unmarshal([]byte(stdout), &report); err != nil {
			t.Fatalf("-o json: %v", err)
		}
		if report.Mode != platform.ModeDriver || report.Objects[0].Name != operator.OperatorName || report.Objects[0].Kind != "Deployment" ||
			report.Deleted == 0 || report.WorkloadsGoneAfter == "" {
			t.Errorf("report: mode %s, first %s, %d deleted, workloads gone after %q", report.Mode, report.Objects[0].Key(), report.Deleted, report.WorkloadsGoneAfter)
		}
		// The order: the operator, the workloads, the rest.
		first := map[string]int{}
		for i, p := range report.Objects {
			if _, ok := first[p.Kind]; !ok {
				first[p.Kind] = i
			}
		}
		if first["DaemonSet"] < first["Deployment"] || first["StorageClass"] < first["DaemonSet"] || first["Namespace"] < first["StorageClass"] {
			t.Errorf("delete order: %v", first)
		}
		wrote := cliWrites(t, sim.APIServer, t0)
		checkOnlyOursDeleted(t, wrote, ours)
		if len(wrote) != report.Deleted {
			t.Errorf("%d writes in the audit log, the report says %d deleted", len(wrote), report.Deleted)
		}
		waitNoneLabelledOurs(t, ctx, sim.Config)
		// The CRD of the ClusterCSIDriver is OpenShift's here (the apiserver serves it from
		// the start): install used it as it was, and uninstall leaves it.
		if !slices.ContainsFunc(report.Objects, func(p deploy.PlannedObject) bool {
			return p.Kind == "CustomResourceDefinition" && p.Action == deploy.ActionLeave
		}) {
			t.Errorf("the CRD clustercsidrivers.operator.openshift.io is not listed as left: %+v", report.Objects)
		}
		userClass.unchanged(t, ctx, sim)
	})

	t.Run("driver mode with a volume", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		sim, op := installedDriver(t, ctx, cli, cloud)
		userClass := userObjects(t, ctx, sim)
		pv := boundVolume(t, ctx, sim, operator.StorageClassPrefix+"default")
		ours := labelledOurs(t, ctx, sim.Config)
		t0 := time.Now()

		// Refused: exit 1, naming the volume, nothing written.
		code, out, _ := runUninstall(t, ctx, cli, sim.Kubeconfig)
		t.Logf("$ manila-setup operator uninstall\n%s", out)
		if code != 1 || !strings.Contains(out, "nothing deleted") || !strings.Contains(out, pv) || !strings.Contains(out, "--keep-driver") {
			t.Errorf("with a volume of the driver: exit %d, want 1 naming %s:\n%s", code, pv, out)
		}
		if w := cliWrites(t, sim.APIServer, t0); len(w) != 0 {
			t.Errorf("a refused uninstall wrote: %v", w)
		}

		// --keep-driver: the operator goes, the driver stays, unmanaged.
		endWatch := stopOperatorWhenDeleted(ctx, sim, op, operator.DefaultNamespace, operator.OperatorName)
		code, out, _ = runUninstall(t, ctx, cli, sim.Kubeconfig, "--keep-driver")
		t.Logf("$ manila-setup operator uninstall --keep-driver\n%s", out)
		endWatch()
		if code != 0 || !strings.Contains(out, "The driver runs on, unmanaged: nothing updates or repairs its") {
			t.Errorf("--keep-driver: exit %d:\n%s", code, out)
		}
		kc := sim.Client
		if _, err := kc.AppsV1().Deployments(operator.DefaultNamespace).Get(ctx, operator.OperatorName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the operator's Deployment after --keep-driver: %v", err)
		}
		if _, err := kc.CoreV1().ServiceAccounts(operator.DefaultNamespace).Get(ctx, operator.OperatorName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the operator's ServiceAccount after --keep-driver: %v", err)
		}
		if _, err := kc.RbacV1().ClusterRoles().Get(ctx, operator.OperatorName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the operator's ClusterRole after --keep-driver: %v", err)
		}
		for what, get := range map[string]func() error{
			"Deployment " + operator.ControllerDeploymentName: func() error {
				_, err := kc.AppsV1().Deployments(operator.DefaultNamespace).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{})
				return err
			},
			"DaemonSet " + operator.NodeDaemonSetName: func() error {
				_, err := kc.AppsV1().DaemonSets(operator.DefaultNamespace).Get(ctx, operator.NodeDaemonSetName, metav1.GetOptions{})
				return err
			},
			"Secret " + operator.DriverSecretName: func() error {
				_, err := kc.CoreV1().Secrets(operator.DefaultNamespace).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
				return err
			},
			"StorageClass csi-manila-cephfs-fast": func() error {
				_, err := kc.StorageV1().StorageClasses().Get(ctx, "csi-manila-cephfs-fast", metav1.GetOptions{})
				return err
			},
		} {
			if err := get(); err != nil {
				t.Errorf("the driver's %s after --keep-driver: %v", what, err)
			}
		}

		// --force: the driver goes; the StorageClass the volume names stays, and the output says
		// which volume lost its driver.
		code, out, _ = runUninstall(t, ctx, cli, sim.Kubeconfig, "--force")
		t.Logf("$ manila-setup operator uninstall --force\n%s", out)
		if code != 0 || !strings.Contains(out, "lose their driver (--force): "+pv) ||
			!strings.Contains(out, "storageclass/csi-manila-default: kept: PersistentVolume(s) "+pv+" name it") {
			t.Errorf("--force: exit %d:\n%s", code, out)
		}
		if _, err := kc.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{}); err != nil {
			t.Errorf("the StorageClass the volume names: %v", err)
		}
		for _, name := range []string{"csi-manila-cephfs-fast"} {
			if _, err := kc.StorageV1().StorageClasses().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("StorageClass %s after --force: %v", name, err)
			}
		}
		if _, err := kc.AppsV1().DaemonSets(operator.DefaultNamespace).Get(ctx, operator.NodeDaemonSetName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the node DaemonSet after --force: %v", err)
		}

		// The volume gone, the last StorageClass goes too.
		if err := kc.CoreV1().PersistentVolumeClaims("app").Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := kc.CoreV1().PersistentVolumes().Delete(ctx, pv, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := waitGone(ctx, time.Minute, func() error { return nil }, func(ctx context.Context) error {
			_, err := kc.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{})
			return err
		}); err != nil {
			t.Fatalf("PersistentVolume %s not deleted: %v", pv, err)
		}
		code, out, _ = runUninstall(t, ctx, cli, sim.Kubeconfig)
		t.Logf("$ manila-setup operator uninstall (no volume left)\n%s", out)
		if code != 0 || !strings.Contains(out, "storageclass/csi-manila-default: deleted") {
			t.Errorf("uninstall after the volume went: exit %d:\n%s", code, out)
		}
		checkOnlyOursDeleted(t, cliWrites(t, sim.APIServer, t0), ours)
		waitNoneLabelledOurs(t, ctx, sim.Config)
		userClass.unchanged(t, ctx, sim)
	})

	t.Run("companion beside the platform", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
		cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-unin3", Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Stop)
		if err := testenv.InstallPlatform(ctx, sim.Config, testenv.PlatformOptions{}); err != nil {
			t.Fatal(err)
		}
		writePlatformDriverSecret(t, ctx, sim, cloud.CloudsFile, testenv.CloudDemo)
		names := operator.NamesFor(platform.ModeCompanion)
		install(t, ctx, cli, cloud, sim.Kubeconfig)
		scaleToZero(t, ctx, sim, names.Namespace, names.Operator)
		op := startOperator(t, cli, sim.Kubeconfig, "--mode", string(platform.ModeCompanion))
		waitStorageClasses(t, ctx, sim, op, operator.PlatformDriverNamespace, cloud.Seed.ShareTypes, []string{names.StorageClassPrefix + "cephfs-fast", names.StorageClassPrefix + "default"})
		// A volume of the platform's driver on the companion's class: the driver is not the
		// companion's, so nothing is refused, and the class it names stays.
		pv := boundVolume(t, ctx, sim, names.StorageClassPrefix+"default")
		platformObjs := snapshotPlatform(t, ctx, sim.Config)
		ours := labelledOurs(t, ctx, sim.Config)
		endWatch := stopOperatorWhenDeleted(ctx, sim, op, names.Namespace, names.Operator)
		t0 := time.Now()
		code, out, _ := runUninstall(t, ctx, cli, sim.Kubeconfig)
		t.Logf("$ manila-setup operator uninstall (companion, %s)\n%s", time.Since(t0).Round(time.Millisecond), out)
		endWatch()
		if code != 0 || !strings.Contains(out, "deployment/"+names.Namespace+"/"+names.Operator+": deleted") ||
			!strings.Contains(out, "manilacompanion/cluster: deleted") || !strings.Contains(out, "namespace/"+names.Namespace+": deleted") ||
			!strings.Contains(out, "storageclass/"+names.StorageClassPrefix+"default: kept: PersistentVolume(s) "+pv+" name it") {
			t.Errorf("companion uninstall: exit %d:\n%s", code, out)
		}
		wrote := cliWrites(t, sim.APIServer, t0)
		checkOnlyOursDeleted(t, wrote, ours)
		for _, w := range wrote {
			if w.Namespace == platform.PlatformNamespace || w.Namespace == operator.PlatformDriverNamespace || strings.HasPrefix(w.Resource, "clustercsidrivers") ||
				strings.HasPrefix(w.Resource, "csidrivers") || (w.Resource == "storageclasses" && strings.HasPrefix(w.Name, operator.StorageClassPrefix)) {
				t.Errorf("the companion's uninstall wrote an object of the platform's: %s", w)
			}
		}
		platformObjs.unchanged(t, ctx, sim.Config)
		if left := waitLabelledOurs(t, ctx, sim.Config, 1); len(left) != 1 || left[0] != "storageclasses//"+names.StorageClassPrefix+"default" {
			t.Errorf("after the companion's uninstall, labelled ours: %v, want only the class the volume names", left)
		}
	})

	t.Run("no Infrastructure, the platform's operator there", func(t *testing.T) {
		// As TestInstallKnowsThePlatform's defensive case: the mode reads as plain Kubernetes
		// (driver), and the platform's Deployment, applied by cluster-storage-operator, has the
		// name driver mode uses. Uninstall judges each object: none is ours, none is written.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		api := testenv.NewAPIServer(t)
		if err := testenv.InstallPlatform(ctx, api.Config, testenv.PlatformOptions{}); err != nil {
			t.Fatal(err)
		}
		kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		platformObjs := snapshotPlatform(t, ctx, api.Config)
		for _, args := range [][]string{nil, {"--force"}, {"--dry-run"}} {
			code, out, _ := runUninstall(t, ctx, cli, kubeconfig, args...)
			t.Logf("$ manila-setup operator uninstall %s\n%s", strings.Join(args, " "), out)
			want := "deployment/" + platform.PlatformNamespace + "/" + platform.PlatformOperatorName + `: left: not ours (managers "cluster-storage-operator")`
			if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "0 deleted") && !strings.Contains(out, "0 would be deleted") {
				t.Errorf("uninstall %v: exit %d, want 0 and %q:\n%s", args, code, want, out)
			}
		}
		if w, err := api.Writes(func(w testenv.AuditWrite) bool { return strings.HasPrefix(w.UserAgent, "manila-setup/") }); err != nil || len(w) != 0 {
			t.Errorf("uninstall wrote to the platform's cluster: %v %v", w, err)
		}
		platformObjs.unchanged(t, ctx, api.Config)
	})
}

// installedDriver is a sim cluster shaped like OpenShift on OpenStack without the platform's
// Manila operator, with `operator install` done and the operator (run here) having deployed the
// driver and its StorageClasses.
func installedDriver(t *testing.T, ctx context.Context, cli string, cloud *testenv.Cloud) (*testenv.SimCluster, *operatorProcess) {
	t.Helper()
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-unin", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	install(t, ctx, cli, cloud, sim.Kubeconfig)
	scaleToZero(t, ctx, sim, operator.DefaultNamespace, operator.OperatorName)
	op := startOperator(t, cli, sim.Kubeconfig, "--mode", string(platform.ModeDriver))
	waitStorageClasses(t, ctx, sim, op, operator.DefaultNamespace, cloud.Seed.ShareTypes, []string{"csi-manila-cephfs-fast", "csi-manila-default"})
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		if _, err := sim.Client.AppsV1().Deployments(operator.DefaultNamespace).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		for _, name := range []string{operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName} {
			if _, err := sim.Client.AppsV1().DaemonSets(operator.DefaultNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		_, err := sim.Client.StorageV1().CSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("the driver's workloads and CSIDriver: %v\n%s", err, op.tail())
	}
	return sim, op
}

func install(t *testing.T, ctx context.Context, cli string, cloud *testenv.Cloud, kubeconfig string) {
	t.Helper()
	out, err := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig,
		"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile).CombinedOutput()
	if err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
}

// scaleToZero: the operator runs in the test; the Deployment's kwok pod would run nothing. A
// patch, not an update: the deployment controller writes the object at the same time.
func scaleToZero(t *testing.T, ctx context.Context, sim *testenv.SimCluster, namespace, name string) {
	t.Helper()
	if _, err := sim.Client.AppsV1().Deployments(namespace).Patch(ctx, name, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// runUninstall runs the CLI's uninstall and returns its exit code, its output (both streams)
// and its standard error apart (for -o json, whose standard output is the report).
func runUninstall(t *testing.T, ctx context.Context, cli, kubeconfig string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, cli, append([]string{"operator", "uninstall", "--kubeconfig", kubeconfig, "--timeout", "2m"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), stdout.String() + stderr.String(), stderr.String()
	case err != nil:
		t.Fatal(err)
	}
	if slices.Contains(args, "json") {
		return 0, stdout.String(), stderr.String()
	}
	return 0, stdout.String() + stderr.String(), stderr.String()
}

// stopOperatorWhenDeleted kills the operator running in the test the moment its Deployment is
// being deleted, as the kubelet would stop its pod. The function it returns ends the watch and
// returns once the operator has exited, or at once when its Deployment was not deleted.
func stopOperatorWhenDeleted(ctx context.Context, sim *testenv.SimCluster, op *operatorProcess, namespace, name string) func() {
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		err := wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			d, err := sim.Client.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
			return apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil), nil
		})
		if err != nil {
			return
		}
		_ = op.cmd.Process.Signal(syscall.SIGKILL)
		<-op.done
	}()
	return func() {
		cancel()
		<-stopped
	}
}

// boundVolume makes a PersistentVolume of the Manila driver on class, bound to claim app/data.
func boundVolume(t *testing.T, ctx context.Context, sim *testenv.SimCluster, class string) string {
	t.Helper()
	createNamespace(t, ctx, sim.Client, "app")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-manila-data"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			ClaimRef:                      &corev1.ObjectReference{Namespace: "app", Name: "data"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: operator.DriverName, VolumeHandle: "0e2d6a3b-share-of-the-test"}},
		},
	}
	if _, err := sim.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := rwxClaim("app", "data", class, "1Gi")
	pvc.Spec.VolumeName = pv.Name
	if _, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBound(t, ctx, sim.Client, pvc, time.Minute, func() error { return nil })
	return pv.Name
}

// cliWrites are the writes of the manila-setup CLI since t0 (the operator's user agent is
// manila-setup-operator/...: not these).
func cliWrites(t *testing.T, api *testenv.APIServer, t0 time.Time) []testenv.AuditWrite {
	t.Helper()
	w, err := api.Writes(func(w testenv.AuditWrite) bool {
		return strings.HasPrefix(w.UserAgent, "manila-setup/") && !w.Time.Before(t0)
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// checkOnlyOursDeleted: every write is a delete of an object that carried our label.
func checkOnlyOursDeleted(t *testing.T, writes []testenv.AuditWrite, ours map[string]bool) {
	t.Helper()
	for _, w := range writes {
		ns := w.Namespace
		if w.Resource == "namespaces" {
			ns = "" // the audit log gives a namespace its own name as namespace
		}
		if w.Verb != "delete" || !ours[w.Resource+"/"+ns+"/"+w.Name] {
			t.Errorf("uninstall wrote what is not labelled ours, or not by a delete: %s", w)
		}
	}
}

// ourSelector selects what install and the operator label.
const ourSelector = operator.LabelManagedBy + " in (manila-setup," + operator.ManagedByValue + ")"

// labelledOurs lists every object of every kind the cluster serves that carries our label, as
// resource/namespace/name: the test's own account of what is ours, not uninstall's.
func labelledOurs(t *testing.T, ctx context.Context, cfg *rest.Config) map[string]bool {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := dc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range l.APIResources {
			// Events are about objects; Endpoints and ComponentStatuses only warn of deprecation.
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || slices.Contains([]string{"events", "endpoints", "componentstatuses"}, r.Name) {
				continue
			}
			list, err := dyn.Resource(gv.WithResource(r.Name)).List(ctx, metav1.ListOptions{LabelSelector: ourSelector})
			if err != nil {
				continue // a kind that cannot be listed here
			}
			for _, o := range list.Items {
				out[r.Name+"/"+o.GetNamespace()+"/"+o.GetName()] = true
			}
		}
	}
	return out
}

// waitNoneLabelledOurs waits until nothing labelled ours is left (a namespace takes a moment).
func waitNoneLabelledOurs(t *testing.T, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	if left := waitLabelledOurs(t, ctx, cfg, 0); len(left) != 0 {
		t.Errorf("labelled ours after uninstall: %v", left)
	}
}

// waitLabelledOurs waits (a minute at most) until n objects labelled ours are left and returns them.
func waitLabelledOurs(t *testing.T, ctx context.Context, cfg *rest.Config, n int) []string {
	t.Helper()
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		left = left[:0]
		for k := range labelledOurs(t, ctx, cfg) {
			left = append(left, k)
		}
		return len(left) <= n, nil
	})
	sort.Strings(left)
	return left
}

// userState is what a user made that is not ours: a StorageClass of the Manila driver and a
// ClusterRole, made by hand.
type userState struct{ class, role string }

func userObjects(t *testing.T, ctx context.Context, sim *testenv.SimCluster) userState {
	t.Helper()
	sc, err := sim.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "user-manila"},
		Provisioner: operator.DriverName, Parameters: map[string]string{"type": "default"}}, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	role, err := sim.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "manila-csi-driver-operator-readonly"}},
		metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	return userState{class: sc.ResourceVersion, role: role.ResourceVersion}
}

func (u userState) unchanged(t *testing.T, ctx context.Context, sim *testenv.SimCluster) {
	t.Helper()
	sc, err := sim.Client.StorageV1().StorageClasses().Get(ctx, "user-manila", metav1.GetOptions{})
	if err != nil || sc.ResourceVersion != u.class {
		t.Errorf("the user's StorageClass user-manila was written or deleted: %v", err)
	}
	role, err := sim.Client.RbacV1().ClusterRoles().Get(ctx, "manila-csi-driver-operator-readonly", metav1.GetOptions{})
	if err != nil || role.ResourceVersion != u.role {
		t.Errorf("the user's ClusterRole was written or deleted: %v", err)
	}
}

// platformObjects are the objects testenv.InstallPlatform writes as the platform's components.
var platformObjects = []struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}{
	{schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, platform.PlatformNamespace, platform.PlatformOperatorName},
	{schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, platform.PlatformNamespace, platform.PlatformOperatorName},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, platform.PlatformNamespace, operator.CredentialsSecretName},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", platform.PlatformNamespace},
	{schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", operator.PlatformDriverNamespace},
	{schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, operator.PlatformDriverNamespace, operator.DriverSecretName},
	{schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "clustercsidrivers"}, "", operator.DriverName},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"}, "", operator.DriverName},
	{schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}, "", "csi-manila-default"},
}

type platformSnapshot map[string]string

// snapshotPlatform reads the resourceVersion of each of the platform's objects.
func snapshotPlatform(t *testing.T, ctx context.Context, cfg *rest.Config) platformSnapshot {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := platformSnapshot{}
	for _, o := range platformObjects {
		u, err := dyn.Resource(o.gvr).Namespace(o.namespace).Get(ctx, o.name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the platform's %s %s/%s: %v", o.gvr.Resource, o.namespace, o.name, err)
		}
		s[o.gvr.Resource+"/"+o.namespace+"/"+o.name] = u.GetResourceVersion()
	}
	return s
}

// unchanged: every object of the snapshot is there with the same resourceVersion.
func (s platformSnapshot) unchanged(t *testing.T, ctx context.Context, cfg *rest.Config) {
	t.Helper()
	now := snapshotPlatform(t, ctx, cfg)
	for k, v := range s {
		if now[k] != v {
			t.Errorf("the platform's %s changed: resourceVersion %s, then %s", k, v, now[k])
		}
	}
}
