//go:build integration

package e2e

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestMustGatherImage runs the CLI image as `oc adm must-gather --image` runs an image: its
// /usr/bin/gather, in a pod whose ServiceAccount is cluster-admin, with /must-gather a volume
// that oc copies back. podman plays the pod (the host's network, the ServiceAccount's token
// through the in-cluster configuration, the image's non-root user) against a cluster the
// operator was installed into: the folder holds the ClusterCSIDriver, the operator's workloads
// and the MachineSet, and no trace of the cloud's password in any encoding.
func TestMustGatherImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("podman is not installed (make test installs it with build/podman.sh): %v", err)
	}
	top, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root := t.TempDir()
	img := buildImageOf(t, top, root, "v0.0.0-mustgather", "manila-setup")

	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 1})
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-mg", Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	cli := buildCLI(t)
	if out, err := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", sim.Kubeconfig,
		"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile).CombinedOutput(); err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}

	// The pod oc makes: a ServiceAccount bound to cluster-admin in a namespace of its own.
	const ns, sa = "openshift-must-gather-test", "must-gather-admin"
	createNamespace(t, ctx, sim.Client, ns)
	if _, err := sim.Client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "must-gather-test"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: ns}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := sim.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saDir, out := t.TempDir(), t.TempDir()
	for name, data := range map[string][]byte{"token": []byte(tok.Status.Token), "ca.crt": sim.Config.CAData, "namespace": []byte(ns)} {
		if err := os.WriteFile(filepath.Join(saDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The image's user is not root: the volume is writable by it, as oc's emptyDir is.
	for _, d := range []string{saDir, out} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	api, err := url.Parse(sim.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	run := podman(root, "run", "--rm", "--network", "host", "--entrypoint", "/usr/bin/gather",
		"-e", "KUBERNETES_SERVICE_HOST="+api.Hostname(), "-e", "KUBERNETES_SERVICE_PORT="+api.Port(),
		"--volume", saDir+":/var/run/secrets/kubernetes.io/serviceaccount:ro", "--volume", out+":/must-gather", img.ref)
	logs, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("podman run %s /usr/bin/gather: %v\n%s", img.ref, err, logs)
	}
	t.Logf("$ oc adm must-gather --image %s (played by podman)\n%s", img.ref, logs)

	for _, f := range []string{
		"cluster-scoped/clustercsidrivers/" + operator.DriverName + ".yaml",
		"namespaces/" + operator.DefaultNamespace + "/apps/deployments/" + operator.OperatorName + ".yaml",
		"namespaces/openshift-machine-api/machine.openshift.io/machinesets/" + cl.MachineSet + ".yaml",
	} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("/must-gather: %v", err)
		}
	}
	if files := noSecretIn(t, out, demoPassword(t, cloud.CloudsFile)); files < 5 {
		t.Errorf("/must-gather: %d files", files)
	}
}

// demoPassword is the password of cloud demo in the loopback cloud's clouds.yaml.
func demoPassword(t *testing.T, cloudsFile string) string {
	t.Helper()
	raw, err := os.ReadFile(cloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(raw, testenv.CloudDemo, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := string(creds.DriverSecretData()["os-password"])
	if p == "" {
		t.Fatal("cloud demo has no password in " + cloudsFile)
	}
	return p
}
