package workers

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/probe"
	"github.com/manila-setup/manila-setup/operator/probe/probepod"
)

// Canary is the check of a rollout's first new Machine of each set (rollout.Checker): what a
// booted machine with the storage NIC shows, before the others are replaced.
//   - no Warning event about the Machine (a port Neutron refused, a failed create);
//   - its Node's IP lies in the machine network and in no storage subnet: a storage subnet that
//     hands out a default route, or holds NODEIP_HINT or a VIP, moves the node IP (logs, exec,
//     br-ex follow it);
//   - the Machine has an address on each storage network: its port exists;
//   - after a removal (patch --remove), its server has no port on a network taken off the set;
//   - its primary port still carries the API and ingress VIPs as allowed address pairs (the
//     storage entry says noAllowedAddressPairs; the primary one must keep them, or keepalived
//     cannot move a VIP to the node).
//
// Without the cluster's machine networks or a cloud, the checks that need them are said to be
// skipped, not passed.
type Canary struct {
	// MachineNetworks are the cluster's machine networks (cluster-config-v1), nil if unknown.
	MachineNetworks []netip.Prefix
	// VIPs are the cluster's API and ingress VIPs (cluster-config-v1), nil if unknown.
	VIPs []netip.Addr
	// Cloud, when set, says what the storage networks' subnets are and what the server's ports
	// carry.
	Cloud *openstack.Client

	// Probe, when set, opens TCP 2049 to the storage networks' export addresses from the new
	// machine's node (package operator/probe): the operator runs in the cluster, in a namespace
	// that admits the probe, from an image that holds it. NoProbe says why not otherwise.
	Probe   *ProbeConfig
	NoProbe string

	mu        sync.Mutex
	networks  map[string]openstack.Network // by neutronid.Key
	discovery *openstack.Discovery         // read once, for the export addresses
}

// ProbeConfig is where and how the NFS probe runs.
type ProbeConfig struct {
	Kube             kubernetes.Interface
	Namespace, Image string
	// Timeout bounds the probe pod's run; zero: probe.DefaultTimeout.
	Timeout time.Duration
}

// NewCanary reads the cluster's machine networks and VIPs (InstallConfigNetworks) for the
// canary; cloud may be nil.
func NewCanary(ctx context.Context, kube kubernetes.Interface, cloud *openstack.Client) *Canary {
	n, _ := InstallConfigNetworks(ctx, kube)
	c := &Canary{Cloud: cloud, MachineNetworks: n.Machine, VIPs: n.VIPs}
	c.Probe, c.NoProbe = probeConfig(ctx, kube)
	return c
}

// probeConfig finds where the NFS probe can run: beside this product's operator in driver mode
// (its namespace admits host-network pods, its image holds the probe), when it runs. The
// platform's operator has the same name and namespace on OpenShift: only a Deployment labelled
// as this product's counts.
func probeConfig(ctx context.Context, kube kubernetes.Interface) (*ProbeConfig, string) {
	if kube == nil {
		return nil, "no cluster"
	}
	d, err := kube.AppsV1().Deployments(operator.DefaultNamespace).Get(ctx, operator.OperatorName, metav1.GetOptions{})
	switch {
	case err == nil && d.Labels[managedByLabel] == managedBy:
		if d.Status.AvailableReplicas == 0 || len(d.Spec.Template.Spec.Containers) == 0 {
			return nil, fmt.Sprintf("the operator's Deployment %s/%s has no available replica", d.Namespace, d.Name)
		}
		return &ProbeConfig{Kube: kube, Namespace: d.Namespace, Image: d.Spec.Template.Spec.Containers[0].Image}, ""
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Sprintf("reading the operator's Deployment: %v", err)
	}
	if _, err := kube.AppsV1().Deployments(operator.CompanionNamespace).Get(ctx, operator.CompanionOperatorName, metav1.GetOptions{}); err == nil {
		return nil, "beside the platform's driver, the operator's namespace " + operator.CompanionNamespace + " admits no host-network pod"
	}
	return nil, "the manila-setup operator does not run in the cluster"
}

