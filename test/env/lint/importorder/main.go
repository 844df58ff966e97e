// Command importorder checks the order of the import groups of Go files: the standard library,
// then other modules, then this project's (github.com/manila-setup/...). goimports -local puts
// the project's imports in a group of their own but keeps the groups in the order it finds
// them, so a file that lists the project's group before the others passes it; this catches it.
//
// Usage: go run ./test/env/lint/importorder FILE.go... (make lint passes every tracked file).
// It prints each misordered file with the first import out of place and exits 1.
package main

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
)

const local = "github.com/manila-setup/"

// class is the group an import belongs to, in the order the groups must come.
type class int

const (
	standard class = iota
	others
	ours
)

var names = [...]string{standard: "the standard library", others: "other modules", ours: "github.com/manila-setup"}

func classOf(path string) class {
	switch first, _, _ := strings.Cut(path, "/"); {
	case strings.HasPrefix(path, local):
		return ours
	case !strings.Contains(first, "."):
		// The standard library's paths have no dot in their first element (as goimports
		// tells them).
		return standard
	}
	return others
}

// check returns why the imports of src are out of order, or "" when they are not.
func check(fset *token.FileSet, name string, src any) (string, error) {
	f, err := parser.ParseFile(fset, name, src, parser.ImportsOnly)
	if err != nil {
		return "", err
	}
	last := standard
	var lastPath string
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil || path == "C" {
			continue // cgo's pseudo-package stands apart by rule
		}
		c := classOf(path)
		if c < last {
			return fmt.Sprintf("%s: import %q (%s) after %q (%s)", fset.Position(spec.Pos()), path, names[c], lastPath, names[last]), nil
		}
		last, lastPath = c, path
	}
	return "", nil
}

func main() {
	fset := token.NewFileSet()
	bad := 0
	for _, name := range os.Args[1:] {
		why, err := check(fset, name, nil)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if why != "" {
			fmt.Println(why)
			bad++
		}
	}
	if bad > 0 {
		fmt.Printf("%d file(s) with import groups out of order: the standard library first, then other modules, then github.com/manila-setup\n", bad)
		os.Exit(1)
	}
}
