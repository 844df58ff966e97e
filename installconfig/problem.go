package installconfig

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Severity says whether a problem fails the check.
type Severity string

const (
	// SeverityError fails validation (exit code 1).
	SeverityError Severity = "error"
	// SeverityWarning is reported but does not fail validation, unless --strict.
	SeverityWarning Severity = "warning"
)

// Rule names say which check found a problem. They are the field.Error Origin, so tests, the
// installer oracle and docs/installconfig.md can refer to a check without matching its text.
const (
	RuleYAMLSyntax       = "yaml-syntax"        // the file is not well-formed YAML
	RuleEmpty            = "empty"              // no document, or only comments / null
	RuleNotMapping       = "not-mapping"        // the document is not a mapping
	RulePlatform         = "platform-openstack" // platform missing, not a mapping, or not openstack
	RuleType             = "type"               // a modelled field has the wrong YAML type
	RuleUUID             = "uuid"               // not a UUID at all
	RuleUUIDVersion      = "uuid-version"       // a UUID, but not version 4
	RuleUUIDCanonical    = "uuid-canonical"     // a UUID v4 the installer accepts, not in canonical form
	RuleDuplicateID      = "duplicate-id"       // the same ID twice in one list
	RuleDuplicateKey     = "duplicate-key"      // a key set twice in one mapping (also through << merges)
	RuleAmbiguousKey     = "ambiguous-key"      // the same field under two spellings (case variants)
	RuleUnknownKey       = "unknown-key"        // a misspelt or misplaced key for one of our fields
	RuleKeySpelling      = "key-spelling"       // warning: a key the installer matches only case-insensitively
	RuleOverridesDefault = "overrides-default"  // warning: a pool list replaces the defaultMachinePlatform list
	RuleExtraDocument    = "extra-document"     // warning: a second YAML document, ignored by the installer
	RuleCompact          = "compact"            // warning (patch): the pools named make no machine in a compact install
	RuleInternal         = "internal"           // a bug in this package, reported instead of a crash
)

// Problem is one finding: a field.Error plus whether it fails the check. File-level problems
// (malformed YAML, empty file) have an empty Field.
type Problem struct {
	field.Error
	Severity Severity
	// Line and Column locate the problem in the file (1-based); 0 when unknown.
	Line, Column int
}

// Rule is the name of the check that found the problem (one of the Rule* constants).
func (p Problem) Rule() string { return p.Origin }

// Text is the one-line form: `PATH: Invalid value: "VALUE": why`, prefixed with "warning: " for
// warnings; file-level problems start with the file name instead of a path.
func (p Problem) Text(fileName string) string {
	var s string
	if p.Field == "" {
		s = fileName + ": " + p.Detail
	} else {
		s = p.Error.Error()
	}
	if p.Severity == SeverityWarning {
		s = "warning: " + s
	}
	return oneLine(s)
}

// oneLine escapes line breaks and other control characters, so that a problem is always one
// line whatever the keys and values of the file hold.
func oneLine(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		if isControl(r) {
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f || r == 0x85 || r == 0x2028 || r == 0x2029
}

// problemJSON is the -o json/yaml form of a problem.
type problemJSON struct {
	Field    string   `json:"field"`
	Type     string   `json:"type"`
	Value    string   `json:"value"`
	Detail   string   `json:"detail"`
	Severity Severity `json:"severity"`
	// Rule is the check's stable name: one of the Rule* constants, a cloud check's, or the ID
	// of a storage-network finding (attach.Fitness), the same ID every command prints.
	Rule string `json:"rule,omitempty"`
}

// MarshalJSON writes {field, type, value, detail, severity, rule}.
func (p Problem) MarshalJSON() ([]byte, error) {
	return json.Marshal(problemJSON{
		Field:    p.Field,
		Type:     string(p.Type),
		Value:    valueString(p.BadValue),
		Detail:   p.Detail,
		Severity: p.Severity,
		Rule:     p.Origin,
	})
}

// UnmarshalJSON reads what MarshalJSON writes (the value as a string; no position), so that
// programs in Go can read the -o json output back.
func (p *Problem) UnmarshalJSON(b []byte) error {
	var j problemJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*p = Problem{Error: field.Error{Type: field.ErrorType(j.Type), Field: j.Field, BadValue: j.Value, Detail: j.Detail, Origin: j.Rule},
		Severity: j.Severity}
	return nil
}

func valueString(v any) string {
	switch t := v.(type) {
	case nil:
		return ""
	case string:
		return t
	case field.OmitValueType:
		return ""
	}
	return fmt.Sprint(v)
}

// Problems is the result of a check, in file order.
type Problems []Problem

// Errors counts the problems that fail the check.
func (ps Problems) Errors() int { return ps.count(SeverityError) }

// Warnings counts the problems that do not fail the check.
func (ps Problems) Warnings() int { return ps.count(SeverityWarning) }

func (ps Problems) count(s Severity) int {
	n := 0
	for _, p := range ps {
		if p.Severity == s {
			n++
		}
	}
	return n
}

// ErrorList returns the errors (not the warnings) as a field.ErrorList.
func (ps Problems) ErrorList() field.ErrorList {
	var l field.ErrorList
	for i := range ps {
		if ps[i].Severity == SeverityError {
			e := ps[i].Error
			l = append(l, &e)
		}
	}
	return l
}

// Text renders one line per problem.
func (ps Problems) Text(fileName string) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text(fileName))
		b.WriteByte('\n')
	}
	return b.String()
}

// sortByPosition orders problems as they appear in the file; problems without a position keep
// their relative order at the front (file-level problems) or where they were reported.
func (ps Problems) sortByPosition() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

func newProblem(sev Severity, rule string, t field.ErrorType, path string, value any, detail string, line, col int) Problem {
	return Problem{
		Error:    field.Error{Type: t, Field: path, BadValue: value, Detail: detail, Origin: rule},
		Severity: sev,
		Line:     line,
		Column:   col,
	}
}

// Summary is the last line of the text output.
func Summary(fileName string, ps Problems) string {
	e, w := ps.Errors(), ps.Warnings()
	switch {
	case e == 0 && w == 0:
		return fileName + ": valid"
	case e == 0:
		return fmt.Sprintf("%s: valid, %s", fileName, plural(w, "warning"))
	case w == 0:
		return fmt.Sprintf("%s: invalid, %s", fileName, plural(e, "error"))
	}
	return fmt.Sprintf("%s: invalid, %s, %s", fileName, plural(e, "error"), plural(w, "warning"))
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
