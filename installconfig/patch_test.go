package installconfig

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func patch(t *testing.T, data string, opts PatchOptions) (*PatchResult, error) {
	t.Helper()
	f, _ := Parse("ic.yaml", []byte(data))
	return Patch(f, opts)
}

func mustPatch(t *testing.T, data string, opts PatchOptions) *PatchResult {
	t.Helper()
	res, err := patch(t, data, opts)
	if err != nil {
		t.Fatalf("patch: %v", err)
	}
	return res
}

var both = PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}}

// A second run changes nothing, for every file patch accepts.
func TestPatchIsIdempotent(t *testing.T) {
	for _, path := range corpus(t) {
		f, _ := Parse("ic.yaml", readFile(t, path))
		res, err := Patch(f, both)
		if err != nil {
			continue
		}
		f2, _ := Parse("ic.yaml", res.Output)
		again, err := Patch(f2, both)
		if err != nil {
			t.Errorf("%s: second run: %v", path, err)
			continue
		}
		if again.Changed || len(again.Changes) != 0 || !bytes.Equal(again.Output, res.Output) {
			t.Errorf("%s: second run changed the file: %v", path, again.Changes)
		}
	}
}

// For the common layouts the diff is only the added lines.
func TestPatchOnlyAddsLines(t *testing.T) {
	for _, name := range []string{"valid-typical", "valid-bom", "valid-crlf", "valid-comments-everywhere",
		"valid-control-plane", "valid-default-platform", "valid-full-machinepool", "valid-indented-seq",
		"valid-minimal", "valid-multi-pool", "valid-no-trailing-newline", "warn-case-variant", "warn-second-document"} {
		data := readFile(t, filepath.Join("testdata", "corpus", name+".yaml"))
		f, _ := Parse("ic.yaml", data)
		res, err := Patch(f, both)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		added, removed := diffStat(UnifiedDiff("a", "b", data, res.Output))
		if removed != 0 || added == 0 || res.Reformatted {
			t.Errorf("%s: +%d -%d lines, reformatted %v; want only added lines", name, added, removed, res.Reformatted)
		}
	}
}

func TestPatchKeepsLineBreaksAndBOM(t *testing.T) {
	for _, name := range []string{"valid-crlf", "valid-bom"} {
		data := readFile(t, filepath.Join("testdata", "corpus", name+".yaml"))
		res := mustPatch(t, string(data), both)
		crlf := bytes.Count(res.Output, []byte("\r\n"))
		lf := bytes.Count(res.Output, []byte("\n"))
		if name == "valid-crlf" && crlf != lf {
			t.Errorf("%s: %d of %d line breaks are CRLF", name, crlf, lf)
		}
		if name == "valid-bom" && (!bytes.HasPrefix(res.Output, utf8BOM) || bytes.Count(res.Output, utf8BOM) != 1) {
			t.Errorf("%s: the BOM is not kept once at the start", name)
		}
	}
}

