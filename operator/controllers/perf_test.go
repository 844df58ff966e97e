//go:build perf && integration

package controllers

// The performance measurement of docs/performance.md: the real `manila-setup operator start`
// binary (leader election on, default 1-minute resync) on a sim cluster, against the loopback
// OpenStack with 200 share types. The 198 extra share types are private to a project created
// for the run, so that other tests sharing the cloud do not see them; all is deleted afterwards.
//
//   KUBEBUILDER_ASSETS=... go test -tags 'integration perf' -run TestPerformance -timeout 30m -v ./operator/
//
// PERF_MINUTES (default 12) is the length of the run.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/test/testenv"
)

func scrape(t *testing.T, addr string) map[string]float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scraping the operator: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndex(line, " ")
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// sum adds the samples whose name and labels contain every fragment.
func sum(m map[string]float64, fragments ...string) float64 {
	var total float64
next:
	for k, v := range m {
		for _, f := range fragments {
			if !strings.Contains(k, f) {
				continue next
			}
		}
		total += v
	}
	return total
}

func procStat(pid int) (rssKiB int64, cpuSeconds float64) {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			f := strings.Fields(l)
			rssKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	s, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	str := string(s)
	i := strings.LastIndexByte(str, ')')
	if i < 0 || i+2 > len(str) {
		return rssKiB, 0 // the process is gone
	}
	f := strings.Fields(str[i+2:])
	if len(f) < 13 {
		return rssKiB, 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return rssKiB, (ut + st) / 100
}

// perfOperator is the operator binary a performance test runs.
type perfOperator struct {
	dir, bin, addr, logPath string
	cmd                     *exec.Cmd
}

// startPerfOperator runs the operator binary (PERF_BINARY, else this tree's, built) as its
// ServiceAccount on sim, with metrics and profiling on a loopback port and PERF_ENV added to its
// environment (e.g. "GOMEMLIMIT=off GOGC=50"), and returns once its controllers started,
// before the ClusterCSIDriver exists. It is stopped when the test ends.
func startPerfOperator(t *testing.T, ctx context.Context, sim *testenv.SimCluster) *perfOperator {
	t.Helper()
	op := &perfOperator{dir: t.TempDir(), bin: os.Getenv("PERF_BINARY")}
	if op.bin == "" {
		op.bin = filepath.Join(op.dir, "manila-setup-operator")
		if out, err := exec.Command("go", "build", "-o", op.bin, "../../cmd/manila-setup-operator").CombinedOutput(); err != nil {
			t.Fatalf("building: %v\n%s", err, out)
		}
	}
	kubeconfig, err := sim.KubeconfigFor(op.dir, "system:serviceaccount:"+testNS+":"+operator.OperatorName, "system:serviceaccounts", "system:serviceaccounts:"+testNS, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	// The user's name (system:serviceaccount:...) has colons, which a kubeconfig path list splits at.
	plain := filepath.Join(op.dir, "operator.kubeconfig")
	if err := os.Rename(kubeconfig, plain); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	op.addr = ln.Addr().String()
	ln.Close()
	op.cmd = exec.Command(op.bin, "start", "--kubeconfig", plain, "--health-address", op.addr, "--namespace", testNS, "--profiling")
	op.cmd.Env = append(os.Environ(), "POD_NAME=perf")
	op.cmd.Env = append(op.cmd.Env, strings.Fields(os.Getenv("PERF_ENV"))...)
	for k, p := range testImages.ImageEnv() {
		op.cmd.Env = append(op.cmd.Env, k+"="+*p)
	}
	op.logPath = filepath.Join(op.dir, "operator.log")
	logf, err := os.Create(op.logPath)
	if err != nil {
		t.Fatal(err)
	}
	op.cmd.Stdout, op.cmd.Stderr = logf, logf
	if err := op.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = op.cmd.Process.Signal(os.Interrupt); _ = op.cmd.Wait() })
	// Leader election done and the controllers started.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(op.logPath)
		return strings.Contains(string(b), " controllers (namespace"), nil
	}); err != nil {
		b, _ := os.ReadFile(op.logPath)
		t.Fatalf("the operator did not start its controllers:\n%s", tail(string(b), 30))
	}
	return op
}

