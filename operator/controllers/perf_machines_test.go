//go:build perf && integration

package controllers

// TestPerformanceMachines: the operator's budgets of docs/performance.md on an installer-shaped
// sim cluster (Infrastructure, install-config, a worker MachineSet of 3 with the Machine API
// stand-in making their kwok Nodes) against the loopback OpenStack with 200 share types:
// the time to the first StorageClass and to all 200, RSS, heap and CPU at start and in steady
// state, then a scale-up of the worker set to 500 Machines of which 147 get a Node (150 worker
// Nodes in all; the other 353 stay Provisioning, as servers the cloud is slow to make).
//
//   KUBEBUILDER_ASSETS=... go test -tags 'integration perf' -run TestPerformanceMachines -timeout 40m -v ./operator/controllers/
//
// PERF_BINARY runs that operator binary instead of building this tree's, PERF_ENV adds to its
// environment (startPerfOperator); PERF_PROFILES names a folder for the heap profiles (start,
// steady, burst, after) and a CPU profile of the steady window (steady-cpu). It reports; it
// asserts no time.

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

func TestPerformanceMachines(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 35*time.Minute)
	defer cancel()

	own := newOwnProject(t, ctx, cloud, cloud.Seed.KeystoneURL)
	run := fmt.Sprintf("perfm-%d", time.Now().Unix())
	start := time.Now()
	for i := 0; i < 198; i++ {
		own.privateShareType(t, ctx, fmt.Sprintf("%s-%03d", run, i))
	}
	t.Logf("created 198 private share types in %s", time.Since(start).Round(time.Second))

	sim := testenv.NewSimCluster(t, testenv.SimOptions{ControlPlaneNodes: 3})
	cl, err := machinectl.InstallerShaped(ctx, sim, machinectl.ClusterOptions{Workers: 3, Controller: machinectl.Options{NodeDelay: time.Second, Interval: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Stop)
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/manila-setup:1", Images: testImages, WithoutClusterCSIDriver: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.Install(ctx, sim.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: own.CloudsYAML}}); err != nil {
		t.Fatal(err)
	}

	op := startPerfOperator(t, ctx, sim)
	addr, logPath, pid := op.addr, op.logPath, op.cmd.Process.Pid

	poll := func(what string, timeout time.Duration, f func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return f(), nil }); err != nil {
			b, _ := os.ReadFile(logPath)
			t.Fatalf("%s: not within %s\n%s", what, timeout, tail(string(b), 30))
		}
	}
	profiles := os.Getenv("PERF_PROFILES")
	heap := func(name string) {
		if profiles != "" {
			saveProfile(t, "http://"+addr+"/debug/pprof/heap?gc=1", filepath.Join(profiles, name+".pprof"))
		}
	}
	memory := func(when string) {
		m := scrape(t, addr)
		rss, cpu := procStat(pid)
		t.Logf("PERF %s: RSS %.1f MiB, Go heap in use %.1f MiB, CPU %.2f s so far", when, float64(rss)/1024,
			sum(m, "go_memstats_heap_inuse_bytes")/(1<<20), cpu)
	}

	crStart := time.Now()
	cr, _ := yaml.Marshal(map[string]any{"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
		"metadata": map[string]any{"name": operator.DriverName}, "spec": map[string]any{"managementState": "Managed", "logLevel": "Normal", "operatorLogLevel": "Normal"}})
	if _, err := deploy.Install(ctx, sim.Config, cr, testNS, deploy.InstallOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := metav1.ListOptions{LabelSelector: machinery.ManagedSelector.String()}
	poll("the first StorageClass", 2*time.Minute, func() bool {
		l, err := sim.Client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: ours.LabelSelector, Limit: 1})
		return err == nil && len(l.Items) > 0
	})
	first := time.Since(crStart)
	poll("operands created", 2*time.Minute, func() bool {
		_, e1 := sim.Client.AppsV1().Deployments(testNS).Get(ctx, workloadControllerService.name, metav1.GetOptions{})
		_, e2 := sim.Client.AppsV1().DaemonSets(testNS).Get(ctx, workloadNodeService.name, metav1.GetOptions{})
		_, e3 := sim.Client.AppsV1().DaemonSets(testNS).Get(ctx, workloadNFSNodeService.name, metav1.GetOptions{})
		return e1 == nil && e2 == nil && e3 == nil
	})
	operands := time.Since(crStart)
	var classes []string
	poll("200 StorageClasses", 3*time.Minute, func() bool {
		l, err := sim.Client.StorageV1().StorageClasses().List(ctx, ours)
		if err != nil || len(l.Items) < 200 {
			return false
		}
		classes = classes[:0]
		for _, sc := range l.Items {
			classes = append(classes, sc.Name+"="+sc.Parameters["nfs-shareClient"])
		}
		return true
	})
	all := time.Since(crStart)
	t.Logf("PERF first StorageClass %.2fs after the ClusterCSIDriver, operands %.2fs, 200 StorageClasses %.2fs (wall times, machine under load)",
		first.Seconds(), operands.Seconds(), all.Seconds())
	t.Logf("PERF nfs-shareClient of %s", classes[0])
	time.Sleep(time.Until(crStart.Add(time.Minute)))
	memory("1 min after the CR")
	heap("start")

	// Steady state: minutes 2 to 5.
	time.Sleep(time.Until(crStart.Add(2 * time.Minute)))
	m0, t0 := scrape(t, addr), time.Now()
	_, cpu0 := procStat(pid)
	steadyProfile := cpuProfile(t, addr, profiles, "steady-cpu", 3*time.Minute-5*time.Second)
	time.Sleep(3 * time.Minute)
	<-steadyProfile
	// The CPU first: rendering every metric for the scrape is work of the measurement's own.
	_, cpu1 := procStat(pid)
	win := time.Since(t0).Minutes()
	m1 := scrape(t, addr)
	delta := func(fr ...string) float64 { return sum(m1, fr...) - sum(m0, fr...) }
	writes := 0.0
	for _, v := range []string{"create", "update", "patch", "delete"} {
		writes += delta(`client="operator"`, `verb="`+v+`"`)
	}
	t.Logf("PERF steady state over %.1f min: %.3f CPU-s/min, operator writes %.0f, direct GETs %.0f", win, (cpu1-cpu0)/win, writes, delta(`client="operator"`, `verb="get"`))
	memory("steady state, 5 min after the CR")
	heap("steady")

	// The burst: 497 more Machines, of which 147 get a Node.
	for i := 0; i < 353; i++ {
		cl.StallNext()
	}
	mc := machineclient.NewForConfigOrDie(sim.Config)
	_, cpuB0 := procStat(pid)
	mB0 := scrape(t, addr)
	burst := time.Now()
	if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Patch(ctx, cl.MachineSet, types.MergePatchType, []byte(`{"spec":{"replicas":500}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	var peakMu sync.Mutex
	var peak int64
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			rss, _ := procStat(pid)
			peakMu.Lock()
			peak = max(peak, rss)
			peakMu.Unlock()
			select {
			case <-stopSampling:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	workers := func() int {
		l, err := sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "node-role.kubernetes.io/worker"})
		if err != nil {
			return 0
		}
		n := 0
		for i := range l.Items {
			if testenv.NodeReady(&l.Items[i]) {
				n++
			}
		}
		return n
	}
	// The window: until 150 worker Nodes are Ready or PERF_BURST_MINUTES (default 6) have
	// passed, whichever comes first; on a loaded machine the stand-in makes fewer Nodes in it.
	burstWindow := 6 * time.Minute
	if v, err := strconv.Atoi(os.Getenv("PERF_BURST_MINUTES")); err == nil && v > 0 {
		burstWindow = time.Duration(v) * time.Minute
	}
	halfway := false
	_ = wait.PollUntilContextTimeout(ctx, time.Second, burstWindow, true, func(context.Context) (bool, error) {
		n := workers()
		if n >= 75 && !halfway {
			halfway = true
			heap("burst")
			memory(fmt.Sprintf("burst, %d worker Nodes", n))
		}
		return n >= 150, nil
	})
	joined := time.Since(burst)
	// The last events settle: 30 s more in the window.
	time.Sleep(30 * time.Second)
	close(stopSampling)
	<-sampled
	_, cpuB1 := procStat(pid)
	mB1 := scrape(t, addr)
	machines, err := mc.MachineV1beta1().Machines(machinectl.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodes, err := sim.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bwrites := 0.0
	for _, v := range []string{"create", "update", "patch", "delete"} {
		bwrites += sum(mB1, `client="operator"`, `verb="`+v+`"`) - sum(mB0, `client="operator"`, `verb="`+v+`"`)
	}
	t.Logf("PERF burst: %d Machines, %d Nodes (%d workers Ready after %.0fs); operator CPU %.2f CPU-s from the scale-up to 30 s after, RSS peak %.1f MiB; operator writes %.0f",
		len(machines.Items), len(nodes.Items), workers(), joined.Seconds(), cpuB1-cpuB0, float64(peak)/1024, bwrites)
	memory("after the burst")
	heap("after")
	var sizes []string
	for _, l := range []struct {
		what string
		obj  any
	}{{"Machines", machines}, {"Nodes", nodes}} {
		b, _ := yaml.Marshal(l.obj)
		sizes = append(sizes, fmt.Sprintf("%s %.1f MiB as YAML", l.what, float64(len(b))/(1<<20)))
	}
	t.Logf("PERF what the cluster holds: %s", strings.Join(sizes, ", "))
}

// cpuProfile takes a CPU profile of the operator for d into folder/name.pprof when folder is set
// (PERF_PROFILES), and closes the returned channel when done. The profiler's own cost is in the
// window's figure: a run without PERF_PROFILES measures without it.
func cpuProfile(t *testing.T, addr, folder, name string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	if folder == "" {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		saveProfile(t, fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds())), filepath.Join(folder, name+".pprof"))
	}()
	return done
}

// saveProfile writes what the profiling endpoint url answers to path; a failure is logged only.
func saveProfile(t *testing.T, url, path string) {
	resp, err := http.Get(url)
	if err != nil {
		t.Logf("profile %s: %v", path, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Logf("profile %s: %v", path, err)
	}
}
