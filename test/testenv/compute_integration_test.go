//go:build integration

package testenv

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/portsbinding"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/trunks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
)

// boundPort is a port with its binding, which only the admin sees.
type boundPort struct {
	ports.Port
	portsbinding.PortsBindingExt
}

// TestLoopbackCloudServesServersOnPremadePorts does what the Machine API provider does on
// OpenShift on OpenStack: an image in Glance, a port made beforehand on the machine network and
// put in a trunk, a server on that port; then a server on two networks, as a worker with the
// storage network attached; then both deleted.
func TestLoopbackCloudServesServersOnPremadePorts(t *testing.T) {
	cloud := NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	pc, eo := connect(t, ctx, CloudDemo)
	adminPC, adminEO := connect(t, ctx, CloudAdmin)
	compute, err := openstack.NewComputeV2(pc, eo)
	if err != nil {
		t.Fatalf("no compute endpoint in the catalog: %v", err)
	}
	image, err := openstack.NewImageV2(pc, eo)
	if err != nil {
		t.Fatalf("no image endpoint in the catalog: %v", err)
	}
	network, err := openstack.NewNetworkV2(pc, eo)
	if err != nil {
		t.Fatal(err)
	}
	adminNetwork, err := openstack.NewNetworkV2(adminPC, adminEO)
	if err != nil {
		t.Fatal(err)
	}
	if compute.Endpoint != cloud.Seed.ComputeURL+"/" {
		t.Errorf("compute endpoint from the catalog %s, seed.json says %s", compute.Endpoint, cloud.Seed.ComputeURL)
	}
	flavor := cloud.Seed.Flavors["m1.xlarge"]
	for _, name := range []string{"m1.small", "m1.large", "m1.xlarge"} {
		if cloud.Seed.Flavors[name] == "" {
			t.Fatalf("flavor %s not seeded: seed.json has %v", name, cloud.Seed.Flavors)
		}
	}
	suffix := uuid.NewString()[:8]

	const imageSize = 1 << 20
	imageID, err := UploadImage(ctx, image, "testenv-"+suffix, imageSize)
	if imageID != "" {
		t.Cleanup(func() {
			if err := images.Delete(context.Background(), image, imageID).ExtractErr(); err != nil {
				t.Errorf("deleting image %s: %v", imageID, err)
			}
		})
	}
	if err != nil {
		t.Fatal(err)
	}

	// The port first, as the Machine API provider makes it, then the trunk it puts it in.
	port, err := ports.Create(ctx, network, ports.CreateOpts{
		Name: "testenv-" + suffix, NetworkID: cloud.Seed.Networks["tenant"],
	}).Extract()
	if err != nil {
		t.Fatalf("creating a port on network tenant: %v", err)
	}
	t.Cleanup(func() {
		if err := ports.Delete(context.Background(), network, port.ID).ExtractErr(); err != nil {
			t.Errorf("deleting port %s: %v", port.ID, err)
		}
	})
	trunk, err := trunks.Create(ctx, network, trunks.CreateOpts{Name: "testenv-" + suffix, PortID: port.ID}).Extract()
	if err != nil {
		t.Fatalf("creating a trunk on port %s: %v", port.ID, err)
	}
	t.Cleanup(func() {
		if err := trunks.Delete(context.Background(), network, trunk.ID).ExtractErr(); err != nil {
			t.Errorf("deleting trunk %s: %v", trunk.ID, err)
		}
	})
	if trunk.Status != "ACTIVE" || trunk.PortID != port.ID {
		t.Errorf("trunk %s: status %s on port %s, want ACTIVE on %s", trunk.ID, trunk.Status, trunk.PortID, port.ID)
	}

	start := time.Now()
	one := createServer(t, ctx, compute, servers.CreateOpts{
		Name: "testenv-one-" + suffix, FlavorRef: flavor, ImageRef: imageID,
		Networks: []servers.Network{{Port: port.ID}},
	})
	waitActive(t, ctx, compute, one)
	t.Logf("server on a pre-made port ACTIVE after %s", time.Since(start).Round(100*time.Millisecond))

	var bound boundPort
	if err := ports.Get(ctx, adminNetwork, port.ID).ExtractInto(&bound); err != nil {
		t.Fatalf("getting port %s as admin: %v", port.ID, err)
	}
	if bound.HostID == "" || bound.VIFType != "ovs" || bound.Status != "ACTIVE" || bound.DeviceID != one {
		t.Errorf("port %s after the server went ACTIVE: host %q, vif_type %q, status %s, device %q; want a host, ovs, ACTIVE, %s",
			port.ID, bound.HostID, bound.VIFType, bound.Status, bound.DeviceID, one)
	}
	srv, err := servers.Get(ctx, compute, one).Extract()
	if err != nil {
		t.Fatalf("getting server %s: %v", one, err)
	}
	if got, want := serverAddresses(srv, "tenant"), port.FixedIPs[0].IPAddress; !slices.Contains(got, want) {
		t.Errorf("server %s lists %v on network tenant, want the port's %s", one, got, want)
	}

	// A worker with the storage network attached: Nova makes a port on each network.
	start = time.Now()
	two := createServer(t, ctx, compute, servers.CreateOpts{
		Name: "testenv-two-" + suffix, FlavorRef: cloud.Seed.Flavors["m1.large"], ImageRef: imageID,
		Networks: []servers.Network{{UUID: cloud.Seed.Networks["tenant"]}, {UUID: cloud.Seed.Networks["storage"]}},
	})
	waitActive(t, ctx, compute, two)
	t.Logf("server on two networks ACTIVE after %s", time.Since(start).Round(100*time.Millisecond))
	srv, err = servers.Get(ctx, compute, two).Extract()
	if err != nil {
		t.Fatalf("getting server %s: %v", two, err)
	}
	for _, n := range []struct{ network, subnet string }{{"tenant", "tenant-subnet"}, {"storage", "storage-subnet"}} {
		prefix := netip.MustParsePrefix(cloud.Seed.Subnets[n.subnet].CIDR)
		got := serverAddresses(srv, n.network)
		if len(got) != 1 {
			t.Errorf("server %s has addresses %v on network %s, want one", two, got, n.network)
			continue
		}
		if a, err := netip.ParseAddr(got[0]); err != nil || !prefix.Contains(a) {
			t.Errorf("server %s has address %s on network %s, not in %s", two, got[0], n.network, prefix)
		}
	}

	for _, id := range []string{one, two} {
		start = time.Now()
		deleteServer(t, ctx, compute, id)
		t.Logf("server %s gone (404) after %s", id, time.Since(start).Round(100*time.Millisecond))
	}
	// The pre-made port stays, unbound, for its owner to delete; the ports Nova made are gone.
	if err := ports.Get(ctx, adminNetwork, port.ID).ExtractInto(&bound); err != nil {
		t.Fatalf("getting port %s after its server's deletion: %v", port.ID, err)
	}
	if bound.HostID != "" || bound.DeviceID != "" || bound.Status != "DOWN" {
		t.Errorf("port %s after its server's deletion: host %q, device %q, status %s; want unbound and DOWN",
			port.ID, bound.HostID, bound.DeviceID, bound.Status)
	}
	pages, err := ports.List(adminNetwork, ports.ListOpts{DeviceID: two}).AllPages(ctx)
	if err != nil {
		t.Fatalf("listing the ports of server %s: %v", two, err)
	}
	if left, err := ports.ExtractPorts(pages); err != nil || len(left) != 0 {
		t.Errorf("server %s deleted, but %d of the ports Nova made for it are left (%v)", two, len(left), err)
	}
}

