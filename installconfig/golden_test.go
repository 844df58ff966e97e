package installconfig

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current output")

// The IDs the patch goldens add to every compute pool.
const (
	addNetwork = "7097dc40-535a-4b98-a484-d00025ce73fb"
	addSG      = "4a30498e-d4d1-4710-86f7-9390abc0868f"
)

func corpus(t testing.TB) []string {
	t.Helper()
	files, err := filepath.Glob("testdata/corpus/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus: %v", err)
	}
	sort.Strings(files)
	return files
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./installconfig -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (go test ./installconfig -update rewrites it):\n%s", path,
			UnifiedDiff(path, "got", want, []byte(got)))
	}
}

// validateText is what `installconfig validate` prints in text mode.
func validateText(name string, data []byte) string {
	_, ps := Check(name, data)
	return ps.Text(name) + Summary(name, ps) + "\n"
}

// patchText is what `installconfig patch --dry-run` prints, or why it refuses.
func patchText(name string, data []byte, opts PatchOptions) string {
	f, _ := Parse(name, data)
	res, err := Patch(f, opts)
	var invalid *InvalidError
	switch {
	case errors.As(err, &invalid):
		return "refused: " + err.Error() + "\n" + invalid.Problems.Text(name)
	case err != nil:
		return "error: " + err.Error() + "\n"
	}
	var b strings.Builder
	for _, c := range res.Changes {
		fmt.Fprintf(&b, "change: %s added=%v normalized=%v note=%q\n", c.Field, c.Added, c.Normalized, c.Note)
	}
	fmt.Fprintf(&b, "reformatted: %v\n", res.Reformatted)
	b.WriteString(UnifiedDiff("a/"+name, "b/"+name, data, res.Output))
	return b.String()
}

func TestValidateGolden(t *testing.T) {
	for _, path := range corpus(t) {
		base := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(base, func(t *testing.T) {
			golden(t, filepath.Join("testdata", "golden", base+".txt"), validateText("install-config.yaml", readFile(t, path)))
		})
	}
}

func TestPatchGolden(t *testing.T) {
	opts := PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}}
	for _, path := range corpus(t) {
		base := strings.TrimSuffix(filepath.Base(path), ".yaml")
		t.Run(base, func(t *testing.T) {
			if base == "valid-large-500-pools" {
				// Too large for a golden file: 1000 lists change, by one added line each.
				f, _ := Parse("install-config.yaml", readFile(t, path))
				res, err := Patch(f, opts)
				if err != nil {
					t.Fatal(err)
				}
				added, removed := diffStat(UnifiedDiff("a", "b", f.Data, res.Output))
				if added != 1000 || removed != 0 || res.Reformatted || len(res.Changes) != 1000 {
					t.Errorf("large file: +%d -%d lines, reformatted %v, %d changes; want +1000 -0, in place, 1000", added, removed, res.Reformatted, len(res.Changes))
				}
				return
			}
			golden(t, filepath.Join("testdata", "patch", base+".diff"), patchText("install-config.yaml", readFile(t, path), opts))
		})
	}
}

// diffStat counts the added and removed lines of a unified diff.
func diffStat(diff string) (added, removed int) {
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "+"):
			added++
		case strings.HasPrefix(l, "-"):
			removed++
		}
	}
	return added, removed
}
