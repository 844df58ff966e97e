package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// leashed are the binaries envtest starts itself (with no way to set their SysProcAttr): each
// is run through setpriv --pdeathsig, so that etcd and kube-apiserver die with the test binary
// as startProcess's children do. A test binary killed by go test's -timeout or an interrupted
// make test left them running, bound to their ports and data directories, for good.
var leashed = []string{"etcd", "kube-apiserver"}

// leashAssets makes dir a copy of the binary assets directory assets in which the leashed
// binaries are small scripts that exec the real ones under setpriv (util-linux, on every Debian
// machine), and everything else is a symbolic link to the original.
func leashAssets(assets, dir string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return "", fmt.Errorf("setpriv (util-linux), to start etcd and kube-apiserver tied to the test: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(assets)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		orig, link := filepath.Join(assets, e.Name()), filepath.Join(dir, e.Name())
		if !slices.Contains(leashed, e.Name()) {
			if err := os.Symlink(orig, link); err != nil {
				return "", err
			}
			continue
		}
		// exec keeps one process: envtest's signals reach the real binary, and the parent
		// whose death kills it is the test binary.
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", shellQuote(setpriv), shellQuote(orig))
		if err := os.WriteFile(link, []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
