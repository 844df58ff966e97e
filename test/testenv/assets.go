package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The versions test/env/kube/build.sh builds; the cache folder is keyed by them.
const (
	kubeVersion = "1.34.10"
	etcdVersion = "3.6.5"
	kwokVersion = "0.8.0"
)

// kubeBinaries are the programs a sim cluster needs; envtest alone needs the first two.
var kubeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"}

// cacheDir mirrors MANILA_SETUP_CACHE in test/env/lib.sh.
func cacheDir() string {
	if d := os.Getenv("MANILA_SETUP_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "manila-setup")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "manila-setup")
}

// runDir mirrors MANILA_SETUP_RUN in test/env/lib.sh.
func runDir() string {
	if d := os.Getenv("MANILA_SETUP_RUN"); d != "" {
		return d
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "manila-setup")
	}
	return filepath.Join(os.TempDir(), "manila-setup")
}

// KubeAssets returns the folder holding the control-plane binaries: $KUBEBUILDER_ASSETS if set,
// else the version-keyed cache folder that test/env/kube/build.sh fills.
func KubeAssets() (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		dir = filepath.Join(cacheDir(), "kube", fmt.Sprintf("k8s-%s_etcd-%s_kwok-%s", kubeVersion, etcdVersion, kwokVersion))
	}
	for _, name := range kubeBinaries {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("kube binaries: %s is missing in %s: run test/env/kube/build.sh (make test does)", name, dir)
		}
	}
	return dir, nil
}

// FindAbove finds rel (a path inside the repository, a build script say) above the working
// directory: a test runs in its package's folder.
func FindAbove(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("%s not found above the working directory", rel)
		}
		dir = parent
	}
}

// BuiltFolder returns the folder a build script of test/env fills: $env if set (make test sets
// it), else what the script (its path inside the repository) prints: it builds once, then
// answers from its cache. The folder must hold want.
func BuiltFolder(ctx context.Context, env, script, want string) (string, error) {
	dir := os.Getenv(env)
	if dir == "" {
		path, err := FindAbove(script)
		if err != nil {
			return "", fmt.Errorf("%w: set %s", err, env)
		}
		out, err := exec.CommandContext(ctx, "bash", path).Output()
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		dir = strings.TrimSpace(string(out))
	}
	if _, err := os.Stat(filepath.Join(dir, want)); err != nil {
		return "", fmt.Errorf("%s is missing in %s: run %s (make test does)", want, dir, script)
	}
	return dir, nil
}
