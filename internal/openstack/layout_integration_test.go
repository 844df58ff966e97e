//go:build integration

package openstack

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDiscoverSecondLayout builds, in a project of its own, a layout with two storage networks
// and an IPv6 subnet:
//
//	storage     (seeded, shared)  10.0.0.0/24    holds the preferred export 10.0.0.10
//	storage-v6  (this project)    fd00:5:6::/64  a DHSS=true share network places servers here,
//	                              10.0.0.16/28   and the narrower subnet holds 10.0.0.20
//	decoy2, l2-tenant             unrelated
func TestDiscoverSecondLayout(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "ms-layout2")
	v6 := p.CreateNetwork("storage-v6", "fd00:5:6::/64", "10.0.0.16/28")
	p.CreateNetwork("decoy2", "172.20.0.0/24")
	p.CreateNetwork("l2-tenant", "10.128.0.0/14")
	p.CreateShareNetwork("dhss-v6", v6.ID, v6.SubnetIDs[0])
	p.CreateShares("layout2", 2)

	c, cnt := connect(t, cloud, ostest.CloudName, func(cfg *Config) { cfg.CloudsFile = p.CloudsFile })
	d, err := c.Discover(testContext(t, 2*time.Minute), DiscoverOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cand := range d.Candidates {
		t.Logf("%s score %d %s: %s", cand.Network.Name, cand.Score, cand.Confidence, strings.Join(cand.Reasons, "; "))
	}
	var got []string
	for _, cand := range d.Candidates {
		got = append(got, cand.Network.Name)
	}
	if !slices.Equal(got, []string{"storage", "storage-v6"}) {
		t.Fatalf("candidates %v, want storage, storage-v6", got)
	}
	storage, sv6 := d.Candidates[0], d.Candidates[1]
	if storage.Shares != 2 || len(storage.Exports) != 1 || storage.Exports[0].Address != netip.MustParseAddr("10.0.0.10") || !storage.Exports[0].Preferred {
		t.Errorf("storage: %+v", storage)
	}
	if sv6.Confidence != ConfidenceHigh || len(sv6.ShareNetworks) != 1 || sv6.ShareNetworks[0] != "dhss-v6" ||
		len(sv6.Exports) != 1 || sv6.Exports[0].Address != netip.MustParseAddr("10.0.0.20") {
		t.Errorf("storage-v6: %+v", sv6)
	}
	if !slices.ContainsFunc(sv6.Network.Subnets, func(s Subnet) bool { return s.CIDR.Addr().Is6() && s.IPVersion == 6 }) {
		t.Errorf("storage-v6 lost its IPv6 subnet: %+v", sv6.Network.Subnets)
	}
	if !hasReason(sv6, "10.0.0.20 is also inside 10.0.0.0/24 of network storage; the narrower subnet 10.0.0.16/28 wins") ||
		!hasReason(sv6, `share network "dhss-v6" places share servers`) {
		t.Errorf("storage-v6 reasons: %q", sv6.Reasons)
	}
	if d.SharesSeen != 2 || d.ShareNetworksSeen != 1 {
		t.Errorf("saw %d shares and %d share networks", d.SharesSeen, d.ShareNetworksSeen)
	}
	// Two shares on the same back end: one export-locations request covers both.
	if n := cnt.get("GET /v2/shares/{id}/export_locations"); n != 1 {
		t.Errorf("%d export-location requests for 2 shares on one back end, want 1", n)
	}
	total, detail := cnt.snapshot()
	t.Logf("%d requests:\n%s", total, detail)
}

