// Package ostest builds throw-away layouts in the loopback OpenStack for tests and benchmarks:
// a project of its own with a member user and a clouds.yaml for it, networks, ports, security
// groups, share networks and shares, all removed again when the test ends. Nothing it does
// changes what other tests see: the project is new, and only the admin creates it.
//
// It talks to the cloud with plain gophercloud calls, independently of package openstack, so
// that the code under test does not build its own fixtures.
package ostest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// CloudName is the name of the only cloud in a Project's clouds.yaml.
const CloudName = "ostest"

// manilaVersion is the microversion the fixtures speak to Manila.
const manilaVersion = "2.65"

// Project is a new project with a member user, as a test's own corner of the cloud.
type Project struct {
	ID, Name   string
	UserID     string
	Password   string
	CloudsFile string // clouds.yaml whose cloud CloudName is the member of this project

	t       testing.TB
	cloud   *testenv.Cloud
	admin   *conn
	member  *conn
	cleanup []func(context.Context) error
}

type conn struct {
	identity, network, manila *gophercloud.ServiceClient
	// compute is nil when the cloud has no Nova.
	compute *gophercloud.ServiceClient
}

// NewProject creates a project and a member user named after prefix, and removes both (and
// everything created through the Project) when the test ends.
func NewProject(t testing.TB, cloud *testenv.Cloud, prefix string) *Project {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := &Project{t: t, cloud: cloud, Name: prefix + "-" + randomHex(4), Password: "pw-" + randomHex(12)}
	p.admin = dial(t, ctx, clouds.WithCloudName(testenv.CloudAdmin), clouds.WithLocations(cloud.CloudsFile))
	t.Cleanup(p.teardown)

	var proj struct {
		Project struct {
			ID string `json:"id"`
		} `json:"project"`
	}
	p.must(post(ctx, p.admin.identity, "projects", map[string]any{"project": map[string]any{"name": p.Name, "domain_id": "default",
		"description": "manila-setup test fixture, deleted when the test ends"}}, &proj))
	p.ID = proj.Project.ID
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.admin.identity, "projects/"+p.ID) })

	var user struct {
		User struct {
			ID string `json:"id"`
		} `json:"user"`
	}
	p.must(post(ctx, p.admin.identity, "users", map[string]any{"user": map[string]any{"name": p.Name, "password": p.Password,
		"domain_id": "default", "default_project_id": p.ID}}, &user))
	p.UserID = user.User.ID
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.admin.identity, "users/"+p.UserID) })

	var roles struct {
		Roles []struct {
			ID string `json:"id"`
		} `json:"roles"`
	}
	p.must(get(ctx, p.admin.identity, "roles?name=member", &roles))
	if len(roles.Roles) == 0 {
		t.Fatal("ostest: no member role")
	}
	_, err := p.admin.identity.Put(ctx, p.admin.identity.ServiceURL("projects", p.ID, "users", p.UserID, "roles", roles.Roles[0].ID), nil, nil, &gophercloud.RequestOpts{OkCodes: []int{204}})
	p.must(err)

	keystone := cloud.Seed.KeystoneURL
	b, err := yaml.Marshal(map[string]any{"clouds": map[string]any{CloudName: map[string]any{
		"auth": map[string]any{"auth_url": keystone, "username": p.Name, "password": p.Password, "project_name": p.Name,
			"user_domain_name": "Default", "project_domain_name": "Default"},
		"region_name": "RegionOne", "interface": "public", "identity_api_version": 3,
	}}})
	p.must(err)
	p.CloudsFile = filepath.Join(t.TempDir(), "clouds.yaml")
	p.must(os.WriteFile(p.CloudsFile, b, 0o600))
	p.member = dial(t, ctx, clouds.WithCloudName(CloudName), clouds.WithLocations(p.CloudsFile))
	return p
}

func dial(t testing.TB, ctx context.Context, opts ...clouds.ParseOption) *conn {
	t.Helper()
	ao, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		t.Fatalf("ostest: clouds.yaml: %v", err)
	}
	ao.AllowReauth = true
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig), config.WithHTTPClient(http.Client{Timeout: 5 * time.Minute}))
	if err != nil {
		t.Fatalf("ostest: authenticating: %v", err)
	}
	c := &conn{}
	if c.identity, err = gcopenstack.NewIdentityV3(pc, eo); err != nil {
		t.Fatal(err)
	}
	if c.network, err = gcopenstack.NewNetworkV2(pc, eo); err != nil {
		t.Fatal(err)
	}
	if c.manila, err = gcopenstack.NewSharedFileSystemV2(pc, eo); err != nil {
		t.Fatal(err)
	}
	c.manila.Microversion = manilaVersion
	if compute, err := gcopenstack.NewComputeV2(pc, eo); err == nil {
		c.compute = compute
	}
	return c
}

func (p *Project) must(err error) {
	p.t.Helper()
	if err != nil {
		p.t.Fatalf("ostest: %v", err)
	}
}

func (p *Project) onCleanup(f func(context.Context) error) { p.cleanup = append(p.cleanup, f) }

// teardown undoes everything, newest first, and reports what could not be removed.
func (p *Project) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	for i := len(p.cleanup) - 1; i >= 0; i-- {
		if err := p.cleanup[i](ctx); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
			p.t.Errorf("ostest cleanup of project %s: %v", p.Name, err)
		}
	}
}

func randomUint(n uint64) uint64 {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	var v uint64
	for _, x := range b {
		v = v<<8 | uint64(x)
	}
	return v % n
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func post(ctx context.Context, sc *gophercloud.ServiceClient, path string, body, into any) error {
	_, err := sc.Post(ctx, sc.ServiceURL(strings.Split(path, "/")...), body, into, &gophercloud.RequestOpts{OkCodes: []int{200, 201, 202}})
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	return nil
}

func get(ctx context.Context, sc *gophercloud.ServiceClient, path string, into any) error {
	_, err := sc.Get(ctx, sc.ResourceBaseURL()+path, into, nil)
	if err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return nil
}

func del(ctx context.Context, sc *gophercloud.ServiceClient, path string) error {
	_, err := sc.Delete(ctx, sc.ResourceBaseURL()+path, &gophercloud.RequestOpts{OkCodes: []int{202, 204}})
	if err != nil {
		return fmt.Errorf("DELETE %s: %w", path, err)
	}
	return nil
}

// Network is a network made by CreateNetwork.
type Network struct {
	ID        string
	SubnetIDs []string
}

// CreateNetwork makes a network of the project with one subnet per CIDR (IPv4 or IPv6).
func (p *Project) CreateNetwork(name string, cidrs ...string) Network {
	p.t.Helper()
	subnets := make([]map[string]any, len(cidrs))
	for i, cidr := range cidrs {
		version := 4
		if strings.Contains(cidr, ":") {
			version = 6
		}
		subnets[i] = map[string]any{"cidr": cidr, "ip_version": version}
	}
	return p.CreateNetworkWith(name, nil, subnets...)
}

// CreateNetworkWith makes a network of the project with the given attributes (Neutron's names:
// port_security_enabled, ...) and one subnet per body (cidr, ip_version, enable_dhcp,
// gateway_ip, dns_nameservers, host_routes, ...; name and network_id are filled in).
func (p *Project) CreateNetworkWith(name string, network map[string]any, subnets ...map[string]any) Network {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	body := map[string]any{"name": name}
	for k, v := range network {
		body[k] = v
	}
	var n struct {
		Network struct {
			ID string `json:"id"`
		} `json:"network"`
	}
	p.must(post(ctx, p.member.network, "networks", map[string]any{"network": body}, &n))
	out := Network{ID: n.Network.ID}
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.member.network, "networks/"+out.ID) })
	for i, sb := range subnets {
		b := map[string]any{"name": fmt.Sprintf("%s-subnet-%d", name, i), "network_id": out.ID, "ip_version": 4}
		for k, v := range sb {
			b[k] = v
		}
		var s struct {
			Subnet struct {
				ID string `json:"id"`
			} `json:"subnet"`
		}
		p.must(post(ctx, p.member.network, "subnets", map[string]any{"subnet": b}, &s))
		out.SubnetIDs = append(out.SubnetIDs, s.Subnet.ID)
		id := s.Subnet.ID
		p.onCleanup(func(ctx context.Context) error { return del(ctx, p.member.network, "subnets/"+id) })
	}
	return out
}

