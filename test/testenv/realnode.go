package testenv

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
)

// The real node keeps its kubelet's root at the path the driver's hostPath volumes name, so
// only one real node runs on a machine at a time (realNodeLock).
const (
	kubeletRoot  = "/var/lib/kubelet"
	realNodeLock = "manila-setup-real-node.lock"
)

// hostDirs are the host folders a kubelet writes to whatever its configuration says: what a
// real node adds to them is removed when it stops.
var hostDirs = []string{kubeletRoot, "/var/log/containers"}

// emptyHostDirs are folders containerd makes whatever its configuration says (the shims'
// sockets; the cgroup of its CRI namespace under each controller), empty once its containers
// are gone: removed when the node stops if they were not there before, deepest first.
func emptyHostDirs() []string {
	dirs := []string{"/run/containerd/s", "/run/containerd"}
	controllers, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	if len(controllers) == 0 {
		controllers, _ = filepath.Glob("/sys/fs/cgroup/*")
		for i := range controllers {
			controllers[i] = filepath.Join(controllers[i], "k8s.io")
		}
	}
	return append(dirs, controllers...)
}

// RealNodeOptions shapes a real node.
type RealNodeOptions struct {
	// Name of the Node; "real-0" when empty.
	Name string
	// Images are operand images to build and load, by the operator's variable (DRIVER_IMAGE,
	// ...) to the reference a pod names: test/env/node/images.sh builds each under that name.
	Images map[string]string
	// LoopbackPorts are ports of the machine's 127.0.0.1 that the node's pods reach as a real
	// cluster's pods reach their cloud: the loopback OpenStack's (CloudPorts) when nil.
	LoopbackPorts []int
	// Labels are added to the Node's (the kubelet's --node-labels), e.g. a role.
	Labels map[string]string
}

// The pod network of the real node: a bridge of its own with the pods' gateway, on a range
// clear of envtest's services (10.0.0.0/24).
const (
	podBridge  = "msnode0"
	podSubnet  = "10.244.0.0/24"
	podGateway = "10.244.0.1"
	// natChain holds the node's rules in the machine's nat table, reached from PREROUTING for
	// packets from the bridge only.
	natChain = "MANILA-SETUP-NODE"
)

// RealNode is a kubelet with containerd and runc beside the kwok nodes of a sim cluster: the
// pods scheduled or bound to it run for real, from images built here (no registry is reached).
// containerd and the kubelet share a mount namespace of their own, shared inside (the kubelet's
// mount propagation needs it), so their mounts go with it. Other pods get an address on a bridge
// of the node's own (the reference CNI plugins), reach the apiserver through the kubernetes
// Service and the loopback cloud as a real cluster's pods reach theirs (startPodNetwork).
type RealNode struct {
	// Name of the Node object; IP its InternalIP, the machine's own non-loopback address.
	Name, IP string
	// Network is the CIDR of the machine's interface that holds IP: the cluster's machine
	// network, as an install-config would name it.
	Network string
	// InstanceID is the OpenStack server the node stands for: its providerID
	// (openstack:///ID) and what its metadata service answers.
	InstanceID string
	// OperatorImage is the operator's image (build/image.sh) as the node's containerd has it.
	OperatorImage string
	// PauseImage is the sandbox image of every pod on the node.
	PauseImage string

	sim        *SimCluster
	dir        string
	socket     string
	containerd *process
	kubelet    *process
	mountNS    string
	lock       *os.File
	before     map[string]map[string]bool // hostDirs' entries before the node started; nil: absent
	existed    map[string]bool            // which of emptyHostDirs existed before the node started
	sysctls    map[string]string          // the machine's kubeletSysctls before the node started
	network    bool                       // the pod network's bridge and rules are in place
	metadata   *http.Server               // the node's metadata service
}

// NodeAssets returns the folder holding the kubelet that test/env/node/build.sh builds, and
// checks that containerd and its tools are installed.
func NodeAssets() (string, error) {
	dir := os.Getenv("MANILA_SETUP_NODE_ASSETS")
	if dir == "" {
		dir = filepath.Join(cacheDir(), "node", "k8s-"+kubeVersion)
	}
	if _, err := os.Stat(filepath.Join(dir, "kubelet")); err != nil {
		return "", fmt.Errorf("real node: kubelet is missing in %s: run test/env/node/build.sh", dir)
	}
	for _, tool := range []string{"containerd", "ctr", "runc", "unshare", "nsenter", "mount"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("real node: %s is not installed: run test/env/node/build.sh (it installs containerd and runc)", tool)
		}
	}
	return dir, nil
}