// The label this product's objects carry.
const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedBy      = "manila-setup"
)

// InstallConfigNetworks are the cluster's networks and VIPs from the install-config the
// installer leaves in kube-system/cluster-config-v1 (deploy.ReadInstallConfig, the one reader
// of it); an error (none is empty) when it cannot be read.
func InstallConfigNetworks(ctx context.Context, kube kubernetes.Interface) (operator.InstallConfigNetworks, error) {
	ic, err := deploy.ReadInstallConfig(ctx, kube)
	return ic.Networks, err
}

// Check judges the facts of a new Machine.
func (c *Canary) Check(ctx context.Context, f rollout.Facts) (rollout.Verdict, error) {
	var v rollout.Verdict
	for _, w := range f.Warnings {
		v.Problems = append(v.Problems, "the Machine reported "+w)
	}
	if len(f.Warnings) == 0 {
		v.Checked = append(v.Checked, "no warning events")
	}
	storage, err := c.storageNetworks(ctx, f.StorageNetworks)
	if err != nil {
		return v, err
	}
	switch {
	case f.NodeElsewhere != "":
		v.Checked = append(v.Checked, "node IP not checked ("+f.NodeElsewhere+")")
	case !f.NodeIP.IsValid():
		v.Problems = append(v.Problems, fmt.Sprintf("its Node %s has no InternalIP", orNone(f.Node)))
	default:
		v = c.checkNodeIP(v, f, storage)
	}
	if c.Cloud == nil {
		v.Checked = append(v.Checked, "storage addresses not checked (no cloud given)")
		if len(f.RemovedNetworks) > 0 {
			v.Checked = append(v.Checked, "no port on the removed networks not checked (no cloud given)")
		}
		return v, nil
	}
	v = c.checkStorageAddresses(v, f, storage)
	if v, err = c.checkRemovedPorts(ctx, v, f); err != nil {
		return v, err
	}
	if v, err = c.checkVIPs(ctx, v, f); err != nil {
		return v, err
	}
	if len(v.Problems) > 0 {
		return v, nil // the probe would tell nothing more
	}
	return c.checkNFS(ctx, v, f)
}

// checkStorageAddresses checks that the Machine has an address on each storage network.
func (c *Canary) checkStorageAddresses(v rollout.Verdict, f rollout.Facts, storage []openstack.Network) rollout.Verdict {
	for _, n := range storage {
		if !slices.ContainsFunc(f.MachineAddresses, func(a netip.Addr) bool { return inSubnets(n.Subnets, a) != nil }) {
			v.Problems = append(v.Problems, fmt.Sprintf("Machine %s has no address on storage network %s: its port was not made, or got no address (addresses %s)", f.Machine, n.Ref(), addrs(f.MachineAddresses)))
			continue
		}
		v.Checked = append(v.Checked, "an address on "+orNone(n.Name))
	}
	return v
}

// checkVIPs checks the VIP address pairs of the server's primary port.
func (c *Canary) checkVIPs(ctx context.Context, v rollout.Verdict, f rollout.Facts) (rollout.Verdict, error) {
	switch {
	case len(c.VIPs) == 0:
		v.Checked = append(v.Checked, "VIP address pairs not checked (no VIPs in the install-config)")
		return v, nil
	case f.ServerID == "":
		v.Checked = append(v.Checked, "VIP address pairs not checked (the Machine has no providerID)")
		return v, nil
	}
	ports, err := c.Cloud.ServerPorts(ctx, f.ServerID)
	if err != nil {
		return v, fmt.Errorf("reading the ports of server %s: %w", f.ServerID, err)
	}
	problem, checked := vipPairs(ports, f.StorageNetworks, c.VIPs)
	if problem != "" {
		v.Problems = append(v.Problems, problem)
	} else {
		v.Checked = append(v.Checked, checked)
	}
	return v, nil
}

