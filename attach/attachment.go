// Package attach is the model every kind of machine shares when the storage network is attached
// to it: the attachment and its record, the checks of its IDs (as given, and in Neutron), the
// network policy, what happened to each object (Result), and one Patch and one PatchFile over a
// small Target interface that each kind (the Machine API's MachineSets, Cluster API's sets,
// HyperShift's NodePools) implements in a package of its own. The rollout engine is beside it,
// in attach/rollout.
package attach

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// Annotation on every object manila-setup attached records, as JSON (Record), the storage
// networks and security groups it attached, so that the wizard and the operator can report them.
const Annotation = record.Annotation

// Attachment is what an object's machines should be attached to: the Neutron IDs of the storage
// networks and of the security groups that let the machines reach Manila's exports.
type Attachment record.IDs

// Validate checks the IDs: at least one network, every ID a UUID v4 (what Neutron makes, in any
// form the installer accepts; patches write the canonical form), no ID twice. Paths are those of
// the command's flags: network[1], security-group[0].
func (a Attachment) Validate() field.ErrorList {
	var errs field.ErrorList
	if len(a.Networks) == 0 {
		errs = append(errs, field.Required(field.NewPath("network"), "at least one storage network ID is needed"))
	}
	errs = append(errs, validateIDs(field.NewPath("network"), a.Networks)...)
	errs = append(errs, validateIDs(field.NewPath("security-group"), a.SecurityGroups)...)
	for i, id := range a.PortSecurityDisabled {
		if !ContainsID(a.Networks, id) {
			errs = append(errs, field.Invalid(field.NewPath("portSecurityDisabled").Index(i), id, "must be one of the networks attached"))
		}
	}
	return errs
}

// validateIDs finds the entries of ids that are not Neutron UUIDs or repeat an earlier one
// (compared canonically), each named by its index under path.
func validateIDs(path *field.Path, ids []string) field.ErrorList {
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, id := range ids {
		_, verdict, _ := neutronid.Check(id)
		switch {
		case verdict == neutronid.NotUUID || verdict == neutronid.WrongVersion:
			errs = append(errs, field.Invalid(path.Index(i), id, neutronid.Expected))
		case seen[neutronid.Key(id)]:
			errs = append(errs, field.Duplicate(path.Index(i), id))
		}
		seen[neutronid.Key(id)] = true
	}
	return errs
}

// PortSecurityOff reports whether network id has port security disabled in Neutron, so that
// the machines' port on it must be written without port security.
func (a Attachment) PortSecurityOff(id string) bool { return ContainsID(a.PortSecurityDisabled, id) }

// PortSecurityOffOf returns those of ids whose port security is disabled (PortSecurityOff), in
// the order of ids: what a kind records of the networks it added.
func (a Attachment) PortSecurityOffOf(ids []string) []string {
	var out []string
	for _, id := range ids {
		if a.PortSecurityOff(id) {
			out = append(out, id)
		}
	}
	return out
}

// Record is the value of Annotation: every storage network and security group manila-setup has
// attached to the object (the union over its runs), when and by what.
type Record struct {
	Attachment
	Time string `json:"time"`
	By   string `json:"by,omitempty"`
}

// RecordIn returns the Record in an object's annotations, nil when there is none or it does not
// parse.
func RecordIn(annotations map[string]string) *Record {
	r := record.Parse(annotations)
	if r == nil {
		return nil
	}
	return &Record{Attachment: Attachment(r.IDs), Time: r.Time, By: r.By}
}

// Merged returns the record after attaching a: the union of the IDs, with time and author now.
// Of a.PortSecurityDisabled, only the networks of a.Networks are recorded.
func (r *Record) Merged(a Attachment, now time.Time, by string) Record {
	out := Record{Time: now.UTC().Format(time.RFC3339), By: by}
	if r != nil {
		out.Networks = slices.Clone(r.Networks)
		out.SecurityGroups = slices.Clone(r.SecurityGroups)
	}
	for _, id := range a.Networks {
		if !ContainsID(out.Networks, id) {
			out.Networks = append(out.Networks, id)
		}
	}
	for _, id := range a.SecurityGroups {
		if !ContainsID(out.SecurityGroups, id) {
			out.SecurityGroups = append(out.SecurityGroups, id)
		}
	}
	if r != nil {
		out.PortSecurityDisabled = slices.Clone(r.PortSecurityDisabled)
	}
	// Only the networks of a are recorded as written without port security: the kinds pass
	// those they added, so a port written before (with or without it) is not misreported.
	for _, id := range a.PortSecurityOffOf(a.Networks) {
		if !ContainsID(out.PortSecurityDisabled, id) {
			out.PortSecurityDisabled = append(out.PortSecurityDisabled, id)
		}
	}
	return out
}

// ContainsID reports whether list names the object id names (neutronid.Equal).
func ContainsID(list []string, id string) bool {
	return slices.ContainsFunc(list, func(x string) bool { return neutronid.Equal(x, id) })
}

// IDChecker looks IDs up in Neutron before anything is written (manila-setup --os-cloud).
// Each method returns nil when every ID exists and the project may use it, an *UnknownIDsError
// naming the IDs that do not, or another error when Neutron could not be asked.
type IDChecker interface {
	CheckNetworks(ctx context.Context, ids []string) error
	CheckSecurityGroups(ctx context.Context, ids []string) error
}

// UnknownIDsError says that IDs given on the command line are not what they should be in the
// cloud: absent, or another kind of object.
type UnknownIDsError struct {
	What string   // "network" or "security group"
	IDs  []string // in the order given
	// Actually says what an ID is instead, when it exists as something else ("subnet").
	Actually map[string]string
}

func (e *UnknownIDsError) Error() string {
	var parts []string
	for _, id := range e.IDs {
		if other := e.Actually[id]; other != "" {
			parts = append(parts, fmt.Sprintf("%s is a %s, not a %s", id, other, e.What))
		} else {
			parts = append(parts, fmt.Sprintf("%s %s does not exist (or the project cannot see it)", e.What, id))
		}
	}
	return "in Neutron, " + strings.Join(parts, "; ")
}

// CheckIDs runs checker over a; a nil checker checks nothing.
func CheckIDs(ctx context.Context, checker IDChecker, a Attachment) error {
	if checker == nil {
		return nil
	}
	wrap := func(what string, err error) error {
		msg := strings.TrimSuffix(err.Error(), ".")
		var unknown *UnknownIDsError
		if !errors.As(err, &unknown) {
			msg = "checking the " + what + " in Neutron: " + msg
		}
		return &wrapped{msg: msg + "; nothing was changed", err: err}
	}
	if err := checker.CheckNetworks(ctx, a.Networks); err != nil {
		return wrap("networks", err)
	}
	if len(a.SecurityGroups) > 0 {
		if err := checker.CheckSecurityGroups(ctx, a.SecurityGroups); err != nil {
			return wrap("security groups", err)
		}
	}
	return nil
}

// wrapped is an error with its own sentence that still unwraps to its cause.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }
