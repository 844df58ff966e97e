package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// built holds the commands Command built, by import path and version: each is built once per
// test binary, in a folder RemoveCommands deletes.
var built struct {
	sync.Mutex
	dir   string
	paths map[string]string
}

// Command builds one of the project's commands (its import path, e.g.
// github.com/manila-setup/manila-setup/cmd/manila-setup) as users run it, once per test binary,
// and returns the binary's path. A version other than "" is stamped as make build stamps it.
// Binaries of one version share a folder, so that the CLI finds the operator beside it. The
// test binary's TestMain calls RemoveCommands when the tests are done.
func Command(t testing.TB, importPath, version string) string {
	t.Helper()
	built.Lock()
	defer built.Unlock()
	key := importPath + "@" + version
	if p, ok := built.paths[key]; ok {
		return p
	}
	if built.dir == "" {
		dir, err := os.MkdirTemp("", "manila-setup-commands-")
		if err != nil {
			t.Fatal(err)
		}
		built.dir, built.paths = dir, map[string]string{}
	}
	dir := filepath.Join(built.dir, "v"+strings.TrimPrefix(version, "v"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.Base(importPath))
	args := []string{"build", "-o", path}
	if version != "" {
		args = append(args, "-ldflags", "-X main.version="+version)
	}
	cmd := exec.Command("go", append(args, importPath)...)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", importPath, err, out)
	}
	built.paths[key] = path
	return path
}

// RemoveCommands deletes what Command built; for TestMain, after m.Run.
func RemoveCommands() {
	built.Lock()
	defer built.Unlock()
	if built.dir != "" {
		if err := os.RemoveAll(built.dir); err != nil {
			fmt.Fprintln(os.Stderr, "removing the test's commands:", err)
		}
		built.dir, built.paths = "", nil
	}
}
