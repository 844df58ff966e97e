// Package layers holds the check that imports run only down the layer table of
// docs/architecture.md: the table is the rule, and this test reads it.
package layers

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/manila-setup/manila-setup/"

// layer is one row of the table: its name and the package paths it lists.
type layer struct {
	name     string
	packages []string
}

var backticked = regexp.MustCompile("`([a-z0-9_./-]+)`")

// readTable reads the rows of the layer table, top to bottom.
func readTable(t *testing.T, doc string) []layer {
	t.Helper()
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "| layer | packages | owns |")
	if !ok {
		t.Fatalf("%s has no layer table", doc)
	}
	var rows []layer
	for _, line := range strings.Split(rest, "\n")[2:] {
		if !strings.HasPrefix(line, "| ") {
			break
		}
		cols := strings.Split(line, "|")
		l := layer{name: strings.TrimSpace(cols[1])}
		for _, m := range backticked.FindAllStringSubmatch(cols[2], -1) {
			l.packages = append(l.packages, strings.TrimSuffix(m[1], "/"))
		}
		rows = append(rows, l)
	}
	return rows
}

// rowOf is the row whose listed package is the longest prefix of pkg (a path in the module).
func rowOf(rows []layer, pkg string) (int, bool) {
	best, bestLen := -1, -1
	for i, l := range rows {
		for _, p := range l.packages {
			if (pkg == p || strings.HasPrefix(pkg, p+"/")) && len(p) > bestLen {
				best, bestLen = i, len(p)
			}
		}
	}
	return best, best >= 0
}

func top(pkg string) string { return strings.SplitN(pkg, "/", 2)[0] }

// TestImportsRunDown: every package of the module is in the table; a package imports only
// packages of the rows below its own, or of its own row under the same top folder (operator/
// controllers its machinery, machinesets its attachment), never a peer of its row (one adapter
// another) nor a row above; and nothing but the test harness imports the test harness.
func TestImportsRunDown(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rows := readTable(t, filepath.Join(root, "docs", "architecture.md"))
	if len(rows) < 5 {
		t.Fatalf("the layer table has %d rows", len(rows))
	}
	harness := len(rows) - 1
	if rows[harness].name != "test harness" {
		t.Fatalf("the last row is %q, want the test harness", rows[harness].name)
	}
	cmd := exec.Command("go", "list", "-tags", "integration", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var problems []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg := strings.TrimPrefix(fields[0], module)
		r, ok := rowOf(rows, pkg)
		if !ok {
			problems = append(problems, pkg+": in no row of the layer table")
			continue
		}
		if r == harness {
			continue // the test harness may link anything
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			imp = strings.TrimPrefix(imp, module)
			ri, ok := rowOf(rows, imp)
			switch {
			case !ok:
				continue // said above, as a package of its own
			case ri == harness:
				problems = append(problems, pkg+" imports the test harness "+imp)
			case ri < r:
				problems = append(problems, pkg+" ("+rows[r].name+") imports "+imp+" ("+rows[ri].name+"), a row above")
			case ri == r && top(imp) != top(pkg):
				problems = append(problems, pkg+" imports "+imp+", a peer of its row ("+rows[r].name+")")
			}
		}
	}
	sort.Strings(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

// TestOperatorLinksNoClientset: the operator's binary links neither client-go's clientset nor
// its scheme of every API group. Either one registers every Kubernetes API group at start and
// keeps those pages resident: the last time a package the operator uses imported the
// clientset (package attach, for one function the operator never calls), the binary grew from
// 35 to 48 MB and the operator's RSS by 8 MiB (docs/performance.md).
func TestOperatorLinksNoClientset(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./cmd/manila-setup-operator")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./cmd/manila-setup-operator: %v", err)
	}
	banned := map[string]bool{"k8s.io/client-go/kubernetes": true, "k8s.io/client-go/kubernetes/scheme": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if banned[imp] {
				t.Errorf("%s imports %s: the operator's binary must not link it (move what needs it to a package of its own, as attach/inuse)", fields[0], imp)
			}
		}
	}
}
