package installconfig

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzValidatePatch: no input makes load, validate or patch panic; every problem is one line
// with a rule; a file that validates (or whose only errors are non-canonical IDs) is patched,
// the result validates and a second patch changes nothing.
func FuzzValidatePatch(f *testing.F) {
	files, _ := filepath.Glob("testdata/corpus/*.yaml")
	for _, path := range files {
		if strings.Contains(path, "large") {
			continue
		}
		f.Add(readFile(f, path))
	}
	f.Add([]byte("platform: {openstack: {}}\ncompute: [{platform: {openstack: {additionalNetworkIDs: [&a x, *a]}}}]\n"))
	f.Add([]byte("a: &a {<<: *a}\n"))
	f.Add([]byte("platform:\n  openstack:\n    defaultMachinePlatform: {<<: [{additionalNetworkIDs: []}]}\n"))
	opts := PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}, ControlPlane: true}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, ps := Check("ic.yaml", data)
		for _, p := range ps {
			if line := p.Text("ic.yaml"); strings.ContainsAny(line, "\r\n") || p.Rule() == "" || p.Rule() == RuleInternal {
				t.Fatalf("problem is not one line with a rule: %q (%s)", line, p.Rule())
			}
		}
		patchable := file.Root() != nil && !file.utf16
		for _, p := range ps {
			if p.Severity == SeverityError && p.Rule() != RuleUUIDCanonical {
				patchable = false
			}
		}
		res, err := Patch(file, opts)
		if !patchable {
			var invalid *InvalidError
			if err == nil || !errors.As(err, &invalid) {
				t.Fatalf("patch of an invalid file: %v, want InvalidError", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("patch of a valid file failed: %v\n%s", err, data)
		}
		out, ps2 := Check("ic.yaml", res.Output)
		if ps2.Errors() != 0 {
			t.Fatalf("patched file does not validate:\n%s\n%s", ps2.Text("ic.yaml"), res.Output)
		}
		again, err := Patch(out, opts)
		if err != nil || again.Changed {
			t.Fatalf("second patch: changed=%v err=%v\n%s", again != nil && again.Changed, err, res.Output)
		}
	})
}
