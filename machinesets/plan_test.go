package machinesets

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/attach"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// IDs the corpus is patched with.
const (
	storageNet  = "3f5a9c3e-5d1b-4e0a-9a57-6b1f0c2d7e11"
	storageNet2 = "c1d2e3f4-a5b6-4c7d-8e9f-a0b1c2d3e4f5"
	storageSG   = "8d2c4b1a-7e6f-4a3b-9c0d-1e2f3a4b5c6d"
)

var fixedNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func loadMachineSet(t testing.TB, path string) *machinev1beta1.MachineSet {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ms machinev1beta1.MachineSet
	if err := yaml.Unmarshal(b, &ms); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return &ms
}

// corpusWant is what each corpus MachineSet is patched with, and what the plan must say.
var corpusWant = map[string]struct {
	want     attach.Attachment
	nets     []string // networks that must be added
	sgs      []string // security groups that must be added
	skip     bool
	invalid  bool
	wantDiff bool
}{
	"installer-default":               {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"primary-subnet":                  {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"ports-sriov":                     {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"already-attached":                {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}},
	"network-by-filter-id":            {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, sgs: []string{storageSG}, wantDiff: true},
	"network-as-port":                 {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}},
	"unknown-fields":                  {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"rootvolume-no-securitygroups":    {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"aws":                             {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, skip: true},
	"control-plane":                   {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, skip: true},
	"broken":                          {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, skip: true, invalid: true},
	"second-storage-network":          {want: attach.Attachment{Networks: []string{storageNet, storageNet2}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet2}, wantDiff: true},
	"no-annotations-null-networks":    {want: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nets: []string{storageNet}, sgs: []string{storageSG}, wantDiff: true},
	"uppercase-request-already-there": {want: attach.Attachment{Networks: []string{strings.ToUpper(storageNet)}, SecurityGroups: []string{strings.ToUpper(storageSG)}}},
}

// TestPlanGolden patches every MachineSet of testdata/corpus and compares what --dry-run shows
// and the JSON patch sent with testdata/golden/<name>.golden (go test -run Golden -update).
func TestPlanGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil || len(files) < 12 {
		t.Fatalf("corpus: %v (%d files)", err, len(files))
	}
	seen := map[string]bool{}
	for _, file := range files {
		name := strings.TrimSuffix(filepath.Base(file), ".yaml")
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			tc, ok := corpusWant[name]
			if !ok {
				t.Fatalf("no expectation for corpus file %s: add it to corpusWant", file)
			}
			ms := loadMachineSet(t, file)
			plan := PlanPatch(ms, tc.want, fixedNow, "manila-setup test")

			if (plan.Skip != "") != tc.skip || plan.Invalid != tc.invalid {
				t.Errorf("skip %q invalid %v; want skip %v invalid %v", plan.Skip, plan.Invalid, tc.skip, tc.invalid)
			}
			if !equalIDs(plan.AddNetworks, tc.nets) || !equalIDs(plan.AddSecurityGroups, tc.sgs) {
				t.Errorf("adds networks %v security groups %v; want %v and %v", plan.AddNetworks, plan.AddSecurityGroups, tc.nets, tc.sgs)
			}
			if plan.Changed() != tc.wantDiff {
				t.Errorf("changed = %v, want %v", plan.Changed(), tc.wantDiff)
			}
			checkGolden(t, filepath.Join("testdata", "golden", name+".golden"), render(plan))
			if plan.Changed() {
				checkPatchedObject(t, ms, plan, tc.want)
			}
		})
	}
	for name := range corpusWant {
		if !seen[name] {
			t.Errorf("corpusWant has %s but testdata/corpus/%s.yaml does not exist", name, name)
		}
	}
}

func equalIDs(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || reflect.DeepEqual(a, b))
}

// render is what a reviewer reads in a golden file: the verdict, the JSON patch, the diff.
func render(p *Plan) string {
	var b strings.Builder
	b.WriteString("MachineSet: " + p.Name + "\nrole: " + p.Role + "\n")
	switch {
	case p.Invalid:
		b.WriteString("verdict: invalid: " + p.Skip + "\n")
	case p.Skip != "":
		b.WriteString("verdict: skipped: " + p.Skip + "\n")
	case !p.Changed():
		b.WriteString("verdict: unchanged (already attached)\n")
	default:
		b.WriteString("verdict: patch\n")
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, p.Patch, "", "  ")
		b.WriteString("--- JSON patch (" + string(jsonPatchMediaType) + ") ---\n" + pretty.String() + "\n")
		b.WriteString("--- diff ---\n" + p.Diff())
	}
	return b.String()
}

