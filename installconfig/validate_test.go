package installconfig

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestCorpus is the table of what each corpus file must produce: the verdict, the counts and
// the rules that fire. The exact text is in testdata/golden.
func TestCorpus(t *testing.T) {
	tests := []struct {
		file     string
		errors   int
		warnings int
		rules    []string // distinct rules, sorted
	}{
		{"invalid-ambiguous-keys", 1, 1, []string{RuleAmbiguousKey, RuleKeySpelling}},
		{"invalid-comments-only", 1, 0, []string{RuleEmpty}},
		{"invalid-complex-key", 1, 0, []string{RuleType}},
		{"invalid-duplicate-key", 1, 0, []string{RuleDuplicateKey}},
		{"invalid-duplicates", 3, 0, []string{RuleDuplicateID, RuleUUIDCanonical}},
		{"invalid-empty", 1, 0, []string{RuleEmpty}},
		{"invalid-list-is-scalar", 3, 0, []string{RuleType}},
		{"invalid-malformed-colon", 1, 0, []string{RuleYAMLSyntax}},
		{"invalid-malformed-second-document", 1, 0, []string{RuleYAMLSyntax}},
		{"invalid-malformed-tab", 1, 0, []string{RuleYAMLSyntax}},
		{"invalid-malformed-unclosed", 1, 0, []string{RuleYAMLSyntax}},
		{"invalid-merge-override", 1, 0, []string{RuleDuplicateKey}},
		{"invalid-misplaced-keys", 3, 0, []string{RuleUnknownKey}},
		{"invalid-misspelled-keys", 5, 0, []string{RuleUnknownKey}},
		{"invalid-no-platform", 1, 0, []string{RulePlatform}},
		{"invalid-noncanonical", 5, 1, []string{RuleOverridesDefault, RuleUUIDCanonical}},
		{"invalid-not-mapping", 1, 0, []string{RuleNotMapping}},
		{"invalid-not-uuid", 3, 0, []string{RuleUUID}},
		{"invalid-platform-aws", 1, 0, []string{RulePlatform}},
		{"invalid-platform-none", 1, 0, []string{RulePlatform}},
		{"invalid-platform-typo", 1, 0, []string{RuleUnknownKey}},
		{"invalid-pool-types", 3, 0, []string{RuleType}},
		{"invalid-structure-types", 3, 0, []string{RuleType}},
		{"invalid-types", 5, 0, []string{RuleType}},
		{"invalid-uuid-version", 2, 0, []string{RuleUUIDVersion}},
		{"valid-anchors", 0, 0, nil},
		{"valid-bom", 0, 0, nil},
		{"valid-comments-everywhere", 0, 0, nil},
		{"valid-control-plane", 0, 0, nil},
		{"valid-crlf", 0, 0, nil},
		{"valid-default-platform", 0, 0, nil},
		{"valid-empty-lists", 0, 0, nil},
		{"valid-flow-style", 0, 0, nil},
		{"valid-full-machinepool", 0, 0, nil},
		{"valid-indented-seq", 0, 0, nil},
		{"valid-installer-generated", 0, 0, nil},
		{"valid-large-500-pools", 0, 0, nil},
		{"valid-merge", 0, 0, nil},
		{"valid-minimal", 0, 0, nil},
		{"valid-multi-pool", 0, 0, nil},
		{"valid-no-trailing-newline", 0, 0, nil},
		{"valid-quoted", 0, 0, nil},
		{"valid-typical", 0, 0, nil},
		{"warn-case-variant", 0, 3, []string{RuleKeySpelling}},
		{"warn-kelvin-sign-key", 0, 1, []string{RuleKeySpelling}},
		{"warn-overrides-default", 0, 2, []string{RuleOverridesDefault}},
		{"warn-second-document", 0, 1, []string{RuleExtraDocument}},
	}
	files := corpus(t)
	if len(files) != len(tests) {
		t.Errorf("the corpus has %d files, the table %d", len(files), len(tests))
	}
	if len(files) < 30 {
		t.Errorf("the corpus has %d files, want at least 30", len(files))
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			_, ps := Check("install-config.yaml", readFile(t, filepath.Join("testdata", "corpus", tt.file+".yaml")))
			rules := map[string]bool{}
			for _, p := range ps {
				rules[p.Rule()] = true
				if p.Rule() == "" {
					t.Errorf("problem without a rule: %s", p.Text("x"))
				}
			}
			var got []string
			for r := range rules {
				got = append(got, r)
			}
			slices.Sort(got)
			if ps.Errors() != tt.errors || ps.Warnings() != tt.warnings || !reflect.DeepEqual(got, tt.rules) {
				t.Errorf("got %d errors, %d warnings, rules %v; want %d, %d, %v\n%s",
					ps.Errors(), ps.Warnings(), got, tt.errors, tt.warnings, tt.rules, ps.Text("install-config.yaml"))
			}
		})
	}
}

