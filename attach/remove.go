package attach

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// Removal is what `patch --remove` takes off the objects: of what their record (Annotation)
// says manila-setup attached, the networks and security groups named here; with neither named,
// everything recorded. What the record does not name is the user's and is never removed.
type Removal struct {
	Networks       []string
	SecurityGroups []string
}

// All reports whether the removal takes everything recorded (nothing named).
func (r Removal) All() bool { return len(r.Networks) == 0 && len(r.SecurityGroups) == 0 }

// Validate checks the IDs named: UUIDs, none twice. Paths are those of the flags.
func (r Removal) Validate() field.ErrorList {
	return append(validateIDs(field.NewPath("network"), r.Networks),
		validateIDs(field.NewPath("security-group"), r.SecurityGroups)...)
}

// Detach is what removing takes off one object, decided from its record and what its spec
// holds (Removal.Decide).
type Detach struct {
	// Networks and SecurityGroups are the recorded IDs the spec still holds: the entries to
	// remove, in record order, canonical.
	Networks       []string
	SecurityGroups []string
	// Record is the record that remains; nil when nothing recorded remains (the annotation
	// goes).
	Record *Record
	// RecordChanged says the annotation is to be rewritten (or removed).
	RecordChanged bool
	// NoRecord says the object has no record: nothing of it is known to be manila-setup's.
	NoRecord bool
}

// Changed reports whether anything is to be written.
func (d Detach) Changed() bool {
	return len(d.Networks) > 0 || len(d.SecurityGroups) > 0 || d.RecordChanged
}

// NotRecordedError says that an ID named for removal is on an object but not in its record:
// the user attached it, not manila-setup, and it is not removed.
type NotRecordedError struct {
	Ref   Ref
	Field *field.Path // network[0], security-group[1]
	ID    string
	// Recorded are the IDs of that kind the record names.
	Recorded []string
}

func (e *NotRecordedError) Error() string {
	what := "networks"
	if strings.HasPrefix(e.Field.String(), "security-group") {
		what = "security groups"
	}
	recorded := "none"
	if len(e.Recorded) > 0 {
		recorded = strings.Join(e.Recorded, ", ")
	}
	return fmt.Sprintf("--%s: Invalid value: %q: %s has it, but its record (annotation %s) does not: it was not attached by manila-setup, which removes only what it added (recorded %s: %s)",
		e.Field, e.ID, e.Ref, Annotation, what, recorded)
}

// Decide says what removing r takes off an object whose record is rec (nil: none) and whose
// spec has the networks and security groups hasNetwork and hasGroup report. A named ID that the
// record lacks is a *NotRecordedError when the spec has it (the user's), and nothing to do when
// it does not (already gone: removing twice is not an error). Without a record nothing is
// removed: it is never guessed what manila-setup added.
func (r Removal) Decide(ref Ref, rec *Record, hasNetwork, hasGroup func(id string) bool, now time.Time, by string) (Detach, error) {
	if rec == nil {
		for i, id := range r.Networks {
			if hasNetwork(id) {
				return Detach{}, &NotRecordedError{Ref: ref, Field: field.NewPath("network").Index(i), ID: id}
			}
		}
		for i, id := range r.SecurityGroups {
			if hasGroup(id) {
				return Detach{}, &NotRecordedError{Ref: ref, Field: field.NewPath("security-group").Index(i), ID: id}
			}
		}
		return Detach{NoRecord: true}, nil
	}
	nets, err := r.pick(ref, "network", r.Networks, rec.Networks, hasNetwork, r.All())
	if err != nil {
		return Detach{}, err
	}
	groups, err := r.pick(ref, "security-group", r.SecurityGroups, rec.SecurityGroups, hasGroup, r.All())
	if err != nil {
		return Detach{}, err
	}
	d := Detach{}
	for _, id := range nets {
		if hasNetwork(id) {
			d.Networks = append(d.Networks, neutronid.Key(id))
		}
	}
	for _, id := range groups {
		if hasGroup(id) {
			d.SecurityGroups = append(d.SecurityGroups, neutronid.Key(id))
		}
	}
	left := Record{Time: now.UTC().Format(time.RFC3339), By: by}
	left.Networks = without(rec.Networks, nets)
	left.SecurityGroups = without(rec.SecurityGroups, groups)
	left.PortSecurityDisabled = without(rec.PortSecurityDisabled, nets)
	d.RecordChanged = len(nets) > 0 || len(groups) > 0
	if len(left.Networks) > 0 || len(left.SecurityGroups) > 0 {
		d.Record = &left
	}
	return d, nil
}