const jsonPatchMediaType = "application/json-patch+json"

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run Golden -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (go test -run Golden -update rewrites it):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}

// checkPatchedObject applies the patch the way the apiserver does and checks the result field
// by field: nothing but the two arrays and the annotation changed, unknown fields survived,
// and patching again changes nothing.
func checkPatchedObject(t *testing.T, ms *machinev1beta1.MachineSet, plan *Plan, want attach.Attachment) {
	t.Helper()
	doc, _ := json.Marshal(ms)
	patch, err := jsonpatch.DecodePatch(plan.Patch)
	if err != nil {
		t.Fatalf("the patch is not a JSON patch: %v", err)
	}
	patchedDoc, err := patch.Apply(doc)
	if err != nil {
		t.Fatalf("the patch does not apply: %v", err)
	}
	var patched machinev1beta1.MachineSet
	if err := json.Unmarshal(patchedDoc, &patched); err != nil {
		t.Fatal(err)
	}

	before, after := genericSpec(t, templateProviderSpec(ms)), genericSpec(t, templateProviderSpec(&patched))
	// The list the storage network goes to: networks[], unless the primary NIC is a ports[]
	// entry (no networks[]), whose ports the provider makes after every networks[] one.
	list := "networks"
	if nets, _ := before["networks"].([]any); len(nets) == 0 {
		if ports, _ := before["ports"].([]any); len(ports) > 0 {
			list = "ports"
		}
	}
	for key, v := range before {
		if key == list || key == "securityGroups" {
			continue
		}
		if !reflect.DeepEqual(after[key], v) {
			t.Errorf("providerSpec.%s changed: %v -> %v", key, v, after[key])
		}
	}
	for key := range after {
		if _, ok := before[key]; !ok && key != list && key != "securityGroups" {
			t.Errorf("providerSpec.%s appeared", key)
		}
	}
	checkAppended(t, list, before[list], after[list], len(plan.AddNetworks), func(i int) map[string]any {
		if list == "ports" {
			groups := []any{}
			for _, g := range want.SecurityGroups {
				groups = append(groups, g)
			}
			return map[string]any{"networkID": plan.AddNetworks[i], "nameSuffix": "manila-" + plan.AddNetworks[i][:8], "securityGroups": groups, "trunk": false}
		}
		return map[string]any{"uuid": plan.AddNetworks[i], "noAllowedAddressPairs": true}
	})
	checkAppended(t, "securityGroups", before["securityGroups"], after["securityGroups"], len(plan.AddSecurityGroups), func(i int) map[string]any {
		return map[string]any{"uuid": plan.AddSecurityGroups[i]}
	})

	// Metadata: the resourceVersion precondition is the one read, other annotations survive.
	if patched.ResourceVersion != ms.ResourceVersion {
		t.Errorf("patched resourceVersion %q, want %q (the precondition)", patched.ResourceVersion, ms.ResourceVersion)
	}
	for k, v := range ms.Annotations {
		if k != attach.Annotation && patched.Annotations[k] != v {
			t.Errorf("annotation %s lost or changed", k)
		}
	}
	rec := attach.RecordIn(patched.Annotations)
	if rec == nil {
		t.Fatalf("no parsable %s annotation after patching: %q", attach.Annotation, patched.Annotations[attach.Annotation])
	}
	for _, id := range want.Networks {
		if !attach.ContainsID(rec.Networks, id) {
			t.Errorf("record %+v lacks network %s", rec, id)
		}
	}
	if prev := attach.RecordIn(ms.Annotations); prev != nil {
		for _, id := range prev.Networks {
			if !attach.ContainsID(rec.Networks, id) {
				t.Errorf("record lost network %s of the previous run", id)
			}
		}
	}
	if again := PlanPatch(&patched, want, fixedNow, "manila-setup test"); again.Changed() || again.Skip != "" {
		t.Errorf("patching the patched MachineSet again is not a no-op: %s", again.Patch)
	}
	// What the diff shows is what the patch does.
	_, previewAfter, err := plan.Preview()
	if got := attach.ToYAML(templateProviderSpec(&patched)); err != nil || got != previewAfter {
		t.Errorf("the diff's After differs from the patched object (%v):\n%s\nvs\n%s", err, previewAfter, got)
	}
}