// HostIP is the machine's first non-loopback IPv4 address: a kubelet refuses a loopback node
// IP, and a pod on the host network reaches a server of the test there.
func HostIP() (string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 || iface.Flags&net.FlagLoopback != 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && ipn.IP.IsGlobalUnicast() {
				return ipn.IP.String(), nil
			}
		}
	}
	return "", errors.New("real node: the machine has no non-loopback IPv4 address for the node IP")
}

// networkOf returns the CIDR of the machine's interface address ip.
func networkOf(ip string) (string, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.String() == ip {
			return (&net.IPNet{IP: ipn.IP.Mask(ipn.Mask), Mask: ipn.Mask}).String(), nil
		}
	}
	return "", fmt.Errorf("real node: no interface of the machine holds %s", ip)
}

// NewRealNode starts a real node in sim for one test and stops it when the test ends.
func NewRealNode(t testing.TB, sim *SimCluster, opts RealNodeOptions) *RealNode {
	t.Helper()
	// Long enough to wait for the machine's one real node: make test runs packages side by side,
	// and the user guide's sandbox holds it for its whole run (3-5 minutes).
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	start := time.Now()
	n, err := StartRealNode(ctx, sim, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("real node %s (%s) up in %s, images built and imported", n.Name, n.IP, time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	return n
}

// StartRealNode builds the node's images, starts containerd and the kubelet, and waits until the
// Node is registered and its runtime ready. It needs root (mount namespaces, cgroups).
func StartRealNode(ctx context.Context, sim *SimCluster, opts RealNodeOptions) (_ *RealNode, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("real node: needs root (a mount namespace, cgroups and /var/lib/kubelet)")
	}
	assets, err := NodeAssets()
	if err != nil {
		return nil, err
	}
	n := &RealNode{Name: opts.Name, sim: sim, InstanceID: string(uuid.NewUUID())}
	if n.Name == "" {
		n.Name = "real-0"
	}
	if n.IP, err = HostIP(); err != nil {
		return nil, err
	}
	if n.Network, err = networkOf(n.IP); err != nil {
		return nil, err
	}
	if n.lock, err = lockFile(ctx, filepath.Join(os.TempDir(), realNodeLock)); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, n.Stop())
		}
	}()
	n.before = snapshotDirs(hostDirs)
	n.sysctls = readSysctls()
	n.existed = map[string]bool{}
	for _, d := range emptyHostDirs() {
		_, err := os.Stat(d)
		n.existed[d] = err == nil
	}
	// Short: the containerd socket's path must fit in a unix socket address.
	if n.dir, err = os.MkdirTemp("", "msnode-"); err != nil {
		return nil, err
	}
	images, err := buildImages(ctx, filepath.Join(n.dir, "images"), opts.Images)
	if err != nil {
		return nil, err
	}
	ports := opts.LoopbackPorts
	if ports == nil {
		ports = CloudPorts()
	}
	if err := n.startPodNetwork(ctx, ports); err != nil {
		return nil, err
	}
	n.PauseImage, n.OperatorImage = images.pause, images.operator
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	for _, archive := range images.archives {
		if err := n.ctr(ctx, "images", "import", "--snapshotter", "native", archive); err != nil {
			return nil, err
		}
	}
	if err := n.startKubelet(filepath.Join(assets, "kubelet")); err != nil {
		return nil, err
	}
	if err := n.waitRegistered(ctx, 2*time.Minute); err != nil {
		return n, err
	}
	return n, n.label(ctx, opts.Labels)
}

// containerdConfig is containerd's configuration: everything under the node's folder, the
// native snapshotter (no overlay mounts in a container), runc with cgroupfs (no systemd), the
// pause image built here, and no negative oom_score_adj (the machine grants no
// CAP_SYS_RESOURCE: runc fails to start the pause container with one).
const containerdConfig = `version = 2
root = "{{dir}}/root"
state = "{{dir}}/state"
[grpc]
  address = "{{dir}}/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "{{dir}}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "{{dir}}/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{dir}}/cni/bin"
    conf_dir = "{{dir}}/cni/net.d"
`

