package installconfig

import (
	"context"
	"slices"
)

// IDRef is one ID of the file, for the cloud checks.
type IDRef struct {
	Kind ListKind
	// ID is the canonical form.
	ID string
	// Field is where the file holds it, e.g. compute[0].platform.openstack.additionalNetworkIDs[1].
	Field string
	// Line and Column locate it in the file.
	Line, Column int
}

// CloudRefs is what the cloud checks look at: every well-formed ID of the file, the
// cluster's networks and its VIPs.
type CloudRefs struct {
	Networks       []IDRef
	SecurityGroups []IDRef
	// MachineNetworks are the networking.machineNetwork[].cidr values, or the installer's
	// default when the file sets none.
	MachineNetworks []CIDRRef
	// ClusterNetworks and ServiceNetworks are networking.clusterNetwork[].cidr and
	// networking.serviceNetwork[], or the installer's defaults when the file sets none.
	ClusterNetworks []CIDRRef
	ServiceNetworks []CIDRRef
	// VIPs are platform.openstack's API and ingress VIPs.
	VIPs []VIPRef
	// ComputePools are the compute pools with the networks their machines get.
	ComputePools []PoolRef
}

// DefaultMachineNetwork is the machine network the installer uses when the file sets none.
const DefaultMachineNetwork = "10.0.0.0/16"

// CIDRRef is one machine, cluster or service network CIDR as written (not checked: the installer checks it).
type CIDRRef struct {
	CIDR  string
	Field string
	// Default is set when the file sets no machine network and this is the installer's default.
	Default      bool
	Line, Column int
}

// PoolRef is one compute pool, for the question "do its machines get a network Manila
// exports on?".
type PoolRef struct {
	// Field is where the pool's networks are (or would be) written, e.g.
	// compute[0].platform.openstack.additionalNetworkIDs.
	Field string
	Name  string
	// Networks are the canonical IDs the machines get: the pool's own list, or
	// defaultMachinePlatform's when the pool sets none (a pool's list replaces the default's).
	Networks []string
	// Inherited is set when Networks come from defaultMachinePlatform.
	Inherited    bool
	Line, Column int
}

// CloudChecker checks what only the cloud can tell: that each network exists and is visible to
// the project, that each security group exists, that no security group ID is given as a
// network or the reverse, that each additional network is fit to be the machines' second NIC
// (DHCP, port security, routes, DNS, no overlap with the cluster's networks, no VIP in its
// subnets), and whether an additional network holds a Manila export location. The OpenStack layer
// (internal/openstack) provides the implementation; this package does not depend on it.
//
// CheckIDs returns problems in the same form as the offline checks (field paths from the
// IDRefs), or an error when the cloud cannot be asked (unreachable, authentication failed).
type CloudChecker interface {
	CheckIDs(ctx context.Context, refs CloudRefs) (Problems, error)
}

// References lists the IDs of a checked file that the cloud checks should look at: those that
// are UUIDs v4, canonical or not (in canonical form), once per place they are written.
func References(f *File) CloudRefs {
	var refs CloudRefs
	if f.root == nil {
		return refs
	}
	c := &checker{f: f}
	c.run()
	seen := map[string]bool{}
	for _, p := range c.model.pools() {
		for _, k := range listKinds {
			for _, l := range p.lists[k] {
				for _, it := range l.items {
					if it.canonical == "" || seen[it.path.String()] {
						continue
					}
					seen[it.path.String()] = true
					ref := IDRef{Kind: k, ID: it.canonical, Field: it.path.String(), Line: it.node.Line, Column: it.node.Column}
					if k == Networks {
						refs.Networks = append(refs.Networks, ref)
					} else {
						refs.SecurityGroups = append(refs.SecurityGroups, ref)
					}
				}
			}
		}
	}
	refs.MachineNetworks = c.model.machineNetworks
	refs.ClusterNetworks = c.model.clusterNetworks
	refs.ServiceNetworks = c.model.serviceNetworks
	refs.VIPs = vips(c.model.osStep.node)
	for _, p := range c.model.compute {
		refs.ComputePools = append(refs.ComputePools, poolRef(p, c.model.def))
	}
	return refs
}

// poolRef describes compute pool p. The installer merges defaultMachinePlatform into each
// pool field by field: a list the pool sets (even empty) replaces the default's.
func poolRef(p, def *pool) PoolRef {
	ref := PoolRef{Name: p.name, Field: p.path.Child("platform", "openstack", Networks.Key()).String()}
	if p.nodeStep.key != nil {
		ref.Line, ref.Column = p.nodeStep.key.Line, p.nodeStep.key.Column
	} else if p.node != nil {
		ref.Line, ref.Column = p.node.Line, p.node.Column
	}
	l := p.list(Networks)
	if l == nil || l.step.node == nil {
		if def == nil {
			return ref
		}
		// Inherited only when there is a list to inherit: otherwise the pool has no networks
		// of its own and the default has none either.
		if l = def.list(Networks); l == nil || l.step.node == nil {
			return ref
		}
		ref.Inherited = true
	}
	for _, it := range l.items {
		if it.canonical != "" && !slices.Contains(ref.Networks, it.canonical) {
			ref.Networks = append(ref.Networks, it.canonical)
		}
	}
	return ref
}

// CheckWithCloud runs the offline checks and, when cloud is not nil and the file could be
// read, the cloud checks. When the cloud cannot be asked, the error says why and the offline
// problems are still returned, so that the caller can show them and exit with 2.
func CheckWithCloud(ctx context.Context, name string, data []byte, cloud CloudChecker) (Problems, error) {
	f, problems := Check(name, data)
	if cloud == nil || f.root == nil {
		return problems, nil
	}
	cloudProblems, err := cloud.CheckIDs(ctx, References(f))
	problems = append(problems, cloudProblems...)
	problems.sortByPosition()
	return problems, err
}

// CloudProblems runs only the cloud checks on a file (one Check accepts), in file order: what
// the cloud adds to the offline problems, for a caller that already has those.
func CloudProblems(ctx context.Context, name string, data []byte, cloud CloudChecker) (Problems, error) {
	f, _ := Parse(name, data)
	if f.root == nil {
		return nil, nil
	}
	problems, err := cloud.CheckIDs(ctx, References(f))
	problems.sortByPosition()
	return problems, err
}
