package diagnose

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// On a cloud whose availability zones Manila serves on storage networks of their own (edge and
// multi-site clouds), a Node needs the networks of its own zone, and a pod's share must be in
// a zone whose networks its Node reaches: a claim provisioned in zone A for a pod in zone B
// never mounts. The cloud provider labels each Node with its server's zone.

// zoneFacts are each zone's storage networks, when Manila serves the zones on different ones.
type zoneFacts []openstack.ZoneNetworks

// networksOf are the storage networks of a zone (nil: Manila exports nothing there).
func (z zoneFacts) networksOf(zone string) []openstack.Candidate {
	at := slices.IndexFunc(z, func(zn openstack.ZoneNetworks) bool { return zn.Zone == zone })
	if at < 0 {
		return nil
	}
	return z[at].Networks
}

// reaches says whether a Node of zone reaches the export address a: it lies in an export
// subnet of one of the zone's storage networks.
func (z zoneFacts) reaches(zone string, a netip.Addr) bool {
	for _, c := range z.networksOf(zone) {
		for _, p := range c.ExportSubnets() {
			if p.Contains(a) {
				return true
			}
		}
	}
	return false
}

// nodeZone is the Node's availability zone, from the cloud provider's label.
func nodeZone(n *corev1.Node) string { return n.Labels[corev1.LabelTopologyZone] }

// judgeZonePorts judges a Node's ports against its zone's storage networks: it must have a port
// on each of them (each back end of the zone exports on its own).
func judgeZonePorts(zones zoneFacts, n *corev1.Node, server string, ports []openstack.Port, set string) Check {
	c := Check{Name: "storage port", Subject: "Node " + n.Name}
	zone := nodeZone(n)
	summary := openstack.ZoneSummary(zones)
	if zone == "" {
		c.Status = NotChecked
		c.Evidence = fmt.Sprintf("Manila exports on a storage network per availability zone (%s), and the Node has no %s label: its zone is not known", summary, corev1.LabelTopologyZone)
		return c
	}
	wanted := zones.networksOf(zone)
	if len(wanted) == 0 {
		c.Status = Failed
		c.Evidence = fmt.Sprintf("the Node is in availability zone %s, where Manila exports no share (%s): no storage network of its zone to attach", zone, summary)
		c.Fix = "move the workload to a zone Manila serves (nodeSelector " + corev1.LabelTopologyZone + "), or ask the cloud's administrator for a Manila back end in " + zone
		return c
	}
	var have, missing []string
	var missingIDs []string
	for _, w := range wanted {
		at := slices.IndexFunc(ports, func(p openstack.Port) bool { return p.NetworkID == w.Network.ID })
		if at >= 0 {
			have = append(have, fmt.Sprintf("port %s on network %s with %s", ports[at].ID, w.Network.Label(), joinAddrs(ports[at].FixedIPs)))
		} else {
			missing = append(missing, w.Network.Label())
			missingIDs = append(missingIDs, w.Network.ID)
		}
	}
	if len(missing) == 0 {
		c.Status = Passed
		c.Evidence = fmt.Sprintf("server %s, in availability zone %s, has %s", server, zone, strings.Join(have, "; "))
		return c
	}
	var elsewhere []string
	for _, zn := range zones {
		if zn.Zone == zone {
			continue
		}
		for _, o := range zn.Networks {
			if slices.ContainsFunc(ports, func(p openstack.Port) bool { return p.NetworkID == o.Network.ID }) {
				elsewhere = append(elsewhere, fmt.Sprintf("%s (zone %s)", o.Network.Label(), zn.Zone))
			}
		}
	}
	c.Status = Failed
	c.Evidence = fmt.Sprintf("server %s, in availability zone %s, has no port on %s, where Manila exports in %s: a mount of a share there times out (mount.nfs: Connection timed out)", server, zone, strings.Join(missing, ", "), zone)
	if len(elsewhere) > 0 {
		c.Evidence += fmt.Sprintf("; its port on %s leads to another zone's exports", strings.Join(elsewhere, ", "))
	}
	if name, ok := strings.CutPrefix(set, "MachineSet "); ok {
		c.Fix = fmt.Sprintf("manila-setup machinesets patch --discover --name %s --rollout", name)
	} else {
		c.Fix = fmt.Sprintf("attach network %s to the Node's machines (manila-setup networks attach)", strings.Join(missingIDs, ", "))
	}
	return c
}

// judgeZone judges where a share is against where the pod's Node is: the Node must reach one of
// the share's export addresses through its zone's storage networks.
func judgeZone(zones zoneFacts, share *openstack.Share, n *corev1.Node) Check {
	c := Check{Name: "zone", Subject: fmt.Sprintf("share %s for Node %s", share.ID, n.Name)}
	zone := nodeZone(n)
	if zone == "" {
		c.Status, c.Evidence = NotChecked, fmt.Sprintf("the Node has no %s label: its zone is not known", corev1.LabelTopologyZone)
		return c
	}
	var addrs []string
	for _, e := range share.ExportLocations {
		hosts, _ := openstack.ExportHosts(e.Path)
		for _, h := range hosts {
			if zones.reaches(zone, h) {
				c.Status = Passed
				c.Evidence = fmt.Sprintf("the Node is in availability zone %s and the share (zone %s) is exported at %s, on a storage network of that zone", zone, orUnknown(share.AvailabilityZone), h)
				return c
			}
			addrs = append(addrs, h.String())
		}
	}
	shareZone := orUnknown(share.AvailabilityZone)
	var serving []string
	for _, zn := range zones {
		for _, cand := range zn.Networks {
			for _, a := range addrs {
				if addr, err := netip.ParseAddr(a); err == nil && slices.ContainsFunc(cand.ExportSubnets(), func(p netip.Prefix) bool { return p.Contains(addr) }) {
					serving = append(serving, fmt.Sprintf("%s (zone %s)", cand.Network.Label(), zn.Zone))
				}
			}
		}
	}
	slices.Sort(serving)
	serving = slices.Compact(serving)
	c.Status = Failed
	c.Evidence = fmt.Sprintf("the pod's Node is in availability zone %s, and the share is in zone %s, exported at %s%s: no storage network of zone %s leads there, so the mount times out",
		zone, shareZone, cmp.Or(strings.Join(addrs, ", "), "no address"), onNetworks(serving), zone)
	c.Fix = fmt.Sprintf("recreate the claim so that its share is made in zone %s (a StorageClass with parameters availability: %s), or run the pod in zone %s (nodeSelector %s: %s)",
		zone, zone, shareZone, corev1.LabelTopologyZone, shareZone)
	return c
}

func onNetworks(names []string) string {
	if len(names) == 0 {
		return ""
	}
	return " on " + strings.Join(names, ", ")
}

// checkZonePorts is checkStoragePort on a cloud of zones.
func (r *run) checkZonePorts(ctx context.Context, f *cloudFacts, n *corev1.Node, set string) {
	id := serverID(n)
	if id == "" {
		r.add(Check{Name: "storage port", Subject: "Node " + n.Name, Status: NotChecked, Evidence: "the Node has no OpenStack providerID: its server is not known"})
		return
	}
	ports, err := f.client.ServerPorts(ctx, id)
	if err != nil {
		r.add(Check{Name: "storage port", Subject: "Node " + n.Name, Status: NotChecked, Evidence: err.Error()})
		return
	}
	r.add(judgeZonePorts(f.zones, n, id, ports, set))
}
