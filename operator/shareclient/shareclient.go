// Package shareclient decides which addresses a Manila NFS share must admit: the addresses the
// cluster's workers mount from. It is the one rule behind the nfs-shareClient of every
// StorageClass manila-setup writes or recommends (the operator's classes in both modes, the
// StorageClass lint, `storageclasses check`, the wizard's last step).
//
// Where a worker mounts from follows from routing, not from configuration: NFS traffic to an
// export address inside a subnet the worker has a port on leaves through that port, from that
// port's address (the destination is on a directly connected subnet). So a worker attached to
// the storage network mounts from its address in the storage subnet that holds the export, and
// a worker without that port mounts, routed, from its address on the machine network. The
// rule therefore counts what each machine will mount from, not what it reports yet:
//   - the machines that exist and have a Node: an address inside an export subnet means they
//     mount from that subnet; a machine whose own spec gives its server a port on the storage
//     network mounts from the export subnets too, even before its address there is reported;
//     any other (made from an older template, or by a set that is not attached) mounts from the
//     machine network;
//   - a machine without a Node (still being created, or one that never joined) runs no pods and
//     mounts nothing: it does not count;
//   - the machines that will exist: a MachineSet (or template, or NodePool) that gives its
//     machines a port on the storage network makes machines that mount from the export subnets,
//     one that does not makes machines that mount from the machine network.
//
// So a scale-up or a machine replacement of an attached set leaves the answer as it was. Both
// networks at once (some sets attached and some not, or a rollout half-way) is a normal state;
// the answer then holds both, until the last machine of an older template is gone.
package shareclient

