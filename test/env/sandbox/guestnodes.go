package main

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
	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
)

// shellImage is the busybox image (test/env/node/images.sh, SHELL_IMAGE) of the demo's writers.
const shellImage = "localhost/manila-setup/shell:sandbox"

// guestWorkers gives worker servers real bodies (nodeboot.Bodies): the first servers that come
// up with a port on the storage network, up to max at a time, become guest nodes (a real
// kernel, containerd and a kubelet under QEMU, with the server's ports on the cloud's
// networks), so that their pods mount Manila shares for real. Every other server gets a kwok
// Node, as before: a worker that is not attached has nothing to mount with, and each guest
// costs about 850 MiB of host memory.
type guestWorkers struct {
	max     int
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

// newGuestWorkers checks that guests can run here (root, the real NFS back end, the guest
// kernel) and starts building the node images in the background; the reason is returned when
// they cannot.
func newGuestWorkers(ctx context.Context, max int, sim *testenv.SimCluster, cloud *testenv.Cloud, clients *machineapi.Clients) (*guestWorkers, string) {
	if os.Geteuid() != 0 {
		return nil, "not root"
	}
	nfs, err := testenv.LoadNFSBackend()
	if err != nil {
		return nil, err.Error()
	}
	storage := cloud.Seed.Networks["storage"]
	if storage == "" {
		return nil, "the loopback cloud has no storage network"
	}
	g := &guestWorkers{max: max, sim: sim, network: clients.Network, nfs: nfs, storage: storage, ctx: ctx,
		bodies: map[string]*guestBody{}, refused: map[string]bool{}, subnets: map[int]bool{}}
	go g.buildImages()
	return g, ""
}

// buildImages builds, once, the images a worker's pods run: the driver's node plugins under the
// names the operator renders, and the writers' shell.
func (g *guestWorkers) buildImages() {
	g.imagesOnce.Do(func() {
		images := map[string]string{"SHELL_IMAGE": shellImage}
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

// Take gives a worker server with a storage port a guest body, while fewer than max run.
func (g *guestWorkers) Take(ctx context.Context, srv *servers.Server, controlPlane bool, giveBack func()) bool {
	if controlPlane {
		return false
	}
	g.mu.Lock()
	full := len(g.bodies) >= g.max || g.refused[srv.ID]
	g.mu.Unlock()
	if full {
		return false
	}
	nics, err := g.nicsOf(ctx, srv.ID)
	if err != nil || nics == nil {
		if err != nil {
			step("warning: worker %s stays a kwok node: %v", srv.Name, err)
		}
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.bodies) >= g.max {
		return false
	}
	b := &guestBody{server: srv.ID, name: srv.Name, storageIP: strings.Split(nics[1].Addrs[0], "/")[0]}
	for b.subnet = 1; g.subnets[b.subnet]; b.subnet++ {
	}
	g.subnets[b.subnet] = true
	g.bodies[srv.ID] = b
	step("worker %s has a storage port: booting it as a guest node (a real kernel, containerd and kubelet; about a minute)", srv.Name)
	go g.boot(b, nics, giveBack)
	return true
}

// nicsOf returns the guest NICs of the server's ports, the machine network's first; nil when
// the server has no port on both the machine network and the storage network.
func (g *guestWorkers) nicsOf(ctx context.Context, serverID string) ([]testenv.GuestNIC, error) {
	pages, err := ports.List(g.network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	machineNet := netip.MustParsePrefix(machineapi.MachineNetwork)
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
	if len(machine) == 0 || len(storage) == 0 {
		return nil, nil
	}
	return append(machine[:1], storage[:1]...), nil
}

func (g *guestWorkers) boot(b *guestBody, nics []testenv.GuestNIC, giveBack func()) {
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
			step("warning: worker %s did not start as a guest node (%v): it gets a kwok node instead", b.name, err)
		}
		delete(g.bodies, b.server)
		delete(g.subnets, b.subnet)
		g.refused[b.server] = true
		giveBack()
		return
	}
	b.node = n
	step("guest node %s Ready in %s: its storage NIC %s is on the storage network; its pods mount Manila shares through its own kernel",
		b.name, since(start), b.storageIP)
}

// Release stops the guest of a server that is gone.
func (g *guestWorkers) Release(serverID string) {
	g.mu.Lock()
	b := g.bodies[serverID]
	delete(g.bodies, serverID)
	if b != nil {
		delete(g.subnets, b.subnet)
	}
	g.mu.Unlock()
	if b != nil && b.node != nil {
		step("worker %s's server is gone: stopping its guest node", b.name)
		b.node.Stop()
	}
}

// ready returns the guest workers whose nodes are Ready, by name.
func (g *guestWorkers) ready() []*guestBody {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []*guestBody
	for _, b := range g.bodies {
		if b.node != nil {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// stop stops every guest node.
func (g *guestWorkers) stop() {
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