func TestPerformance(t *testing.T) {
	minutes := 12
	if v, err := strconv.Atoi(os.Getenv("PERF_MINUTES")); err == nil && v >= 5 {
		minutes = v
	}
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(minutes+8)*time.Minute)
	defer cancel()

	// A project and user of its own, with 198 private share types on top of the 2 public ones.
	own := newOwnProject(t, ctx, cloud, cloud.Seed.KeystoneURL)
	run := fmt.Sprintf("perf-%d", time.Now().Unix())
	createType := func(name string) string {
		id, _ := own.privateShareType(t, ctx, name)
		return id
	}
	start := time.Now()
	for i := 0; i < 198; i++ {
		createType(fmt.Sprintf("%s-%03d", run, i))
	}
	t.Logf("created 198 private share types in %s", time.Since(start).Round(time.Second))

	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3, WorkerNodes: 2})
	cfgc := configclient.NewForConfigOrDie(sim.Config)
	infra, err := cfgc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "sim-perf", ControlPlaneTopology: configv1.HighlyAvailableTopologyMode}
	if _, err := cfgc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sim.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: machinery.ClusterConfigName},
		Data: map[string]string{"install-config": "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\n"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	credsYAML := own.CloudsYAML
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/manila-setup:1", Images: testImages, WithoutClusterCSIDriver: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Install(ctx, sim.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: credsYAML}}); err != nil {
		t.Fatal(err)
	}

	op := startPerfOperator(t, ctx, sim)
	dir, bin, addr, cmd := op.dir, op.bin, op.addr, op.cmd

	// The measure starts when the ClusterCSIDriver is created, as in the reference.
	crStart := time.Now()
	cr, _ := yaml.Marshal(map[string]any{"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
		"metadata": map[string]any{"name": operator.DriverName}, "spec": map[string]any{"managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal"}})
	if _, err := deploy.Install(ctx, sim.Config, cr, testNS, deploy.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	poll := func(what string, timeout time.Duration, f func() bool) time.Duration {
		s := time.Now()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return f(), nil }); err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "operator.log"))
			t.Fatalf("%s: not within %s\n%s", what, timeout, tail(string(b), 30))
		}
		return time.Since(s)
	}
	poll("operands created", 2*time.Minute, func() bool {
		_, e1 := sim.Client.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		_, e2 := sim.Client.AppsV1().DaemonSets(testNS).Get(ctx, workloadNodeService.name, metav1.GetOptions{})
		_, e3 := sim.Client.AppsV1().DaemonSets(testNS).Get(ctx, workloadNFSNodeService.name, metav1.GetOptions{})
		return e1 == nil && e2 == nil && e3 == nil
	})
	created := time.Since(crStart)
	poll("200 StorageClasses", 3*time.Minute, func() bool {
		l, err := sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: machinery.ManagedSelector.String()})
		return err == nil && len(l.Items) >= 200
	})
	classes := time.Since(crStart)
	t.Logf("PERF operands created %.2fs after the ClusterCSIDriver; 200 StorageClasses after %.1fs", created.Seconds(), classes.Seconds())

	// Settle, then add a share type and time its StorageClass.
	time.Sleep(time.Until(crStart.Add(2 * time.Minute)))
	newType := run + "-late"
	added := time.Now()
	createType(newType)
	took := poll("the new share type's StorageClass", 3*time.Minute, func() bool {
		_, err := sim.Client.StorageV1().StorageClasses().Get(ctx, operator.StorageClassNames([]string{newType}, nil, nil)[newType], metav1.GetOptions{})
		return err == nil
	})
	t.Logf("PERF new share type -> StorageClass in %.1fs (resync 1m)", time.Since(added).Seconds())
	_ = took

	// Steady state: from minute 4 to the end.
	time.Sleep(time.Until(crStart.Add(4 * time.Minute)))
	m0, t0 := scrape(t, addr), time.Now()
	_, cpu0 := procStat(cmd.Process.Pid)
	time.Sleep(time.Until(crStart.Add(time.Duration(minutes) * time.Minute)))
	m1, t1 := scrape(t, addr), time.Now()
	rss, cpu1 := procStat(cmd.Process.Pid)
	win := t1.Sub(t0).Minutes()
	delta := func(fr ...string) float64 { return sum(m1, fr...) - sum(m0, fr...) }
	opWrites := 0.0
	for _, v := range []string{"create", "update", "patch", "delete"} {
		opWrites += delta(`client="operator"`, `verb="`+v+`"`)
	}
	leWrites := delta(`client="leader-election"`, `verb="update"`) + delta(`client="leader-election"`, `verb="create"`)
	gets := delta(`client="operator"`, `verb="get"`)
	conflicts := sum(m1, `manila_operator_kube_requests_total`, `code="409"`)
	lists := delta("manila_operator_openstack_share_type_lists_total")
	tokens := sum(m1, "manila_operator_openstack_tokens_total")
	t.Logf("PERF steady state over %.1f min: operator writes %.2f/min, lease writes %.2f/min, operator direct GETs %.2f/min, share type lists %.2f/min",
		win, opWrites/win, leWrites/win, gets/win, lists/win)
	t.Logf("PERF whole run: %v HTTP 409, %v Keystone tokens; RSS after %d min %.1f MiB; CPU %.3f CPU-s/min in steady state",
		conflicts, tokens, minutes, float64(rss)/1024, (cpu1-cpu0)/win)
	status, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	var mem []string
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if strings.HasPrefix(l, k) {
				mem = append(mem, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	mib := func(name string) string { return fmt.Sprintf("%s %.1f MiB", name, sum(m1, name)/(1<<20)) }
	t.Logf("PERF memory after %d min (PERF_ENV %q): %s; Go: %s, %s, %s, %s, %s", minutes, os.Getenv("PERF_ENV"), strings.Join(mem, ", "),
		mib("go_memstats_heap_inuse_bytes"), mib("go_memstats_heap_idle_bytes"), mib("go_memstats_heap_released_bytes"),
		mib("go_memstats_stack_inuse_bytes"), mib("go_memstats_sys_bytes"))
	if path := os.Getenv("PERF_HEAP_PROFILE"); path != "" {
		if resp, err := http.Get("http://" + addr + "/debug/pprof/heap"); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			_ = os.WriteFile(path, b, 0o644)
			t.Logf("heap profile written to %s (go tool pprof -sample_index=inuse_space %s %s)", path, bin, path)
		}
	}
	d, _ := sim.Client.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
	t.Logf("PERF controller Deployment generation %d (1 = rolled out once)", d.Generation)
	_ = gophercloud.AvailabilityPublic
}
