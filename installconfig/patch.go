package installconfig

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// PatchOptions say which IDs to add where.
type PatchOptions struct {
	// Networks and SecurityGroups are the IDs to add, in any form the installer accepts
	// (they are written in canonical form).
	Networks       []string
	SecurityGroups []string
	// Pools names the compute pools to patch; empty means every compute pool.
	Pools []string
	// ControlPlane patches controlPlane as well.
	ControlPlane bool
	// Remove removes the IDs from the pools' own lists instead of adding them (patch
	// --remove): every other item, and every other byte, stays. A list inherited from
	// platform.openstack.defaultMachinePlatform is not a pool's own and is left alone; an ID
	// that is in no list is nothing to do.
	Remove bool
}

// Change is what patch did to one list.
type Change struct {
	// Field is the path of the list, e.g. compute[0].platform.openstack.additionalNetworkIDs.
	Field string `json:"field"`
	// Added are the IDs appended to it.
	Added []string `json:"added,omitempty"`
	// Removed are the IDs taken out of it (patch --remove).
	Removed []string `json:"removed,omitempty"`
	// Normalized are the IDs rewritten in canonical form, as "old -> new".
	Normalized []string `json:"normalized,omitempty"`
	// Note explains a change that is more than an append.
	Note string `json:"note,omitempty"`
}

// PatchResult is the outcome of Patch.
type PatchResult struct {
	// Output is the patched file; equal to the input when nothing changed.
	Output []byte
	// Changed says whether Output differs from the input.
	Changed bool
	// Changes lists what changed, list by list.
	Changes []Change
	// Reformatted says that the file could not be edited in place (an uncommon layout, such
	// as IDs shared through YAML anchors) and was written out again as a whole: comments,
	// key order, quoting and unknown fields are kept, blank lines and indentation may not be.
	Reformatted bool
	// Warnings are the warnings of the patched file.
	Warnings Problems
}

// InvalidError is returned when the file has problems patch does not fix; nothing is written.
type InvalidError struct {
	Problems Problems
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("the install-config has %s; fix them first (patch only rewrites non-canonical IDs)", plural(e.Problems.Errors(), "error"))
}

// OptionError is a bad option value, such as an ID that is not a UUID v4.
type OptionError struct {
	Err *field.Error
}

func (e *OptionError) Error() string { return e.Err.Error() }

// Patch adds IDs to the lists of the selected pools and rewrites non-canonical IDs. It edits
// the text where it can, so that the diff is only the added lines; it validates the input
// first and checks the result (it parses, validates, and means exactly the input plus the
// requested change) before returning it.
func Patch(f *File, opts PatchOptions) (result *PatchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			result, err = nil, fmt.Errorf("internal error while patching (please report it): %v", r)
		}
	}()
	ids, err := normalizeOptionIDs(opts)
	if err != nil {
		return nil, err
	}
	if f.root == nil {
		return nil, &InvalidError{Problems: f.loadProblems}
	}
	if f.utf16 {
		return nil, &InvalidError{Problems: Problems{newProblem(SeverityError, RuleYAMLSyntax, field.ErrorTypeInvalid, "", nil,
			"the file is UTF-16; patch edits UTF-8 files only (convert it with iconv -f UTF-16 -t UTF-8)", 0, 0)}}
	}
	c := &checker{f: f}
	c.run()
	c.problems = append(append(Problems(nil), f.loadProblems...), c.problems...)
	var blocking Problems
	for _, p := range c.problems {
		if p.Severity == SeverityError && p.Rule() != RuleUUIDCanonical {
			blocking = append(blocking, p)
		}
	}
	if len(blocking) > 0 {
		all := append(Problems(nil), c.problems...)
		all.sortByPosition()
		return nil, &InvalidError{Problems: all}
	}

	// A compact install's masters run the workloads: they get the IDs too (compact.go).
	var compactWarned Problems
	compact := compactPools(&c.model)
	tookControlPlane := len(compact) > 0 && !opts.ControlPlane && len(opts.Pools) == 0
	if tookControlPlane {
		opts.ControlPlane = true
	} else if len(compact) > 0 && !opts.ControlPlane {
		compactWarned = compactWarnings(compact, opts.Pools)
	}
	plan, err := makePlan(&c.model, ids, opts)
	if err != nil {
		return nil, err
	}
	if len(plan.ops) == 0 && len(plan.normalize) == 0 {
		warnings := append(append(Problems(nil), c.problems...), compactWarned...)
		warnings.sortByPosition()
		return &PatchResult{Output: f.Data, Warnings: warnings}, nil
	}
	expected, err := plan.expected(f)
	if err != nil {
		return nil, fmt.Errorf("cannot read the install-config back: %w", err)
	}

	// Edit the text in place; if that is not possible or does not give exactly the expected
	// document, write the edited tree out as a whole; if even that fails (IDs shared through
	// anchors with pools that are not patched), expand the anchors first.
	var lastErr error
	for _, mode := range []editMode{editText, editTree, editFlattened} {
		out, reformatted, err := plan.apply(f, mode)
		if err != nil {
			lastErr = err
			continue
		}
		problems, err := verify(f.Name, out, expected)
		if err != nil {
			lastErr = err
			continue
		}
		changes := plan.changes()
		if tookControlPlane {
			for i := range changes {
				if strings.HasPrefix(changes[i].Field, "controlPlane.") && changes[i].Note == "" {
					changes[i].Note = compactNote(compact)
				}
			}
		}
		problems = append(problems, compactWarned...)
		problems.sortByPosition()
		return &PatchResult{
			Output:      out,
			Changed:     !bytes.Equal(out, f.Data),
			Changes:     changes,
			Reformatted: reformatted,
			Warnings:    problems,
		}, nil
	}
	return nil, fmt.Errorf("cannot patch this file safely (%v); nothing was written", lastErr)
}