// startContainerd starts containerd in a new mount namespace made rshared inside, and waits for
// its socket.
func (n *RealNode) startContainerd(ctx context.Context) error {
	conf := strings.NewReplacer("{{dir}}", n.dir, "{{pause}}", n.PauseImage).Replace(containerdConfig)
	path := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return err
	}
	n.socket = filepath.Join(n.dir, "containerd.sock")
	masks, err := maskSysctls(filepath.Join(n.dir, "sysctl"))
	if err != nil {
		return err
	}
	// unshare execs (no fork): the process started is containerd itself, in the namespace.
	n.containerd, err = startProcess(n.dir, "containerd", "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", masks+`mount --make-rshared / && exec containerd --config "$0"`, path)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if n.containerd.exited() {
			return false, fmt.Errorf("real node: containerd exited:\n%s", n.containerd.tail(30))
		}
		return exec.CommandContext(ctx, "ctr", "-a", n.socket, "version").Run() == nil, nil
	})
	if err != nil {
		return fmt.Errorf("real node: containerd did not serve %s: %w\n%s", n.socket, err, n.containerd.tail(30))
	}
	n.mountNS, err = os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.containerd.cmd.Process.Pid))
	return err
}

// kubeletSysctls are the kernel settings a kubelet sets at start when they differ (its
// setupKernelTunables), with the values it wants. They are the machine's, not a namespace's:
// kernel.panic=10 and kernel.panic_on_oops=1 would stay after the node, on a machine others use.
var kubeletSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// maskSysctls writes, for each of kubeletSysctls, a file holding the value the kubelet wants, and
// returns the shell commands that bind them over /proc/sys in the node's mount namespace: the
// kubelet reads what it wants and writes nothing to the machine.
func maskSysctls(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	var sh strings.Builder
	for name, value := range kubeletSysctls {
		file := filepath.Join(dir, strings.ReplaceAll(name, "/", "."))
		if err := os.WriteFile(file, []byte(value+"\n"), 0o600); err != nil {
			return "", err
		}
		fmt.Fprintf(&sh, "mount --bind %s /proc/sys/%s && ", file, name)
	}
	return sh.String(), nil
}

