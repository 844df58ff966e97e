package controllers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

// A storage subnet that runs out: a Machine whose providerSpec attaches the storage network
// but whose port Neutron refused ("No more IP addresses available on network ...") never
// becomes a Node. The Machine API says so on the Machine only (phase Failed, errorMessage);
// StorageNetworkReachable names such Machines with a reason of its own, the free addresses
// of the storage subnets as Neutron counts them, and the cloud's words.

// reasonStorageAddressUnavailable: Machines that attach the storage network got no address on
// it, for lack of free addresses in its subnets.
const reasonStorageAddressUnavailable = "StorageAddressUnavailable"

// capacityPeriod is how long a count of the free addresses is kept: it is asked only while
// Machines lack an address or sets want some, and at most this often. While the sets want more
// than the last count found free, it is asked again after shortRecount: an admin who enlarged
// the pool sees the condition clear within seconds, not a minute.
const (
	capacityPeriod = time.Minute
	shortRecount   = 10 * time.Second
)

// MachinesWithoutStorageAddress is the number of Machines the storage network controller last
// found without an address on the storage network for lack of free addresses.
var MachinesWithoutStorageAddress = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "manila_operator_machines_without_storage_address",
	Help: "Machines that attach the storage network but got no address on it (the storage subnets ran out of free addresses) and have no Node.",
})

// StorageSubnetFreeAddresses is the number of free addresses of the storage subnets, as last
// counted (only while Machines lack an address; -1 until counted).
var StorageSubnetFreeAddresses = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "manila_operator_storage_subnet_free_addresses",
	Help: "Free addresses of the storage network's subnets (allocation pools minus the ports on them), as last counted while Machines lacked an address; -1 until counted.",
})

func init() { StorageSubnetFreeAddresses.Set(-1) }

// reasonStorageAddressesShort: the attached MachineSets want more storage addresses than the
// storage subnets have free; the Machines beyond them will fail when they are made.
const reasonStorageAddressesShort = "StorageAddressesShort"

// StorageAddressesShort is how many more storage addresses the attached MachineSets want than
// the storage subnets have free, as last counted; 0 when there are enough.
var StorageAddressesShort = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "manila_operator_storage_addresses_short",
	Help: "Storage addresses the MachineSets attached to the storage network want (replicas not made yet, Machines not given a server yet) beyond the free addresses of its subnets; 0 when there are enough.",
})

// wantedAddresses are the storage addresses the attached MachineSets still want, by set.
type wantedAddresses struct {
	total int64
	bySet map[string]int64
}

// addressesWanted counts, for each MachineSet whose providerSpec attaches network id, the
// storage addresses it still wants: its replicas beyond its live Machines (not made yet), and
// its live Machines that have no server yet (no phase, or Provisioning), no address in the
// storage subnets and no error. A Machine past Provisioning has its ports, whose addresses the
// free count has already taken.
func addressesWanted(sets, machines []*unstructured.Unstructured, id string, subnets []openstack.Subnet) wantedAddresses {
	w := wantedAddresses{bySet: map[string]int64{}}
	live := map[string]int64{}
	pending := map[string]int64{}
	for _, u := range machines {
		if u.GetDeletionTimestamp() != nil {
			continue
		}
		set := ""
		for _, ref := range u.GetOwnerReferences() {
			if ref.Kind == "MachineSet" {
				set = ref.Name
			}
		}
		if set == "" {
			continue
		}
		live[set]++
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		message, _, _ := unstructured.NestedString(u.Object, "status", "errorMessage")
		if (phase == "" || phase == "Provisioning") && message == "" && !hasAddressIn(u, subnets) {
			pending[set]++
		}
	}
	for _, u := range sets {
		if !machineSetAttached(u, id) {
			continue
		}
		replicas := int64(1) // the API's default
		switch v, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "replicas"); n := v.(type) {
		case int64:
			replicas = n
		case float64: // objects decoded as plain JSON
			replicas = int64(n)
		}
		n := max(0, replicas-live[u.GetName()]) + pending[u.GetName()]
		if n > 0 {
			w.bySet[u.GetName()] = n
			w.total += n
		}
	}
	return w
}

