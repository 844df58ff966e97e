package machinesets

import (
	"encoding/json"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/manila-setup/manila-setup/attach"
)

// storageEntry returns the networks[] entry on id of a plan's patched providerSpec.
func storageEntry(t *testing.T, p *Plan, id string) map[string]any {
	t.Helper()
	raw, err := applyToProviderSpec(p.ms, p.Patch)
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Networks []map[string]any `json:"networks"`
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatal(err)
	}
	for _, n := range spec.Networks {
		if n["uuid"] == id {
			return n
		}
	}
	t.Fatalf("no networks[] entry on %s in %s", id, raw)
	return nil
}

// TestPlanPortSecurity: a network without port security gets portSecurity: false on its entry
// (and the record says so), one with port security gets no such field, an entry already
// written so is "already attached", and an entry on such a network that lacks it is reported.
func TestPlanPortSecurity(t *testing.T) {
	ms := loadMachineSet(t, "testdata/corpus/installer-default.yaml")
	off := attach.Attachment{Networks: []string{storageNet, storageNet2}, PortSecurityDisabled: []string{storageNet}}
	p := PlanPatch(ms, off, fixedNow, "test")
	if !p.Changed() {
		t.Fatalf("not patched: %+v", p.Result())
	}
	if e := storageEntry(t, p, storageNet); e["portSecurity"] != false || e["noAllowedAddressPairs"] != true {
		t.Errorf("entry of the network without port security: %v", e)
	}
	if e := storageEntry(t, p, storageNet2); len(e) != 2 || e["noAllowedAddressPairs"] != true {
		t.Errorf("entry of the network with port security: %v, want only uuid and noAllowedAddressPairs", e)
	}
	if !strings.Contains(p.Diff(), "+  portSecurity: false\n") {
		t.Errorf("the diff does not show portSecurity: false:\n%s", p.Diff())
	}
	patched := applied(t, ms, p)
	if rec := attach.RecordIn(patched.Annotations); rec == nil || len(rec.PortSecurityDisabled) != 1 || rec.PortSecurityDisabled[0] != storageNet {
		t.Errorf("record %+v", rec)
	}
	if again := PlanPatch(patched, off, fixedNow, "test"); again.Changed() || again.Warning != "" || again.Result().Reason != "already attached" {
		t.Errorf("second plan: changed %t, %+v", again.Changed(), again.Result())
	}

	// Attached before without the flag (by hand, or by an older manila-setup): left as it is,
	// with the path of the entry to fix.
	plain := applied(t, ms, PlanPatch(ms, attach.Attachment{Networks: []string{storageNet}}, fixedNow, "test"))
	again := PlanPatch(plain, off, fixedNow, "test")
	if !strings.Contains(again.Warning, "network "+storageNet+" has port security disabled") || !strings.Contains(again.Warning, providerSpecField+".networks[1]") {
		t.Errorf("entry without the flag: warning %q", again.Warning)
	}
	if e := storageEntry(t, again, storageNet2); e["portSecurity"] != nil {
		t.Errorf("network with port security got %v", e)
	}
}

// applied returns ms with the plan's patch applied, as the apiserver applies it.
func applied(t *testing.T, ms *machinev1beta1.MachineSet, p *Plan) *machinev1beta1.MachineSet {
	t.Helper()
	doc, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	patch, err := jsonpatch.DecodePatch(p.Patch)
	if err != nil {
		t.Fatal(err)
	}
	if doc, err = patch.Apply(doc); err != nil {
		t.Fatal(err)
	}
	var out machinev1beta1.MachineSet
	if err := json.Unmarshal(doc, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
