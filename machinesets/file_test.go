package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/internal/textdiff"
)

var emptyValueLine = regexp.MustCompile(`^-\s*[\w-]+:\s*(null|~|\[\]|\{\})?\s*$`)

var fileWant = attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}

func fileOpts() attach.Options {
	return attach.Options{Attachment: fileWant, By: "manila-setup test", Now: func() time.Time { return time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC) }}
}

// TestPatchFileGolden patches every corpus file offline and compares the output with
// testdata/file/<name>.golden (go test -run Golden -update rewrites them). Where the file was
// spliced, the diff adds lines and removes none; a second patch of the output changes nothing.
func TestPatchFileGolden(t *testing.T) {
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("corpus: %v", err)
	}
	for _, path := range files {
		name := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			res, err := PatchFile(context.Background(), name+".yaml", data, Selection{}, fileOpts())
			if err != nil {
				t.Fatal(err)
			}
			var summary strings.Builder
			for _, r := range res.Results {
				summary.WriteString("# " + r.Name + ": " + r.Action)
				if r.Reason != "" {
					summary.WriteString(" (" + r.Reason + ")")
				}
				summary.WriteString("\n")
			}
			if res.Reformatted {
				summary.WriteString("# reformatted\n")
			}
			checkGolden(t, filepath.Join("testdata", "file", name+".golden"), summary.String()+string(res.Output))

			diff := textdiff.Unified("a", "b", data, res.Output)
			if !res.Reformatted {
				// Lines are only added, but for an empty value the new one takes the place of.
				for _, l := range strings.Split(diff, "\n") {
					if strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---") && !emptyValueLine.MatchString(l) {
						t.Errorf("a spliced patch removed a line: %q\n%s", l, diff)
					}
				}
			}
			patched := res.Results[0].Action == attach.ActionPatched
			if patched == (diff == "") {
				t.Errorf("action %s but diff %q", res.Results[0].Action, diff)
			}
			again, err := PatchFile(context.Background(), name+".yaml", res.Output, Selection{}, fileOpts())
			if err != nil {
				t.Fatal(err)
			}
			if string(again.Output) != string(res.Output) || again.Results[0].Action == attach.ActionPatched {
				t.Errorf("a second patch changed the file again: %+v\n%s", again.Results, textdiff.Unified("1", "2", res.Output, again.Output))
			}
		})
	}
}

