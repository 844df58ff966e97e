package testenv

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
)

// NodeImages are the images a node's containerd loads (test/env/node/images.sh), built once
// for every node of a test.
type NodeImages struct {
	// Pause is the pods' sandbox image, Operator the operator's own image (built, not loaded).
	Pause, Operator string
	archives        []string
}

// BuildNodeImages builds the node images into dir: the pause and operator images, and one per
// variable of images (DRIVER_IMAGE, SHELL_IMAGE, ...) under the reference it maps to.
func BuildNodeImages(ctx context.Context, dir string, images map[string]string) (*NodeImages, error) {
	s, err := buildImages(ctx, dir, images)
	if err != nil {
		return nil, err
	}
	// A guest node runs no operator pod (its pods need the kubernetes Service, which guests do
	// not serve yet): its image would take a quarter of the guest's tmpfs.
	n := &NodeImages{Pause: s.pause, Operator: s.operator}
	for i, ref := range s.refs {
		if ref != s.operator {
			n.archives = append(n.archives, s.archives[i])
		}
	}
	return n, nil
}

// GuestNodeOptions shape a guest node.
type GuestNodeOptions struct {
	// Name of the Node and the guest's host name.
	Name string
	// InstanceID is the Nova server the node is the body of: its providerID is
	// openstack:///InstanceID. A new UUID when empty.
	InstanceID string
	// NICs are the server's Neutron ports, the machine network's first: the node IP is its
	// first address.
	NICs []GuestNIC
	// Images are loaded into the node's containerd.
	Images *NodeImages
	// PodSubnet is the range of the node's pod bridge (10.244.1.0/24 when empty): each node of
	// a cluster needs its own.
	PodSubnet string
	// LoopbackPorts are ports of the host's 127.0.0.1 that the node (and its host-network pods)
	// reach at the guest's own 127.0.0.1, as the kubelet reaches the apiserver: the loopback
	// cloud's (CloudPorts) when nil. The apiserver's port is always forwarded.
	LoopbackPorts []int
	// MemoryMiB of the guest; 640 when 0 (the budget is 1 GiB of host memory per guest, QEMU's
	// own and its translated code's included).
	MemoryMiB int
	// Labels are added to the Node, as an installer adds roles.
	Labels map[string]string
}

// GuestNode is a Kubernetes node whose body is a guest: a real kernel under QEMU with the Nova
// server's ports on the cloud's networks, running containerd and a kubelet of the cluster's
// version (the host's own binaries, read over 9p). Its pods' volumes are mounted by that
// kernel, as on a worker of a real cluster, and the apiserver reaches its kubelet (logs, exec)
// through the cluster's node proxy (APIServerOptions.GuestNodes).
type GuestNode struct {
	Name, IP, InstanceID string
	*Guest

	sim      *SimCluster
	dir      string
	addrs    []string     // what the apiserver dials for this node, routed to its kubelet
	metadata *http.Server // the server's metadata service, reached at 169.254.169.254:80
}

// The kubelet's ports inside a guest: the API the apiserver reaches, and its health endpoint.
const (
	guestKubeletPort = 10250
	guestHealthzPort = 10248
)

// NewGuestNode starts a guest node for one test and stops it when the test ends.
func NewGuestNode(t testing.TB, ctx context.Context, sim *SimCluster, opts GuestNodeOptions) *GuestNode {
	t.Helper()
	start := time.Now()
	n, err := StartGuestNode(ctx, sim, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("guest node %s (%s) registered in %s", n.Name, n.IP, time.Since(start).Round(100*time.Millisecond))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("guest node %s, kubelet log (last lines):\n%s", n.Name, n.KubeletLog(context.Background(), 30))
		}
		n.Stop()
	})
	return n
}

