package installconfig

import (
	"context"
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

// CloudRefs is what the cloud checks look at: every well-formed ID of the file and the
// machine network.
type CloudRefs struct {
	Networks       []IDRef
	SecurityGroups []IDRef
	// MachineNetworks are the networking.machineNetwork[].cidr values.
	MachineNetworks []string
}

// CloudChecker checks what only the cloud can tell: that each network exists and is visible to
// the project, that each security group exists, that no security group ID is given as a
// network or the reverse, that no subnet of an additional network overlaps the machine network,
// and whether an additional network holds a Manila export location. The OpenStack layer
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
	return refs
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
