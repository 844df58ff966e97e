package machineapi

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servergroups"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/config"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/attributestags"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/security/groups"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/trunks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/networks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// Clients are the loopback cloud's services as the cluster's user (project demo) sees them.
type Clients struct {
	Network, Compute, Image *gophercloud.ServiceClient
}

// Connect authenticates as cloud of the clouds.yaml file cloudsFile.
func Connect(ctx context.Context, cloudsFile, cloud string) (*Clients, error) {
	ao, eo, tlsConfig, err := clouds.Parse(clouds.WithLocations(cloudsFile), clouds.WithCloudName(cloud))
	if err != nil {
		return nil, fmt.Errorf("clouds.yaml %s, cloud %s: %w", cloudsFile, cloud, err)
	}
	pc, err := config.NewProviderClient(ctx, ao, config.WithTLSConfig(tlsConfig))
	if err != nil {
		return nil, fmt.Errorf("authenticating as %s: %w", cloud, err)
	}
	var c Clients
	if c.Network, err = openstack.NewNetworkV2(pc, eo); err != nil {
		return nil, err
	}
	if c.Compute, err = openstack.NewComputeV2(pc, eo); err != nil {
		return nil, err
	}
	// Server groups with soft-anti-affinity and server tags want a recent microversion.
	c.Compute.Microversion = "2.60"
	if c.Image, err = openstack.NewImageV2(pc, eo); err != nil {
		return nil, err
	}
	return &c, nil
}

// cloudsYAMLFor returns a clouds.yaml holding one cloud, named as, with the credentials of the
// cloud from of the file cloudsFile: what the installer stores in the Secret
// openshift-machine-api/openstack-cloud-credentials (cloud "openstack").
func cloudsYAMLFor(cloudsFile, from, as string) ([]byte, error) {
	raw, err := os.ReadFile(cloudsFile)
	if err != nil {
		return nil, err
	}
	var all struct {
		Clouds map[string]any `json:"clouds"`
	}
	if err := yaml.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("%s does not parse", cloudsFile)
	}
	entry, ok := all.Clouds[from]
	if !ok {
		return nil, fmt.Errorf("%s has no cloud %q", cloudsFile, from)
	}
	return yaml.Marshal(map[string]any{"clouds": map[string]any{as: entry}})
}

// InstallerCloud is what openshift-install leaves in the cloud for one cluster, as the machine
// actuator needs it: the machine network (network <infraID>-openshift, subnet <infraID>-nodes,
// both tagged openshiftClusterID=<infraID>), the master and worker security groups, the API and
// ingress VIP ports, and the RHCOS image <infraID>-rhcos.
type InstallerCloud struct {
	InfraID   string
	NetworkID string
	SubnetID  string
	CIDR      string
	// SubnetV6ID is the machine network's IPv6 subnet of a dual-stack cluster ("" for none).
	SubnetV6ID       string
	SecurityGroupIDs map[string]string // role (master, worker) -> ID
	APIVIP           string
	IngressVIP       string
	ImageID          string

	clients *Clients
}

// SeedInstallerCloud creates what openshift-install leaves in the cloud for cluster infraID,
// with the machine network cidr and the VIPs at its .5 and .7 (as DefaultInstallConfig says).
// On error, what it made is deleted.
// A cidrV6 other than "" makes the machine network dual-stack, with a DHCPv6-stateful IPv6
// subnet as the installer's dual-stack documentation creates it; the VIPs stay IPv4.
func SeedInstallerCloud(ctx context.Context, c *Clients, infraID, cidr, cidrV6, apiVIP, ingressVIP string) (_ *InstallerCloud, err error) {
	ic := &InstallerCloud{InfraID: infraID, CIDR: cidr, APIVIP: apiVIP, IngressVIP: ingressVIP, SecurityGroupIDs: map[string]string{}, clients: c}
	defer func() {
		if err != nil {
			ic.Delete(context.Background())
		}
	}()
	tag := "openshiftClusterID=" + infraID
	n, err := networks.Create(ctx, c.Network, networks.CreateOpts{Name: infraID + "-openshift"}).Extract()
	if err != nil {
		return nil, fmt.Errorf("creating network %s-openshift: %w", infraID, err)
	}
	ic.NetworkID = n.ID
	s, err := subnets.Create(ctx, c.Network, subnets.CreateOpts{NetworkID: n.ID, Name: infraID + "-nodes", CIDR: cidr, IPVersion: gophercloud.IPv4}).Extract()
	if err != nil {
		return nil, fmt.Errorf("creating subnet %s-nodes (%s): %w", infraID, cidr, err)
	}
	ic.SubnetID = s.ID
	tagged := map[string]string{"networks": n.ID, "subnets": s.ID}
	if cidrV6 != "" {
		s6, err := subnets.Create(ctx, c.Network, subnets.CreateOpts{NetworkID: n.ID, Name: infraID + "-nodes-v6", CIDR: cidrV6, IPVersion: gophercloud.IPv6,
			IPv6AddressMode: "dhcpv6-stateful", IPv6RAMode: "dhcpv6-stateful"}).Extract()
		if err != nil {
			return nil, fmt.Errorf("creating subnet %s-nodes-v6 (%s): %w", infraID, cidrV6, err)
		}
		ic.SubnetV6ID = s6.ID
		tagged["subnets-v6"] = s6.ID
	}
	for kind, id := range tagged {
		kind = strings.TrimSuffix(kind, "-v6")
		if _, err := attributestags.ReplaceAll(ctx, c.Network, kind, id, attributestags.ReplaceAllOpts{Tags: []string{tag}}).Extract(); err != nil {
			return nil, fmt.Errorf("tagging %s %s with %s: %w", kind, id, tag, err)
		}
	}
	for _, role := range []string{"master", "worker"} {
		g, err := groups.Create(ctx, c.Network, groups.CreateOpts{Name: infraID + "-" + role}).Extract()
		if err != nil {
			return nil, fmt.Errorf("creating security group %s-%s: %w", infraID, role, err)
		}
		ic.SecurityGroupIDs[role] = g.ID
		if _, err := attributestags.ReplaceAll(ctx, c.Network, "security-groups", g.ID, attributestags.ReplaceAllOpts{Tags: []string{tag}}).Extract(); err != nil {
			return nil, fmt.Errorf("tagging security group %s: %w", g.ID, err)
		}
	}
	for name, ip := range map[string]string{infraID + "-api-port": apiVIP, infraID + "-ingress-port": ingressVIP} {
		if _, err := ports.Create(ctx, c.Network, ports.CreateOpts{NetworkID: n.ID, Name: name,
			FixedIPs: []ports.IP{{SubnetID: s.ID, IPAddress: ip}}}).Extract(); err != nil {
			return nil, fmt.Errorf("creating VIP port %s (%s): %w", name, ip, err)
		}
	}
	// A failed upload still returns what it created, for Delete above.
	if ic.ImageID, err = testenv.UploadImage(ctx, c.Image, infraID+"-rhcos", 1<<20); err != nil {
		return nil, err
	}
	return ic, nil
}

