package machineapi

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// GuestWorkersOptions say which workers get a real body.
type GuestWorkersOptions struct {
	// Max is how many guest workers run at once; the others get kwok Nodes. Each costs about
	// 850 MiB of host memory.
	Max int
	// Unattached: workers without a port on the storage network get a body too, so that a pod
	// on them fails to mount as on a real cloud; else they get kwok Nodes.
	Unattached bool
	// ShellImage, when set, is built into the guests' containerd too: busybox with its applets
	// (test/env/node/images.sh, SHELL_IMAGE), for pods that write and read.
	ShellImage string
	// Log says what happens (a guest booting, Ready, failing, stopped); nil: nothing is said.
	Log func(format string, args ...any)
}

// GuestWorkers gives worker servers real bodies (nodeboot.Bodies, ClusterOptions.Bodies): the
// first servers that come up with a port on the storage network (or any, with Unattached), up
// to Max at a time, become guest nodes: a real kernel, containerd and a kubelet under QEMU,
// with the server's ports on the cloud's networks, so that their pods mount Manila shares for
// real. Every other server gets a kwok Node, as before.
type GuestWorkers struct {
	opts    GuestWorkersOptions
	sim     *testenv.SimCluster
	network *gophercloud.ServiceClient
	nfs     *testenv.NFSBackend
	storage string          // the storage network's ID
	ctx     context.Context // the sandbox's: a guest lives as long as the sandbox

	imagesOnce sync.Once
	images     *testenv.NodeImages
	imagesErr  error
	imagesDir  string

	mu      sync.Mutex
	bodies  map[string]*guestBody // by server ID
	refused map[string]bool       // servers whose body did not start: they stay on kwok
	subnets map[int]bool          // pod subnets 10.244.N.0/24 in use
}

type guestBody struct {
	server, name string
	storageIP    string
	subnet       int
	node         *testenv.GuestNode // nil until it is Ready
}

// NewGuestWorkers checks that guests can run here (root, the real NFS back end) and starts
// building the node images in the background. The guests live until ctx ends or Stop; sim's
// apiserver must have the node proxy (APIServerOptions.GuestNodes).
func NewGuestWorkers(ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud, clients *Clients, opts GuestWorkersOptions) (*GuestWorkers, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("guest workers need root (QEMU's taps in the cloud's namespaces)")
	}
	nfs, err := testenv.LoadNFSBackend()
	if err != nil {
		return nil, err
	}
	storage := cloud.Seed.Networks["storage"]
	if storage == "" {
		return nil, fmt.Errorf("the loopback cloud has no storage network")
	}
	if opts.Log == nil {
		opts.Log = func(string, ...any) {}
	}
	g := &GuestWorkers{opts: opts, sim: sim, network: clients.Network, nfs: nfs, storage: storage, ctx: ctx,
		bodies: map[string]*guestBody{}, refused: map[string]bool{}, subnets: map[int]bool{}}
	go g.buildImages()
	return g, nil
}

// buildImages builds, once, the images a worker's pods run: the driver's node plugins under the
// names the operator renders, and the writers' shell.
func (g *GuestWorkers) buildImages() {
	g.imagesOnce.Do(func() {
		images := map[string]string{}
		if g.opts.ShellImage != "" {
			images["SHELL_IMAGE"] = g.opts.ShellImage
		}
		for env, ref := range operator.DefaultImages.ImageEnv() {
			switch env {
			case "DRIVER_IMAGE", "NFS_DRIVER_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE", "LIVENESS_PROBE_IMAGE":
				images[env] = *ref
				if v := os.Getenv(env); v != "" {
					images[env] = v
				}
			}
		}
		// Short: podman refuses a run root of more than 50 characters.
		if g.imagesDir, g.imagesErr = os.MkdirTemp("", "msimg-"); g.imagesErr != nil {
			return
		}
		g.images, g.imagesErr = testenv.BuildNodeImages(g.ctx, g.imagesDir, images)
	})
}

// Take gives a worker server a guest body (one with a storage port, unless Unattached), while
// fewer than Max run.
func (g *GuestWorkers) Take(ctx context.Context, srv *servers.Server, controlPlane bool, giveBack func()) bool {
	if controlPlane {
		return false
	}
	g.mu.Lock()
	full := len(g.bodies) >= g.opts.Max || g.refused[srv.ID]
	g.mu.Unlock()
	if full {
		return false
	}
	nics, err := g.nicsOf(ctx, srv.ID)
	if err != nil || nics == nil {
		if err != nil {
			g.opts.Log("warning: worker %s stays a kwok node: %v", srv.Name, err)
		}
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bodies) >= g.opts.Max {
		return false
	}
	b := &guestBody{server: srv.ID, name: srv.Name}
	if len(nics) > 1 {
		b.storageIP = strings.Split(nics[1].Addrs[0], "/")[0]
	}
	for b.subnet = 1; g.subnets[b.subnet]; b.subnet++ {
	}
	g.subnets[b.subnet] = true
	g.bodies[srv.ID] = b
	if b.storageIP != "" {
		g.opts.Log("worker %s has a storage port: booting it as a guest node (a real kernel, containerd and kubelet; about a minute)", srv.Name)
	} else {
		g.opts.Log("worker %s has no storage port: booting it as a guest node all the same (a real kernel, containerd and kubelet; about a minute)", srv.Name)
	}
	go g.boot(b, nics, giveBack)
	return true
}