// StartGuestNode boots the guest, starts containerd with the images and the kubelet, and waits
// until the Node is registered and Ready.
func StartGuestNode(ctx context.Context, sim *SimCluster, opts GuestNodeOptions) (_ *GuestNode, err error) {
	if sim.nodes == nil {
		return nil, errors.New("guest node: the cluster's apiserver has no node proxy (SimOptions.APIServer.GuestNodes)")
	}
	if opts.Images == nil {
		return nil, errors.New("guest node: no images (BuildNodeImages)")
	}
	if len(opts.NICs) == 0 || len(opts.NICs[0].Addrs) == 0 {
		return nil, fmt.Errorf("guest node %s: no machine network address", opts.Name)
	}
	assets, err := NodeAssets()
	if err != nil {
		return nil, err
	}
	cni, err := BuiltFolder(ctx, "MANILA_SETUP_OPERAND_BIN", "test/env/node/operands.sh", "cni/bridge")
	if err != nil {
		return nil, err
	}
	ip, _, err := net.ParseCIDR(opts.NICs[0].Addrs[0])
	if err != nil {
		return nil, fmt.Errorf("guest node %s: machine address %q: %w", opts.Name, opts.NICs[0].Addrs[0], err)
	}
	n := &GuestNode{Name: opts.Name, IP: ip.String(), InstanceID: opts.InstanceID, sim: sim}
	if n.InstanceID == "" {
		n.InstanceID = string(uuid.NewUUID())
	}
	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	// The guest reads this folder through the host's root: what the node needs from the host
	// is written here before it boots.
	if n.dir, err = os.MkdirTemp("", "msgnode-"); err != nil {
		return nil, err
	}
	api, err := url.Parse(sim.Config.Host)
	if err != nil {
		return nil, err
	}
	ports := opts.LoopbackPorts
	if ports == nil {
		ports = CloudPorts()
	}
	ports = append(append([]int(nil), ports...), mustPort(api.Port()))
	if err := n.writeFiles(opts, filepath.Join(cni, "cni")); err != nil {
		return nil, err
	}
	srv, metadataPort, err := serveMetadata(n.InstanceID, n.Name)
	if err != nil {
		return nil, err
	}
	n.metadata = srv
	kubeletPort, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	memory := opts.MemoryMiB
	if memory == 0 {
		memory = 640
	}
	if n.Guest, err = StartGuest(ctx, GuestOptions{
		Name: opts.Name, NICs: opts.NICs, MemoryMiB: memory, HostRoot: true,
		HostLink: &HostLink{Forwards: map[int]int{kubeletPort[0]: guestKubeletPort}},
	}); err != nil {
		return nil, err
	}
	// The apiserver dials a node by its host name first, then its addresses.
	to := "127.0.0.1:" + strconv.Itoa(kubeletPort[0])
	for _, a := range []string{n.Name, n.IP} {
		n.addrs = append(n.addrs, net.JoinHostPort(a, strconv.Itoa(guestKubeletPort)))
	}
	sim.nodes.route(to, n.addrs...)

	script := strings.NewReplacer(
		"{{dir}}", n.dir, "{{ports}}", strings.Trim(fmt.Sprint(ports), "[]"), "{{host}}", HostLinkHost,
		"{{kubelet}}", filepath.Join(assets, "kubelet"), "{{name}}", n.Name, "{{ip}}", n.IP,
		"{{instance}}", n.InstanceID, "{{archives}}", strings.Join(opts.Images.archives, " "),
		"{{tmpfs}}", strconv.Itoa(memory/2), "{{metadata}}", metadataAddress, "{{metadataPort}}", strconv.Itoa(metadataPort),
	).Replace(guestNodeScript)
	out, code, err := n.Run(ctx, 5*time.Minute, script)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, fmt.Errorf("guest node %s: starting containerd and the kubelet: exit code %d:\n%s", n.Name, code, out)
	}
	if err := n.initializeAsCloudController(ctx, opts.NICs, 4*time.Minute); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx, 4*time.Minute); err != nil {
		return nil, err
	}
	if len(opts.Labels) > 0 {
		rn := &RealNode{Name: n.Name, sim: sim}
		if err := rn.label(ctx, opts.Labels); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func mustPort(s string) int {
	p, _ := strconv.Atoi(s)
	return p
}

// guestNodeScript runs in the guest (its init's shell, busybox): a writable root above the
// host's (an overlay on a tmpfs: the host's files are never written), the kernel's file systems
// in it, and there, with the host's own programs, the forwards to the host's loopback ports,
// containerd with the images, and the kubelet. Their logs are in the guest's /var/log/ms-node.
const guestNodeScript = `set -e
mkdir -p /node /upper
mount -t tmpfs -o size={{tmpfs}}m tmpfs /upper
mkdir -p /upper/u /upper/w
mount -t overlay overlay -o lowerdir=/host,upperdir=/upper/u,workdir=/upper/w /node
mount -t proc proc /node/proc
mount -t sysfs sysfs /node/sys
mount -t cgroup2 cgroup2 /node/sys/fs/cgroup
mount -t devtmpfs devtmpfs /node/dev
mkdir -p /node/dev/pts /node/dev/shm
mount -t devpts devpts /node/dev/pts
mount -t tmpfs tmpfs /node/dev/shm
mount -t tmpfs tmpfs /node/run
# The kubelet's folders start empty: the host's, below, may hold a real node's pods.
for d in /node/var/lib/kubelet /node/var/log/pods /node/var/log/containers; do mkdir -p $d; mount -t tmpfs tmpfs $d; done
# containerd's own tmpfs: its overlayfs snapshotter keeps each layer once for all containers (the
# native one copies an image per container), and an overlay's upper layer cannot be on the
# node's root, itself an overlay.
mkdir -p /node/var/lib/ms-node
mount -t tmpfs -o size={{tmpfs}}m tmpfs /node/var/lib/ms-node
mount --make-rshared /node
# The controllers a pod's cgroup asks for, and a machine ID of the node's own (the host's would
# make every guest node one machine).
for c in cpuset cpu io memory pids; do echo +$c >/node/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true; done
cat /proc/sys/kernel/random/uuid | tr -d - >/node/etc/machine-id
hostname >/node/etc/hostname
# Nova's metadata service, where a server finds it (the driver's node plugin asks it for the
# instance's ID).
ip addr add {{metadata}}/32 dev lo
# The node's root is the overlay, made the root of a mount namespace of its own (as switch_root
# makes a system's root): a process that enters a container's mount namespace (runc exec, for
# kubectl exec) is put at the namespace's top root, which must be the node's, not the
# initramfs below. The guest's init reaches the node's namespace through the kubelet's
# (RunOnNode), and reads its logs on the overlay, which both see.
cd /node
exec unshare -m --propagation slave sh -ec 'mount --move . / && exec chroot . /bin/sh -ec "$0"' '
# Shared inside the node, as on a systemd host: the kubelet and the CSI node plugins need
# their mounts under /var/lib/kubelet to propagate (Bidirectional mounts).
mount --make-rshared /
mkdir -p /var/log/ms-node /run/ms-node
for p in {{ports}}; do
  setsid socat TCP-LISTEN:$p,bind=127.0.0.1,fork,reuseaddr TCP:{{host}}:$p </dev/null >>/var/log/ms-node/forward.log 2>&1 &
done
setsid socat TCP-LISTEN:80,bind={{metadata}},fork,reuseaddr TCP:{{host}}:{{metadataPort}} </dev/null >>/var/log/ms-node/forward.log 2>&1 &
setsid containerd --config {{dir}}/containerd.toml </dev/null >/var/log/ms-node/containerd.log 2>&1 &
i=0
until ctr -a /run/ms-node/containerd.sock version >/dev/null 2>&1; do
  i=$((i+1)); [ $i -lt 120 ] || { tail -n 20 /var/log/ms-node/containerd.log; exit 1; }
  sleep 0.5
done
for a in {{archives}}; do ctr -a /run/ms-node/containerd.sock -n k8s.io images import --snapshotter overlayfs "$a" >/dev/null; done
setsid {{kubelet}} --config={{dir}}/kubelet.yaml --kubeconfig={{dir}}/kubeconfig --hostname-override={{name}} \
  --cloud-provider=external --node-ip={{ip}} --provider-id=openstack:///{{instance}} --root-dir=/var/lib/kubelet \
  --cert-dir=/var/lib/kubelet/pki --v=2 </dev/null >/var/log/ms-node/kubelet.log 2>&1 &
echo $! >/var/log/ms-node/kubelet.pid
'
`

// guestContainerdConfig: as the real node's (containerdConfig), in the guest's own folders, with
// the overlayfs snapshotter (a kernel of its own: overlay mounts work in it).
const guestContainerdConfig = `version = 2
root = "/var/lib/ms-node/containerd"
state = "/run/ms-node/containerd"
[grpc]
  address = "/run/ms-node/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{{pause}}"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{{cni}}"
    conf_dir = "{{dir}}/net.d"
`

// guestKubeletConfig: the real node's (kubeletConfig) in a kernel of its own, where the kubelet
// may set its kernel settings, listening on the guest's addresses.
const guestKubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
localStorageCapacityIsolation: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
containerRuntimeEndpoint: unix:///run/ms-node/containerd.sock
address: 0.0.0.0
port: {{port}}
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: {{healthz}}
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

// guestPodNetwork is the node's pod network: a bridge of its own with the pods' gateway.
const guestPodNetwork = `{
  "cniVersion": "1.0.0",
  "name": "pods",
  "plugins": [{
    "type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
    "ipam": {"type": "host-local", "ranges": [[{"subnet": "{{subnet}}"}]], "routes": [{"dst": "0.0.0.0/0"}]}
  }]
}
`

func (n *GuestNode) writeFiles(opts GuestNodeOptions, cniBin string) error {
	subnet := opts.PodSubnet
	if subnet == "" {
		subnet = "10.244.1.0/24"
	}
	kubeconfig, err := n.sim.KubeconfigFor(n.dir, "system:node:"+n.Name, "system:nodes", "system:masters")
	if err != nil {
		return err
	}
	if err := os.Rename(kubeconfig, filepath.Join(n.dir, "kubeconfig")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(n.dir, "net.d"), 0o755); err != nil {
		return err
	}
	files := map[string]string{
		"containerd.toml":        strings.NewReplacer("{{pause}}", opts.Images.Pause, "{{cni}}", cniBin, "{{dir}}", n.dir).Replace(guestContainerdConfig),
		"kubelet.yaml":           strings.NewReplacer("{{port}}", strconv.Itoa(guestKubeletPort), "{{healthz}}", strconv.Itoa(guestHealthzPort)).Replace(guestKubeletConfig),
		"net.d/10-pods.conflist": strings.ReplaceAll(guestPodNetwork, "{{subnet}}", subnet),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// initializeAsCloudController does for the registered Node what OpenShift's
// openstack-cloud-controller-manager does for a kubelet started with --cloud-provider=external:
// it sets the Node's addresses from the server's ports (an InternalIP each, the node IP first,
// then the host name) and removes the taint node.cloudprovider.kubernetes.io/uninitialized. So a
// worker attached to the storage network lists its storage address, as on a real cluster, and
// what reads Node addresses (the operator, diagnose) sees what it would there; the kubelet
// leaves addresses set by a cloud provider alone.
func (n *GuestNode) initializeAsCloudController(ctx context.Context, nics []GuestNIC, timeout time.Duration) error {
	addresses := []corev1.NodeAddress{}
	for _, nic := range nics {
		if len(nic.Addrs) == 0 {
			continue
		}
		if ip, _, err := net.ParseCIDR(nic.Addrs[0]); err == nil {
			addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
		}
	}
	addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: n.Name})
	status, _ := json.Marshal(map[string]any{"status": map[string]any{"addresses": addresses}})
	nodes := n.sim.Client.CoreV1().Nodes()
	var last error
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := nodes.Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		var taints []corev1.Taint
		for _, t := range node.Spec.Taints {
			if t.Key != cloudUninitializedTaint {
				taints = append(taints, t)
			}
		}
		if len(taints) != len(node.Spec.Taints) {
			node.Spec.Taints = taints
			if _, err := nodes.Update(ctx, node, metav1.UpdateOptions{}); err != nil {
				last = err
				return false, nil
			}
		}
		if _, err := nodes.Patch(ctx, n.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
			last = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("guest node %s: setting its addresses as the cloud controller manager does: %v (%w)", n.Name, last, err)
	}
	return nil
}

// cloudUninitializedTaint is what a kubelet with --cloud-provider=external puts on its Node until
// the cloud controller manager has initialized it.
const cloudUninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// waitReady waits until the Node is registered and Ready.
func (n *GuestNode) waitReady(ctx context.Context, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		node, err := n.sim.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("guest node %s did not become Ready (%s): %w\nkubelet log:\n%s", n.Name, last, err, n.KubeletLog(context.Background(), 30))
	}
	return nil
}

