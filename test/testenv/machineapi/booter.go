package machineapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// ProviderIDPrefix starts an OpenStack Node's and Machine's providerID; the server ID follows.
const ProviderIDPrefix = "openstack:///"

// NodeBooter is the one stand-in left beside the real controllers: what a booted RHCOS server
// does for its cluster, which no fake virt driver does. For each ACTIVE server of a Machine it
// registers the server's Node, as the kubelet would after nodeip-configuration chose its node
// IP: named as the server's hostname (its name), spec.providerID openstack:///<server ID>, the
// node IP first among its InternalIPs and then every other address of the server's ports,
// by the rule of machinectl/nodeip.go. When the server is gone, so is its Node (the kubelet
// stops; the real machine controller deletes the Node of a deleted Machine too).
type NodeBooter struct {
	mc        machineclient.Interface
	kc        kubernetes.Interface
	cloud     *Clients
	nodes     machinectl.NodeRegistrar
	namespace string
	rule      machinectl.NodeIPRule
	// machineNetwork holds the primary NIC's address.
	machineNetwork netip.Prefix
	// mastersSchedulable: the masters' Nodes take workloads (a compact cluster), no NoSchedule
	// taint on them.
	mastersSchedulable bool

	mu      sync.Mutex
	lastErr error
	booted  map[string]string // server ID -> Node name
}

// Err returns the error of the booter's last round, nil if it went through.
func (b *NodeBooter) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastErr
}

// Run boots Nodes every interval until ctx ends.
func (b *NodeBooter) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		err := b.round(ctx)
		b.mu.Lock()
		b.lastErr = err
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (b *NodeBooter) round(ctx context.Context) error {
	machines, err := b.mc.MachineV1beta1().Machines(b.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Machines: %w", err)
	}
	for _, m := range machines.Items {
		if m.Spec.ProviderID == nil || !strings.HasPrefix(*m.Spec.ProviderID, ProviderIDPrefix) {
			continue
		}
		id := strings.TrimPrefix(*m.Spec.ProviderID, ProviderIDPrefix)
		b.mu.Lock()
		_, done := b.booted[id]
		b.mu.Unlock()
		if done {
			continue
		}
		srv, err := servers.Get(ctx, b.cloud.Compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, 404) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading server %s of Machine %s: %w", id, m.Name, err)
		}
		if srv.Status != "ACTIVE" {
			continue
		}
		if err := b.boot(ctx, srv, m.Labels[machinectl.RoleLabel] == "master"); err != nil {
			return err
		}
	}
	return b.reap(ctx)
}

// boot registers the Node of an ACTIVE server.
func (b *NodeBooter) boot(ctx context.Context, srv *servers.Server, controlPlane bool) error {
	nics, err := b.nicsOf(ctx, srv.ID)
	if err != nil {
		return err
	}
	if len(nics) == 0 {
		return fmt.Errorf("server %s (%s) is ACTIVE without a port", srv.Name, srv.ID)
	}
	var ips []string
	for _, a := range machinectl.NodeAddresses(b.rule.NodeIP(nics), machinectl.MachineAddresses(nics)) {
		ips = append(ips, a.String())
	}
	name := srv.Name
	if err := b.nodes.AddNode(ctx, name, controlPlane, ips...); err != nil {
		return fmt.Errorf("registering Node %s of server %s: %w", name, srv.ID, err)
	}
	// The kubelet sets spec.providerID once, from the metadata service; nodelink links by it.
	spec := map[string]any{"providerID": ProviderIDPrefix + srv.ID}
	if controlPlane && b.mastersSchedulable {
		spec["taints"] = nil // mastersSchedulable: the scheduler config of a compact install
	}
	patch, _ := json.Marshal(map[string]any{"spec": spec})
	if _, err := b.kc.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting the providerID of Node %s: %w", name, err)
	}
	b.mu.Lock()
	b.booted[srv.ID] = name
	b.mu.Unlock()
	return nil
}

// nicsOf is the server's NICs after DHCP, from its ports: the port on the machine network
// first (the primary NIC), then the others in their order.
func (b *NodeBooter) nicsOf(ctx context.Context, serverID string) ([]machinectl.NIC, error) {
	pages, err := ports.List(b.cloud.Network, ports.ListOpts{DeviceID: serverID}).AllPages(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the ports of server %s: %w", serverID, err)
	}
	all, err := ports.ExtractPorts(pages)
	if err != nil {
		return nil, err
	}
	var primary, others []machinectl.NIC
	for _, p := range all {
		network, err := networks.Get(ctx, b.cloud.Network, p.NetworkID).Extract()
		if err != nil {
			return nil, fmt.Errorf("reading network %s of port %s: %w", p.NetworkID, p.ID, err)
		}
		for _, ip := range p.FixedIPs {
			s, err := subnets.Get(ctx, b.cloud.Network, ip.SubnetID).Extract()
			if err != nil {
				return nil, fmt.Errorf("reading subnet %s of port %s: %w", ip.SubnetID, p.ID, err)
			}
			nic, err := machinectl.NICOf(network.Name, ip.IPAddress, s)
			if err != nil {
				return nil, fmt.Errorf("port %s: %w", p.ID, err)
			}
			if b.onMachineNetwork(nic.Addr) {
				primary = append(primary, nic)
			} else {
				others = append(others, nic)
			}
		}
	}
	return append(primary, others...), nil
}

func (b *NodeBooter) onMachineNetwork(a netip.Addr) bool { return b.machineNetwork.Contains(a) }

// reap deletes the Nodes whose servers are gone.
func (b *NodeBooter) reap(ctx context.Context) error {
	b.mu.Lock()
	booted := make(map[string]string, len(b.booted))
	for id, n := range b.booted {
		booted[id] = n
	}
	b.mu.Unlock()
	for id, name := range booted {
		_, err := servers.Get(ctx, b.cloud.Compute, id).Extract()
		if err == nil {
			continue
		}
		if !gophercloud.ResponseCodeIs(err, 404) {
			return fmt.Errorf("reading server %s of Node %s: %w", id, name, err)
		}
		if err := b.kc.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting Node %s of the deleted server %s: %w", name, id, err)
		}
		b.mu.Lock()
		delete(b.booted, id)
		b.mu.Unlock()
	}
	return nil
}