func normalizeOptionIDs(opts PatchOptions) ([2][]string, error) {
	var ids [2][]string
	for k, list := range [2][]string{opts.Networks, opts.SecurityGroups} {
		flag := "--network"
		if k == int(SecurityGroups) {
			flag = "--security-group"
		}
		seen := map[string]bool{}
		for _, s := range list {
			canonical, err := neutronid.Normalize(s)
			if err != nil {
				return ids, &OptionError{field.Invalid(field.NewPath(flag), s, err.Error())}
			}
			if !seen[canonical] {
				seen[canonical] = true
				ids[k] = append(ids[k], canonical)
			}
		}
	}
	if len(ids[Networks]) == 0 && len(ids[SecurityGroups]) == 0 {
		return ids, &OptionError{field.Required(field.NewPath("--network"), "give at least one --network or --security-group")}
	}
	return ids, nil
}

// target is a pool to patch; pool is nil for a pool patch creates (compute pool "worker"
// when the file has none, the control plane when the file has no controlPlane).
type target struct {
	pool    *pool
	kind    PoolKind
	final   [2][]string // the pool's own list after the patch, when it changes
	added   [2][]string
	removed [2][]string
	seed    [2]bool // the list is new and starts with the IDs of defaultMachinePlatform
}

type plan struct {
	model     *model
	ops       []*target
	normalize []*idItem
}

func makePlan(m *model, ids [2][]string, opts PatchOptions) (*plan, error) {
	p := &plan{model: m}
	for _, pl := range m.pools() {
		for _, k := range listKinds {
			for _, l := range pl.lists[k] {
				for i := range l.items {
					if it := &l.items[i]; it.canonical != "" && it.canonical != it.value {
						p.normalize = append(p.normalize, it)
					}
				}
			}
		}
	}

	var targets []*target
	if opts.ControlPlane {
		targets = append(targets, &target{pool: poolOrNil(m.controlPlane), kind: ControlPlanePool})
	}
	if len(m.compute) == 0 {
		want := len(opts.Pools) == 0
		for _, name := range opts.Pools {
			want = want || name == "worker"
			if name != "worker" {
				return nil, &OptionError{field.NotFound(field.NewPath("--pool"), name)}
			}
		}
		if want {
			targets = append(targets, &target{kind: ComputePool})
		}
	} else {
		matched := map[string]bool{}
		for _, cp := range m.compute {
			if len(opts.Pools) == 0 {
				targets = append(targets, &target{pool: cp, kind: ComputePool})
				continue
			}
			for _, name := range opts.Pools {
				if cp.name == name {
					matched[name] = true
					targets = append(targets, &target{pool: cp, kind: ComputePool})
					break
				}
			}
		}
		for _, name := range opts.Pools {
			if !matched[name] {
				var names []string
				for _, cp := range m.compute {
					names = append(names, fmt.Sprintf("%q", cp.name))
				}
				e := field.NotFound(field.NewPath("--pool"), name)
				e.Detail = "no compute pool has this name; the pools are " + strings.Join(names, ", ")
				return nil, &OptionError{e}
			}
		}
	}

	if opts.Remove {
		p.planRemoval(targets, ids)
		return p, nil
	}
	for _, t := range targets {
		for _, k := range listKinds {
			if len(ids[k]) == 0 {
				continue
			}
			own, ownSet := t.ownList(k)
			base := own
			if !ownSet && m.def != nil {
				if dl := m.def.list(k); dl != nil && len(dl.items) > 0 {
					base = canonicalValues(dl)
					t.seed[k] = true
				}
			}
			have := map[string]bool{}
			for _, v := range base {
				have[v] = true
			}
			var add []string
			for _, id := range ids[k] {
				if !have[id] {
					add = append(add, id)
				}
			}
			if len(add) == 0 {
				t.seed[k] = false
				continue
			}
			t.added[k] = add
			t.final[k] = append(append([]string(nil), base...), add...)
		}
		if len(t.added[Networks]) > 0 || len(t.added[SecurityGroups]) > 0 {
			p.ops = append(p.ops, t)
		}
	}
	return p, nil
}