// shortMessage says which sets want more storage addresses than are free, and the fix.
func (r storageReport) shortMessage() string {
	var parts []string
	for _, set := range slices.Sorted(maps.Keys(r.wanted.bySet)) {
		parts = append(parts, fmt.Sprintf("%s %d", set, r.wanted.bySet[set]))
	}
	subnet := "SUBNET"
	if c := r.capacity.counted(); len(c) > 0 {
		subnet = subnetRef(c[0].Subnet)
	}
	return fmt.Sprintf("the MachineSets attached to the storage network %s want %d more addresses on it (%s), %d more than %s: that many of their new Machines will get no address there and no Node; "+
		"fix: enlarge the storage subnet's allocation pool (openstack subnet set --allocation-pool start=FIRST,end=LAST %s) or scale the sets down",
		r.network, r.wanted.total, strings.Join(parts, ", "), r.short, r.capacity, subnet)
}

// unaddressedMachine is a Machine that attaches the storage network and failed without an
// address on it and without a Node.
type unaddressedMachine struct {
	name, set, phase string
	// reason and message are its status.errorReason and errorMessage.
	reason, message string
}

// noAddressWords are what Neutron says when a subnet has no free address.
var noAddressWords = []string{"No more IP addresses available", "IpAddressGenerationFailure"}

// outOfAddresses tells whether the cloud's words say a port got no address.
func (m unaddressedMachine) outOfAddresses() bool {
	return slices.ContainsFunc(noAddressWords, func(w string) bool { return strings.Contains(m.message, w) })
}

// failedWithoutStorageAddress returns the Machines a MachineSet made whose own providerSpec
// attaches network id, that are not being deleted, have no Node, no address in the storage
// subnets, and failed (phase Failed, or an errorMessage): those the storage network may have
// left without an address. Sorted by name.
func failedWithoutStorageAddress(machines []*unstructured.Unstructured, id string, subnets []openstack.Subnet) []unaddressedMachine {
	var out []unaddressedMachine
	for _, u := range machines {
		set := ""
		for _, ref := range u.GetOwnerReferences() {
			if ref.Kind == "MachineSet" {
				set = ref.Name
			}
		}
		if set == "" || u.GetDeletionTimestamp() != nil {
			continue
		}
		value, _, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", "providerSpec", "value")
		spec, _ := value.(map[string]any)
		if !attachment.SpecOf(spec).HasNetwork(id) {
			continue
		}
		if ref, _, _ := unstructured.NestedMap(u.Object, "status", "nodeRef"); len(ref) > 0 {
			continue
		}
		phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
		reason, _, _ := unstructured.NestedString(u.Object, "status", "errorReason")
		message, _, _ := unstructured.NestedString(u.Object, "status", "errorMessage")
		if phase != "Failed" && message == "" {
			continue
		}
		if hasAddressIn(u, subnets) {
			continue
		}
		out = append(out, unaddressedMachine{name: u.GetName(), set: set, phase: phase, reason: reason, message: message})
	}
	slices.SortFunc(out, func(a, b unaddressedMachine) int { return strings.Compare(a.name, b.name) })
	return out
}

// hasAddressIn tells whether one of the Machine's status.addresses lies in a subnet.
func hasAddressIn(u *unstructured.Unstructured, subnets []openstack.Subnet) bool {
	addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "addresses")
	for _, a := range addrs {
		am, _ := a.(map[string]any)
		s, _ := am["address"].(string)
		r := storageReport{subnets: subnets}
		if ip, err := netip.ParseAddr(s); err == nil {
			if _, in := r.subnetOf(ip); in {
				return true
			}
		}
	}
	return false
}

// storageCapacity is the free addresses of the storage subnets, or why they are not known.
type storageCapacity struct {
	subnets []openstack.SubnetCapacity
	err     error
}

// counted are the subnets a port takes its address from, as the patch commands count them.
func (c storageCapacity) counted() []openstack.SubnetCapacity {
	return attach.NetworkCapacity{Subnets: c.subnets}.Counted()
}

// free is the number of free addresses, -1 when not known.
func (c storageCapacity) free() int64 {
	if c.err != nil || len(c.subnets) == 0 {
		return -1
	}
	return attach.NetworkCapacity{Subnets: c.subnets}.Free()
}

