package controllers

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// On a cloud whose availability zones Manila serves on storage networks of their own (edge and
// multi-site clouds: a back end per zone, each exporting on a network of its site), discovery
// names no one storage network ((*openstack.Ranking).StorageNetwork refuses, naming each zone's).
// The operator then works with every zone's networks: the workers of each zone mount from their
// address on their own zone's, so the classes admit the export subnets of every zone, the
// driver's runtime configuration matches them all, and StorageNetworkReachable judges each
// MachineSet against the networks of its zone.

// zones are each zone's storage networks, when discovery found the zones served on different
// ones and no --storage-network was given; nil otherwise.
func (s *storageNetworks) zones() []openstack.ZoneNetworks {
	if s.given != "" {
		return nil
	}
	s.mu.Lock()
	ranking := s.ranking
	s.mu.Unlock()
	if ranking == nil {
		return nil
	}
	_, err := ranking.StorageNetwork()
	var sne *openstack.StorageNetworkError
	if !errors.As(err, &sne) || len(sne.Zones) == 0 {
		return nil
	}
	return sne.Zones
}

// networkIDs are the networks the workers mount through: the storage network, else every
// zone's; none when neither is known.
func (s *storageNetworks) networkIDs() []string {
	if id, _, _ := s.network(); id != "" {
		return []string{id}
	}
	var ids []string
	for _, z := range s.zones() {
		for _, c := range z.Networks {
			if !slices.Contains(ids, c.Network.ID) {
				ids = append(ids, c.Network.ID)
			}
		}
	}
	return ids
}

// zoneCandidates are the storage networks of every zone, each once.
func (s *storageNetworks) zoneCandidates() []openstack.Candidate {
	var out []openstack.Candidate
	for _, z := range s.zones() {
		for _, c := range z.Networks {
			if !slices.ContainsFunc(out, func(o openstack.Candidate) bool { return o.Network.ID == c.Network.ID }) {
				out = append(out, c)
			}
		}
	}
	return out
}

// zonesExportSubnets are the subnets holding export addresses of every zone's storage networks.
func (s *storageNetworks) zonesExportSubnets() []netip.Prefix {
	var out []netip.Prefix
	for _, c := range s.zoneCandidates() {
		for _, p := range c.ExportSubnets() {
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// zonesExportSubnet is the runtime configuration's one CIDR on a cloud of zones: the smallest
// prefix covering every zone's (grantable) export subnets, when it takes in no export of
// another network; "" otherwise, and the node plugin then mounts the share's preferred export,
// which is on its own back end's network.
func (s *storageNetworks) zonesExportSubnet() string {
	var subnets []netip.Prefix
	var ids []string
	for _, c := range s.zoneCandidates() {
		ids = append(ids, c.Network.ID)
		for _, e := range grantable(c.Exports) {
			if e.CIDR.IsValid() && !slices.Contains(subnets, e.CIDR.Masked()) {
				subnets = append(subnets, e.CIDR.Masked())
			}
		}
	}
	if len(subnets) == 0 || slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return p.Addr().Is4() != subnets[0].Addr().Is4() }) {
		return ""
	}
	covering := shareclient.Covering(subnets)
	if covering.Bits() == 0 || s.othersExportIn(covering, ids...) {
		return ""
	}
	return covering.String()
}

// zonesVerdict judges each MachineSet against the storage networks of its zone (its
// providerSpec's availabilityZone): it must attach every one of them. It returns the condition
// and how many sets do not.
func zonesVerdict(sets []*unstructured.Unstructured, zones []openstack.ZoneNetworks) (operatorv1.ConditionStatus, string, string, int) {
	var problems, fine []string
	for _, u := range sets {
		zone, _, _ := unstructured.NestedString(u.Object, "spec", "template", "spec", "providerSpec", "value", "availabilityZone")
		at := slices.IndexFunc(zones, func(z openstack.ZoneNetworks) bool { return z.Zone == zone })
		switch {
		case zone == "":
			problems = append(problems, fmt.Sprintf("MachineSet %s names no availability zone, so which zone's storage network its machines need is not known", u.GetName()))
			continue
		case at < 0 || len(zones[at].Networks) == 0:
			problems = append(problems, fmt.Sprintf("MachineSet %s makes its machines in availability zone %s, where Manila exports no share", u.GetName(), zone))
			continue
		}
		var missing []string
		for _, c := range zones[at].Networks {
			if !machineSetAttached(u, c.Network.ID) {
				missing = append(missing, c.Network.Label())
			}
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("MachineSet %s (zone %s) does not attach %s, where Manila exports in %s", u.GetName(), zone, strings.Join(missing, ", "), zone))
		} else {
			fine = append(fine, fmt.Sprintf("%s (%s)", u.GetName(), zone))
		}
	}
	summary := openstack.ZoneSummary(zones)
	if len(problems) > 0 {
		return operatorv1.ConditionFalse, "MachineSetsNotAttached",
			fmt.Sprintf("Manila exports on a storage network per availability zone (%s): %s, so their nodes cannot mount the shares of their zone: run manila-setup machinesets patch --discover --rollout",
				summary, strings.Join(problems, "; ")), len(problems)
	}
	return operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("every MachineSet (%d) attaches its machines to the storage networks of its availability zone (%s): %s", len(sets), summary, strings.Join(fine, ", ")), 0
}

// zoneNetworks are the zones' storage networks (zones), nil when the controller has none.
func (c *storageNetworkController) zoneNetworks() []openstack.ZoneNetworks {
	if c.zones == nil {
		return nil
	}
	return c.zones()
}