// pick returns the recorded IDs to remove: all of them, or those named that the record has;
// a named one the record lacks but the spec has is a *NotRecordedError.
func (r Removal) pick(ref Ref, flag string, named, recorded []string, has func(string) bool, all bool) ([]string, error) {
	if all {
		return recorded, nil
	}
	var out []string
	for i, id := range named {
		at := slices.IndexFunc(recorded, func(x string) bool { return neutronid.Equal(x, id) })
		switch {
		case at >= 0:
			out = append(out, recorded[at])
		case has(id):
			return nil, &NotRecordedError{Ref: ref, Field: field.NewPath(flag).Index(i), ID: id, Recorded: recorded}
		}
	}
	return out, nil
}

// without returns list without the IDs of drop.
func without(list, drop []string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(id string) bool { return ContainsID(drop, id) })
}

// Reason is the Reason of an object from which nothing is removed.
func (d Detach) Reason() string {
	if d.NoRecord {
		return "no attachment record (annotation " + Annotation + "): nothing manila-setup added to remove"
	}
	return "nothing recorded left to remove"
}

// Remover is a kind that removes, besides attaching: the plan of a removal, as Target.Plan is
// that of an attachment. Write, Get and the rest are the Target's.
type Remover[O any] interface {
	PlanRemove(ctx context.Context, o O, r Removal, now time.Time, by string) (Plan, error)
}

// FileRemover is a FileTarget's side of a removal: PlanRemove from the file alone.
type FileRemover[O any] interface {
	PlanRemoveFile(o O, r Removal, now time.Time, by string) (Plan, error)
}

// planOf is the plan of o as opts asks: a removal (opts.Remove) or an attachment.
func planOf[O any](ctx context.Context, target Target[O], o O, opts Options) (Plan, error) {
	if opts.Remove == nil {
		return target.Plan(ctx, o, opts.Attachment, opts.Now(), opts.By)
	}
	remover, ok := any(target).(Remover[O])
	if !ok {
		return Plan{}, fmt.Errorf("%s: removing is not supported for this kind", target.Ref(o).Kind)
	}
	return remover.PlanRemove(ctx, o, *opts.Remove, opts.Now(), opts.By)
}

// planFileOf is planOf for the objects of a file.
func planFileOf[O any](target FileTarget[O], o O, opts Options) (Plan, error) {
	if opts.Remove == nil {
		return target.PlanFile(o, opts.Attachment, opts.Now(), opts.By)
	}
	remover, ok := any(target).(FileRemover[O])
	if !ok {
		return Plan{}, fmt.Errorf("%s: removing is not supported for this kind", target.Ref(o).Kind)
	}
	return remover.PlanRemoveFile(o, *opts.Remove, opts.Now(), opts.By)
}

// RemovedResult fills a result's removal fields and its Action from d: patched when d writes,
// else unchanged with d's Reason.
func RemovedResult(r Result, d Detach) Result {
	r.RemovedNetworks, r.RemovedSecurityGroups = d.Networks, d.SecurityGroups
	if d.Changed() {
		r.Action = ActionPatched
		return r
	}
	r.Action, r.Reason = ActionUnchanged, d.Reason()
	return r
}

// PatchOp is one operation of an RFC 6902 JSON patch; each kind converts it to its own.
type PatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// RecordOps are the JSON-patch operations that write what is left of an object's record, or
// remove it (and the annotations, when the record was the only one); none when the record stays
// as it is. annotations are the object's.
func (d Detach) RecordOps(annotations map[string]string) []PatchOp {
	key := "/metadata/annotations/" + strings.ReplaceAll(strings.ReplaceAll(Annotation, "~", "~0"), "/", "~1")
	if !d.RecordChanged {
		return nil
	}
	if d.Record == nil {
		if _, ok := annotations[Annotation]; !ok {
			return nil
		}
		if len(annotations) == 1 {
			return []PatchOp{{Op: "remove", Path: "/metadata/annotations"}}
		}
		return []PatchOp{{Op: "remove", Path: key}}
	}
	b, _ := json.Marshal(d.Record)
	return []PatchOp{{Op: "add", Path: key, Value: string(b)}}
}