// CreateNetworks makes n networks named prefix-0..n-1, each with one /24 subnet, with Neutron's
// bulk API (50 per request). Quotas are raised first. The admin creates them for the project as
// VXLAN networks with explicit VNIs: the loopback cloud's tenant range has only 1000. They are
// deleted in parallel when the test ends (a network takes its subnets with it).
func (p *Project) CreateNetworks(prefix string, n int) []Network {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p.SetNeutronQuota(n+10, n+10, 100)
	var out []Network
	var paths []string
	p.onCleanup(func(ctx context.Context) error { return deleteAll(ctx, p.admin.network, paths) })
	vni := 100000 + int(randomUint(15_000_000))
	// Small batches: a bulk request holds Neutron (one process on SQLite) for its whole length,
	// and other tests share this cloud.
	const batch = 50
	for start := 0; start < n; start += batch {
		end := min(start+batch, n)
		var nets, subs []map[string]any
		for i := start; i < end; i++ {
			nets = append(nets, map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "project_id": p.ID,
				"provider:network_type": "vxlan", "provider:segmentation_id": vni + i})
		}
		var created struct {
			Networks []struct {
				ID string `json:"id"`
			} `json:"networks"`
		}
		p.must(post(ctx, p.admin.network, "networks", map[string]any{"networks": nets}, &created))
		for j, cn := range created.Networks {
			i := start + j
			paths = append(paths, "networks/"+cn.ID)
			subs = append(subs, map[string]any{"name": fmt.Sprintf("%s-%d-subnet", prefix, i), "network_id": cn.ID,
				"cidr": fmt.Sprintf("172.%d.%d.0/24", 16+i/256%16, i%256), "ip_version": 4})
			out = append(out, Network{ID: cn.ID})
		}
		var createdSubs struct {
			Subnets []struct {
				ID string `json:"id"`
			} `json:"subnets"`
		}
		p.must(post(ctx, p.member.network, "subnets", map[string]any{"subnets": subs}, &createdSubs))
		for j, s := range createdSubs.Subnets {
			out[start+j].SubnetIDs = []string{s.ID}
		}
	}
	return out
}

// deleteAll deletes paths with a few requests in flight; missing ones are fine.
func deleteAll(ctx context.Context, sc *gophercloud.ServiceClient, paths []string) error {
	const workers = 4
	work := make(chan string)
	errs := make(chan error, len(paths))
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for path := range work {
				if err := del(ctx, sc, path); err != nil && !gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
					errs <- err
				}
			}
		}()
	}
	for _, path := range paths {
		work <- path
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// SetNeutronQuota raises the project's network, subnet and port quotas (as admin).
func (p *Project) SetNeutronQuota(networks, subnets, ports int) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.admin.network.Put(ctx, p.admin.network.ServiceURL("quotas", p.ID), map[string]any{"quota": map[string]any{
		"network": networks, "subnet": subnets, "port": ports}}, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
	p.must(err)
}

// SetNovaQuota sets the project's Nova instances, cores and RAM (MiB) quotas (as admin).
func (p *Project) SetNovaQuota(instances, cores, ramMiB int) {
	p.t.Helper()
	if p.admin.compute == nil {
		p.t.Fatal("ostest: the cloud has no Nova")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.admin.compute.Put(ctx, p.admin.compute.ServiceURL("os-quota-sets", p.ID), map[string]any{"quota_set": map[string]any{
		"instances": instances, "cores": cores, "ram": ramMiB}}, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
	p.must(err)
}

// CreateSecurityGroup makes a security group; allowEgress=false removes the default egress rules.
func (p *Project) CreateSecurityGroup(name string, allowEgress bool) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var sg struct {
		SecurityGroup struct {
			ID    string `json:"id"`
			Rules []struct {
				ID string `json:"id"`
			} `json:"security_group_rules"`
		} `json:"security_group"`
	}
	p.must(post(ctx, p.member.network, "security-groups", map[string]any{"security_group": map[string]any{"name": name}}, &sg))
	id := sg.SecurityGroup.ID
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.member.network, "security-groups/"+id) })
	if !allowEgress {
		for _, r := range sg.SecurityGroup.Rules {
			p.must(del(ctx, p.member.network, "security-group-rules/"+r.ID))
		}
	}
	return id
}

// AllowIngress adds ingress rules to security group sg, one per "protocol:port" (IPv4, from
// anywhere), as an administrator opens a group for a service: "tcp:2049", "udp:111".
func (p *Project) AllowIngress(sg string, rules ...string) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range rules {
		proto, portText, ok := strings.Cut(r, ":")
		port, err := strconv.Atoi(portText)
		if !ok || err != nil {
			p.t.Fatalf("AllowIngress %q: want protocol:port", r)
		}
		p.must(post(ctx, p.member.network, "security-group-rules", map[string]any{"security_group_rule": map[string]any{
			"security_group_id": sg, "direction": "ingress", "ethertype": "IPv4",
			"protocol": proto, "port_range_min": port, "port_range_max": port}}, nil))
	}
}

// CreatePort makes a port on a network for a (pretend) server: device_id and a compute
// device_owner, as Nova would set them.
func (p *Project) CreatePort(networkID, name, deviceID string, securityGroups ...string) string {
	p.t.Helper()
	attrs := map[string]any{}
	if len(securityGroups) > 0 {
		attrs["security_groups"] = securityGroups
	}
	return p.CreatePortWith(networkID, name, deviceID, attrs)
}