// planRemoval plans taking ids out of the targets' own lists.
func (p *plan) planRemoval(targets []*target, ids [2][]string) {
	for _, t := range targets {
		for _, k := range listKinds {
			own, ownSet := t.ownList(k)
			if !ownSet || len(ids[k]) == 0 {
				continue
			}
			drop := map[string]bool{}
			for _, id := range ids[k] {
				drop[id] = true
			}
			final := make([]string, 0, len(own))
			for _, v := range own {
				if drop[v] {
					if !slices.Contains(t.removed[k], v) {
						t.removed[k] = append(t.removed[k], v)
					}
					continue
				}
				final = append(final, v)
			}
			if len(t.removed[k]) > 0 {
				t.final[k] = final
			}
		}
		if len(t.removed[Networks]) > 0 || len(t.removed[SecurityGroups]) > 0 {
			p.ops = append(p.ops, t)
		}
	}
}

func poolOrNil(p *pool) *pool {
	if p == nil || p.node == nil {
		return nil
	}
	return p
}

// ownList is the pool's own list for k in canonical form, and whether it has one (a null
// value counts as none, as for the installer).
func (t *target) ownList(k ListKind) ([]string, bool) {
	if t.pool == nil {
		return nil, false
	}
	l := t.pool.list(k)
	if l == nil || l.step.node == nil {
		return nil, false
	}
	return canonicalValues(l), true
}

func canonicalValues(l *idList) []string {
	out := make([]string, 0, len(l.items))
	for _, it := range l.items {
		if it.canonical != "" {
			out = append(out, it.canonical)
		} else {
			out = append(out, it.value)
		}
	}
	return out
}

// keyOr returns the key as written in s, or name when s has none.
func keyOr(s step, name string) string {
	if s.key != nil {
		return s.key.Value
	}
	return name
}

// genericPath is the path of a pool's list in the decoded document: mapping keys as written
// (or as patch creates them) and sequence indexes.
func (p *plan) genericPath(t *target, k ListKind) []any {
	m := p.model
	var path []any
	switch {
	case t.kind == ControlPlanePool:
		path = []any{keyOr(m.cpStep, "controlPlane")}
	case t.pool == nil:
		path = []any{keyOr(m.computeStep, "compute"), 0}
	default:
		path = []any{keyOr(m.computeStep, "compute"), t.pool.index}
	}
	var list *idList
	if t.pool != nil {
		list = t.pool.list(k)
		path = append(path, keyOr(t.pool.platform, "platform"), keyOr(t.pool.openstack, "openstack"))
	} else {
		path = append(path, "platform", "openstack")
	}
	if list != nil {
		return append(path, list.step.key.Value)
	}
	return append(path, k.Key())
}

func (p *plan) listPath(t *target, k ListKind) string {
	var b strings.Builder
	for i, seg := range p.genericPath(t, k) {
		switch v := seg.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		case string:
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(v)
		}
	}
	return b.String()
}

func (p *plan) changes() []Change {
	var out []Change
	byPath := map[string]int{}
	for _, it := range p.normalize {
		path := it.path.String()
		i := strings.LastIndexByte(path, '[')
		list := path[:i]
		n, ok := byPath[list]
		if !ok {
			n = len(out)
			byPath[list] = n
			out = append(out, Change{Field: list})
		}
		out[n].Normalized = append(out[n].Normalized, it.value+" -> "+it.canonical)
	}
	for _, t := range p.ops {
		for _, k := range listKinds {
			if len(t.removed[k]) > 0 {
				out = append(out, Change{Field: p.listPath(t, k), Removed: t.removed[k]})
			}
			if len(t.added[k]) == 0 {
				continue
			}
			ch := Change{Field: p.listPath(t, k), Added: t.added[k]}
			switch {
			case t.pool == nil && t.kind == ComputePool:
				ch.Note = `created compute pool "worker", the pool the installer adds when there is none`
			case t.pool == nil:
				ch.Note = "created controlPlane, which the installer otherwise adds with defaults"
			case t.seed[k]:
				ch.Note = fmt.Sprintf("new list starts with the %s(s) of platform.openstack.defaultMachinePlatform, which a pool's own list replaces", k.noun())
			}
			out = append(out, ch)
		}
	}
	return out
}

