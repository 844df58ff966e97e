// Package nodeboot plays what a booted RHCOS server does for its cluster, which no fake virt
// driver does: once a server of the cluster is ACTIVE, its kubelet registers the server's Node,
// after nodeip-configuration chose the node IP. Both the real Machine API
// (test/testenv/machineapi) and the real Cluster API (test/testenv/capireal) use it, so a Node
// looks the same whichever controllers made its server.
//
// A Node is named as the server's hostname (its name), with spec.providerID
// openstack:///<server ID>, the node IP first among its InternalIPs and then every other address
// of the server's ports (the rule of machinectl/nodeip.go). When the server is gone, so is its
// Node: the kubelet stops, and the controllers delete the Node of a deleted Machine too.
package nodeboot

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// Interval is how often a booter looks at the servers: a kubelet registers within seconds of
// its server's boot, and a test run has up to eight clusters asking the same Nova at once.
const Interval = 2 * time.Second

// ProviderIDPrefix starts an OpenStack Node's and Machine's providerID; the server ID follows.
const ProviderIDPrefix = "openstack:///"

// Server is one of the cluster's servers, whose Node is registered once it is ACTIVE.
type Server struct {
	ID string
	// ControlPlane: the server is a master; its Node gets the master roles.
	ControlPlane bool
}

// Bodies gives some servers a real body, whose own kubelet registers the server's Node.
type Bodies interface {
	// Take is asked once for each ACTIVE server, before a kwok Node is registered for it: true
	// when it gives the server a body (started in the background), false to leave the server
	// to a kwok Node. A body that fails to start calls giveBack, and the next round asks again
	// (Take must then say no) and registers a kwok Node.
	Take(ctx context.Context, srv *servers.Server, controlPlane bool, giveBack func()) bool
	// Release stops the body of a server that is gone, before its Node is deleted.
	Release(serverID string)
}

// Booter registers the Nodes of the cluster's servers. Set every field before Run.
type Booter struct {
	// Servers lists the cluster's servers: those of its Machines' providerIDs (Machine API) or
	// those named after the cluster (Cluster API, whose Machines learn their server later).
	Servers func(context.Context) ([]Server, error)
	// Compute and Network see the cloud as the cluster's user does.
	Compute, Network *gophercloud.ServiceClient
	Nodes            machinectl.NodeRegistrar
	Kube             kubernetes.Interface
	Rule             machinectl.NodeIPRule
	// MachineNetwork is the ID of the network of the primary NIC (the installer's nodes network).
	MachineNetwork string
	// MastersSchedulable: the masters' Nodes take workloads (a compact cluster), no NoSchedule
	// taint on them.
	MastersSchedulable bool
	// Bodies, when set, may give a server a real body (a kubelet in a guest with the server's
	// ports) instead of a kwok Node; nil: every server gets a kwok Node.
	Bodies Bodies

	mu       sync.Mutex
	lastErr  error
	failures int               // rounds failed in a row
	quiet    int               // rounds in a row that did not ask Nova (settled)
	booted   map[string]string // server ID -> Node name
}

// Err returns the error of the booter's last round, nil if it went through.
func (b *Booter) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// Stuck returns the last round's error once five rounds in a row failed; a passing error (a busy
// Nova) is retried and not reported.
func (b *Booter) Stuck() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.failures < 5 {
		return nil
	}
	return b.lastErr
}