// KubeletLog returns the last lines of the node's kubelet log.
func (n *GuestNode) KubeletLog(ctx context.Context, lines int) string {
	if n.Guest == nil {
		return ""
	}
	out, _, err := n.Run(ctx, 20*time.Second, fmt.Sprintf("tail -n %d /node/var/log/ms-node/kubelet.log", lines))
	if err != nil {
		return err.Error()
	}
	return out
}

// RunOnNode runs script with the node's shell (the host's /bin/sh) in the node's mount
// namespace, as `oc debug node` would: it sees the node's root and the pods' mounts.
func (n *GuestNode) RunOnNode(ctx context.Context, timeout time.Duration, script string) (string, int, error) {
	file := fmt.Sprintf("/tmp/ms-cmd-%d.sh", time.Now().UnixNano())
	wrapped := fmt.Sprintf("echo %s | base64 -d >/node%s && nsenter -t \"$(cat /node/var/log/ms-node/kubelet.pid)\" -m -- /bin/sh %s; rc=$?; rm -f /node%s; exit $rc",
		base64.StdEncoding.EncodeToString([]byte(script)), file, file, file)
	return n.Run(ctx, timeout, wrapped)
}

// Stop ends the guest (its kubelet and pods with it) and removes the node's files and routes.
func (n *GuestNode) Stop() {
	if n.sim != nil && n.sim.nodes != nil && len(n.addrs) > 0 {
		n.sim.nodes.unroute(n.addrs...)
	}
	if n.Guest != nil {
		n.Guest.Stop()
	}
	if n.metadata != nil {
		_ = n.metadata.Close()
	}
	if n.dir != "" {
		_ = os.RemoveAll(n.dir)
	}
}