// Every rule is exercised by the corpus.
func TestCorpusCoversEveryRule(t *testing.T) {
	all := []string{RuleYAMLSyntax, RuleEmpty, RuleNotMapping, RulePlatform, RuleType, RuleUUID, RuleUUIDVersion,
		RuleUUIDCanonical, RuleDuplicateID, RuleDuplicateKey, RuleAmbiguousKey, RuleUnknownKey, RuleKeySpelling,
		RuleOverridesDefault, RuleExtraDocument}
	seen := map[string]bool{}
	for _, path := range corpus(t) {
		_, ps := Check("x", readFile(t, path))
		for _, p := range ps {
			seen[p.Rule()] = true
		}
	}
	for _, r := range all {
		if !seen[r] {
			t.Errorf("no corpus file triggers rule %q", r)
		}
	}
}

func check(t *testing.T, yaml string) []string {
	t.Helper()
	_, ps := Check("ic.yaml", []byte(yaml))
	var lines []string
	for _, p := range ps {
		lines = append(lines, p.Text("ic.yaml"))
	}
	return lines
}

const osPlatform = "platform:\n  openstack:\n    cloud: c\n"

// laughs is a small document whose aliases expand to 10^6 values.
var laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" +
	"b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n" +
	"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n" +
	"d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n" +
	"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n" +
	"f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"

