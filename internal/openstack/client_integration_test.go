//go:build integration

package openstack

import (
	"io"
	"net/http"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/testenv"
)

func TestConnectWithPasswordAndApplicationCredential(t *testing.T) {
	cloud := testenv.NewCloud(t)
	for _, name := range []string{testenv.CloudDemo, testenv.CloudAppCred} {
		t.Run(name, func(t *testing.T) {
			c, cnt := connect(t, cloud, name)
			if c.ProjectID() != cloud.Seed.ProjectID {
				t.Errorf("project %q, want %q", c.ProjectID(), cloud.Seed.ProjectID)
			}
			if c.Region() != "RegionOne" || c.Cloud() != name {
				t.Errorf("region %q cloud %q", c.Region(), c.Cloud())
			}
			if !c.ManilaAvailable() || !c.HasService("network") {
				t.Errorf("catalog lacks Manila or Neutron")
			}
			if _, err := c.Network(testContext(t, time.Minute), cloud.Seed.Networks["storage"]); err != nil {
				t.Fatal(err)
			}
			if cnt.auths() != 1 {
				t.Errorf("%d token requests, want 1", cnt.auths())
			}
		})
	}
}

func TestConnectFromBytes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	t.Setenv("OS_CLIENT_CONFIG_FILE", "/nonexistent/clouds.yaml")
	t.Setenv("OS_CLOUD", "")
	data, err := readFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Connect(testContext(t, time.Minute), Config{CloudsYAML: data, Cloud: testenv.CloudAppCred})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Identity(), "application credential ") {
		t.Errorf("identity %q", c.Identity())
	}
	if _, err := c.ShareTypes(testContext(t, time.Minute)); err != nil {
		t.Fatal(err)
	}
}

func TestNetworksOfTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, _ := connect(t, cloud, testenv.CloudDemo)
	ctx := testContext(t, 2*time.Minute)
	nets, err := c.Networks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]Network{}
	for _, n := range nets {
		byName[n.Name] = n
	}
	for name, cidr := range map[string]string{"tenant": "10.196.0.0/16", "storage": "10.0.0.0/24", "decoy": "192.168.50.0/24"} {
		n := byName[name]
		if n.ID != cloud.Seed.Networks[name] || len(n.Subnets) != 1 || n.Subnets[0].CIDR != netip.MustParsePrefix(cidr) {
			t.Errorf("network %s = %+v, want ID %s with subnet %s", name, n, cloud.Seed.Networks[name], cidr)
		}
	}
	if !byName["storage"].Shared || byName["tenant"].Shared {
		t.Errorf("shared flags: storage %v tenant %v", byName["storage"].Shared, byName["tenant"].Shared)
	}

	missing := "6a1c3e8e-0000-4000-8000-000000000000"
	some, err := c.Networks(ctx, cloud.Seed.Networks["storage"], missing, cloud.Seed.Networks["decoy"])
	if err != nil || len(some) != 2 || some[0].Name != "decoy" || some[1].Name != "storage" || len(some[1].Subnets) != 1 {
		t.Errorf("Networks(ids) = %+v, %v", some, err)
	}
	_, err = c.Network(ctx, missing)
	if !IsNotFound(err) || !strings.Contains(err.Error(), "there is no network with ID "+missing) {
		t.Errorf("missing network: %v (kind %v)", err, KindOf(err))
	}
}

func TestPagination(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, cnt := connect(t, cloud, testenv.CloudDemo, func(cfg *Config) { cfg.PageSize = 1 })
	ctx := testContext(t, 2*time.Minute)
	nets, err := c.Networks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nets) < 3 {
		t.Fatalf("%d networks with one per page", len(nets))
	}
	if got := cnt.get("GET /v2.0/networks"); got < len(nets) {
		t.Errorf("%d network requests for %d networks one per page", got, len(nets))
	}
	types, err := c.ShareTypes(ctx)
	if err != nil || len(types) < 2 {
		t.Fatalf("share types %v %v", types, err)
	}
	shares, err := c.Shares(ctx, ShareFilter{})
	if err != nil || len(shares) == 0 {
		t.Fatalf("shares %v %v", shares, err)
	}
	if got := cnt.get("GET /v2/shares/detail"); got != len(shares)+1 {
		t.Errorf("%d share list requests for %d shares one per page, want %d", got, len(shares), len(shares)+1)
	}
}

