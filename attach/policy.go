package attach

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// NetworkPolicy is the rule every command and the wizard follow, with a cloud, before a network
// is attached: the pods must reach the shares through it.
type NetworkPolicy struct {
	// Discover adds the network Manila exports on, as `networks discover` finds it.
	Discover bool
	// Force attaches a network the policy refuses; it is then reported in Networks.Forced.
	Force bool
	// NodeAddresses are the nodes' internal addresses: a subnet holding one is the machines'
	// own network (none known: not checked).
	NodeAddresses []netip.Addr
	// SecurityGroups: the machines' port on the network gets security groups (Fitness).
	SecurityGroups bool
	// MachineNetworks are the cluster's networks, when known (Fitness).
	MachineNetworks []netip.Prefix
	// VIPs are the cluster's API and ingress VIPs, when known (Fitness).
	VIPs []netip.Addr
}

// NetworkProblem is a network the policy refuses: no Manila export location lies in its
// subnets, or it is the machines' own. Index is its place among the IDs given.
type NetworkProblem struct {
	Index   int
	ID      string
	Problem string
	// Finding is set when the problem is one of Fitness's.
	Finding *Finding
}

// Networks is what ResolveNetworks decided.
type Networks struct {
	// IDs are the networks to attach: those given, then the discovered one.
	IDs []string
	// Discovered is the network discovery added (NetworkPolicy.Discover), nil if none.
	Discovered *openstack.Candidate
	// Forced are the networks refused but attached anyway (NetworkPolicy.Force).
	Forced []NetworkProblem
	// Warnings are what the networks will do to the machines (Fitness's warnings): said, and
	// the networks attached.
	Warnings []NetworkProblem
	// PortSecurityDisabled are those of IDs whose port security is disabled in Neutron
	// (PortSecurityOff): their port is written without port security.
	PortSecurityDisabled []string
	// Zones are, by network ID, the availability zones Manila exports in on each network, when
	// the cloud's shares are in several zones (discovery's evidence); nil otherwise. A machine
	// of another zone attached to such a network gets a port that leads nowhere (ZoneProblems).
	Zones map[string][]string
}

// ZoneProblems are the rows that would attach a network to machines of an availability zone
// the network serves no share in: for each such row and network, a NetworkProblem whose Index
// is the network's place in n.IDs. A row or a network with no zone is not judged.
func (n Networks) ZoneProblems(rows []Result) []NetworkProblem {
	var out []NetworkProblem
	for _, r := range rows {
		if r.Zone == "" {
			continue
		}
		for _, id := range r.AddedNetworks {
			zones := n.Zones[neutronid.Key(id)]
			if len(zones) == 0 || slices.Contains(zones, r.Zone) {
				continue
			}
			out = append(out, NetworkProblem{Index: slices.IndexFunc(n.IDs, func(x string) bool { return neutronid.Equal(x, id) }), ID: id,
				Problem: fmt.Sprintf("%s %s makes its machines in availability zone %s, and Manila exports on this network for %s only: their port on it would lead nowhere; give each zone's sets that zone's network (see `manila-setup networks discover`)",
					coalesceKind(r.Kind), r.Name, r.Zone, strings.Join(zones, ", "))})
		}
	}
	return out
}

func coalesceKind(kind string) string {
	if kind == "" {
		return "object"
	}
	return kind
}

// Attachment is what the resolved networks attach, with groups as the security groups.
func (n Networks) Attachment(groups []string) Attachment {
	return Attachment{Networks: slices.Clone(n.IDs), SecurityGroups: slices.Clone(groups), PortSecurityDisabled: slices.Clone(n.PortSecurityDisabled)}
}

// PortSecurityOff returns those of ids that networks (as Neutron describes them) say have port
// security disabled, in the order of ids. Neutron gives such a network's ports no port
// security, and refuses security groups (PortSecurityAndIPRequiredForSecurityGroups) and
// allowed address pairs (AddressPairAndPortSecurityRequired) on them, so each consumer must be
// told to create the machines' port without it. A network whose port_security_enabled is not
// reported (the extension is off) is not among them.
func PortSecurityOff(networks []openstack.Network, ids []string) []string {
	var out []string
	for _, id := range ids {
		at := slices.IndexFunc(networks, func(n openstack.Network) bool { return neutronid.Equal(n.ID, id) })
		if at >= 0 && networks[at].PortSecurity != nil && !*networks[at].PortSecurity {
			out = append(out, id)
		}
	}
	return out
}

// NetworkPolicyError says which networks the policy refuses; nothing may be written.
type NetworkPolicyError struct{ Problems []NetworkProblem }

func (e *NetworkPolicyError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = fmt.Sprintf("network[%d]: Invalid value: %q: %s", p.Index, p.ID, p.Problem)
	}
	return strings.Join(lines, "\n")
}

// CloudError says the cloud could not be asked about the networks.
type CloudError struct{ Err error }

