package clusterapi

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// TestRemoveFile: attached, then removed, each set of the file points at a new template without
// the storage port and security group, keeping what the user put there by hand (ocp-gpu's SR-IOV
// port and security group); the records go; removing again, or from the file never attached,
// changes nothing; --network naming the hand-added port's network is an error naming it.
func TestRemoveFile(t *testing.T) {
	const storageNet, storageSG = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "77c0a1d2-1111-4111-8111-111111111111"
	const handNet, handSG = "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37", "88d1b2e3-2222-4222-8222-222222222222"
	data, err := os.ReadFile("testdata/file/openshift-cluster-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	attached, err := PatchFile(context.Background(), "capi.yaml", data, Scope{}, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	removeOpts := func(r attach.Removal) attach.Options {
		opts := fileOpts()
		opts.Remove = &r
		return opts
	}
	removed, err := PatchFile(context.Background(), "capi.yaml", attached.Output, Scope{}, removeOpts(attach.Removal{}))
	if err != nil {
		t.Fatal(err)
	}
	f, err := filepatch.Parse("capi.yaml", removed.Output)
	if err != nil {
		t.Fatal(err)
	}
	templates := map[string]string{}
	var sets []map[string]any
	for _, o := range f.Objects() {
		var obj map[string]any
		_ = json.Unmarshal(o.JSON, &obj)
		if o.Kind == TemplateKind {
			spec, _ := json.Marshal(obj["spec"])
			templates[o.Name] = string(spec)
		} else {
			sets = append(sets, obj)
		}
	}
	if len(removed.Results) != 2 {
		t.Fatalf("results: %+v", removed.Results)
	}
	for i, r := range removed.Results {
		if r.Action != attach.ActionPatched || strings.Join(r.RemovedNetworks, ",") != storageNet || strings.Join(r.RemovedSecurityGroups, ",") != storageSG {
			t.Errorf("%s: %+v", r.Name, r)
		}
		spec := templates[r.Template]
		if spec == "" || strings.Contains(spec, storageNet) || strings.Contains(spec, storageSG) {
			t.Errorf("%s: template %q after the removal: %s", r.Name, r.Template, spec)
		}
		if r.Name == "ocp-gpu" && (!strings.Contains(spec, handNet) || !strings.Contains(spec, handSG)) {
			t.Errorf("ocp-gpu lost what the user put in its template: %s", spec)
		}
		meta, _ := sets[i]["metadata"].(map[string]any)
		if annotations, _ := meta["annotations"].(map[string]any); annotations[attach.Annotation] != nil {
			t.Errorf("%s: the record is left: %v", r.Name, annotations)
		}
	}

	for what, in := range map[string][]byte{"removed again": removed.Output, "never attached": data} {
		again, err := PatchFile(context.Background(), "capi.yaml", in, Scope{}, removeOpts(attach.Removal{}))
		if err != nil || string(again.Output) != string(in) || again.Results[0].Action != attach.ActionUnchanged {
			t.Errorf("%s: %v %+v", what, err, again)
		}
	}
	_, err = PatchFile(context.Background(), "capi.yaml", attached.Output, Scope{}, removeOpts(attach.Removal{Networks: []string{handNet}}))
	if err == nil || !strings.Contains(err.Error(), `--network[0]: Invalid value: "`+handNet+`"`) {
		t.Errorf("--network of the hand-added port: %v", err)
	}
}