func TestIdentifySaysWhatAnIDIs(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, cnt := connect(t, cloud, testenv.CloudDemo)
	missing := "0b8e4c5e-0000-4000-8000-000000000000"
	got, err := c.Identify(testContext(t, time.Minute), cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"],
		cloud.Seed.Subnets["decoy-subnet"].ID, missing)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]ResourceKind{
		cloud.Seed.Networks["storage"]:        KindNetwork,
		cloud.Seed.SecurityGroups["nfs"]:      KindSecurityGroup,
		cloud.Seed.Subnets["decoy-subnet"].ID: KindSubnet,
	}
	for id, kind := range want {
		if got[id] != kind {
			t.Errorf("%s: %q, want %q", id, got[id], kind)
		}
	}
	if _, ok := got[missing]; ok {
		t.Errorf("missing ID identified as %q", got[missing])
	}
	// network, security group, subnet, port: one request per kind still unresolved.
	if total, detail := cnt.snapshot(); total != 1+4 {
		t.Errorf("%d requests, want 5:\n%s", total, detail)
	}
}

func TestSecurityGroupsOfTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, _ := connect(t, cloud, testenv.CloudDemo)
	ctx := testContext(t, time.Minute)
	sgs, err := c.SecurityGroups(ctx, cloud.Seed.SecurityGroups["nfs"], cloud.Seed.SecurityGroups["block-egress"], cloud.Seed.SecurityGroups["default"])
	if err != nil || len(sgs) != 3 {
		t.Fatalf("security groups: %v %v", sgs, err)
	}
	byName := map[string]SecurityGroup{}
	for _, g := range sgs {
		byName[g.Name] = g
	}
	storage := netip.MustParseAddr("10.0.0.10")
	if v := CheckEgress([]SecurityGroup{byName["block-egress"]}, true, storage, "NFS"); v.Allowed {
		t.Errorf("block-egress allows NFS: %s", v.Summary)
	}
	if v := CheckEgress([]SecurityGroup{byName["default"]}, true, storage, "CEPHFS"); !v.Allowed {
		t.Errorf("default blocks CephFS: %s", v.Summary)
	}
	if v := CheckEgress([]SecurityGroup{byName["block-egress"], byName["default"]}, true, storage, "NFS"); !v.Allowed {
		t.Errorf("default+block-egress blocks NFS (groups are additive): %s", v.Summary)
	}
	hasIngress2049 := slices.ContainsFunc(byName["nfs"].Rules, func(r Rule) bool {
		return r.Direction == "ingress" && r.Protocol == "tcp" && r.PortMin == 2049
	})
	if !hasIngress2049 {
		t.Errorf("nfs group rules: %+v", byName["nfs"].Rules)
	}
	_, err = c.SecurityGroup(ctx, cloud.Seed.Networks["storage"])
	if !IsNotFound(err) || !strings.Contains(err.Error(), "there is no security group with ID") {
		t.Errorf("network ID as security group: %v", err)
	}
}

func TestManilaOfTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c, cnt := connect(t, cloud, testenv.CloudDemo)
	ctx := testContext(t, 2*time.Minute)
	info, err := c.Manila(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Microversion != manilaNewest || info.MinVersion != "2.0" || !strings.HasSuffix(info.Endpoint, "/v2/") {
		t.Errorf("manila %+v", info)
	}
	types, err := c.ShareTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]ShareType{}
	for _, st := range types {
		byName[st.Name] = st
	}
	if d := byName["default"]; d.ID != cloud.Seed.ShareTypes["default"] || d.DHSS || !d.SnapshotSupport || !d.Public {
		t.Errorf("share type default: %+v", d)
	}
	if f := byName["cephfs-fast"]; f.ID != cloud.Seed.ShareTypes["cephfs-fast"] || f.DHSS || f.ExtraSpecs["driver_handles_share_servers"] == "" {
		t.Errorf("share type cephfs-fast: %+v", f)
	}
	// The operator's summaries say the same of each type, without its extra specs.
	summaries, err := c.ShareTypeSummaries(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(summaries) != len(types) {
		t.Fatalf("%d summaries for %d share types", len(summaries), len(types))
	}
	for i, sum := range summaries {
		full := types[i]
		full.Description, full.ExtraSpecs = "", nil
		if !reflect.DeepEqual(sum, full) {
			t.Errorf("summary %+v, want %+v", sum, full)
		}
	}
	if _, err := c.ShareNetworks(ctx); err != nil {
		t.Fatal(err)
	}
	shares, err := c.Shares(ctx, ShareFilter{Status: "available", ExportLocations: true})
	if err != nil {
		t.Fatal(err)
	}
	var seeded *Share
	for i := range shares {
		if shares[i].ID == cloud.Seed.Shares["nfs-share"].ID {
			seeded = &shares[i]
		}
	}
	if seeded == nil || seeded.Protocol != "NFS" || seeded.ShareType != "default" {
		t.Fatalf("seeded share not listed: %+v", shares)
	}
	var paths []string
	for _, l := range seeded.ExportLocations {
		paths = append(paths, l.Path)
		if l.AdminOnly {
			t.Errorf("a non-admin sees an admin-only export location %s", l.Path)
		}
	}
	slices.Sort(paths)
	want := slices.Sorted(slices.Values(cloud.Seed.Shares["nfs-share"].ExportLocations))
	if !slices.Equal(paths, want) {
		t.Errorf("export locations %v, want %v", paths, want)
	}
	if cnt.get("GET /v2/") != 1 {
		t.Errorf("microversion negotiated %d times", cnt.get("GET /v2/"))
	}
}