func (e *CloudError) Error() string { return "checking the network with the cloud: " + e.Err.Error() }
func (e *CloudError) Unwrap() error { return e.Err }

// NoStorageNetworkError says that discovery found no network Manila exports on.
type NoStorageNetworkError struct {
	Err error
	// Evidence: some network looks like one, without certainty (the user should choose).
	Evidence bool
	// Identity is the cloud identity (project) that looked.
	Identity string
}

func (e *NoStorageNetworkError) Error() string {
	var sne *openstack.StorageNetworkError
	if errors.As(e.Err, &sne) && len(sne.Zones) > 0 {
		// One network for every machine would leave another zone's workers with a port
		// that leads nowhere.
		return fmt.Sprintf("--discover: %v; give each zone's machines that zone's networks with --network, one zone at a time, or patch the worker MachineSets alone, which --discover gives their own zone's (see `manila-setup networks discover`)", e.Err)
	}
	if e.Evidence {
		return fmt.Sprintf("--discover: %v with --network (see `manila-setup networks discover`)", e.Err)
	}
	return fmt.Sprintf("--discover: %v, so the network it exports on is not known to project %s; create a share (or ask the cloud's administrator for the storage network) and give it with --network", e.Err, e.Identity)
}
func (e *NoStorageNetworkError) Unwrap() error { return e.Err }

// StorageNetworkOf is the network a discovery says Manila exports on: the one rule of --discover
// for the install-config, the MachineSets, the Cluster API sets and the NodePools.
func StorageNetworkOf(d *openstack.Discovery, identity string) (*openstack.Candidate, error) {
	best, err := d.StorageNetwork()
	if err != nil {
		return nil, &NoStorageNetworkError{Err: err, Identity: identity,
			Evidence: errors.Is(err, openstack.ErrNoStorageNetwork) && len(d.Candidates) > 0 && d.Candidates[0].HasEvidence()}
	}
	return best, nil
}

// ResolveNetworks applies the policy to the networks given: adds the discovered one, and refuses
// (*NetworkPolicyError) a network in whose subnets no export location lies, or the machines'
// own, unless Force. A network the project does not know is left to the Neutron check of the
// IDs (IDChecker), which says so with the others.
func ResolveNetworks(ctx context.Context, cloud *openstack.Client, ids []string, p NetworkPolicy) (Networks, error) {
	d, err := cloud.Discover(ctx, openstack.DiscoverOptions{})
	if err != nil {
		return Networks{IDs: slices.Clone(ids)}, &CloudError{Err: err}
	}
	return Resolve(d, cloud.Identity(), ids, p)
}

// Resolve is ResolveNetworks over a discovery already made; identity names the project that
// made it. A network is judged twice: do Manila's exports lie in it (and is it not the machines'
// own), and is it fit to be a machine's second NIC (Fitness: its errors refuse it like the
// first, its warnings are said). The networks without port security are named in
// PortSecurityDisabled, also when security groups are forced onto them: the consumers then
// put the groups on the machines' other ports only.
func Resolve(d *openstack.Discovery, identity string, ids []string, p NetworkPolicy) (Networks, error) {
	out := Networks{IDs: slices.Clone(ids)}
	if p.Discover {
		best, err := StorageNetworkOf(d, identity)
		if err != nil {
			return out, err
		}
		out.Discovered = best
		if !slices.ContainsFunc(out.IDs, func(n string) bool { return neutronid.Equal(n, best.Network.ID) }) {
			out.IDs = append(out.IDs, best.Network.ID)
		}
	}
	var refused []NetworkProblem
	refuse := func(np NetworkProblem) {
		if p.Force {
			out.Forced = append(out.Forced, np)
		} else {
			refused = append(refused, np)
		}
	}
	for i, id := range out.IDs {
		at := slices.IndexFunc(d.Networks, func(n openstack.Network) bool { return neutronid.Equal(n.ID, id) })
		if at < 0 {
			continue
		}
		if problem := d.NetworkProblem(id, p.NodeAddresses); problem != "" {
			refuse(NetworkProblem{Index: i, ID: id, Problem: problem})
		}
		for _, f := range Fitness(d.Networks[at], FitnessOptions{SecurityGroups: p.SecurityGroups, MachineNetworks: p.MachineNetworks, VIPs: p.VIPs}) {
			np := NetworkProblem{Index: i, ID: id, Problem: f.String(), Finding: &f}
			if f.Severity == SeverityError {
				refuse(np)
			} else {
				out.Warnings = append(out.Warnings, np)
			}
		}
	}
	out.PortSecurityDisabled = PortSecurityOff(d.Networks, out.IDs)
	if len(d.Zones) > 0 {
		out.Zones = map[string][]string{}
		for _, c := range d.Candidates {
			if c.HasEvidence() && len(c.Zones) > 0 {
				out.Zones[neutronid.Key(c.Network.ID)] = slices.Clone(c.Zones)
			}
		}
	}
	if len(refused) > 0 {
		return out, &NetworkPolicyError{Problems: refused}
	}
	return out, nil
}