func (c storageCapacity) String() string {
	if c.err != nil {
		return "the free addresses of the storage subnets could not be counted: " + c.err.Error()
	}
	if len(c.subnets) == 0 {
		return "the free addresses of the storage subnets are not counted yet"
	}
	parts := make([]string, 0, len(c.subnets))
	for _, s := range c.counted() {
		parts = append(parts, fmt.Sprintf("subnet %s: %d of %d addresses of its allocation pools in use", s.Ref(), s.Used, s.Size))
	}
	return fmt.Sprintf("the storage subnets have %d free addresses (%s)", c.free(), strings.Join(parts, "; "))
}

// withoutAddress keeps of the failed Machines those that lack an address for lack of free
// addresses: the cloud said so, or the storage subnets have none left.
func withoutAddress(failed []unaddressedMachine, capacity storageCapacity) []unaddressedMachine {
	empty := capacity.free() == 0
	return slices.DeleteFunc(slices.Clone(failed), func(m unaddressedMachine) bool { return !m.outOfAddresses() && !empty })
}

// addressMessage names the Machines without a storage address, by MachineSet, with the free
// addresses, the cloud's words and the fix.
func (r storageReport) addressMessage() string {
	var names []string
	sets := map[string][]string{}
	var order []string
	for _, m := range r.unaddressed {
		if _, ok := sets[m.set]; !ok {
			order = append(order, m.set)
		}
		sets[m.set] = append(sets[m.set], m.name)
	}
	for _, s := range order {
		names = append(names, fmt.Sprintf("%s (MachineSet %s)", capNames(sets[s]), s))
	}
	var said []string
	for _, m := range r.unaddressed {
		if m.message != "" && !slices.Contains(said, m.message) && len(said) < 2 {
			said = append(said, m.message)
		}
	}
	cloud := ""
	if len(said) > 0 {
		cloud = fmt.Sprintf("; the Machine API said: %q", strings.Join(said, `", "`))
	}
	subnet := "SUBNET"
	if c := r.capacity.counted(); len(c) > 0 {
		subnet = subnetRef(c[0].Subnet)
	}
	attach, have := "Machines attach", "have"
	if len(r.unaddressed) == 1 {
		attach, have = "Machine attaches", "has"
	}
	return fmt.Sprintf("%d %s the storage network %s but got no address on it and %s no Node: %s; %s%s; "+
		"fix: enlarge the storage subnet's allocation pool (openstack subnet set --allocation-pool start=FIRST,end=LAST %s) or attach a network with room, then delete those Machines so that their MachineSets make them again",
		len(r.unaddressed), attach, r.network, have, strings.Join(names, ", "), r.capacity, cloud, subnet)
}

// capacityOf counts the free addresses of a network's subnets through the operator's
// OpenStack client (Neutron: the subnets' allocation pools, the ports on each subnet).
type capacitySource interface {
	NetworkCapacity(ctx context.Context, networkID string) ([]openstack.SubnetCapacity, error)
}

func (s *clientSource) NetworkCapacity(ctx context.Context, networkID string) ([]openstack.SubnetCapacity, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.CapacityCounts.Add(1)
	out, err := c.NetworkCapacity(ctx, networkID)
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}

// errNoCapacitySource: the cloud has not been reached yet (no discovery with these credentials).
var errNoCapacitySource = errors.New("the cloud has not been reached yet")

// freeAddresses counts the free addresses of network id's subnets, at most once per
// capacityPeriod for the same network (the answer is kept).
func (s *storageNetworks) freeAddresses(ctx context.Context, id string, maxAge time.Duration) storageCapacity {
	s.mu.Lock()
	src := s.src
	if s.capNet == id && time.Since(s.capAt) < maxAge {
		c := s.capLast
		s.mu.Unlock()
		return c
	}
	s.mu.Unlock()
	cs, ok := src.(capacitySource)
	if !ok {
		return storageCapacity{err: errNoCapacitySource}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	subnets, err := cs.NetworkCapacity(ctx, id)
	c := storageCapacity{subnets: subnets, err: err}
	s.mu.Lock()
	s.capNet, s.capAt, s.capLast = id, time.Now(), c
	s.mu.Unlock()
	return c
}
