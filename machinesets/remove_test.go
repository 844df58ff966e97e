package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/attach"
)

// handNet is a storage-like network the user attached by hand: in the spec, not in the record.
const handNet = "0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

func removeOpts(r attach.Removal) attach.Options {
	opts := fileOpts()
	opts.Remove = &r
	return opts
}

// TestRemoveFileUndoesPatch: on every corpus file that attaching changes, removing afterwards
// gives back the file as it was, byte for byte where the attachment was spliced; removing again
// changes nothing.
func TestRemoveFileUndoesPatch(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*.yaml")
	undone := 0
	for _, path := range files {
		name := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		attached, err := PatchFile(context.Background(), name, data, Selection{}, fileOpts())
		if err != nil || attached.Reformatted || !attached.Results[0].Writes() || attach.RecordIn(loadYAML(t, data).Annotations) != nil {
			continue // only the files a clean attachment spliced into
		}
		if strings.Contains(string(data), "networks: null") {
			continue // a list that was null comes back absent: the same to the Machine API, not the same bytes
		}
		removed, err := PatchFile(context.Background(), name, attached.Output, Selection{}, removeOpts(attach.Removal{}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(removed.Output) != string(data) {
			t.Errorf("%s: attached then removed is not the original:\n%s", name, removed.Output)
		}
		if r := removed.Results[0]; r.Action != attach.ActionPatched || strings.Join(r.RemovedNetworks, ",") != strings.Join(attached.Results[0].AddedNetworks, ",") {
			t.Errorf("%s: %+v", name, r)
		}
		again, err := PatchFile(context.Background(), name, removed.Output, Selection{}, removeOpts(attach.Removal{}))
		if err != nil || again.Results[0].Action != attach.ActionUnchanged || !strings.Contains(again.Results[0].Reason, "no attachment record") {
			t.Errorf("%s: removed twice: %+v %v", name, again.Results, err)
		}
		undone++
	}
	if undone < 5 {
		t.Errorf("%d corpus files undone, want most", undone)
	}
}

func loadYAML(t *testing.T, data []byte) *machinev1beta1.MachineSet {
	t.Helper()
	var ms machinev1beta1.MachineSet
	if err := yaml.Unmarshal(data, &ms); err != nil {
		t.Fatal(err)
	}
	return &ms
}

// withHandNetwork is a corpus MachineSet with a network the user added by hand, then
// storageNet and storageNet2 attached by manila-setup.
func withHandNetwork(t *testing.T) *machinev1beta1.MachineSet {
	t.Helper()
	ms := loadMachineSet(t, "testdata/corpus/installer-default.yaml")
	hand := PlanPatch(ms, attach.Attachment{Networks: []string{handNet}}, fixedNow, "by hand")
	ms = withPatch(t, ms, hand.Patch)
	delete(ms.Annotations, attach.Annotation) // the user's: no record of it
	p := PlanPatch(ms, attach.Attachment{Networks: []string{storageNet, storageNet2}, SecurityGroups: []string{storageSG}}, fixedNow, "manila-setup test")
	return withPatch(t, ms, p.Patch)
}

func withPatch(t *testing.T, ms *machinev1beta1.MachineSet, patch []byte) *machinev1beta1.MachineSet {
	t.Helper()
	doc, err := json.Marshal(ms)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatal(err)
	}
	patched, err := decoded.Apply(doc)
	if err != nil {
		t.Fatalf("%v\n%s", err, patch)
	}
	var out machinev1beta1.MachineSet
	if err := json.Unmarshal(patched, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func TestPlanRemove(t *testing.T) {
	ms := withHandNetwork(t)
	now := fixedNow.Add(time.Hour)

	// Everything recorded: the hand-added network stays, the record goes.
	p, err := Target{}.PlanRemoveFile(ms, attach.Removal{}, now, "manila-setup test")
	if err != nil {
		t.Fatal(err)
	}
	if p.Result.Action != attach.ActionPatched || strings.Join(p.Result.RemovedNetworks, ",") != storageNet+","+storageNet2 || strings.Join(p.Result.RemovedSecurityGroups, ",") != storageSG {
		t.Fatalf("remove all: %+v", p.Result)
	}
	after := withPatch(t, ms, p.Change.(attach.FileChange).Patch)
	spec, _ := DecodeProviderSpec(templateProviderSpec(after))
	if !spec.HasNetwork(handNet) || spec.HasNetwork(storageNet) || spec.HasNetwork(storageNet2) || spec.HasSecurityGroup(storageSG) {
		t.Errorf("after removing: %s", templateProviderSpec(after))
	}
	if _, ok := after.Annotations[attach.Annotation]; ok {
		t.Errorf("the record is left: %v", after.Annotations)
	}
	if d := p.Diff(); !strings.Contains(d, "-  uuid: "+storageNet) && !strings.Contains(d, storageNet) {
		t.Errorf("diff:\n%s", d)
	}

	// --network: only that one; the record keeps the rest.
	p, err = Target{}.PlanRemoveFile(ms, attach.Removal{Networks: []string{storageNet2}}, now, "manila-setup test")
	if err != nil {
		t.Fatal(err)
	}
	after = withPatch(t, ms, p.Change.(attach.FileChange).Patch)
	spec, _ = DecodeProviderSpec(templateProviderSpec(after))
	rec := attach.RecordIn(after.Annotations)
	if !spec.HasNetwork(handNet) || !spec.HasNetwork(storageNet) || spec.HasNetwork(storageNet2) || !spec.HasSecurityGroup(storageSG) ||
		rec == nil || strings.Join(rec.Networks, ",") != storageNet || strings.Join(rec.SecurityGroups, ",") != storageSG {
		t.Errorf("after removing one: %s, record %+v", templateProviderSpec(after), rec)
	}

	// --network the user added: an error naming the flag and the value; nothing planned.
	_, err = Target{}.PlanRemoveFile(ms, attach.Removal{Networks: []string{handNet}}, now, "x")
	var notRecorded *attach.NotRecordedError
	if !errors.As(err, &notRecorded) || !strings.Contains(err.Error(), `--network[0]: Invalid value: "`+handNet+`"`) {
		t.Errorf("hand-added network named: %v", err)
	}

	// No record: unchanged, even with a network that looks like storage.
	bare := loadMachineSet(t, "testdata/corpus/installer-default.yaml")
	bare = withPatch(t, bare, PlanPatch(bare, attach.Attachment{Networks: []string{handNet}}, fixedNow, "x").Patch)
	delete(bare.Annotations, attach.Annotation)
	p, err = Target{}.PlanRemoveFile(bare, attach.Removal{}, now, "x")
	if err != nil || p.Result.Action != attach.ActionUnchanged || p.Change != nil {
		t.Errorf("no record: %+v %v", p.Result, err)
	}

	// The control plane is never touched.
	cp := loadMachineSet(t, "testdata/corpus/control-plane.yaml")
	if p, _ := (Target{}).PlanRemoveFile(cp, attach.Removal{}, now, "x"); p.Result.Action != attach.ActionSkipped {
		t.Errorf("control plane: %+v", p.Result)
	}
}

// A MachineSet whose primary NIC is a ports[] entry gets the storage network as a ports[] entry
// after the others (the provider makes ports[] after every networks[] port, so the primary stays
// the first NIC), and --remove takes back that entry only: a ports[] entry the user wrote on the
// same network, under another nameSuffix, stays.
func TestPortsFirstAttachAndRemove(t *testing.T) {
	ms := loadMachineSet(t, "testdata/corpus/ports-sriov.yaml")
	p := PlanPatch(ms, attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}, fixedNow, "x")
	after := withPatch(t, ms, p.Patch)
	spec, err := DecodeProviderSpec(templateProviderSpec(after))
	if err != nil {
		t.Fatal(err)
	}
	ports := spec.Spec.Ports
	if len(spec.Spec.Networks) != 0 || len(ports) != 3 || ports[0].NameSuffix != "nodes" || ports[2].NetworkID != storageNet ||
		ports[2].NameSuffix != "manila-3f5a9c3e" || ports[2].SecurityGroups == nil || strings.Join(*ports[2].SecurityGroups, ",") != storageSG ||
		len(ports[2].AllowedAddressPairs) != 0 || ports[2].Trunk == nil || *ports[2].Trunk {
		t.Fatalf("attached ports-first: networks %+v ports %+v", spec.Spec.Networks, ports)
	}
	// The user's own port on the storage network, beside ours.
	hand := withPatch(t, after, []byte(`[{"op":"add","path":"/spec/template/spec/providerSpec/value/ports/-","value":{"networkID":"`+storageNet+`","nameSuffix":"nfs"}}]`))
	r, err := Target{}.PlanRemoveFile(hand, attach.Removal{}, fixedNow.Add(time.Hour), "x")
	if err != nil {
		t.Fatal(err)
	}
	removed := withPatch(t, hand, r.Change.(attach.FileChange).Patch)
	spec, _ = DecodeProviderSpec(templateProviderSpec(removed))
	if len(spec.Spec.Ports) != 3 || spec.Spec.Ports[2].NameSuffix != "nfs" || spec.HasSecurityGroup(storageSG) {
		t.Errorf("after --remove: ports %+v, securityGroups %+v; want the user's port kept, ours and the group gone", spec.Spec.Ports, spec.Spec.SecurityGroups)
	}
}
