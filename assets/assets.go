// Package assets holds, as YAML, every object the Manila CSI driver operator applies (the driver:
// CSIDriver, controller Deployment, node DaemonSets, RBAC, ...) and every object needed to
// deploy the operator itself (operator/: CRD, namespace, RBAC, Deployment, ClusterCSIDriver).
//
// Manifests carry ${VAR} placeholders. Render replaces them and fails on any placeholder left
// without a value, so a missing image or namespace is an error rather than a broken object.
package assets

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strings"
)

//go:embed *.yaml rbac/*.yaml operator/*.yaml companion/*.yaml credentials/*.yaml
var files embed.FS

// ReadFile returns the raw manifest at name (e.g. "controller.yaml", "rbac/provisioner_role.yaml").
func ReadFile(name string) ([]byte, error) { return files.ReadFile(name) }

// placeholder matches ${NAME}; $(NAME) (Kubernetes' own env expansion in args) is left alone.
var placeholder = regexp.MustCompile(`\$\{([A-Z][A-Z0-9_]*)\}`)

// Render returns the manifest at name with every ${VAR} replaced by vars[VAR]. A placeholder
// with no value in vars is an error naming it.
func Render(name string, vars map[string]string) ([]byte, error) {
	raw, err := files.ReadFile(name)
	if err != nil {
		return nil, err
	}
	return Substitute(name, raw, vars)
}

// Substitute replaces ${VAR} placeholders in raw; name is used in errors only.
func Substitute(name string, raw []byte, vars map[string]string) ([]byte, error) {
	var missing []string
	out := placeholder.ReplaceAllFunc(raw, func(m []byte) []byte {
		key := string(placeholder.FindSubmatch(m)[1])
		v, ok := vars[key]
		if !ok {
			missing = append(missing, key)
			return m
		}
		return []byte(v)
	})
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("%s: no value for %s", name, strings.Join(dedupe(missing), ", "))
	}
	return out, nil
}

// List returns the manifest names under dir ("." for the driver's, "rbac", "operator"), sorted.
func List(dir string) ([]string, error) {
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".yaml") {
			continue
		}
		if dir == "." {
			names = append(names, e.Name())
		} else {
			names = append(names, dir+"/"+e.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// SplitDocuments splits a multi-document YAML stream on "---" lines, dropping empty documents.
func SplitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if len(bytes.TrimSpace(stripComments([]byte(d)))) > 0 {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(b []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}