// createServer creates a server and registers its deletion (if the test has not deleted it).
func createServer(t *testing.T, ctx context.Context, compute *gophercloud.ServiceClient, opts servers.CreateOpts) string {
	t.Helper()
	srv, err := servers.Create(ctx, compute, opts, nil).Extract()
	if err != nil {
		t.Fatalf("creating server %s: %v", opts.Name, err)
	}
	t.Cleanup(func() {
		err := servers.Delete(context.Background(), compute, srv.ID).ExtractErr()
		if err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			t.Errorf("deleting server %s: %v", srv.ID, err)
		}
	})
	return srv.ID
}

// waitActive waits up to two minutes for a server to be ACTIVE, and fails the test at once when
// it goes to ERROR, with Nova's reason.
func waitActive(t *testing.T, ctx context.Context, compute *gophercloud.ServiceClient, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	err := poll(ctx, func() (bool, error) {
		srv, err := servers.Get(ctx, compute, id).Extract()
		if err != nil {
			return false, fmt.Errorf("getting server %s: %w", id, err)
		}
		last = srv.Status
		if srv.Status == "ERROR" {
			return false, fmt.Errorf("server %s went to ERROR: %s", id, srv.Fault.Message)
		}
		return srv.Status == "ACTIVE", nil
	})
	if err != nil {
		t.Fatalf("waiting for server %s to be ACTIVE (last status %q): %v", id, last, err)
	}
}

// deleteServer deletes a server and waits up to two minutes until Nova answers 404 for it.
func deleteServer(t *testing.T, ctx context.Context, compute *gophercloud.ServiceClient, id string) {
	t.Helper()
	if err := servers.Delete(ctx, compute, id).ExtractErr(); err != nil {
		t.Fatalf("deleting server %s: %v", id, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last string
	err := poll(ctx, func() (bool, error) {
		srv, err := servers.Get(ctx, compute, id).Extract()
		if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			return true, nil
		}
		if err != nil {
			return false, fmt.Errorf("getting server %s: %w", id, err)
		}
		last = srv.Status
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for server %s to be gone (last status %q): %v", id, last, err)
	}
}

// poll calls done every 250 ms until it reports true, returns an error, or ctx ends.
func poll(ctx context.Context, done func() (bool, error)) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}

// serverAddresses lists the addresses a server reports on the named network.
func serverAddresses(srv *servers.Server, network string) []string {
	var out []string
	list, _ := srv.Addresses[network].([]any)
	for _, a := range list {
		if m, ok := a.(map[string]any); ok {
			if s, ok := m["addr"].(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}