// TestPatchFileStreams: several documents, a List, comments, another kind, CRLF line ends: the
// worker MachineSets are patched, the rest of the text is kept byte for byte.
func TestPatchFileStreams(t *testing.T) {
	worker, err := os.ReadFile("testdata/corpus/installer-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	master, err := os.ReadFile("testdata/corpus/control-plane.yaml")
	if err != nil {
		t.Fatal(err)
	}
	configMap := "# kept as it is\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other   # a comment\ndata: {a: \"1\"}\n"
	list := "apiVersion: v1\nkind: List\nitems:\n" + indentItem(string(worker)) + indentItem(string(master))
	for _, crlf := range []bool{false, true} {
		in := "# worker MachineSets of cluster ostest\n" + configMap + "---\n" + list
		if crlf {
			in = strings.ReplaceAll(in, "\n", "\r\n")
		}
		res, err := PatchFile(context.Background(), "cluster.yaml", []byte(in), Selection{}, fileOpts())
		if err != nil {
			t.Fatal(err)
		}
		out := string(res.Output)
		if res.Reformatted || res.Others != 1 || len(res.Results) != 2 {
			t.Fatalf("crlf %t: reformatted %t, %d others, results %+v", crlf, res.Reformatted, res.Others, res.Results)
		}
		byName := resultsByName(res.Results)
		if byName["ostest-8x2kq-worker-0"].Action != attach.ActionPatched || byName["ostest-8x2kq-master"].Action != attach.ActionSkipped {
			t.Errorf("results %+v", res.Results)
		}
		nl := "\n"
		if crlf {
			nl = "\r\n"
		}
		head := strings.ReplaceAll("# worker MachineSets of cluster ostest\n"+configMap+"---\n", "\n", nl)
		if !strings.HasPrefix(out, head) || strings.Count(out, storageNet) != 2 { // the network and the annotation
			t.Errorf("crlf %t: the other documents changed, or the network is not there once:\n%s", crlf, out)
		}
		if crlf && strings.Count(out, "\n") != strings.Count(out, "\r\n") {
			t.Errorf("a line without CR in a CRLF file:\n%q", out)
		}
		var objs []map[string]any
		for _, raw := range res.Objects {
			var o map[string]any
			if err := json.Unmarshal(raw, &o); err != nil {
				t.Fatal(err)
			}
			objs = append(objs, o)
		}
		if len(objs) != 2 {
			t.Errorf("%d objects, want the 2 MachineSets", len(objs))
		}
	}
}

func indentItem(doc string) string {
	lines := strings.Split(strings.TrimRight(doc, "\n"), "\n")
	var b strings.Builder
	for i, l := range lines {
		switch {
		case i == 0:
			b.WriteString("- " + l + "\n")
		case l == "":
			b.WriteString("\n")
		default:
			b.WriteString("  " + l + "\n")
		}
	}
	return b.String()
}

func TestPatchFileErrors(t *testing.T) {
	worker, err := os.ReadFile("testdata/corpus/installer-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, data string
		sel        Selection
		want       string
		file       bool
	}{
		{"not YAML", "a: [b", Selection{}, "x.yaml: not YAML", true},
		{"no MachineSet", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", Selection{}, "x.yaml: no MachineSet", true},
		{"twice", string(worker) + "---\n" + string(worker), Selection{}, `document 2.metadata.name: Duplicate value: "ostest-8x2kq-worker-0"`, true},
		{"no name", "apiVersion: machine.openshift.io/v1beta1\nkind: MachineSet\nmetadata: {}\n", Selection{}, "document 1.metadata.name: Required value", true},
		{"unknown --name", string(worker), Selection{Names: []string{"nope"}}, "MachineSet nope not found in x.yaml (there: ostest-8x2kq-worker-0)", false},
	} {
		_, err := PatchFile(context.Background(), "x.yaml", []byte(c.data), c.sel, fileOpts())
		var fe *filepatch.Error
		var se *attach.SelectionError
		switch {
		case err == nil || !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		case c.file && !errors.As(err, &fe), !c.file && !errors.As(err, &se):
			t.Errorf("%s: error of type %T", c.name, err)
		}
	}
}

func resultsByName(rs []attach.Result) map[string]attach.Result {
	out := map[string]attach.Result{}
	for _, r := range rs {
		out[r.Name] = r
	}
	return out
}

// BenchmarkPatchFile200: a GitOps file of 200 worker MachineSets in one List, all patched
// (go test -run '^$' -bench PatchFile -benchmem ./machinesets/).
func BenchmarkPatchFile200(b *testing.B) {
	worker, err := os.ReadFile("testdata/corpus/installer-default.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var list strings.Builder
	list.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range 200 {
		list.WriteString(indentItem(strings.ReplaceAll(string(worker), "ostest-8x2kq-worker-0", "ostest-8x2kq-worker-"+strconv.Itoa(i))))
	}
	data := []byte(list.String())
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for b.Loop() {
		res, err := PatchFile(context.Background(), "list.yaml", data, Selection{}, fileOpts())
		if err != nil || res.Reformatted || len(res.Results) != 200 {
			b.Fatalf("%v, reformatted %t, %d results", err, res != nil && res.Reformatted, len(res.Results))
		}
	}
}

// TestPatchFileSurvivesMutations: 3000 corpus files with random bytes changed, inserted (YAML's
// own punctuation mostly) or cut: PatchFile never panics nor hangs, and what it returns patches
// again without change. (Deterministic: the same seed each run.)
func TestPatchFileSurvivesMutations(t *testing.T) {
	files, _ := filepath.Glob("testdata/corpus/*.yaml")
	var seeds [][]byte
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	const punctuation = "-:[]{}&*!|> \n#'\""
	r := rand.New(rand.NewSource(1))
	patched := 0
	for i := 0; i < 3000; i++ {
		in := slices.Clone(seeds[r.Intn(len(seeds))])
		for range 1 + r.Intn(4) {
			p := r.Intn(len(in))
			switch r.Intn(3) {
			case 0:
				in[p] = byte(r.Intn(256))
			case 1:
				in = slices.Insert(in, p, punctuation[r.Intn(len(punctuation))])
			case 2:
				in = slices.Delete(in, p, min(len(in), p+1+r.Intn(5)))
			}
		}
		done := make(chan *attach.FileResult, 1)
		go func() {
			res, err := PatchFile(context.Background(), "f.yaml", in, Selection{}, fileOpts())
			if err != nil {
				res = nil
			}
			done <- res
		}()
		var res *attach.FileResult
		select {
		case res = <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("PatchFile did not return within 10 s on:\n%s", in)
		}
		if res == nil {
			continue
		}
		again, err := PatchFile(context.Background(), "f.yaml", res.Output, Selection{}, fileOpts())
		if err != nil {
			t.Fatalf("the output does not patch again: %v\n--- input\n%s\n--- output\n%s", err, in, res.Output)
		}
		for _, r := range again.Results {
			if r.Action == attach.ActionPatched {
				t.Fatalf("a second patch changed %s again\n--- input\n%s", r.Name, in)
			}
		}
		patched++
	}
	if patched < 500 {
		t.Errorf("only %d of 3000 mutated files were patchable: the mutations test too little", patched)
	}
}