func TestPatchOptions(t *testing.T) {
	typical := string(readFile(t, "testdata/corpus/valid-multi-pool.yaml"))
	tests := []struct {
		name    string
		data    string
		opts    PatchOptions
		changes []string // Field: added
		err     string
	}{
		{"one pool", typical, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"infra"}},
			[]string{"compute[1].platform.openstack.additionalNetworkIDs: [" + addNetwork + "]"}, ""},
		{"two pools and the control plane", typical, PatchOptions{SecurityGroups: []string{addSG}, Pools: []string{"gpu", "worker"}, ControlPlane: true},
			[]string{
				"controlPlane.platform.openstack.additionalSecurityGroupIDs: [" + addSG + "]",
				"compute[0].platform.openstack.additionalSecurityGroupIDs: [" + addSG + "]",
				"compute[2].platform.openstack.additionalSecurityGroupIDs: [" + addSG + "]",
			}, ""},
		{"an ID already there is not added", typical, PatchOptions{Networks: []string{"837e03cd-a06c-494f-9f58-88263af211ef"}, Pools: []string{"worker"}},
			nil, ""},
		{"IDs in other forms are normalized and deduplicated", typical,
			PatchOptions{Networks: []string{strings.ToUpper(addNetwork), "urn:uuid:" + addNetwork}, Pools: []string{"worker"}},
			[]string{"compute[0].platform.openstack.additionalNetworkIDs: [" + addNetwork + "]"}, ""},
		{"unknown pool", typical, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"storage"}}, nil,
			`--pool: Not found: "storage": no compute pool has this name; the pools are "worker", "infra", "gpu"`},
		{"not a UUID", typical, PatchOptions{Networks: []string{"storage-net"}}, nil,
			`--network: Invalid value: "storage-net": must be a UUID v4`},
		{"not version 4", typical, PatchOptions{SecurityGroups: []string{"aa1788ba-e63a-11f1-aa6c-02fc00000001"}}, nil,
			`--security-group: Invalid value: "aa1788ba-e63a-11f1-aa6c-02fc00000001": must be a UUID v4, not a version 1 UUID`},
		{"nothing to add", typical, PatchOptions{}, nil, `--network: Required value: give at least one --network or --security-group`},
		{"no compute pool: worker is created", osPlatform, PatchOptions{Networks: []string{addNetwork}},
			[]string{"compute[0].platform.openstack.additionalNetworkIDs: [" + addNetwork + "]"}, ""},
		{"no compute pool, another name", osPlatform, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"infra"}}, nil,
			`--pool: Not found: "infra"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := patch(t, tt.data, tt.opts)
			if tt.err != "" {
				var oe *OptionError
				if !errors.As(err, &oe) || err.Error() != tt.err {
					t.Fatalf("err = %v, want OptionError %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range res.Changes {
				got = append(got, c.Field+": ["+strings.Join(c.Added, " ")+"]")
			}
			if strings.Join(got, "\n") != strings.Join(tt.changes, "\n") {
				t.Errorf("changes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.changes, "\n"))
			}
			if res.Changed != (len(tt.changes) > 0) {
				t.Errorf("Changed = %v", res.Changed)
			}
		})
	}
}

// Exact outputs for layouts the corpus does not show.
func TestPatchLayouts(t *testing.T) {
	n := addNetwork
	tests := []struct {
		name string
		in   string
		opts PatchOptions
		out  string
	}{
		{"empty value after the key",
			"platform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs: # fill in\n      type: m1\n",
			PatchOptions{Networks: []string{n}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs: # fill in\n      - " + n + "\n      type: m1\n"},
		{"platform with a null value",
			"platform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n  replicas: 3\n",
			PatchOptions{Networks: []string{n}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs:\n      - " + n + "\n  replicas: 3\n"},
		{"control plane created",
			"platform:\n  openstack: {cloud: c}\n",
			PatchOptions{Networks: []string{n}, ControlPlane: true},
			"platform:\n  openstack: {cloud: c}\ncontrolPlane:\n  name: master\n  platform:\n    openstack:\n      additionalNetworkIDs:\n      - " + n + "\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs:\n      - " + n + "\n"},
		{"trailing comma in a flow list",
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform: {openstack: {additionalNetworkIDs: ['837e03cd-a06c-494f-9f58-88263af211ef',]}}\n",
			PatchOptions{Networks: []string{n}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform: {openstack: {additionalNetworkIDs: ['837e03cd-a06c-494f-9f58-88263af211ef', '" + n + "']}}\n"},
		{"normalized in its quoting, with an anchor",
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform:\n    openstack:\n      additionalNetworkIDs:\n      - &x \"{" + n + "}\"\n",
			PatchOptions{Networks: []string{n}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform:\n    openstack:\n      additionalNetworkIDs:\n      - &x \"" + n + "\"\n"},
		{"the control plane as openshift-install writes it",
			"controlPlane:\n  name: master\n  platform: {}   # filled in below\n  replicas: 3\nplatform:\n  openstack: {cloud: c}\n",
			PatchOptions{SecurityGroups: []string{addSG}, ControlPlane: true, Pools: []string{"worker"}},
			"controlPlane:\n  name: master\n  platform:   # filled in below\n    openstack:\n      additionalSecurityGroupIDs:\n      - " + addSG + "\n  replicas: 3\nplatform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalSecurityGroupIDs:\n      - " + addSG + "\n"},
		{"a tagged flow mapping and an anchored flow list",
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform: !!map {openstack: {additionalSecurityGroupIDs: &sg []}}\n",
			PatchOptions{Networks: []string{n}, SecurityGroups: []string{addSG}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- platform: !!map {openstack: {additionalSecurityGroupIDs: &sg [" + addSG + "], additionalNetworkIDs: [" + n + "]}}\n"},
		{"an empty compute list gets the worker pool",
			"platform:\n  openstack: {cloud: c}\ncompute: []\n",
			PatchOptions{Networks: []string{n}},
			"platform:\n  openstack: {cloud: c}\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs:\n      - " + n + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := mustPatch(t, tt.in, tt.opts)
			if string(res.Output) != tt.out {
				t.Errorf("got\n%s\nwant\n%s\ndiff:\n%s", res.Output, tt.out, UnifiedDiff("want", "got", []byte(tt.out), res.Output))
			}
		})
	}
}

// A pool that shares its settings through an anchor with a pool that is not patched is
// unshared, so that only the selected pool changes.
func TestPatchUnsharesAnchors(t *testing.T) {
	data := string(readFile(t, "testdata/corpus/valid-anchors.yaml"))
	res := mustPatch(t, data, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"infra"}})
	f, ps := Check("ic.yaml", res.Output)
	if ps.Errors() != 0 {
		t.Fatal(ps.Text("ic.yaml"))
	}
	c := &checker{f: f}
	c.run()
	lists := map[string]string{}
	for _, p := range c.model.pools() {
		if l := p.list(Networks); l != nil {
			lists[l.step.path.String()] = strings.Join(canonicalValues(l), ",")
		}
	}
	n1 := "837e03cd-a06c-494f-9f58-88263af211ef"
	want := map[string]string{
		"compute[0].platform.openstack.additionalNetworkIDs":   n1,
		"compute[1].platform.openstack.additionalNetworkIDs":   n1 + "," + addNetwork,
		"controlPlane.platform.openstack.additionalNetworkIDs": n1,
	}
	for k, v := range want {
		if lists[k] != v {
			t.Errorf("%s = %q, want %q", k, lists[k], v)
		}
	}
	if !res.Reformatted {
		t.Error("expected the file to be written out as a whole (anchors expanded)")
	}
}

func TestPatchRefusesInvalidInput(t *testing.T) {
	_, err := patch(t, string(readFile(t, "testdata/corpus/invalid-not-uuid.yaml")), both)
	var invalid *InvalidError
	if !errors.As(err, &invalid) || invalid.Problems.Errors() != 3 {
		t.Fatalf("err = %v, want InvalidError with 3 errors", err)
	}
	if err.Error() != "the install-config has 3 errors; fix them first (patch only rewrites non-canonical IDs)" {
		t.Errorf("message: %v", err)
	}
}

// When the file is written out as a whole, {key} (a null value in a flow mapping) stays null:
// the YAML encoder alone would turn it into an empty string.
func TestPatchReformatKeepsFlowNulls(t *testing.T) {
	data := string(readFile(t, "testdata/corpus/valid-anchors.yaml")) + "featureGates: [{a}]\n"
	res := mustPatch(t, data, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"infra"}})
	if !res.Reformatted || !strings.Contains(string(res.Output), "featureGates: [{a: null}]\n") {
		t.Errorf("reformatted %v:\n%s", res.Reformatted, res.Output)
	}
}
