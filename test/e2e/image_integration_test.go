//go:build integration

package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestOperatorImage builds the operator image as `make image` does (build/image.sh), checks that
// a second build gives the same image ID, and runs the image with podman the way the kubelet
// would run the Deployment that `manila-setup operator install` created: its command, args,
// environment (downward API included), its ServiceAccount's token through the in-cluster
// configuration, a read-only root filesystem, no capabilities, the image's non-root user. The
// containerised operator must then do what the host-process one does in TestWholeJourney:
// create the driver's workloads, the Secret and a StorageClass per share type, answer its
// probes, and report a healthy, enabled driver on the ClusterCSIDriver.
func TestOperatorImage(t *testing.T) {
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

	// 1. The image, twice, in storage of this test's own.
	const version = "v0.0.0-imagetest"
	podmanRoot := t.TempDir()
	first := buildImage(t, top, podmanRoot, version)
	second := buildImage(t, top, t.TempDir(), version)
	if first.id != second.id {
		t.Errorf("two builds of the same commit gave image IDs %s and %s, want the same", first.id, second.id)
	}
	labels := podmanInspect(t, podmanRoot, first.ref, "{{json .Labels}}")
	for _, want := range []string{`"org.opencontainers.image.version":"` + version + `"`, `"org.opencontainers.image.revision":"imagetest"`, `"org.opencontainers.image.source"`, `"org.opencontainers.image.licenses"`} {
		if !strings.Contains(labels, want) {
			t.Errorf("image labels %s lack %s", labels, want)
		}
	}
	if user := strings.TrimSpace(podmanInspect(t, podmanRoot, first.ref, "{{.Config.User}}")); user == "" || user == "0" || strings.HasPrefix(user, "0:") || user == "root" {
		t.Errorf("image user %q, want a non-root uid", user)
	}
	if st, err := os.Stat(first.archive); err != nil || st.Size() == 0 {
		t.Errorf("OCI archive %s: %v", first.archive, err)
	} else {
		t.Logf("image %s: ID %s, OCI archive %.1f MB", first.ref, first.id, float64(st.Size())/1e6)
	}

	// 2. A cluster shaped like a fresh install, and the operator installed as a user does.
	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3})
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{InfraID: "ostest-image", Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	cli := buildCLI(t)
	install := exec.CommandContext(ctx, cli, "operator", "install", "--kubeconfig", sim.Kubeconfig,
		"--os-cloud", testenv.CloudDemo, "--os-client-config-file", cloud.CloudsFile)
	install.Env = append(os.Environ(), "OPERATOR_IMAGE="+first.ref)
	if out, err := install.CombinedOutput(); err != nil {
		t.Fatalf("operator install: %v\n%s", err, out)
	}
	ns := operator.DefaultNamespace
	dep, err := sim.Client.AppsV1().Deployments(ns).Get(ctx, operator.OperatorName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// kwok's pod would run nothing: podman runs the pod here instead.
	// A patch, not an update: the deployment controller writes the object at the same time.
	if _, err := sim.Client.AppsV1().Deployments(ns).Patch(ctx, operator.OperatorName, types.MergePatchType,
		[]byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	// 3. The pod, as podman runs it.
	tok, err := sim.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, dep.Spec.Template.Spec.ServiceAccountName,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for ServiceAccount %s: %v", dep.Spec.Template.Spec.ServiceAccountName, err)
	}
	saDir := t.TempDir()
	for name, data := range map[string][]byte{"token": []byte(tok.Status.Token), "ca.crt": sim.Config.CAData, "namespace": []byte(ns)} {
		if err := os.WriteFile(filepath.Join(saDir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(saDir, 0o755); err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(sim.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	if img := dep.Spec.Template.Spec.Containers[0].Image; img != first.ref {
		t.Fatalf("the installed Deployment runs image %s, want the one built, %s", img, first.ref)
	}
	run, probes, metrics := podmanRunArgs(t, dep.Spec.Template.Spec, saDir, api)
	op := startContainer(t, podmanRoot, run)

	classes := waitStorageClasses(t, ctx, sim, op, operator.DefaultNamespace, cloud.Seed.ShareTypes, []string{"csi-manila-cephfs-fast", "csi-manila-default"})
	t.Logf("the containerised operator made StorageClasses %s and %s", classes[0].Name, classes[1].Name)
	// The workloads: created in the same sync as the classes or soon after.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		if _, err := sim.Client.AppsV1().Deployments(ns).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{}); err != nil {
			return false, nil
		}
		for _, name := range []string{operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName} {
			if _, err := sim.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("the driver's Deployment %s and DaemonSets %s, %s: %v", operator.ControllerDeploymentName, operator.NodeDaemonSetName, operator.NFSNodeDaemonSetName, err)
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if err := waitHTTP(ctx, "http://"+probes+path, op); err != nil {
			t.Errorf("probe %s on %s: %v", path, probes, err)
		}
	}

	// 4. Healthy and enabled, as `manila-setup operator status` reads it.
	var status []byte
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		status, err = exec.CommandContext(ctx, cli, "operator", "status", "--kubeconfig", sim.Kubeconfig).CombinedOutput()
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("operator status never healthy: %v\n%s\n%s", err, status, op.tail())
	}
	oc, err := operatorclient.NewForConfig(sim.Config)
	if err != nil {
		t.Fatal(err)
	}
	d, err := oc.OperatorV1().ClusterCSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[string]operatorv1.ConditionStatus{}
	for _, c := range d.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if conds[operator.ConditionDisabled] != operatorv1.ConditionFalse {
		t.Errorf("%s = %q, want False: %+v", operator.ConditionDisabled, conds[operator.ConditionDisabled], d.Status.Conditions)
	}
	if _, ok := conds[operator.ConditionStorageNetworkReachable]; !ok {
		t.Errorf("no %s condition: %+v", operator.ConditionStorageNetworkReachable, d.Status.Conditions)
	}
	t.Logf("$ manila-setup operator status\n%s", status)
	scrapeOperatorMetrics(t, ctx, sim, ns, metrics, op)

	// MANILA_SETUP_IMAGE_SOAK=10m keeps the container running that long and reports the
	// operator's memory inside it, for docs/performance.md (not part of make test).
	if soak, _ := time.ParseDuration(os.Getenv("MANILA_SETUP_IMAGE_SOAK")); soak > 0 {
		pid := strings.TrimSpace(podmanInspectContainer(t, podmanRoot, "manila-setup-operator-imagetest", "{{.State.Pid}}"))
		end := time.Now().Add(soak)
		for time.Now().Before(end) {
			time.Sleep(time.Minute)
			if err := op.alive(); err != nil {
				t.Fatal(err)
			}
			st, err := os.ReadFile("/proc/" + pid + "/status")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range strings.Split(string(st), "\n") {
				if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "RssAnon:") || strings.HasPrefix(l, "RssFile:") {
					t.Logf("soak %s: %s", time.Until(end).Round(time.Second), strings.Join(strings.Fields(l), " "))
				}
			}
		}
	}
}

func podmanInspectContainer(t *testing.T, root, name, format string) string {
	t.Helper()
	out, err := podman(root, "container", "inspect", "--format", format, name).CombinedOutput()
	if err != nil {
		t.Fatalf("podman container inspect %s: %v\n%s", name, err, out)
	}
	return string(out)
}

type builtImage struct{ ref, id, archive string }

// buildImage runs build/image.sh for the operator image with podman storage under root.
func buildImage(t *testing.T, top, root, version string) builtImage {
	t.Helper()
	return buildImageOf(t, top, root, version, "manila-setup-operator")
}

// buildImageOf runs build/image.sh for the image of one binary.
func buildImageOf(t *testing.T, top, root, version, binary string) builtImage {
	t.Helper()
	cmd := exec.Command("bash", filepath.Join(top, "build", "image.sh"), "build")
	cmd.Dir = top
	cmd.Env = append(os.Environ(), "PODMAN_ROOT="+root, "VERSION="+version, "COMMIT=imagetest",
		"IMAGE_DIR="+filepath.Join(root, "archives"), "BINARIES="+binary)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("build/image.sh: %v\n%s%s", err, out, stderr)
	}
	f := strings.Split(strings.TrimSpace(string(out)), "\t")
	if len(f) != 3 {
		t.Fatalf("build/image.sh printed %q, want reference, ID and archive", out)
	}
	t.Cleanup(func() { podmanCleanup(root) })
	return builtImage{ref: f[0], id: f[1], archive: f[2]}
}

// podman runs podman as build/podman.sh does, with storage under root.
func podman(root string, args ...string) *exec.Cmd {
	script := `. "$0"; podman_ "$@"`
	top, _ := filepath.Abs("../..")
	cmd := exec.Command("bash", append([]string{"-c", script, filepath.Join(top, "build", "podman.sh")}, args...)...)
	cmd.Env = append(os.Environ(), "PODMAN_ROOT="+root, "PODMAN_CONF_DIR="+filepath.Join(root, "conf"))
	return cmd
}

func podmanInspect(t *testing.T, root, ref, format string) string {
	t.Helper()
	out, err := podman(root, "image", "inspect", "--format", format, ref).CombinedOutput()
	if err != nil {
		t.Fatalf("podman image inspect %s: %v\n%s", ref, err, out)
	}
	return string(out)
}

// podmanCleanup removes what podman keeps under root: containers, images, and the storage's
// own mounts, so that the test directory can be removed.
func podmanCleanup(root string) {
	_ = podman(root, "rm", "--all", "--force").Run()
	_ = podman(root, "system", "reset", "--force").Run()
}

// podmanRunArgs turns the operator Deployment's pod spec into `podman run` arguments, as the
// kubelet would run it, with the pod's network being the host's (where the API server and the
// cloud listen). It returns the arguments and the addresses of the probes and of the metrics.
func podmanRunArgs(t *testing.T, pod corev1.PodSpec, saDir string, api *url.URL) (args []string, probes, metrics string) {
	t.Helper()
	if len(pod.Containers) != 1 {
		t.Fatalf("the operator pod has %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	podIP := "127.0.0.1"
	probes = net.JoinHostPort(podIP, freePort(t))
	env := map[string]string{
		"KUBERNETES_SERVICE_HOST": api.Hostname(),
		"KUBERNETES_SERVICE_PORT": api.Port(),
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = operator.OperatorName + "-imagetest"
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			env[e.Name] = podIP
		default:
			t.Fatalf("env %s: a source this test does not emulate: %+v", e.Name, e.ValueFrom)
		}
	}
	args = []string{"run", "--rm", "--network", "host", "--name", "manila-setup-operator-imagetest",
		"--volume", saDir + ":/var/run/secrets/kubernetes.io/serviceaccount:ro"}
	if sc := c.SecurityContext; sc != nil {
		if ptr.Deref(sc.ReadOnlyRootFilesystem, false) {
			args = append(args, "--read-only", "--read-only-tmpfs=false")
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			args = append(args, "--security-opt", "no-new-privileges")
		}
		if sc.Capabilities != nil {
			for _, d := range sc.Capabilities.Drop {
				args = append(args, "--cap-drop", string(d))
			}
		}
	}
	for k, v := range env {
		args = append(args, "--env", k+"="+v)
	}
	if len(c.Command) > 0 {
		entry, _ := json.Marshal(c.Command)
		args = append(args, "--entrypoint", string(entry))
	}
	args = append(args, c.Image)
	for _, a := range c.Args {
		switch {
		case strings.HasPrefix(a, "--health-address="):
			a = "--health-address=" + net.JoinHostPort("127.0.0.1", freePort(t)) // the host's 8443 may be taken
		case strings.HasPrefix(a, "--probe-address="):
			a = "--probe-address=" + probes
		case strings.HasPrefix(a, "--metrics-address="):
			metrics = net.JoinHostPort(podIP, freePort(t))
			a = "--metrics-address=" + metrics
		}
		args = append(args, strings.ReplaceAll(a, "$(POD_IP)", podIP))
	}
	// A short resync, as the host-process operator of the journey test runs with (not while
	// soaking: the Deployment's own settings are measured then).
	if os.Getenv("MANILA_SETUP_IMAGE_SOAK") == "" {
		args = append(args, "--resync=10s")
	}
	return args, probes, metrics
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// startContainer runs `podman run` in the foreground, as operatorProcess does the binary.
func startContainer(t *testing.T, root string, args []string) *operatorProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "operator.log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := podman(root, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &operatorProcess{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = podman(root, "stop", "--time", "15", "manila-setup-operator-imagetest").Run()
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Log("operator container log:\n" + p.tail())
		}
	})
	return p
}

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, op *operatorProcess) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		resp, err := http.Get(url)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%v (last: %s)", err, last)
	}
	return nil
}