// nicsOf returns the guest NICs of the server's ports, the machine network's first and then
// the storage network's; nil when the server has no port on the machine network, or none on
// the storage network and Unattached is not set.
func (g *GuestWorkers) nicsOf(ctx context.Context, serverID string) ([]testenv.GuestNIC, error) {
	pages, err := ports.List(g.network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	machineNet := netip.MustParsePrefix(MachineNetwork)
	var machine, storage []testenv.GuestNIC
	for _, p := range all {
		for _, ip := range p.FixedIPs {
			a, err := netip.ParseAddr(ip.IPAddress)
			switch {
			case err != nil:
			case p.NetworkID == g.storage && a.Is4():
				storage = append(storage, g.nfs.StoragePort(p.MACAddress, ip.IPAddress+"/24"))
			case machineNet.Contains(a):
				machine = append(machine, g.nfs.MachinePort(p.MACAddress, fmt.Sprintf("%s/%d", ip.IPAddress, machineNet.Bits())))
			}
		}
	}
	if len(machine) == 0 || len(storage) == 0 && !g.opts.Unattached {
		return nil, nil
	}
	if len(storage) == 0 {
		return machine[:1], nil
	}
	return append(machine[:1], storage[:1]...), nil
}

func (g *GuestWorkers) boot(b *guestBody, nics []testenv.GuestNIC, giveBack func()) {
	start := time.Now()
	g.buildImages()
	err := g.imagesErr
	var n *testenv.GuestNode
	if err == nil {
		n, err = testenv.StartGuestNode(g.ctx, g.sim, testenv.GuestNodeOptions{
			Name: b.name, InstanceID: b.server, NICs: nics, Images: g.images,
			PodSubnet: fmt.Sprintf("10.244.%d.0/24", b.subnet),
			Labels:    map[string]string{"node-role.kubernetes.io/worker": ""},
		})
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bodies[b.server] != b { // released while it booted
		if n != nil {
			n.Stop()
		}
		return
	}
	if err != nil {
		if g.ctx.Err() == nil {
			g.opts.Log("warning: worker %s did not start as a guest node (%v): it gets a kwok node instead", b.name, err)
		}
		delete(g.bodies, b.server)
		delete(g.subnets, b.subnet)
		g.refused[b.server] = true
		giveBack()
		return
	}
	b.node = n
	if b.storageIP != "" {
		g.opts.Log("guest node %s Ready in %s: its storage NIC %s is on the storage network; its pods mount Manila shares through its own kernel",
			b.name, time.Since(start).Round(100*time.Millisecond), b.storageIP)
	} else {
		g.opts.Log("guest node %s Ready in %s, with no storage NIC", b.name, time.Since(start).Round(100*time.Millisecond))
	}
}

// Release stops the guest of a server that is gone.
func (g *GuestWorkers) Release(serverID string) {
	g.mu.Lock()
	b := g.bodies[serverID]
	delete(g.bodies, serverID)
	if b != nil {
		delete(g.subnets, b.subnet)
	}
	g.mu.Unlock()
	if b != nil && b.node != nil {
		g.opts.Log("worker %s's server is gone: stopping its guest node", b.name)
		b.node.Stop()
	}
}

// GuestWorker is a worker server whose body is a guest node.
type GuestWorker struct {
	*testenv.GuestNode
	// StorageIP is its address on the storage network; empty when it has no storage port.
	StorageIP string
}

// Ready returns the guest workers whose nodes are Ready, by name.
func (g *GuestWorkers) Ready() []GuestWorker {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []GuestWorker
	for _, b := range g.bodies {
		if b.node != nil {
			out = append(out, GuestWorker{GuestNode: b.node, StorageIP: b.storageIP})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Stop stops every guest node.
func (g *GuestWorkers) Stop() {
	g.mu.Lock()
	bodies := g.bodies
	g.bodies = map[string]*guestBody{}
	g.mu.Unlock()
	for _, b := range bodies {
		if b.node != nil {
			b.node.Stop()
		}
	}
	if g.imagesDir != "" {
		_ = os.RemoveAll(g.imagesDir)
	}
}