// checkNFS runs the NFS probe on the Machine's node, to the export addresses of its storage
// networks: the node is taken as attached only when it reaches them.
func (c *Canary) checkNFS(ctx context.Context, v rollout.Verdict, f rollout.Facts) (rollout.Verdict, error) {
	switch {
	case c.Probe == nil:
		v.Checked = append(v.Checked, "NFS not probed ("+c.NoProbe+")")
		return v, nil
	case f.NodeElsewhere != "":
		v.Checked = append(v.Checked, "NFS not probed ("+f.NodeElsewhere+")")
		return v, nil
	}
	targets, err := c.exportTargets(ctx, f.StorageNetworks)
	if err != nil {
		return v, err
	}
	if len(targets) == 0 {
		v.Checked = append(v.Checked, "NFS not probed (no Manila export address lies on the storage networks)")
		return v, nil
	}
	res, err := probepod.Run(ctx, c.Probe.Kube, probepod.Spec{Namespace: c.Probe.Namespace, Node: f.Node, Image: c.Probe.Image, Targets: targets, Timeout: c.Probe.Timeout})
	switch {
	case err != nil:
		v.Problems = append(v.Problems, "the NFS probe on its node gave no answer: "+err.Error())
	case !res.Reachable():
		v.Problems = append(v.Problems, res.Problems()...)
	default:
		v.Checked = append(v.Checked, fmt.Sprintf("NFS reachable from the node (%d export addresses)", len(targets)))
	}
	return v, nil
}

// exportTargets are the NFS endpoints (ADDR:2049) of the Manila exports on the networks ids,
// as discovery finds them (read once), at most probe.MaxTargets.
func (c *Canary) exportTargets(ctx context.Context, ids []string) ([]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.discovery == nil {
		d, err := c.Cloud.Discover(ctx, openstack.DiscoverOptions{})
		if err != nil {
			return nil, fmt.Errorf("finding the storage networks' export addresses: %w", err)
		}
		c.discovery = d
	}
	var out []string
	for _, cand := range c.discovery.Candidates {
		if !attach.ContainsID(ids, cand.Network.ID) {
			continue
		}
		for _, e := range cand.Exports {
			t := netip.AddrPortFrom(e.Address, probe.NFSPort).String()
			if !slices.Contains(out, t) && len(out) < probe.MaxTargets {
				out = append(out, t)
			}
		}
	}
	return out, nil
}

// vipPairs checks that a primary port of the server (one not on a storage network) lets the
// VIPs through: the Machine API adds them as allowed address pairs to every port whose network
// entry does not say noAllowedAddressPairs, and keepalived needs them to move a VIP to the node.
func vipPairs(ports []openstack.Port, storage []string, vips []netip.Addr) (problem, checked string) {
	var primary []openstack.Port
	for _, p := range ports {
		if !attach.ContainsID(storage, p.NetworkID) {
			primary = append(primary, p)
		}
	}
	if len(primary) == 0 {
		return "", "VIP address pairs not checked (the server has no port off the storage networks in Neutron)"
	}
	for _, p := range primary {
		if len(missingPairs(p, vips)) == 0 {
			return "", "VIPs allowed on primary port " + orNone(p.Name)
		}
	}
	p := primary[0]
	missing := missingPairs(p, vips)
	var fix []string
	for _, a := range missing {
		fix = append(fix, "--allowed-address ip-address="+a.String())
	}
	return fmt.Sprintf("the server's primary port %s (%s, network %s) lacks the allowed address pairs of VIPs %s: keepalived cannot move them to this node; fix: openstack port set %s %s",
		orNone(p.Name), p.ID, p.NetworkID, addrs(missing), strings.Join(fix, " "), p.ID), ""
}