// scrapeOperatorMetrics scrapes the containerised operator's /metrics as OpenShift's Prometheus
// does: over HTTPS on the pod IP, with the token of a ServiceAccount granted "get" on /metrics.
// No service-ca runs here, so the operator serves its self-signed certificate, for the names of
// its metrics Service.
func scrapeOperatorMetrics(t *testing.T, ctx context.Context, sim *testenv.SimCluster, ns, addr string, op *operatorProcess) {
	t.Helper()
	if addr == "" {
		t.Fatal("the operator Deployment has no --metrics-address")
	}
	const promNS, promSA = "openshift-monitoring", "prometheus-k8s"
	if _, err := sim.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: promNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := sim.Client.CoreV1().ServiceAccounts(promNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: promSA}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := sim.Client.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "imagetest-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "imagetest-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "imagetest-metrics-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: promNS, Name: promSA}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := sim.Client.CoreV1().ServiceAccounts(promNS).CreateToken(ctx, promSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	service := "manila-csi-driver-operator-metrics." + ns + ".svc"
	var served []string
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		// Self-signed: what is checked is the names it is for.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			served = cs.PeerCertificates[0].DNSNames
			return nil
		}}}}
	var body, last string
	err = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := op.alive(); err != nil {
			return false, err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+tok.Status.Token)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body, last = string(b), resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("scraping https://%s/metrics with Prometheus' token: %v (last: %s)\n%s", addr, err, last, op.tail())
	}
	if !slices.Contains(served, service) {
		t.Errorf("the metrics certificate is for %v, want %s among its names", served, service)
	}
	want := `manila_operator_condition{condition="ManilaControllerDisabled",reason="ManilaAvailable",status="False"} 1`
	if !strings.Contains(body, want) {
		t.Errorf("no %s in the scrape of the image's operator", want)
	}
	resp, err := client.Get("https://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: %s, want 401 Unauthorized", resp.Status)
	}
}