// Run registers and removes Nodes every interval until ctx ends.
func (b *Booter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := b.round(ctx)
		if ctx.Err() != nil {
			return
		}
		b.mu.Lock()
		b.lastErr = err
		if err != nil {
			b.failures++
		} else {
			b.failures = 0
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// round reads the project's servers in one list (a GET per server, twice a second per cluster,
// kept Nova's API busy for nothing), boots the Nodes of the cluster's ACTIVE servers and removes
// those of servers that are gone.
func (b *Booter) round(ctx context.Context) error {
	all, err := b.Servers(ctx)
	if err != nil {
		return err
	}
	// Every Machine's server has its Node and every Node's Machine is still there: Nova has
	// nothing to tell this round. Each list of every server costs Nova a read of them all and
	// Neutron two (their ports, their security groups), and a loaded test run has several
	// clusters asking every Interval. A full look every quietRounds still catches a server
	// deleted behind its Machine's back.
	if b.settled(all) && b.quiet < quietRounds {
		b.quiet++
		return nil
	}
	b.quiet = 0
	pages, err := servers.List(b.Compute, servers.ListOpts{}).AllPages(ctx)
	if err != nil {
		return fmt.Errorf("listing the servers: %w", err)
	}
	listed, err := servers.ExtractServers(pages)
	if err != nil {
		return err
	}
	byID := make(map[string]*servers.Server, len(listed))
	for i := range listed {
		byID[listed[i].ID] = &listed[i]
	}
	for _, s := range all {
		if b.isBooted(s.ID) {
			continue
		}
		if srv := byID[s.ID]; srv != nil && srv.Status == "ACTIVE" {
			if err := b.boot(ctx, srv, s.ControlPlane); err != nil {
				return err
			}
		}
	}
	return b.reap(ctx, byID)
}

// quietRounds is how many rounds in a row a settled booter skips Nova (30 s at Interval).
const quietRounds = 15

// settled reports whether the servers all are exactly those booted.
func (b *Booter) settled(all []Server) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := make(map[string]bool, len(all))
	for _, s := range all {
		if _, done := b.booted[s.ID]; !done {
			return false
		}
		seen[s.ID] = true
	}
	return len(seen) == len(b.booted)
}

func (b *Booter) isBooted(id string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, done := b.booted[id]
	return done
}

// boot registers the Node of an ACTIVE server.
func (b *Booter) boot(ctx context.Context, srv *servers.Server, controlPlane bool) error {
	if b.Bodies != nil && b.Bodies.Take(ctx, srv, controlPlane, func() { b.forget(srv.ID) }) {
		b.mu.Lock()
		if b.booted == nil {
			b.booted = map[string]string{}
		}
		b.booted[srv.ID] = srv.Name
		b.mu.Unlock()
		return nil
	}
	nics, err := b.nicsOf(ctx, srv.ID)
	if err != nil {
		return err
	}
	if len(nics) == 0 {
		return fmt.Errorf("server %s (%s) is ACTIVE without a port", srv.Name, srv.ID)
	}
	var ips []string
	for _, a := range machinectl.NodeAddresses(b.Rule.NodeIP(nics), machinectl.MachineAddresses(nics)) {
		ips = append(ips, a.String())
	}
	name := srv.Name
	if err := b.Nodes.AddNode(ctx, name, controlPlane, ips...); err != nil {
		return fmt.Errorf("registering Node %s of server %s: %w", name, srv.ID, err)
	}
	// The kubelet sets spec.providerID once, from the metadata service; the Machine API's
	// nodelink and Cluster API's Machine controller link by it. The zone label is the cloud
	// provider's.
	spec := map[string]any{"providerID": ProviderIDPrefix + srv.ID}
	if controlPlane && b.MastersSchedulable {
		spec["taints"] = nil // mastersSchedulable: the scheduler config of a compact install
	}
	body := map[string]any{"spec": spec}
	if srv.AvailabilityZone != "" {
		// The cloud provider labels each Node with its server's availability zone.
		body["metadata"] = map[string]any{"labels": map[string]string{corev1.LabelTopologyZone: srv.AvailabilityZone}}
	}
	patch, _ := json.Marshal(body)
	if _, err := b.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the providerID of Node %s: %w", name, err)
	}
	b.mu.Lock()
	if b.booted == nil {
		b.booted = map[string]string{}
	}
	b.booted[srv.ID] = name
	b.mu.Unlock()
	return nil
}

// forget makes the booter treat the server as not booted: a body that did not start gives it
// back.
func (b *Booter) forget(serverID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.booted, serverID)
}

// nicsOf is the server's NICs after DHCP, from its ports: the port on the machine network
// first (the primary NIC), then the others in their order.
func (b *Booter) nicsOf(ctx context.Context, serverID string) ([]machinectl.NIC, error) {
	pages, err := ports.List(b.Network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	var primary, others []machinectl.NIC
	for _, p := range all {
		network, err := networks.Get(ctx, b.Network, p.NetworkID).Extract()
		if err != nil {
			return nil, fmt.Errorf("reading network %s of port %s: %w", p.NetworkID, p.ID, err)
		}
		for _, ip := range p.FixedIPs {
			s, err := subnets.Get(ctx, b.Network, ip.SubnetID).Extract()
			if err != nil {
				return nil, fmt.Errorf("reading subnet %s of port %s: %w", ip.SubnetID, p.ID, err)
			}
			nic, err := machinectl.NICOf(network.Name, ip.IPAddress, s)
			if err != nil {
				return nil, fmt.Errorf("port %s: %w", p.ID, err)
			}
			if p.NetworkID == b.MachineNetwork {
				primary = append(primary, nic)
			} else {
				others = append(others, nic)
			}
		}
	}
	if len(all) > 0 && len(primary) == 0 {
		return nil, fmt.Errorf("server %s is ACTIVE without an address on the machine network %s", serverID, b.MachineNetwork)
	}
	return append(primary, others...), nil
}

// reap deletes the Nodes whose servers are gone from the list.
func (b *Booter) reap(ctx context.Context, listed map[string]*servers.Server) error {
	b.mu.Lock()
	booted := make(map[string]string, len(b.booted))
	for id, n := range b.booted {
		booted[id] = n
	}
	b.mu.Unlock()
	for id, name := range booted {
		if listed[id] != nil {
			continue
		}
		if b.Bodies != nil {
			b.Bodies.Release(id)
		}
		if err := b.Kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Node %s of the deleted server %s: %w", name, id, err)
		}
		b.mu.Lock()
		delete(b.booted, id)
		b.mu.Unlock()
	}
	return nil
}