// missingPairs are the VIPs no allowed address pair of p covers.
func missingPairs(p openstack.Port, vips []netip.Addr) []netip.Addr {
	var missing []netip.Addr
	for _, vip := range vips {
		covered := slices.ContainsFunc(p.AllowedAddressPairs, func(pair string) bool {
			if a, err := netip.ParseAddr(pair); err == nil {
				return a == vip
			}
			pre, err := netip.ParsePrefix(pair)
			return err == nil && pre.Contains(vip)
		})
		if !covered {
			missing = append(missing, vip)
		}
	}
	return missing
}

// checkNodeIP checks where the node IP lies: in no storage subnet, in a machine network.
func (c *Canary) checkNodeIP(v rollout.Verdict, f rollout.Facts, storage []openstack.Network) rollout.Verdict {
	for _, n := range storage {
		if s := inSubnets(n.Subnets, f.NodeIP); s != nil {
			msg := fmt.Sprintf("Node %s took its node IP %s from storage subnet %s of network %s: logs, exec and the node's br-ex would go over the storage network", f.Node, f.NodeIP, subnetLabel(*s), n.Ref())
			if fixes := fixesOf(n); fixes != "" {
				msg += "; fix: " + fixes
			}
			v.Problems = append(v.Problems, msg)
			return v
		}
	}
	if len(c.MachineNetworks) == 0 {
		v.Checked = append(v.Checked, fmt.Sprintf("node IP %s (machine network unknown)", f.NodeIP))
		return v
	}
	if !slices.ContainsFunc(c.MachineNetworks, func(p netip.Prefix) bool { return p.Contains(f.NodeIP) }) {
		v.Problems = append(v.Problems, fmt.Sprintf("Node %s's node IP %s is outside the machine network %s", f.Node, f.NodeIP, prefixes(c.MachineNetworks)))
		return v
	}
	v.Checked = append(v.Checked, fmt.Sprintf("node IP %s on the machine network", f.NodeIP))
	return v
}

// storageNetworks are the networks of ids with their subnets, read once per network.
func (c *Canary) storageNetworks(ctx context.Context, ids []string) ([]openstack.Network, error) {
	if c.Cloud == nil || len(ids) == 0 {
		return nil, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.networks == nil {
		c.networks = map[string]openstack.Network{}
	}
	var missing []string
	for _, id := range ids {
		if _, ok := c.networks[neutronid.Key(id)]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		nets, err := c.Cloud.Networks(ctx, missing...)
		if err != nil {
			return nil, fmt.Errorf("reading the storage networks: %w", err)
		}
		for _, n := range nets {
			c.networks[neutronid.Key(n.ID)] = n
		}
	}
	var out []openstack.Network
	for _, id := range ids {
		if n, ok := c.networks[neutronid.Key(id)]; ok {
			out = append(out, n)
		}
	}
	return out, nil
}

// fixesOf are the fixes of what moves a node IP: the default-route findings of the network.
func fixesOf(n openstack.Network) string {
	var fixes []string
	for _, f := range attach.Fitness(n, attach.FitnessOptions{}) {
		if f.ID == attach.FindingDefaultRoute && f.Fix != "" {
			fixes = append(fixes, f.Fix)
		}
	}
	return strings.Join(fixes, "; ")
}

func inSubnets(subnets []openstack.Subnet, a netip.Addr) *openstack.Subnet {
	for i := range subnets {
		if subnets[i].CIDR.IsValid() && subnets[i].CIDR.Contains(a) {
			return &subnets[i]
		}
	}
	return nil
}

func subnetLabel(s openstack.Subnet) string {
	if s.Name == "" {
		return s.CIDR.String() + " (" + s.ID + ")"
	}
	return s.Name + " " + s.CIDR.String()
}

func addrs(as []netip.Addr) string {
	if len(as) == 0 {
		return "none"
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return strings.Join(out, ", ")
}

func prefixes(ps []netip.Prefix) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return strings.Join(out, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