func TestDiscoverOnTheSeed(t *testing.T) {
	cloud := testenv.NewCloud(t)
	for _, exact := range []bool{false, true} {
		c, cnt := connect(t, cloud, testenv.CloudDemo)
		d, err := c.Discover(testContext(t, 2*time.Minute), DiscoverOptions{ExactExports: exact})
		if err != nil {
			t.Fatal(err)
		}
		best := d.Best()
		if best == nil || best.Network.ID != cloud.Seed.Networks["storage"] || best.Confidence != ConfidenceHigh {
			t.Fatalf("exact=%v: best candidate %+v", exact, best)
		}
		for _, cand := range d.Candidates {
			if cand.Network.Name == "decoy" || cand.Network.Name == "tenant" {
				t.Errorf("exact=%v: %s is a candidate: %v", exact, cand.Network.Name, cand.Reasons)
			}
		}
		var addrs []string
		for _, e := range best.Exports {
			addrs = append(addrs, e.Address.String())
			if e.Address.String() == "10.0.0.10" && !e.Preferred {
				t.Errorf("10.0.0.10 not marked preferred")
			}
		}
		if !slices.Equal(addrs, []string{"10.0.0.10", "10.0.0.20"}) {
			t.Errorf("exact=%v: exports %v", exact, addrs)
		}
		for _, u := range d.Unmatched {
			if u.Address.String() == "11.0.0.11" {
				t.Errorf("exact=%v: the admin-only export 11.0.0.11 leaked to a non-admin", exact)
			}
		}
		total, detail := cnt.snapshot()
		t.Logf("exact=%v: %d requests:\n%s", exact, total, detail)
		if cnt.auths() != 1 {
			t.Errorf("%d token requests, want 1", cnt.auths())
		}
		if el := cnt.get("GET /v2/shares/{id}/export_locations"); !exact && el != 1 {
			t.Errorf("bulk discovery asked %d shares for export locations, want 1 (one per distinct address set)", el)
		}
	}
}

// fail401Once answers the first request to a service with 401, as a service does when a token
// expired, to prove the client re-authenticates then (and only then).
type fail401Once struct {
	next http.RoundTripper
	done atomic.Bool
}

func (f *fail401Once) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.Contains(req.URL.Path, "/auth/tokens") && f.done.CompareAndSwap(false, true) {
		return &http.Response{StatusCode: 401, Status: "401 Unauthorized", Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"code":401}}`)), Request: req}, nil
	}
	return f.next.RoundTrip(req)
}

func TestReauthenticatesOnlyOn401(t *testing.T) {
	cloud := testenv.NewCloud(t)
	f := &fail401Once{}
	f.done.Store(true) // authenticate normally first
	c, cnt := connect(t, cloud, testenv.CloudDemo, func(cfg *Config) {
		inner := cfg.WrapTransport
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { f.next = rt; return inner(f) }
	})
	ctx := testContext(t, 2*time.Minute)
	for i := 0; i < 3; i++ {
		if _, err := c.Networks(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if cnt.auths() != 1 {
		t.Fatalf("%d token requests after 3 calls, want 1", cnt.auths())
	}
	old := c.provider.Token()
	f.done.Store(false) // the next service call gets a 401
	if _, err := c.Networks(ctx); err != nil {
		t.Fatalf("call after a 401: %v", err)
	}
	if cnt.auths() != 2 || c.provider.Token() == old {
		t.Errorf("%d token requests after a 401, want 2 (and a new token)", cnt.auths())
	}
}
