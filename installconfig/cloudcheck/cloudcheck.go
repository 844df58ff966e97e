// Package cloudcheck is the installconfig.CloudChecker of `installconfig validate --os-cloud`:
// it asks the cloud, through internal/openstack, what the offline checks cannot know.
//
//   - each additional network exists and the project can see it; each additional security
//     group exists; an ID given in the wrong list (a security group as a network, a subnet or a
//     port as either) is called out as such;
//   - each additional network is fit to be the machines' second NIC, by the rules every
//     command applies to a storage network (attach.Fitness): DHCP on, port security on (the
//     installer gives every machine its role's security group), no default route or DNS servers handed out, no overlap with
//     the machine, cluster or service networks, no API or ingress VIP in its subnets. The
//     machines' primary network is not one of these lists and is not judged;
//   - every compute pool gets a network Manila exports on: a warning names the network when it
//     does not, with the command that adds it.
//
// Requests: with Manila in the catalog, one discovery (pages of networks, subnets, shares and
// share networks, one per distinct export address); without it, one network lookup per 50 IDs.
// Then one security group lookup per 50 IDs, and one more per kind for IDs found in neither.
package cloudcheck

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// Rule names of the cloud checks (the Origin of their problems), next to installconfig's own.
const (
	RuleNetworkNotFound       = "cloud-network-not-found"
	RuleSecurityGroupNotFound = "cloud-security-group-not-found"
	RuleWrongKind             = "cloud-wrong-kind"
	RuleNoManilaNetwork       = "cloud-no-manila-network"
	RuleManilaUnknown         = "cloud-manila-unknown"
)

// Checker checks an install-config's IDs against one cloud.
type Checker struct {
	Client *openstack.Client
	// File is the install-config's name as the user gave it, for the suggested patch command.
	File string
}

// CheckIDs implements installconfig.CloudChecker.
func (c Checker) CheckIDs(ctx context.Context, refs installconfig.CloudRefs) (installconfig.Problems, error) {
	netIDs, sgIDs := ids(refs.Networks), ids(refs.SecurityGroups)

	var nets []openstack.Network
	var disc *openstack.Discovery
	if c.Client.ManilaAvailable() {
		d, err := c.Client.Discover(ctx, openstack.DiscoverOptions{})
		if err != nil {
			return nil, err
		}
		disc, nets = d, d.Networks
	} else if len(netIDs) > 0 {
		var err error
		if nets, err = c.Client.Networks(ctx, netIDs...); err != nil {
			return nil, err
		}
	}
	byID := map[string]openstack.Network{}
	for _, n := range nets {
		byID[strings.ToLower(n.ID)] = n
	}

	var groups []openstack.SecurityGroup
	if len(sgIDs) > 0 {
		var err error
		if groups, err = c.Client.SecurityGroups(ctx, sgIDs...); err != nil {
			return nil, err
		}
	}
	sgByID := map[string]bool{}
	for _, g := range groups {
		sgByID[strings.ToLower(g.ID)] = true
	}

	// IDs found in neither place: ask Neutron what they are, to say "wrong list" rather than
	// "not found" when that is the mistake.
	var unknown []string
	for _, r := range refs.Networks {
		if _, ok := byID[r.ID]; !ok {
			unknown = append(unknown, r.ID)
		}
	}
	for _, r := range refs.SecurityGroups {
		if !sgByID[r.ID] {
			unknown = append(unknown, r.ID)
		}
	}
	kinds := map[string]openstack.ResourceKind{}
	if len(unknown) > 0 {
		var err error
		if kinds, err = c.Client.Identify(ctx, unknown...); err != nil {
			return nil, err
		}
	}

	var ps installconfig.Problems
	where := c.where()
	fitOpts := fitnessOptions(refs)
	for _, r := range refs.Networks {
		n, ok := byID[r.ID]
		if !ok {
			ps = append(ps, c.missing(r, installconfig.Networks, kinds[r.ID], where))
			continue
		}
		ps = append(ps, fitness(r, n, fitOpts)...)
	}
	for _, r := range refs.SecurityGroups {
		if !sgByID[r.ID] {
			ps = append(ps, c.missing(r, installconfig.SecurityGroups, kinds[r.ID], where))
		}
	}
	ps = append(ps, c.manilaNetworks(refs.ComputePools, disc, byID)...)
	return ps, nil
}