// Delete removes the cluster from the cloud: its servers (named <infraID>-...; their ports go
// with them, or here), every port left on its network, the network, security groups, server
// groups named after it and the image. Best effort, bounded: it is cleanup.
func (ic *InstallerCloud) Delete(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	c := ic.clients
	var errs []error
	note := func(what string, err error) {
		if err != nil && !gophercloud.ResponseCodeIs(err, 404) {
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	prefix := "^" + regexp.QuoteMeta(ic.InfraID) + "-"
	if pages, err := servers.List(c.Compute, servers.ListOpts{Name: prefix}).AllPages(ctx); err == nil {
		all, _ := servers.ExtractServers(pages)
		for _, s := range all {
			note("deleting server "+s.Name, servers.Delete(ctx, c.Compute, s.ID).ExtractErr())
		}
		note("waiting for the servers to go", wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			pages, err := servers.List(c.Compute, servers.ListOpts{Name: prefix}).AllPages(ctx)
			if err != nil {
				return false, err
			}
			left, err := servers.ExtractServers(pages)
			return len(left) == 0, err
		}))
	} else {
		note("listing servers", err)
	}
	// The trunks CAPO made for the servers' ports (named as the ports): a port in a trunk
	// cannot be deleted.
	if pages, err := trunks.List(c.Network, trunks.ListOpts{}).AllPages(ctx); err == nil {
		all, _ := trunks.ExtractTrunks(pages)
		re := regexp.MustCompile(prefix)
		for _, tr := range all {
			if re.MatchString(tr.Name) {
				note("deleting trunk "+tr.Name, trunks.Delete(ctx, c.Network, tr.ID).ExtractErr())
			}
		}
	} else {
		note("listing trunks", err)
	}
	if ic.NetworkID != "" {
		if pages, err := ports.List(c.Network, ports.ListOpts{NetworkID: ic.NetworkID}).AllPages(ctx); err == nil {
			all, _ := ports.ExtractPorts(pages)
			for _, p := range all {
				if p.DeviceOwner == "network:dhcp" {
					continue
				}
				note("deleting port "+p.ID, ports.Delete(ctx, c.Network, p.ID).ExtractErr())
			}
		}
	}
	// Ports of the cluster's servers on other networks (a storage network), by their names.
	if pages, err := ports.List(c.Network, ports.ListOpts{}).AllPages(ctx); err == nil {
		all, _ := ports.ExtractPorts(pages)
		re := regexp.MustCompile(prefix)
		for _, p := range all {
			if re.MatchString(p.Name) {
				note("deleting port "+p.Name, ports.Delete(ctx, c.Network, p.ID).ExtractErr())
			}
		}
	}
	if ic.NetworkID != "" {
		note("deleting network "+ic.NetworkID, networks.Delete(ctx, c.Network, ic.NetworkID).ExtractErr())
	}
	for _, id := range ic.SecurityGroupIDs {
		note("deleting security group "+id, groups.Delete(ctx, c.Network, id).ExtractErr())
	}
	if pages, err := servergroups.List(c.Compute, servergroups.ListOpts{}).AllPages(ctx); err == nil {
		all, _ := servergroups.ExtractServerGroups(pages)
		re := regexp.MustCompile(prefix)
		for _, g := range all {
			if re.MatchString(g.Name) {
				note("deleting server group "+g.Name, servergroups.Delete(ctx, c.Compute, g.ID).ExtractErr())
			}
		}
	}
	if ic.ImageID != "" {
		note("deleting image "+ic.ImageID, images.Delete(ctx, c.Image, ic.ImageID).ExtractErr())
	}
	return errors.Join(errs...)
}
