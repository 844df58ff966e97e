//go:build integration

package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestInstallKnowsThePlatform runs `manila-setup operator install` against clusters shaped like
// real ones: where the platform's cluster-storage-operator runs its Manila operator, driver mode
// writes nothing (the audit log says so) and exits 1 naming the platform's objects, and the
// default installs the companion, writing none of them; where the Storage capability is off it
// installs the driver and refuses the companion; off OpenStack it writes nothing.
func TestInstallKnowsThePlatform(t *testing.T) {
	cloud := testenv.NewCloud(t)
	cli := buildCLI(t)
	ctx := context.Background()
	cluster := func(t *testing.T, platformType configv1.PlatformType, opts *testenv.PlatformOptions) (*testenv.APIServer, string) {
		t.Helper()
		api := testenv.NewAPIServer(t)
		cc, err := configclient.NewForConfig(api.Config)
		if err != nil {
			t.Fatal(err)
		}
		infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ostest-plat1", PlatformStatus: &configv1.PlatformStatus{Type: platformType},
			ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
		if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if opts != nil {
			if err := testenv.InstallPlatform(ctx, api.Config, *opts); err != nil {
				t.Fatal(err)
			}
		}
		kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		return api, kubeconfig
	}
	install := func(kubeconfig string, extra ...string) (int, string) {
		out, err := exec.CommandContext(ctx, cli, append([]string{"operator", "install", "--kubeconfig", kubeconfig,
			"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile}, extra...)...).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	status := func(kubeconfig string) (int, string) {
		out, err := exec.CommandContext(ctx, cli, "operator", "status", "--kubeconfig", kubeconfig).CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	ourWrites := func(t *testing.T, api *testenv.APIServer) []testenv.AuditWrite {
		t.Helper()
		w, err := api.Writes(testenv.ByUserAgent("manila-setup"))
		if err != nil {
			t.Fatal(err)
		}
		return w
	}

	t.Run("platform runs Manila", func(t *testing.T) {
		api, kubeconfig := cluster(t, configv1.OpenStackPlatformType, &testenv.PlatformOptions{})
		// Asked for driver mode, whose names are the platform's: nothing written, exit 1.
		code, out := install(kubeconfig, "--mode", "driver")
		if code != 1 {
			t.Errorf("exit %d, want 1:\n%s", code, out)
		}
		t.Logf("$ manila-setup operator install --mode driver ...\n%s", out)
		for _, want := range []string{"Deployment " + platform.PlatformNamespace + "/" + platform.PlatformOperatorName + " (managed by cluster-storage-operator)",
			"ClusterCSIDriver " + platform.DriverName, "manila-setup networks attach"} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not name %q:\n%s", want, out)
			}
		}
		// operator status reads the platform's driver, and says whose it is.
		code, out = status(kubeconfig)
		t.Logf("$ manila-setup operator status\n%s", out)
		if code != 0 || !strings.Contains(out, "mode companion (PlatformManilaOperator)") || strings.Contains(out, "OPERAND") ||
			!strings.Contains(out, "credentials: the cloud-credential operator (CredentialsRequest openshift-cloud-credential-operator/openshift-manila-csi-driver)") {
			t.Errorf("status on the platform's driver: exit %d:\n%s", code, out)
		}
		if w := ourWrites(t, api); len(w) != 0 {
			t.Errorf("manila-setup wrote to the platform's cluster: %v", w)
		}
		// By default the companion: its own namespace and names, nothing of the platform's.
		code, out = install(kubeconfig)
		t.Logf("$ manila-setup operator install ...\n%s", out)
		if code != 0 || !strings.Contains(out, "mode companion:") || !strings.Contains(out, "deployment/"+operator.CompanionOperatorName+" applied") ||
			!strings.Contains(out, "manilacompanion/cluster applied") {
			t.Errorf("companion install: exit %d:\n%s", code, out)
		}
		for _, w := range ourWrites(t, api) {
			if w.Namespace != "" && w.Namespace != operator.CompanionNamespace && w.Namespace != "kube-system" {
				t.Errorf("the companion install wrote outside its namespace: %s", w)
			}
			if strings.HasPrefix(w.Resource, "clustercsidrivers") || strings.HasPrefix(w.Resource, "csidrivers") || strings.HasPrefix(w.Name, "openshift-") ||
				(w.Resource == "storageclasses" && strings.HasPrefix(w.Name, operator.StorageClassPrefix)) {
				t.Errorf("the companion install wrote an object of the platform's: %s", w)
			}
		}
		if code, out := install(kubeconfig, "--mode", "companion"); code != 0 {
			t.Errorf("companion install again: exit %d:\n%s", code, out)
		}
		code, out = status(kubeconfig)
		t.Logf("$ manila-setup operator status (companion installed, not running)\n%s", out)
		if code != 0 || !strings.Contains(out, "ManilaCompanion cluster (manila-setup's companion, namespace manila-setup)") ||
			!strings.Contains(out, "credentials: clouds.yaml, stored by `manila-setup operator install --os-cloud`") {
			t.Errorf("status with the companion: exit %d:\n%s", code, out)
		}
		dep, err := api.Client.AppsV1().Deployments(platform.PlatformNamespace).Get(ctx, platform.PlatformOperatorName, metav1.GetOptions{})
		if err != nil || !strings.Contains(dep.Spec.Template.Spec.Containers[0].Image, "ocp-v4.0-art-dev") {
			t.Errorf("the platform's Deployment changed: %v", err)
		}
	})
	t.Run("Storage capability disabled", func(t *testing.T) {
		api, kubeconfig := cluster(t, configv1.OpenStackPlatformType, &testenv.PlatformOptions{StorageCapabilityDisabled: true})
		// No platform operator to accompany.
		if code, out := install(kubeconfig, "--mode", "companion"); code != 1 || !strings.Contains(out, "this cluster has none") {
			t.Errorf("--mode companion without the platform's operator: exit %d, want 1:\n%s", code, out)
		}
		if w := ourWrites(t, api); len(w) != 0 {
			t.Errorf("a refused companion install wrote: %v", w)
		}
		if code, out := install(kubeconfig); code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
		if w := ourWrites(t, api); len(w) == 0 {
			t.Error("install wrote nothing in driver mode")
		}
		// A user scaled the operator by hand: install again names the field and who set it, and
		// writes nothing; --force-conflicts takes the field back.
		if _, err := api.Client.AppsV1().Deployments(operator.DefaultNamespace).Patch(ctx, operator.OperatorName, types.MergePatchType,
			[]byte(`{"spec":{"replicas":3}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
			t.Fatal(err)
		}
		writes := len(ourWrites(t, api))
		code, out := install(kubeconfig)
		t.Logf("$ manila-setup operator install ... (after kubectl edit)\n%s", out)
		if code != 1 || !strings.Contains(out, "deployment/"+operator.DefaultNamespace+"/"+operator.OperatorName+": fields owned by another manager") ||
			!strings.Contains(out, ".spec.replicas") || !strings.Contains(out, "kubectl-edit") {
			t.Errorf("install over a hand-scaled operator: exit %d, want 1 naming .spec.replicas and kubectl-edit:\n%s", code, out)
		}
		if w := ourWrites(t, api); len(w) != writes {
			t.Errorf("a refused install wrote: %v", w[writes:])
		}
		if code, out := install(kubeconfig, "--force-conflicts"); code != 0 {
			t.Errorf("--force-conflicts: exit %d, want 0:\n%s", code, out)
		}
		if dep, err := api.Client.AppsV1().Deployments(operator.DefaultNamespace).Get(ctx, operator.OperatorName, metav1.GetOptions{}); err != nil || *dep.Spec.Replicas != 1 {
			t.Errorf("--force-conflicts did not take .spec.replicas back: %v", err)
		}
		// Nothing runs the operator here: status names the mode, the credentials' source, and
		// the driver as not deployed.
		if code, out := status(kubeconfig); code != 1 || !strings.Contains(out, "mode driver (StorageCapabilityDisabled)") ||
			!strings.Contains(out, "credentials: clouds.yaml, stored by `manila-setup operator install --os-cloud`") || !strings.Contains(out, "not deployed") {
			t.Errorf("status after install, operator not running: exit %d:\n%s", code, out)
		}
	})
	t.Run("credentials the OpenShift way", func(t *testing.T) {
		api, kubeconfig := cluster(t, configv1.OpenStackPlatformType, &testenv.PlatformOptions{StorageCapabilityDisabled: true})
		install := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", kubeconfig)
		install.Env = append(os.Environ(), "OS_CLOUD=", "OS_CLIENT_CONFIG_FILE=") // no cloud named: the OpenShift way
		out, err := install.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "credentialsrequest/manila-setup-operator applied") {
			t.Fatalf("install without --os-cloud on a cluster with the cloud-credential operator: %v\n%s", err, out)
		}
		t.Logf("$ manila-setup operator install\n%s", out)
		if code, out := status(kubeconfig); !strings.Contains(out, "credentials: missing") {
			t.Errorf("before the cloud-credential operator answers: exit %d:\n%s", code, out)
		}
		wrote, err := testenv.FulfilCredentialsRequests(ctx, api.Config, []byte("clouds:\n  openstack:\n    auth: {auth_url: 'https://keystone.invalid:5000/v3'}\n"))
		if err != nil || len(wrote) != 1 || wrote[0] != operator.DefaultNamespace+"/"+operator.CredentialsSecretName {
			t.Fatalf("the cloud-credential stand-in wrote %v: %v", wrote, err)
		}
		if _, out := status(kubeconfig); !strings.Contains(out, "credentials: the cloud-credential operator (CredentialsRequest openshift-cloud-credential-operator/manila-setup-operator)") {
			t.Errorf("status does not say where the credentials came from:\n%s", out)
		}
	})
	t.Run("no Infrastructure, the platform's operator there", func(t *testing.T) {
		// OpenShift's APIs without an Infrastructure object: the mode reads as plain Kubernetes
		// (driver), yet the platform's Manila operator Deployment, applied by
		// cluster-storage-operator, has the name driver mode writes. Ownership decides per object.
		api := testenv.NewAPIServer(t)
		if err := testenv.InstallPlatform(ctx, api.Config, testenv.PlatformOptions{}); err != nil {
			t.Fatal(err)
		}
		kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		before, err := api.Client.AppsV1().Deployments(platform.PlatformNamespace).Get(ctx, platform.PlatformOperatorName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		code, out := install(kubeconfig)
		t.Logf("$ manila-setup operator install ...\n%s", out)
		want := "deployment/" + platform.PlatformNamespace + "/" + platform.PlatformOperatorName + ": exists and is not manila-setup's (written by \"cluster-storage-operator\")"
		if code != 1 || !strings.Contains(out, "nothing installed") || !strings.Contains(out, want) || !strings.Contains(out, "--force-conflicts") {
			t.Errorf("exit %d, want 1 naming %q and --force-conflicts:\n%s", code, want, out)
		}
		if w := ourWrites(t, api); len(w) != 0 {
			t.Errorf("a refused install wrote: %v", w)
		}
		after, err := api.Client.AppsV1().Deployments(platform.PlatformNamespace).Get(ctx, platform.PlatformOperatorName, metav1.GetOptions{})
		if err != nil || after.Generation != before.Generation || after.Spec.Template.Spec.Containers[0].Image != before.Spec.Template.Spec.Containers[0].Image {
			t.Errorf("the platform's Deployment changed (generation %d -> %d): %v", before.Generation, after.Generation, err)
		}
	})
	t.Run("not OpenStack", func(t *testing.T) {
		api, kubeconfig := cluster(t, configv1.AWSPlatformType, nil)
		code, out := install(kubeconfig)
		if code != 1 || !strings.Contains(out, "AWS, not OpenStack") {
			t.Errorf("exit %d, want 1 naming the platform:\n%s", code, out)
		}
		if w := ourWrites(t, api); len(w) != 0 {
			t.Errorf("manila-setup wrote to a cluster on AWS: %v", w)
		}
	})
}