// expected is the decoded input with the plan applied: what the output must decode to.
func (p *plan) expected(f *File) (any, error) {
	var doc any
	if err := f.doc.Decode(&doc); err != nil {
		return nil, err
	}
	normalized := map[string]string{}
	for _, it := range p.normalize {
		normalized[it.value] = it.canonical
	}
	// Non-canonical IDs are rewritten wherever a list of ours holds them.
	if len(normalized) > 0 {
		for _, pl := range p.model.pools() {
			for _, k := range listKinds {
				for _, l := range pl.lists[k] {
					gp := genericListPath(p.model, pl, l)
					if v, ok := getGeneric(doc, gp); ok {
						if seq, ok := v.([]any); ok {
							for i, item := range seq {
								if s, ok := item.(string); ok && normalized[s] != "" {
									seq[i] = normalized[s]
								}
							}
						}
					}
				}
			}
		}
	}
	for _, t := range p.ops {
		gp := p.genericPath(t, Networks)
		switch {
		case t.pool == nil && t.kind == ComputePool:
			doc = setGeneric(doc, gp[:2], map[string]any{"name": "worker"})
		case t.pool == nil:
			doc = setGeneric(doc, gp[:1], map[string]any{"name": "master"})
		}
		for _, k := range listKinds {
			if len(t.added[k]) == 0 && len(t.removed[k]) == 0 {
				continue
			}
			values := make([]any, len(t.final[k]))
			for i, v := range t.final[k] {
				values[i] = v
			}
			doc = setGeneric(doc, p.genericPath(t, k), values)
		}
	}
	return doc, nil
}

func genericListPath(m *model, pl *pool, l *idList) []any {
	var path []any
	switch pl.kind {
	case DefaultPool:
		path = []any{keyOr(m.platformStep, "platform"), keyOr(m.osStep, "openstack"), pl.openstack.key.Value}
	case ControlPlanePool:
		path = []any{keyOr(m.cpStep, "controlPlane"), pl.platform.key.Value, pl.openstack.key.Value}
	default:
		path = []any{keyOr(m.computeStep, "compute"), pl.index, pl.platform.key.Value, pl.openstack.key.Value}
	}
	return append(path, l.step.key.Value)
}

func getGeneric(doc any, path []any) (any, bool) {
	cur := doc
	for _, seg := range path {
		switch s := seg.(type) {
		case string:
			switch m := cur.(type) {
			case map[string]any:
				v, ok := m[s]
				if !ok {
					return nil, false
				}
				cur = v
			case map[any]any:
				v, ok := m[s]
				if !ok {
					return nil, false
				}
				cur = v
			default:
				return nil, false
			}
		case int:
			seq, ok := cur.([]any)
			if !ok || s >= len(seq) {
				return nil, false
			}
			cur = seq[s]
		}
	}
	return cur, true
}

// setGeneric sets the value at path, creating mappings (and a one-element list for index 0)
// where the path does not exist yet.
func setGeneric(doc any, path []any, value any) any {
	if len(path) == 0 {
		return value
	}
	switch s := path[0].(type) {
	case string:
		switch m := doc.(type) {
		case map[string]any:
			m[s] = setGeneric(m[s], path[1:], value)
			return m
		case map[any]any:
			m[s] = setGeneric(m[s], path[1:], value)
			return m
		default:
			return map[string]any{s: setGeneric(nil, path[1:], value)}
		}
	case int:
		seq, _ := doc.([]any)
		for len(seq) <= s {
			seq = append(seq, nil)
		}
		seq[s] = setGeneric(seq[s], path[1:], value)
		return seq
	}
	return doc
}

// verify checks that out is a valid install-config that decodes to expected, and returns its
// problems (warnings).
func verify(name string, out []byte, expected any) (Problems, error) {
	f, problems := Check(name, out)
	if problems.Errors() > 0 {
		var first string
		for _, p := range problems {
			if p.Severity == SeverityError {
				first = p.Text(name)
				break
			}
		}
		return nil, fmt.Errorf("the patched file does not validate: %s", first)
	}
	var got any
	if err := f.doc.Decode(&got); err != nil {
		return nil, err
	}
	if !reflect.DeepEqual(got, expected) {
		return nil, errors.New("the patched file does not mean what was asked")
	}
	return problems, nil
}