// CreatePortWith makes a port of a server (deviceID) with more attributes (Neutron's names:
// security_groups, allowed_address_pairs, ...).
func (p *Project) CreatePortWith(networkID, name, deviceID string, attrs map[string]any) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	port := map[string]any{"network_id": networkID, "name": name, "device_id": deviceID, "device_owner": "compute:nova"}
	for k, v := range attrs {
		port[k] = v
	}
	var out struct {
		Port struct {
			ID string `json:"id"`
		} `json:"port"`
	}
	p.must(post(ctx, p.member.network, "ports", map[string]any{"port": port}, &out))
	id := out.Port.ID
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.member.network, "ports/"+id) })
	return id
}

// UpdateSubnet changes a subnet of the project (Neutron's names: allocation_pools,
// gateway_ip, ...).
func (p *Project) UpdateSubnet(id string, attrs map[string]any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := p.member.network.Put(ctx, p.member.network.ResourceBaseURL()+"subnets/"+id, map[string]any{"subnet": attrs}, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
	if err != nil {
		p.must(fmt.Errorf("PUT subnets/%s: %w", id, err))
	}
}

// CreateShareNetwork makes a Manila share network on a Neutron network and subnet.
func (p *Project) CreateShareNetwork(name, networkID, subnetID string) string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out struct {
		ShareNetwork struct {
			ID string `json:"id"`
		} `json:"share_network"`
	}
	p.must(post(ctx, p.member.manila, "share-networks", map[string]any{"share_network": map[string]any{
		"name": name, "neutron_net_id": networkID, "neutron_subnet_id": subnetID}}, &out))
	id := out.ShareNetwork.ID
	p.onCleanup(func(ctx context.Context) error { return del(ctx, p.member.manila, "share-networks/"+id) })
	return id
}

// CreateShares makes n 1 GiB NFS shares of the share type "default" named prefix-i, waits
// until all are available, and deletes them (waiting until they are gone) when the test ends.
func (p *Project) CreateShares(prefix string, n int) []string {
	p.t.Helper()
	return p.CreateSharesIn(prefix, n, "default", "")
}

// CreateSharesIn is CreateShares with the share type and the availability zone ("": Manila's
// choice) given.
func (p *Project) CreateSharesIn(prefix string, n int, shareType, zone string) []string {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	if n > 40 {
		_, err := p.admin.manila.Put(ctx, p.admin.manila.ServiceURL("quota-sets", p.ID), map[string]any{"quota_set": map[string]any{
			"shares": n + 10, "gigabytes": n + 100}}, nil, &gophercloud.RequestOpts{OkCodes: []int{200}})
		p.must(err)
	}
	var mu sync.Mutex
	var ids []string
	p.onCleanup(func(ctx context.Context) error {
		mu.Lock()
		defer mu.Unlock()
		return p.deleteShares(ctx, ids)
	})
	// A few requests in flight: the API answers while the share service works.
	work := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				var out struct {
					Share struct {
						ID string `json:"id"`
					} `json:"share"`
				}
				share := map[string]any{"name": fmt.Sprintf("%s-%d", prefix, i), "share_proto": "NFS", "size": 1, "share_type": shareType}
				if zone != "" {
					share["availability_zone"] = zone
				}
				if err := post(ctx, p.member.manila, "shares", map[string]any{"share": share}, &out); err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				ids = append(ids, out.Share.ID)
				mu.Unlock()
			}
		}()
	}
	for i := 0; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	p.must(<-errs)
	p.must(p.waitShares(ctx, prefix, n))
	return ids
}

// waitShares waits until n shares whose names start with prefix are available.
func (p *Project) waitShares(ctx context.Context, prefix string, n int) error {
	for {
		var list struct {
			Shares []struct {
				Name   string `json:"name"`
				Status string `json:"status"`
			} `json:"shares"`
		}
		if err := get(ctx, p.member.manila, "shares/detail?limit=5000", &list); err != nil {
			return err
		}
		available := 0
		for _, s := range list.Shares {
			if !strings.HasPrefix(s.Name, prefix+"-") {
				continue
			}
			switch s.Status {
			case "available":
				available++
			case "error":
				return fmt.Errorf("share %s went to status error", s.Name)
			}
		}
		if available >= n {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d shares available: %w", available, n, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

func (p *Project) deleteShares(ctx context.Context, ids []string) error {
	paths := make([]string, 0, len(ids))
	for _, id := range ids {
		paths = append(paths, "shares/"+id)
	}
	if err := deleteAll(ctx, p.member.manila, paths); err != nil {
		return err
	}
	for len(ids) > 0 {
		var list struct {
			Shares []struct {
				ID string `json:"id"`
			} `json:"shares"`
		}
		if err := get(ctx, p.member.manila, "shares?limit=5000", &list); err != nil {
			return err
		}
		// Only these shares: the project's others (a second CreateShares) have cleanups of their own.
		left := 0
		for _, sh := range list.Shares {
			if slices.Contains(ids, sh.ID) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d shares still there: %w", left, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	return nil
}