func readSysctls() map[string]string {
	out := map[string]string{}
	for name := range kubeletSysctls {
		if b, err := os.ReadFile("/proc/sys/" + name); err == nil {
			out[name] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// restoreSysctls puts back a setting that changed while the node ran and says so: the masks
// of maskSysctls should have kept every one.
func restoreSysctls(before map[string]string) error {
	var errs []error
	for name, now := range readSysctls() {
		if was, ok := before[name]; ok && was != now {
			errs = append(errs, fmt.Errorf("real node: the machine's %s changed from %s to %s while it ran (restored)", name, was, now))
			_ = os.WriteFile("/proc/sys/"+name, []byte(was+"\n"), 0o644)
		}
	}
	return errors.Join(errs...)
}

// ctr runs containerd's client against the node's containerd, in the kubelet's namespace.
func (n *RealNode) ctr(ctx context.Context, args ...string) error {
	out, err := n.ctrOutput(ctx, args...)
	if err != nil {
		return fmt.Errorf("real node: ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func (n *RealNode) ctrOutput(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "ctr", append([]string{"-a", n.socket, "-n", "k8s.io"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// kubeletConfig is a KubeletConfiguration for a node without systemd, swap accounting, QoS
// cgroups or CAP_SYS_RESOURCE, that trusts every client (a test node on loopback ports), and
// leaves the machine's iptables alone (its chains would outlive it, and KUBE-FIREWALL drops
// connections to 127.0.0.0/8 from other addresses).
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
containerRuntimeEndpoint: unix://{{socket}}
address: {{ip}}
port: {{port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{healthz}}
podLogsDir: {{dir}}/pod-logs
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
registerNode: true
makeIPTablesUtilChains: false
`

// startKubelet starts the kubelet in containerd's mount namespace.
func (n *RealNode) startKubelet(bin string) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	conf := strings.NewReplacer("{{socket}}", n.socket, "{{ip}}", n.IP, "{{dir}}", n.dir,
		"{{port}}", strconv.Itoa(ports[0]), "{{healthz}}", strconv.Itoa(ports[1])).Replace(kubeletConfig)
	confPath := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		return err
	}
	kubeconfig, err := n.sim.KubeconfigFor(n.dir, "system:node:"+n.Name, "system:nodes", "system:masters")
	if err != nil {
		return err
	}
	n.kubelet, err = startProcess(n.dir, "kubelet", "nsenter", "--mount=/proc/"+strconv.Itoa(n.containerd.cmd.Process.Pid)+"/ns/mnt", "--",
		bin, "--config="+confPath, "--kubeconfig="+kubeconfig, "--hostname-override="+n.Name,
		"--node-ip="+n.IP, "--provider-id=openstack:///"+n.InstanceID, "--root-dir="+kubeletRoot, "--cert-dir="+filepath.Join(n.dir, "pki"), "--v=2")
	return err
}

// label adds labels to the Node, as an installer does for roles: the kubelet refuses to set
// node-role.kubernetes.io labels itself.
func (n *RealNode) label(ctx context.Context, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return err
	}
	_, err = n.sim.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// waitRegistered waits until the Node exists and its kubelet reports the container runtime up.
func (n *RealNode) waitRegistered(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*process{n.containerd, n.kubelet} {
			if p.exited() {
				return false, fmt.Errorf("real node: %s exited:\n%s", p.name, p.tail(30))
			}
		}
		node, err := n.sim.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				// Without a CNI the runtime's network is not ready, and the node with it:
				// pods on the host network run all the same.
				return c.Status == corev1.ConditionTrue || strings.Contains(c.Message, "NetworkReady=false"), nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("real node %s did not register (%s): %w\nkubelet log:\n%s", n.Name, last, err, n.kubelet.tail(30))
	}
	return nil
}

// Stop stops the kubelet, removes every container, stops containerd, ends whatever else runs in
// the node's mount namespace (its mounts go with it) and removes what the node wrote.
func (n *RealNode) Stop() error {
	var errs []error
	if n.kubelet != nil {
		n.kubelet.stop()
	}
	if n.containerd != nil && !n.containerd.exited() {
		errs = append(errs, n.removeContainers())
		n.containerd.stop()
	}
	if n.mountNS != "" {
		errs = append(errs, killNamespace(n.mountNS))
	}
	if n.network {
		errs = append(errs, stopPodNetwork())
		n.network = false
	}
	n.stopMetadataService()
	n.kubelet, n.containerd, n.mountNS = nil, nil, ""
	if n.before != nil {
		errs = append(errs, restoreDirs(hostDirs, n.before))
		n.before = nil
	}
	for d, existed := range n.existed {
		if !existed {
			errs = append(errs, removeEmptyTree(d))
		}
	}
	n.existed = nil
	if n.sysctls != nil {
		errs = append(errs, restoreSysctls(n.sysctls))
		n.sysctls = nil
	}
	if n.dir != "" {
		errs = append(errs, os.RemoveAll(n.dir))
		n.dir = ""
	}
	if n.lock != nil {
		_ = n.lock.Close() // releases the flock
		n.lock = nil
	}
	return errors.Join(errs...)
}

// removeContainers kills and deletes every task and container (pods' sandboxes too): their
// processes run in namespaces of their own, which killing containerd would not end.
func (n *RealNode) removeContainers() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := n.ctrOutput(ctx, "tasks", "ls")
	if err != nil {
		return fmt.Errorf("real node: listing tasks: %w: %s", err, out)
	}
	var errs []error
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] == "TASK" {
			continue
		}
		if pid, err := strconv.Atoi(f[1]); err == nil && pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		// A sandbox's task may already be gone: containerd's CRI deletes it when it exits.
		// A shim that ended with its task answers "ttrpc: closed".
		if err := n.ctr(ctx, "tasks", "delete", "--force", f[0]); err != nil && !strings.Contains(err.Error(), "not found") && !strings.Contains(err.Error(), "ttrpc: closed") {
			errs = append(errs, err)
		}
	}
	ids, err := n.ctrOutput(ctx, "containers", "ls", "-q")
	if err != nil {
		return fmt.Errorf("real node: listing containers: %w: %s", err, ids)
	}
	for _, id := range strings.Fields(ids) {
		if err := n.ctr(ctx, "containers", "delete", id); err != nil && !strings.Contains(err.Error(), "not found") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killNamespace kills every process left in the mount namespace ns (containerd's shims) and waits
// for them to end: with the last one the namespace and its mounts are gone.
func killNamespace(ns string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := namespacePIDs(ns)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("real node: processes %v still in mount namespace %s", pids, ns)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func namespacePIDs(ns string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if link, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && link == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// snapshotDirs records the entries of each folder; an absent folder is recorded as nil.
func snapshotDirs(dirs []string) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			out[d] = nil
			continue
		}
		out[d] = map[string]bool{}
		for _, e := range entries {
			out[d][e.Name()] = true
		}
	}
	return out
}

// restoreDirs removes what was added to each folder since snapshotDirs, and a folder that was
// absent.
func restoreDirs(dirs []string, before map[string]map[string]bool) error {
	var errs []error
	for _, d := range dirs {
		had := before[d]
		if had == nil {
			errs = append(errs, os.RemoveAll(d))
			continue
		}
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if !had[e.Name()] {
				errs = append(errs, os.RemoveAll(filepath.Join(d, e.Name())))
			}
		}
	}
	return errors.Join(errs...)
}

// removeEmptyTree removes dir and the folders under it, deepest first, with rmdir only: a
// cgroup goes when no process is left in it, and nothing that holds a file is removed.
func removeEmptyTree(dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return nil
	}
	var dirs []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("real node: removing %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// lockFile takes an exclusive flock on path, waiting for another holder until ctx ends.
func lockFile(ctx context.Context, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
			// Who holds it, for whoever waits: a test binary, or make demo's sandbox.
			if err := f.Truncate(0); err == nil {
				_, _ = f.WriteAt([]byte(fmt.Sprintf("pid %d (%s)\n", os.Getpid(), filepath.Base(os.Args[0]))), 0)
			}
			return f, nil
		}
		select {
		case <-ctx.Done():
			holder, _ := os.ReadFile(path)
			f.Close()
			return nil, fmt.Errorf("real node: another real node, of %s, holds %s (one per machine: they share %s; make demo-down stops the demo's): %w",
				strings.TrimSpace(string(holder)), path, kubeletRoot, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// freePorts returns n ports of 127.0.0.1 free at the time of asking.
func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// nodeImageSet is what test/env/node/images.sh built: the images' names and archives.
type nodeImageSet struct {
	pause, operator string
	archives        []string
	refs            []string // the reference of each archive
}

// nodeScripts is test/env/node, where the node's scripts and programs are.
func nodeScripts() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "env", "node")
}

// buildImages builds the node's images into dir with test/env/node/images.sh: the operator's
// image from the code under test, so it is built for every node.
func buildImages(ctx context.Context, dir string, operands map[string]string) (nodeImageSet, error) {
	script := filepath.Join(nodeScripts(), "images.sh")
	var stderr strings.Builder
	cmd := exec.CommandContext(ctx, script, dir)
	cmd.Env = os.Environ()
	for k, v := range operands {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nodeImageSet{}, fmt.Errorf("real node: building its images (%s): %w\n%s", script, err, stderr.String())
	}
	var s nodeImageSet
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ref, archive, ok := strings.Cut(line, "\t")
		if !ok {
			continue
		}
		switch {
		case strings.Contains(ref, "/pause:"):
			s.pause = ref
		case strings.Contains(ref, "/manila-setup-operator:"):
			s.operator = ref
		}
		s.archives = append(s.archives, archive)
		s.refs = append(s.refs, ref)
	}
	if s.pause == "" || s.operator == "" {
		return nodeImageSet{}, fmt.Errorf("real node: %s printed no pause and operator image: %q", script, out)
	}
	return s, nil
}

// PodLogDir is where the kubelet writes its pods' container logs (namespace_pod_uid/container/).
func (n *RealNode) PodLogDir() string { return filepath.Join(n.dir, "pod-logs") }

// ContainerLogs returns the last lines of what a container of the node's pod wrote, from the
// kubelet's log files (its current and earlier runs, oldest first): what `kubectl logs` shows.
func (n *RealNode) ContainerLogs(namespace, pod, container string, lines int) string {
	files, _ := filepath.Glob(filepath.Join(n.PodLogDir(), namespace+"_"+pod+"_*", container, "*.log"))
	sort.Strings(files)
	var all []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		all = append(all, "== "+filepath.Base(f))
		all = append(all, strings.Split(strings.TrimRight(string(b), "\n"), "\n")...)
	}
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
