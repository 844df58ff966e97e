package clusterapi

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func fileOpts() attach.Options {
	return attach.Options{
		Attachment: attach.Attachment{Networks: []string{"5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"}, SecurityGroups: []string{"77c0a1d2-1111-4111-8111-111111111111"}},
		By:         "manila-setup test",
		Now:        func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) },
	}
}

// TestPatchFileGolden: each file of testdata/file gets its sets pointed at new templates,
// appended as documents; every other byte is the input's (checked line by line: the input's
// lines come out in order, and only the references, records and new documents are added).
func TestPatchFileGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/file/*.yaml")
	if len(files) == 0 {
		t.Fatal("no files in testdata/file")
	}
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		res, err := PatchFile(context.Background(), filepath.Base(path), data, Scope{}, fileOpts())
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if res.Reformatted {
			t.Errorf("%s: written out as a whole, want spliced", path)
		}
		golden := strings.TrimSuffix(path, ".yaml") + ".golden"
		if *update {
			if err := os.WriteFile(golden, res.Output, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Output) != string(want) {
			t.Errorf("%s differs from %s (-update rewrites it):\n%s", path, golden, textdiff.Unified(golden, "got", want, res.Output))
		}
		// The input's lines survive, in order, but for the references replaced.
		out := strings.Split(string(res.Output), "\n")
		j := 0
		for _, line := range strings.Split(string(data), "\n") {
			k := j
			for k < len(out) && out[k] != line {
				k++
			}
			switch {
			case k < len(out):
				j = k + 1
			case !strings.Contains(line, "name: ocp-"):
				t.Errorf("%s: input line %q is not in the output (in order)", path, line)
			}
		}
		// A second pass over the output changes nothing.
		again, err := PatchFile(context.Background(), filepath.Base(path), res.Output, Scope{}, fileOpts())
		if err != nil {
			t.Fatalf("%s, second pass: %v", path, err)
		}
		if string(again.Output) != string(res.Output) || len(again.Appended) != 0 {
			t.Errorf("%s: a second pass changed the file again (new templates %v)", path, again.Appended)
		}
	}
}

// TestPatchFileErrors: what the file lacks is said with where it is.
func TestPatchFileErrors(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"no sets", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n", "no Cluster API MachineSet or MachineDeployment"},
		{"not YAML", "a: [\n", "not YAML"},
		{"no name", "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineSet\nmetadata: {}\n", "document 1.metadata.name: Required value"},
	} {
		_, err := PatchFile(context.Background(), "f.yaml", []byte(c.in), Scope{}, fileOpts())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", c.name, err, c.want)
		}
	}
	in := "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineSet\nmetadata:\n  name: a\nspec:\n  template:\n    spec:\n      infrastructureRef:\n        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1\n        kind: OpenStackMachineTemplate\n        name: elsewhere\n"
	res, err := PatchFile(context.Background(), "f.yaml", []byte(in), Scope{}, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Results[0]; r.Action != attach.ActionInvalid || !strings.Contains(r.Reason, `"elsewhere" is not in f.yaml`) || string(res.Output) != in {
		t.Errorf("a set whose template is not in the file: %s %q, output changed: %t", r.Action, r.Reason, string(res.Output) != in)
	}
}