// where names the project and region the IDs were looked up in.
func (c Checker) where() string {
	s := fmt.Sprintf("cloud %q", c.Client.Cloud())
	if r := c.Client.Region(); r != "" {
		s += fmt.Sprintf(" (region %s)", r)
	}
	return s
}

func (c Checker) missing(r installconfig.IDRef, list installconfig.ListKind, actually openstack.ResourceKind, where string) installconfig.Problem {
	noun, rule := "network", RuleNetworkNotFound
	if list == installconfig.SecurityGroups {
		noun, rule = "security group", RuleSecurityGroupNotFound
	}
	switch {
	case actually == openstack.KindSecurityGroup && list == installconfig.Networks:
		return problem(installconfig.SeverityError, RuleWrongKind, field.ErrorTypeInvalid, r,
			"is a security group, not a network: move it to additionalSecurityGroupIDs")
	case actually == openstack.KindNetwork && list == installconfig.SecurityGroups:
		return problem(installconfig.SeverityError, RuleWrongKind, field.ErrorTypeInvalid, r,
			"is a network, not a security group: move it to additionalNetworkIDs")
	case actually != "":
		return problem(installconfig.SeverityError, RuleWrongKind, field.ErrorTypeInvalid, r,
			fmt.Sprintf("is a Neutron %s, not a %s: give the ID of the %s itself", actually, noun, noun))
	}
	fix := "check the ID with `openstack network show`, or pick one from `manila-setup networks list`"
	if list == installconfig.SecurityGroups {
		fix = "check the ID with `openstack security group show`; a group of another project cannot be used"
	}
	return problem(installconfig.SeverityError, rule, field.ErrorTypeNotFound, r,
		fmt.Sprintf("no %s with this ID is visible to %s in %s: %s", noun, c.Client.Identity(), where, fix))
}

// manilaNetworks warns about each compute pool whose machines get no network Manila exports
// on: their pods would hang in ContainerCreating with "mount.nfs: Connection timed out".
func (c Checker) manilaNetworks(pools []installconfig.PoolRef, d *openstack.Discovery, byID map[string]openstack.Network) installconfig.Problems {
	if len(pools) == 0 {
		return nil
	}
	if d == nil {
		return installconfig.Problems{{
			Error:    field.Error{Type: field.ErrorTypeInvalid, Detail: fmt.Sprintf("Manila is not in the service catalog of %s: there is no export location to look for, so whether the workers reach Manila shares was not checked", c.where()), Origin: RuleManilaUnknown},
			Severity: installconfig.SeverityWarning,
		}}
	}
	exporting := map[string]openstack.Candidate{}
	for _, cand := range d.Candidates {
		if len(cand.Exports) > 0 {
			exporting[strings.ToLower(cand.Network.ID)] = cand
		}
	}
	if len(exporting) == 0 {
		detail := "Manila has no available share with an export location in a network of this project yet, so the network it exports on is not known"
		if best := d.Best(); best != nil {
			detail += fmt.Sprintf("; its share networks point at network %s", label(best.Network))
		}
		return installconfig.Problems{{
			Error:    field.Error{Type: field.ErrorTypeInvalid, Detail: detail + "; create a share and run `manila-setup networks discover`", Origin: RuleManilaUnknown},
			Severity: installconfig.SeverityWarning,
		}}
	}
	// The network the fix names: the storage network by the one rule of internal/openstack when
	// it decides, else (a tie) the best one that holds an export, and the message says so.
	var best *openstack.Candidate
	var tie string
	if chosen, err := d.StorageNetwork(); err == nil && len(chosen.Exports) > 0 {
		best = chosen
	} else {
		for i := range d.Candidates {
			if len(d.Candidates[i].Exports) > 0 {
				best = &d.Candidates[i]
				break
			}
		}
		if err != nil {
			tie = "; " + err.Error() + " (see `manila-setup networks discover`)"
		}
	}
	var ps installconfig.Problems
	for _, p := range pools {
		if slices.ContainsFunc(p.Networks, func(id string) bool { _, ok := exporting[id]; return ok }) {
			continue
		}
		fix := fmt.Sprintf("manila-setup installconfig patch %s --network %s", c.fileArg(), best.Network.ID)
		if p.Name != "" {
			fix += " --pool " + p.Name
		}
		detail := fmt.Sprintf("none of these networks holds a Manila export location: shares are exported at %s on network %s, so pods on these machines cannot mount them; add it with `%s`",
			best.Exports[0].Address, label(best.Network), fix) + tie
		if p.Inherited {
			detail += " (the pool inherits platform.openstack.defaultMachinePlatform's list)"
		}
		ps = append(ps, installconfig.Problem{
			Error:    field.Error{Type: field.ErrorTypeInvalid, Field: p.Field, BadValue: strings.Join(p.Networks, ", "), Detail: detail, Origin: RuleNoManilaNetwork},
			Severity: installconfig.SeverityWarning,
			Line:     p.Line, Column: p.Column,
		})
	}
	return ps
}