import (
	"cmp"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// Machine is one existing worker machine and its addresses (Machine status.addresses).
type Machine struct {
	Name      string
	Addresses []netip.Addr
	// Attached: the machine's own spec gives its server a port on the storage network (a
	// machine keeps the template it was made from, so one made before its set was attached
	// has none).
	Attached bool
	// NoNode: the machine has no Node (status.nodeRef): it is being created, or never joined.
	// Such a machine runs no pods and mounts nothing.
	NoNode bool
}

// Set makes machines: a MachineSet, a Cluster API template or a NodePool.
type Set struct {
	Name string
	// Attached: the machines it makes get a port on the storage network.
	Attached bool
}

// Facts are what the rule looks at.
type Facts struct {
	// MachineNetworks are the cluster's machine networks (install-config networking.machineNetwork).
	MachineNetworks []netip.Prefix
	// ExportSubnets are the CIDRs of the storage network's subnets that hold Manila's export
	// addresses; empty when the storage network or its subnets are not known.
	ExportSubnets []netip.Prefix
	// Sets are what makes worker machines; Machines the worker machines there are.
	Sets     []Set
	Machines []Machine
}

// Answer is where the workers mount from.
type Answer struct {
	// Clients are the networks the workers mount from, sorted.
	Clients []netip.Prefix
	// ViaMachineNetwork and ViaStorageNetwork tell which kind of network is in Clients.
	ViaMachineNetwork bool
	ViaStorageNetwork bool
	// Reason says why, in one sentence (for conditions and reports).
	Reason string

	storage []netip.Prefix // the clients that are export subnets
}

// DriverGrantsIPv6 tells whether the driver the operator deploys can grant an IPv6 ip rule:
// cloud-provider-openstack v1.35.0 speaks Manila microversion 2.37 (manilaclient's
// minimumManilaVersion), and Manila takes IPv6 ip rules from 2.38 only (it answers 400 below),
// so an IPv6 entry in nfs-shareClient fails every CreateVolume of the class.
const DriverGrantsIPv6 = false

// ErrNoMachineNetwork is returned when the machine networks are unknown.
var ErrNoMachineNetwork = errors.New("the machine network is not known")

// Decide applies the rule.
func Decide(f Facts) (Answer, error) {
	if len(f.MachineNetworks) == 0 {
		return Answer{}, ErrNoMachineNetwork
	}
	machine := masked(f.MachineNetworks)
	exports := masked(f.ExportSubnets)
	var a Answer
	add := func(p ...netip.Prefix) {
		for _, x := range p {
			if !slices.Contains(a.Clients, x) {
				a.Clients = append(a.Clients, x)
			}
		}
	}
	var viaStorage, viaMachine, attached, notAttached []string
	noNode := 0
	for _, m := range f.Machines {
		if m.NoNode {
			noNode++
			continue
		}
		if s, ok := containing(exports, m.Addresses); ok {
			add(s)
			viaStorage = append(viaStorage, m.Name)
			continue
		}
		if m.Attached && len(exports) > 0 {
			// Its port on the storage network is there or coming; once the machine runs, it
			// mounts from its address there.
			add(exports...)
			viaStorage = append(viaStorage, m.Name)
			continue
		}
		viaMachine = append(viaMachine, m.Name)
		if s, ok := containing(machine, m.Addresses); ok {
			add(s)
		} else {
			add(machine...)
		}
	}
	for _, s := range f.Sets {
		if s.Attached && len(exports) > 0 {
			add(exports...)
			attached = append(attached, s.Name)
		} else {
			add(machine...)
			notAttached = append(notAttached, s.Name)
		}
	}
	if len(a.Clients) == 0 {
		add(machine...)
	}
	dropped := a.dropFamilies(exports)
	slices.SortFunc(a.Clients, comparePrefix)
	for _, c := range a.Clients {
		if slices.Contains(exports, c) {
			a.ViaStorageNetwork = true
		} else {
			a.ViaMachineNetwork = true
		}
	}
	// A network inside another of the answer adds nothing (a machine network that overlaps
	// the storage subnet, which the install-config checks warn about).
	a.Clients = slices.DeleteFunc(slices.Clone(a.Clients), func(c netip.Prefix) bool {
		return slices.ContainsFunc(a.Clients, func(o netip.Prefix) bool { return o != c && Covers(o, c) })
	})
	for _, c := range a.Clients {
		if slices.Contains(exports, c) {
			a.storage = append(a.storage, c)
		}
	}
	a.Reason = reason(a, len(exports) > 0, viaStorage, viaMachine, attached, notAttached) + dropped
	if noNode > 0 {
		a.Reason += fmt.Sprintf("; %d %s without a Node yet %s not counted", noNode, plural(noNode, "machine"), isAre(noNode))
	}
	return a, nil
}

// dropFamilies keeps the clients a worker mounts from and the driver can grant: a worker mounts
// an export from its address of the export's family, so a machine network of another family
// (the IPv6 half of a dual-stack machine network, before IPv4 exports) is no client; and, while
// the driver cannot grant IPv6 rules (DriverGrantsIPv6), IPv6 entries go as long as an IPv4 one
// is left (with none left, they stay: the claims then fail on Manila's refusal, which says why,
// rather than get a class that admits everyone). It returns what it says of the dropped ones.
func (a *Answer) dropFamilies(exports []netip.Prefix) string {
	families := map[bool]bool{} // Is4 -> present among the exports
	for _, e := range exports {
		families[e.Addr().Is4()] = true
	}
	keep := func(drop func(netip.Prefix) bool) []netip.Prefix {
		var kept, gone []netip.Prefix
		for _, c := range a.Clients {
			if drop(c) {
				gone = append(gone, c)
			} else {
				kept = append(kept, c)
			}
		}
		if len(kept) == 0 {
			return nil
		}
		a.Clients = kept
		return gone
	}
	var notes []string
	if len(families) > 0 {
		if gone := keep(func(c netip.Prefix) bool { return !families[c.Addr().Is4()] }); len(gone) > 0 {
			notes = append(notes, fmt.Sprintf("%s left out: Manila exports on %s only, which a worker mounts from its address of that family", Join(gone), familyName(exports[0])))
		}
	}
	if !DriverGrantsIPv6 {
		if gone := keep(func(c netip.Prefix) bool { return !c.Addr().Is4() }); len(gone) > 0 {
			notes = append(notes, fmt.Sprintf("%s left out: the driver cannot grant IPv6 rules (Manila microversion 2.37; IPv6 ip rules need 2.38)", Join(gone)))
		}
	}
	if len(notes) == 0 {
		return ""
	}
	return "; " + strings.Join(notes, "; ")
}

func familyName(p netip.Prefix) string {
	if p.Addr().Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func reason(a Answer, exportsKnown bool, viaStorage, viaMachine, attached, notAttached []string) string {
	switch {
	case !exportsKnown:
		return "the subnet Manila exports in is not known, so the workers are taken to mount through the machine network"
	case a.ViaStorageNetwork && a.ViaMachineNetwork:
		var parts []string
		if len(viaStorage)+len(attached) > 0 {
			parts = append(parts, "through the storage network: "+describe(viaStorage, attached))
		}
		parts = append(parts, "through the machine network (routed): "+describe(viaMachine, notAttached))
		return "the workers mount from two networks, " + strings.Join(parts, "; ")
	case a.ViaStorageNetwork:
		return "every worker has a port on the storage network, so it mounts from its address in the export subnet (" + describe(viaStorage, attached) + ")"
	case len(viaMachine)+len(notAttached) == 0:
		return "no worker machine or MachineSet is known, so the workers are taken to mount through the machine network"
	}
	return "no worker has a port on the storage network, so the workers mount through the machine network, routed (" + describe(viaMachine, notAttached) + ")"
}

func describe(machines, sets []string) string {
	var parts []string
	if len(machines) > 0 {
		parts = append(parts, fmt.Sprintf("%d %s", len(machines), plural(len(machines), "machine")))
	}
	if len(sets) > 0 {
		parts = append(parts, plural(len(sets), "set")+" "+strings.Join(sets, ", "))
	}
	return strings.Join(parts, " and ")
}

func isAre(n int) string {
	if n == 1 {
		return "is"
	}
	return "are"
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Value is the nfs-shareClient for the answer. A driver that takes a comma-separated list
// (list: cloud-provider-openstack v1.35.0 and later, one Manila access rule per entry) gets the
// networks themselves. A driver that makes one access rule of the whole value (beside the
// platform's operator) gets Single.
func (a Answer) Value(list bool) string {
	if len(a.Clients) == 0 {
		return ""
	}
	if list {
		s := make([]string, len(a.Clients))
		for i, c := range a.Clients {
			s[i] = c.String()
		}
		return strings.Join(s, ",")
	}
	return a.Single().String()
}

// Single is the one rule for a driver that takes one: the smallest prefix that covers every
// client of the first one's family when it admits nothing else (adjacent subnets); otherwise
// never the wider prefix (10.196.0.0/16 and 172.17.5.0/24, the director's layout half-way
// through a rollout, would make 0.0.0.0/0, a share open to everyone): the storage subnet the
// exports are in, whose workers are the ones being attached, else the first client. Left says
// which clients it leaves out.
func (a Answer) Single() netip.Prefix {
	if len(a.Clients) == 0 {
		return netip.Prefix{}
	}
	if c := Covering(a.Clients); tiles(c, a.Clients) {
		return c
	}
	if len(a.storage) > 0 {
		return a.storage[0]
	}
	return a.Clients[0]
}

// Left returns the clients the nfs-shareClient of Value(list) does not admit.
func (a Answer) Left(list bool) []netip.Prefix {
	if list || len(a.Clients) == 0 {
		return nil
	}
	return Missing([]netip.Prefix{a.Single()}, a.Clients)
}

// tiles tells whether the prefixes of ps of c's family fill c exactly: c admits nothing they do
// not. The prefixes do not overlap (Decide drops one inside another).
func tiles(c netip.Prefix, ps []netip.Prefix) bool {
	free := new(big.Int).Lsh(big.NewInt(1), uint(c.Addr().BitLen()-c.Bits()))
	for _, p := range ps {
		if Covers(c, p) {
			free.Sub(free, new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits())))
		}
	}
	return free.Sign() == 0
}

// Covering is the smallest prefix that contains every prefix of ps of the first one's address
// family.
func Covering(ps []netip.Prefix) netip.Prefix {
	var out netip.Prefix
	for i, p := range ps {
		p = p.Masked()
		switch {
		case i == 0:
			out = p
		case p.Addr().Is4() != out.Addr().Is4():
			continue
		default:
			out = commonPrefix(out, p)
		}
	}
	return out
}

// commonPrefix is the longest prefix that contains both a and b.
func commonPrefix(a, b netip.Prefix) netip.Prefix {
	bits := min(a.Bits(), b.Bits())
	for ; bits > 0; bits-- {
		p := netip.PrefixFrom(a.Addr(), bits).Masked()
		if p.Contains(b.Addr()) {
			return p
		}
	}
	return netip.PrefixFrom(a.Addr(), 0).Masked()
}

// ParseValue reads an nfs-shareClient: one address or CIDR, or (newer drivers) a
// comma-separated list of them. Addresses become host prefixes.
func ParseValue(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		p, err := ParseRule(part)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// ParseRule reads one address or CIDR, as a Manila ip access rule's access_to holds.
func ParseRule(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR", s)
}

// Missing returns the networks of clients that no rule covers whole.
func Missing(rules, clients []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, c := range clients {
		if !slices.ContainsFunc(rules, func(r netip.Prefix) bool { return Covers(r, c) }) {
			out = append(out, c)
		}
	}
	return out
}

// Covers tells whether every address of b is in a.
func Covers(a, b netip.Prefix) bool {
	return a.Addr().Is4() == b.Addr().Is4() && a.Bits() <= b.Bits() && a.Contains(b.Addr())
}

// Join prints prefixes as "a, b".
func Join(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

func masked(ps []netip.Prefix) []netip.Prefix {
	out := make([]netip.Prefix, 0, len(ps))
	for _, p := range ps {
		if p.IsValid() && !slices.Contains(out, p.Masked()) {
			out = append(out, p.Masked())
		}
	}
	return out
}

// containing returns the most specific prefix of ps that holds one of the addresses.
func containing(ps []netip.Prefix, addrs []netip.Addr) (netip.Prefix, bool) {
	var best netip.Prefix
	for _, a := range addrs {
		for _, p := range ps {
			if p.Contains(a) && (!best.IsValid() || p.Bits() > best.Bits()) {
				best = p
			}
		}
	}
	return best, best.IsValid()
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(a.Bits(), b.Bits())
}