func genericSpec(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkAppended checks that after is before with exactly n entries appended.
func checkAppended(t *testing.T, key string, before, after any, n int, entry func(int) map[string]any) {
	t.Helper()
	b, _ := before.([]any)
	a, ok := after.([]any)
	if n == 0 {
		if !reflect.DeepEqual(before, after) {
			t.Errorf("%s changed though nothing was to be added", key)
		}
		return
	}
	if !ok || len(a) != len(b)+n {
		t.Fatalf("%s: %d entries before, %v after; want %d appended", key, len(b), after, n)
	}
	if len(b) > 0 && !reflect.DeepEqual(a[:len(b)], b) {
		t.Errorf("%s: existing entries changed", key)
	}
	for i := 0; i < n; i++ {
		if !reflect.DeepEqual(a[len(b)+i], any(entry(i))) {
			t.Errorf("%s[%d] = %v, want %v", key, len(b)+i, a[len(b)+i], entry(i))
		}
	}
}

func TestAttachmentValidate(t *testing.T) {
	tests := []struct {
		a    attach.Attachment
		want []string
	}{
		{attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, nil},
		{attach.Attachment{}, []string{"network: Required value"}},
		{attach.Attachment{Networks: []string{"storage"}}, []string{`network[0]: Invalid value: "storage": must be a UUID v4`}},
		{attach.Attachment{Networks: []string{storageNet, strings.ToUpper(storageNet)}}, []string{"network[1]: Duplicate value"}},
		{attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{"", storageSG}}, []string{`security-group[0]: Invalid value: ""`}},
		{attach.Attachment{Networks: []string{"aa1788ba-e63a-11f1-aa6c-02fc00000001"}}, []string{`network[0]: Invalid value: "aa1788ba-e63a-11f1-aa6c-02fc00000001": must be a UUID v4`}},
		{attach.Attachment{Networks: []string{storageNet, "{" + storageNet + "}"}}, []string{"network[1]: Duplicate value"}},
	}
	for _, tt := range tests {
		errs := tt.a.Validate()
		if len(errs) != len(tt.want) {
			t.Errorf("%+v: %v, want %d errors", tt.a, errs, len(tt.want))
			continue
		}
		for i, e := range errs {
			if !strings.Contains(e.Error(), tt.want[i]) {
				t.Errorf("%+v: error %q does not contain %q", tt.a, e.Error(), tt.want[i])
			}
		}
	}
}

func TestMissingFrom(t *testing.T) {
	template := loadMachineSet(t, "testdata/corpus/already-attached.yaml")
	old := loadMachineSet(t, "testdata/corpus/installer-default.yaml")
	byFilter := loadMachineSet(t, "testdata/corpus/network-by-filter-id.yaml")
	spec := func(ms *machinev1beta1.MachineSet) *ProviderSpec {
		p, err := DecodeProviderSpec(templateProviderSpec(ms))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if got := MissingFrom(spec(template), spec(old)); !reflect.DeepEqual(got, []string{"network " + storageNet, "security group " + storageSG}) {
		t.Errorf("old machine lacks %v", got)
	}
	if got := MissingFrom(spec(template), spec(template)); len(got) != 0 {
		t.Errorf("a machine from the template lacks %v", got)
	}
	// The same network named by filter.id (in upper case) counts as present.
	if got := MissingFrom(spec(template), spec(byFilter)); !reflect.DeepEqual(got, []string{"security group " + storageSG}) {
		t.Errorf("machine with the network by filter.id lacks %v", got)
	}
}

// TestPlanMigrationWarning: the migration warning comes only on a cluster that runs the
// migration (status.authoritativeAPI set) and only when a network is added.
func TestPlanMigrationWarning(t *testing.T) {
	now := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	want := attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}
	ms := loadMachineSet(t, "testdata/corpus/installer-default.yaml")
	if p := PlanPatch(ms, want, now, "test"); !p.Changed() || p.Warning != "" {
		t.Errorf("without the migration: changed %t, warning %q", p.Changed(), p.Warning)
	}
	ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityMachineAPI
	if p := PlanPatch(ms, want, now, "test"); !p.Changed() || !strings.Contains(p.Warning, "noAllowedAddressPairs") {
		t.Errorf("with the migration: changed %t, warning %q", p.Changed(), p.Warning)
	}
	if p := PlanPatch(ms, attach.Attachment{SecurityGroups: want.SecurityGroups}, now, "test"); !p.Changed() || p.Warning != "" {
		t.Errorf("a security group only: changed %t, warning %q", p.Changed(), p.Warning)
	}
	ms.Status.AuthoritativeAPI = machinev1beta1.MachineAuthorityClusterAPI
	if p := PlanPatch(ms, want, now, "test"); p.Changed() || !strings.Contains(p.Skip, ClusterAPINamespace+"/"+ms.Name) {
		t.Errorf("Cluster API authoritative: changed %t, skip %q", p.Changed(), p.Skip)
	}
}
