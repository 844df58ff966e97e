//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"

	osapi "github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// workersWriteOneShare is the seed's demo on real kernels: two guests stand for two workers'
// Nova servers, each with the MAC and address of that server's port on the storage network as
// Neutron has them, mount the export the Manila node plugin chose in its NodeStage (vc: the
// server and share it hands the NFS plugin), append a line each and read the other's. The share
// is the one the real driver provisioned for the operator's class, so what admits them is the
// rule the driver granted from the class's nfs-shareClient, judged by the NFS server itself.
func workersWriteOneShare(t *testing.T, ctx context.Context, nfs *testenv.NFSBackend, network *gophercloud.ServiceClient, storageSubnets []netip.Prefix,
	storagePorts []osapi.Port, vc map[string]string) {
	t.Helper()
	if len(storagePorts) < 2 {
		t.Fatalf("two workers' storage ports needed, have %d", len(storagePorts))
	}
	export := vc["server"] + ":" + vc["share"]
	server, err := netip.ParseAddr(strings.Trim(vc["server"], "[]"))
	if err != nil {
		t.Fatalf("the node plugin's export server %q: %v", vc["server"], err)
	}
	// Each guest has every address of its port, in its subnet (a dual-stack storage port has
	// two); it mounts from the one of the export's family.
	guests := make([]*testenv.Guest, 2)
	mountFrom := make([]netip.Addr, 2)
	var wg sync.WaitGroup
	for i, sp := range storagePorts[:2] {
		p, err := ports.Get(ctx, network, sp.ID).Extract()
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, a := range sp.FixedIPs {
			for _, sub := range storageSubnets {
				if sub.Contains(a) {
					addrs = append(addrs, netip.PrefixFrom(a, sub.Bits()).String())
				}
			}
			if a.Is4() == server.Is4() {
				mountFrom[i] = a
			}
		}
		if len(addrs) != len(sp.FixedIPs) || !mountFrom[i].IsValid() {
			t.Fatalf("storage port %s: addresses %v, subnets %v: want each in a subnet, one of the export %s's family", sp.ID, sp.FixedIPs, storageSubnets, server)
		}
		nic := nfs.StoragePort(p.MACAddress, addrs...)
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := testenv.StartGuest(ctx, testenv.GuestOptions{Name: fmt.Sprintf("worker-%d", i), NICs: []testenv.GuestNIC{nic}})
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(g.Stop)
			guests[i] = g
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, g := range guests {
		g.MustRun(t, ctx, fmt.Sprintf("mkdir -p /mnt/test && mount.nfs %s /mnt/test -o vers=4.1 && echo 'hello from %s (%s)' >>/mnt/test/%s",
			export, g.Name, mountFrom[i], g.Name))
	}
	for i, g := range guests {
		other := guests[1-i]
		out := g.MustRun(t, ctx, "cat /mnt/test/"+other.Name)
		if !strings.Contains(out, "hello from "+other.Name) {
			t.Errorf("%s reads %s's file as %q", g.Name, other.Name, out)
		}
		m := g.MustRun(t, ctx, "grep ' /mnt/test ' /proc/mounts")
		if !strings.Contains(m, "clientaddr="+mountFrom[i].String()) {
			t.Errorf("%s's mount is not made from its storage port's address %s: %s", g.Name, mountFrom[i], m)
		}
		g.MustRun(t, ctx, "umount /mnt/test")
	}
	t.Logf("two workers' kernels (storage addresses %s, %s) mounted %s, the export the node plugin chose, and read each other's lines",
		mountFrom[0], mountFrom[1], export)
}

// nodeKernel boots a guest that stands in for the real node's kernel, which has no NFS client:
// it has the node's address, so the NFS server judges the rules the driver granted for the node
// as it would judge the node, and reaches the export subnet on-link.
func nodeKernel(t *testing.T, ctx context.Context, node *testenv.RealNode) *testenv.Guest {
	t.Helper()
	nfs, err := testenv.LoadNFSBackend()
	if err != nil {
		t.Fatal(err)
	}
	cloud, err := testenv.LoadCloud()
	if err != nil {
		t.Fatal(err)
	}
	addr, err := netip.ParseAddr(node.IP)
	if err != nil {
		t.Fatalf("real node %s: address %q: %v", node.Name, node.IP, err)
	}
	nic, undo, err := nfs.StorageClientAs(ctx, "fa:16:3e:00:ee:01", addr, cloud.Seed.Subnets["storage-subnet"].CIDR)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(undo)
	return testenv.BootGuest(t, ctx, testenv.GuestOptions{Name: node.Name, NICs: []testenv.GuestNIC{nic}})
}

// preferredExport is the share's preferred export location (IP:/path).
func preferredExport(t *testing.T, ctx context.Context, manila *gophercloud.ServiceClient, share string) string {
	t.Helper()
	locs, err := shares.ListExportLocations(ctx, manila, share).Extract()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locs {
		if l.Preferred && !l.IsAdminOnly {
			return l.Path
		}
	}
	t.Fatalf("share %s has no preferred export location: %+v", share, locs)
	return ""
}