// TestAttachmentsWithoutNova: servers are pretend (no Nova here); their ports carry device_id
// and names as OpenShift's machine controller makes them.
func TestAttachmentsWithoutNova(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "ms-attach")
	tenant := p.CreateNetwork("l3-tenant", "10.200.0.0/16")
	storage := cloud.Seed.Networks["storage"]
	blocking := p.CreateSecurityGroup("no-egress", false)
	open := p.CreateSecurityGroup("open", true)
	const infra = "mycluster-x7k2p"
	a, b, m := "1a1a1a1a-0000-4000-8000-000000000001", "1a1a1a1a-0000-4000-8000-000000000002", "1a1a1a1a-0000-4000-8000-000000000003"
	p.CreatePort(tenant.ID, infra+"-worker-0-a-0", a, open)
	p.CreatePort(storage, infra+"-worker-0-a-storage", a, blocking)
	p.CreatePort(tenant.ID, infra+"-worker-0-b-0", b, open)
	p.CreatePort(tenant.ID, infra+"-master-0-0", m, open)
	p.CreatePort(storage, "someone-else", "1a1a1a1a-0000-4000-8000-000000000009", open)
	// A machine's primary port as the Machine API makes it: the VIPs as allowed address pairs.
	vips := "1a1a1a1a-0000-4000-8000-000000000004"
	p.CreatePortWith(tenant.ID, "other-cluster-worker-0-0", vips, map[string]any{"security_groups": []string{open},
		"allowed_address_pairs": []map[string]any{{"ip_address": "10.200.0.5"}, {"ip_address": "10.200.0.7/32"}}})

	c, cnt := connect(t, cloud, ostest.CloudName, func(cfg *Config) { cfg.CloudsFile = p.CloudsFile })
	ctx := testContext(t, 2*time.Minute)

	t.Run("by server ID", func(t *testing.T) {
		cnt.reset()
		atts, err := c.Attachments(ctx, ServerSelector{Servers: []Server{{ID: a, Name: "worker-0-a"}, {ID: b, Name: "worker-0-b"}}}, []string{storage, tenant.ID})
		if err != nil {
			t.Fatal(err)
		}
		st := atts[storage]
		if st.Attached != 1 || st.Total != 2 || !st.Servers[0].Attached || st.Servers[1].Attached || st.Servers[0].Ports[0].Name != infra+"-worker-0-a-storage" {
			t.Errorf("storage: %+v", st)
		}
		if atts[tenant.ID].Attached != 2 {
			t.Errorf("tenant: %+v", atts[tenant.ID])
		}
		if total, detail := cnt.snapshot(); total != 1 {
			t.Errorf("%d requests for two networks and two servers, want 1:\n%s", total, detail)
		}
	})
	t.Run("allowed address pairs", func(t *testing.T) {
		ports, err := c.ServerPorts(ctx, vips)
		if err != nil || len(ports) != 1 || !slices.Equal(ports[0].AllowedAddressPairs, []string{"10.200.0.5", "10.200.0.7/32"}) {
			t.Errorf("ports of the server with VIP pairs: %+v, %v", ports, err)
		}
		if ports, err := c.ServerPorts(ctx, b); err != nil || len(ports) != 1 || ports[0].AllowedAddressPairs != nil {
			t.Errorf("ports of a server without pairs: %+v, %v", ports, err)
		}
	})
	t.Run("by name only", func(t *testing.T) {
		atts, err := c.Attachments(ctx, ServerSelector{Servers: []Server{{Name: infra + "-worker-0-a"}, {Name: infra + "-worker-0-b"}}}, []string{storage})
		if err != nil {
			t.Fatal(err)
		}
		if st := atts[storage]; st.Attached != 1 || st.Servers[0].Name != infra+"-worker-0-a" || !st.Servers[0].Attached {
			t.Errorf("storage: %+v", st)
		}
	})
	t.Run("by infra ID prefix", func(t *testing.T) {
		atts, err := c.Attachments(ctx, ServerSelector{NamePrefix: infra + "-"}, []string{storage})
		if err != nil {
			t.Fatal(err)
		}
		// Three servers of the cluster (two workers and a master) have ports; one is on storage.
		if st := atts[storage]; st.Total != 3 || st.Attached != 1 {
			t.Errorf("storage: %+v", st)
		}
	})
	t.Run("discovery checks the attached ports' security groups", func(t *testing.T) {
		d, err := c.Discover(ctx, DiscoverOptions{Servers: &ServerSelector{Servers: []Server{{ID: a}, {ID: b}}}, SecurityGroupIDs: []string{open}})
		if err != nil {
			t.Fatal(err)
		}
		best := d.Best()
		if best == nil || best.Network.ID != storage || best.Attachment == nil || best.Attachment.Attached != 1 {
			t.Fatalf("best %+v", best)
		}
		if len(best.Traffic) != 1 || best.Traffic[0].Allowed || !strings.Contains(best.Traffic[0].Summary, "security groups no-egress would block NFS") {
			t.Errorf("traffic %+v", best.Traffic)
		}
		if d.SecurityGroups == nil || len(d.SecurityGroups.Verdicts) != 2 || !d.SecurityGroups.Verdicts[0].Allowed || !d.SecurityGroups.Verdicts[1].Allowed {
			t.Errorf("given groups %+v", d.SecurityGroups)
		}
	})
	t.Run("ports of a server", func(t *testing.T) {
		ports, err := c.ServerPorts(ctx, a)
		if err != nil || len(ports) != 2 {
			t.Fatalf("%d ports, %v", len(ports), err)
		}
		for _, port := range ports {
			if port.DeviceOwner != "compute:nova" || len(port.FixedIPs) != 1 || !port.PortSecurity {
				t.Errorf("port %+v", port)
			}
		}
	})
}