func (c Checker) fileArg() string {
	if c.File == "" || c.File == "-" {
		return "install-config.yaml"
	}
	return c.File
}

func problem(sev installconfig.Severity, rule string, t field.ErrorType, r installconfig.IDRef, detail string) installconfig.Problem {
	return installconfig.Problem{
		Error:    field.Error{Type: t, Field: r.Field, BadValue: r.ID, Detail: detail, Origin: rule},
		Severity: sev,
		Line:     r.Line, Column: r.Column,
	}
}

func ids(refs []installconfig.IDRef) []string {
	var out []string
	for _, r := range refs {
		if !slices.Contains(out, r.ID) {
			out = append(out, r.ID)
		}
	}
	return out
}

func label(n openstack.Network) string {
	if n.Name == "" {
		return n.ID
	}
	return fmt.Sprintf("%q (%s)", n.Name, n.ID)
}

// fitnessOptions are what the file says of the cluster, for attach.Fitness: its machine,
// cluster and service networks and its VIPs, each with where it was read. A value that does
// not parse is left to the installer's own checks.
//
// SecurityGroups is always set: the installer gives every machine the security group of its
// role (<infraID>-worker, <infraID>-master) beside additionalSecurityGroupIDs, and every port
// of the machine inherits it, so a network without port security refuses the port whatever the
// file says (openshift/installer pkg/asset/machines/openstack).
func fitnessOptions(refs installconfig.CloudRefs) attach.FitnessOptions {
	opts := attach.FitnessOptions{SecurityGroups: true, Sources: map[string]string{}}
	for _, list := range [][]installconfig.CIDRRef{refs.MachineNetworks, refs.ClusterNetworks, refs.ServiceNetworks} {
		for _, m := range list {
			p, err := netip.ParsePrefix(m.CIDR)
			if err != nil {
				continue
			}
			opts.MachineNetworks = append(opts.MachineNetworks, p)
			where := m.Field
			if m.Default {
				where = "the installer's default, as " + m.Field + " is not set"
			}
			opts.Sources[p.String()] = where
		}
	}
	for _, v := range refs.VIPs {
		a, err := netip.ParseAddr(v.Address)
		if err != nil {
			continue
		}
		opts.VIPs = append(opts.VIPs, a)
		opts.Sources[a.String()] = v.Field
	}
	return opts
}

// fitness judges network n, given at r, as the machines' second NIC: one problem per finding,
// errors as errors, warnings as warnings, the finding's ID as the rule (the same ID every
// command prints).
func fitness(r installconfig.IDRef, n openstack.Network, opts attach.FitnessOptions) installconfig.Problems {
	var ps installconfig.Problems
	for _, f := range attach.Fitness(n, opts) {
		sev := installconfig.SeverityWarning
		if f.Severity == attach.SeverityError {
			sev = installconfig.SeverityError
		}
		if fix := installConfigFix(f.ID, n); fix != "" {
			f.Fix = fix
		}
		ps = append(ps, problem(sev, f.ID, field.ErrorTypeInvalid, r, f.String()))
	}
	return ps
}

// installConfigFix is the fix that lies in the install-config itself, where the finding's own
// (for a running cluster) would not do; "" keeps the finding's.
func installConfigFix(id string, n openstack.Network) string {
	switch id {
	case attach.FindingOverlap:
		return "choose networking CIDRs apart from the storage subnet, or a storage network apart from them"
	case attach.FindingVIPInSubnet:
		return "give platform.openstack.apiVIPs and ingressVIPs addresses of the machine network, outside the storage subnet"
	case attach.FindingPortSecurityOff:
		return "the installer puts each machine's own security group (<infraID>-<role>) on this port too, whatever additionalSecurityGroupIDs says: " +
			"openstack network set --enable-port-security " + n.ID + ", or attach the network after the install with `manila-setup machinesets patch`, which writes the port without port security"
	}
	return ""
}