// Focused cases beside the corpus: each one line of YAML, the exact lines expected.
func TestValidateCases(t *testing.T) {
	n1 := "837e03cd-a06c-494f-9f58-88263af211ef"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"valid", osPlatform + "compute:\n- name: w\n  platform: {openstack: {additionalNetworkIDs: [" + n1 + "]}}\n", nil},
		{"null list is absent", osPlatform + "compute:\n- platform: {openstack: {additionalNetworkIDs: null}}\n", nil},
		{"empty list item", osPlatform + "compute:\n- platform: {openstack: {additionalNetworkIDs: ['']}}\n",
			[]string{`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "": must be a UUID v4, not an empty string`}},
		{"cut UUID", osPlatform + "compute:\n- platform: {openstack: {additionalSecurityGroupIDs: [837e03cd-a06c-494f-9f58]}}\n",
			[]string{`compute[0].platform.openstack.additionalSecurityGroupIDs[0]: Invalid value: "837e03cd-a06c-494f-9f58": must be a UUID v4: 32 hexadecimal digits as 8-4-4-4-12, this one is cut or mistyped`}},
		{"timestamp item", osPlatform + "compute:\n- platform: {openstack: {additionalNetworkIDs: [2024-01-02]}}\n",
			[]string{`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "2024-01-02": must be a network ID (a UUID v4 string), not a timestamp`}},
		{"explicit str tag is a string", osPlatform + "compute:\n- platform: {openstack: {additionalNetworkIDs: [!!str " + n1 + "]}}\n", nil},
		{"alias item", osPlatform + "x: &n " + n1 + "\ncompute:\n- platform: {openstack: {additionalNetworkIDs: [*n, *n]}}\n",
			[]string{`compute[0].platform.openstack.additionalNetworkIDs[1]: Duplicate value: "` + n1 + `": the same network as compute[0].platform.openstack.additionalNetworkIDs[0]`}},
		{"alias cycle in a list", osPlatform + "compute:\n- platform: {openstack: {additionalNetworkIDs: &a [*a]}}\n",
			[]string{
				`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "[[[[[[[[[]]]]]]]]]": must be a network ID (a UUID v4 string), not a list`,
				`ic.yaml: line 5: the alias *a cannot be expanded: anchor 'a' value contains itself`,
			}},
		{"recursive merge", osPlatform + "compute:\n- &base\n  <: *base\n",
			[]string{`ic.yaml: line 6: the alias *base cannot be expanded: anchor 'base' value contains itself`}},
		{"billion laughs", osPlatform + laughs, []string{`ic.yaml: line 5: the alias *a cannot be expanded: document contains excessive aliasing`}},
		{"merge of a scalar", osPlatform + "compute:\n- <<: abc\n  name: w\n",
			[]string{`compute[0].<<: Invalid value: "abc": a << merge needs a mapping or a list of mappings, not a string`}},
		{"two case variants of platform", "platform: {openstack: {cloud: c}}\nPlatform: {openstack: {cloud: d}}\n",
			[]string{
				`warning: Platform: Invalid value: "Platform": the installer reads this key as "platform" because it matches keys case-insensitively, but tools that read keys exactly ignore it; spell it "platform"`,
				`Platform: Duplicate value: "Platform": platform is set 2 times, as "platform" (line 1), "Platform" (line 2); the installer silently uses only one of them ("platform")`,
			}},
		{"root typos", osPlatform + "computes: []\ncontrol_plane: {}\n",
			[]string{
				`computes: Invalid value: "computes": unknown field, did you mean "compute"? The installer rejects unknown fields, and tools that read install-configs leniently (Hive, the assisted installer) drop them silently`,
				`control_plane: Invalid value: "control_plane": unknown field, did you mean "controlPlane"? The installer rejects unknown fields, and tools that read install-configs leniently (Hive, the assisted installer) drop them silently`,
			}},
		{"typo of a key we do not model is left alone", osPlatform + "pulSecret: x\ncompute:\n- platform: {openstack: {zone: [a], typ: x}}\n", nil},
		{"defaultMachinePlatform typo", "platform:\n  openstack:\n    defaultMachinePlatfrom: {}\n",
			[]string{`platform.openstack.defaultMachinePlatfrom: Invalid value: "defaultMachinePlatfrom": unknown field, did you mean "defaultMachinePlatform"? The installer rejects unknown fields, and tools that read install-configs leniently (Hive, the assisted installer) drop them silently`}},
		{"openstack null", "platform:\n  openstack:\n",
			[]string{`platform.openstack: Required value: is null; it must be a mapping with the OpenStack settings (at least cloud)`}},
		{"platform is a string", "platform: openstack\n",
			[]string{`platform: Invalid value: "openstack": must be a mapping with the openstack platform settings, not a string`}},
		{"root is a scalar", "hello\n", []string{`ic.yaml: the document must be a mapping (an install-config), not a string`}},
		{"null document", "~\n", []string{`ic.yaml: the document is null: the file holds no install-config`}},
		{"unknown anchor", "a: *nope\n", []string{`ic.yaml: line 1, column 4: malformed YAML: unknown anchor 'nope' referenced`}},
		{"bad indentation", "a:\n    b: 1\n  c: 2\n", []string{`ic.yaml: line 3, column 3: malformed YAML: did not find expected key`}},
		{"colon on the first line", "a: b: c\n", []string{`ic.yaml: line 1, column 5: malformed YAML: mapping values are not allowed in this context`}},
		{"invalid UTF-8", "a: \xff\xfe\n", []string{`ic.yaml: line 1, column 4: malformed YAML: invalid leading UTF-8 octet`}},
		{"key with a line break", osPlatform + "\"a\\nb\": 1\n\"a\\nb\": 2\n",
			[]string{`"a\nb": Duplicate value: "a\nb": set again (first on line 4); the installer reads YAML strictly and rejects a key set twice`}},
		{"a tag with a line break", "!%0A\n", []string{`ic.yaml: the document must be a mapping (an install-config), not a value tagged "!\n"`}},
		{"garbage after the document", osPlatform + "--- [\n", []string{`ic.yaml: line 4, column 5: malformed YAML: did not find expected node content`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := check(t, tt.yaml)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestProblemJSON(t *testing.T) {
	_, ps := Check("ic.yaml", readFile(t, "testdata/corpus/invalid-uuid-version.yaml"))
	b, err := json.Marshal(ps[:1])
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"field":"compute[0].platform.openstack.additionalNetworkIDs[0]","type":"FieldValueInvalid","value":"aa1788ba-e63a-11f1-aa6c-02fc00000001","detail":"must be a UUID v4, not a version 1 UUID","severity":"error","rule":"uuid-version"}]`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	// Read back: what a program in Go sees of the output.
	var back Problems
	if err := json.Unmarshal(b, &back); err != nil || len(back) != 1 || back[0].Rule() != RuleUUIDVersion ||
		back[0].Text("ic.yaml") != ps[0].Text("ic.yaml") {
		t.Errorf("read back: %v, %+v", err, back)
	}
	if l := ps.ErrorList(); len(l) != 2 || l[1].Field != "compute[0].platform.openstack.additionalNetworkIDs[1]" {
		t.Errorf("ErrorList = %v", l)
	}
}

func TestSummary(t *testing.T) {
	ps := Problems{
		newProblem(SeverityError, RuleUUID, "FieldValueInvalid", "a", "x", "d", 1, 1),
		newProblem(SeverityWarning, RuleKeySpelling, "FieldValueInvalid", "b", "y", "d", 2, 1),
		newProblem(SeverityWarning, RuleKeySpelling, "FieldValueInvalid", "c", "z", "d", 3, 1),
	}
	for _, tt := range []struct {
		ps   Problems
		want string
	}{
		{nil, "f: valid"},
		{ps[1:2], "f: valid, 1 warning"},
		{ps[:1], "f: invalid, 1 error"},
		{ps, "f: invalid, 1 error, 2 warnings"},
	} {
		if got := Summary("f", tt.ps); got != tt.want {
			t.Errorf("Summary = %q, want %q", got, tt.want)
		}
	}
}
