package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartRefusesWithoutImagesOrWithBadFlags(t *testing.T) {
	images := []string{"DRIVER_IMAGE", "NFS_DRIVER_IMAGE", "PROVISIONER_IMAGE", "SNAPSHOTTER_IMAGE", "RESIZER_IMAGE",
		"LIVENESS_PROBE_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE", "KUBE_RBAC_PROXY_IMAGE"}
	for _, k := range images {
		t.Setenv(k, "")
	}
	run1 := func(args ...string) (int, string) {
		var out, errOut bytes.Buffer
		code := run(args, &out, &errOut)
		return code, out.String() + errOut.String()
	}
	if code, out := run1("start"); code != exitUsage || !strings.Contains(out, "not set: DRIVER_IMAGE") {
		t.Errorf("start without images: exit %d, %q", code, out)
	}
	for _, k := range images {
		t.Setenv(k, "example.test/x:1")
	}
	if code, out := run1("start", "--kubeconfig", "/nonexistent/kubeconfig"); code != exitUsage || !strings.Contains(out, "kubeconfig /nonexistent/kubeconfig") {
		t.Errorf("bad kubeconfig: exit %d, %q", code, out)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := run1("start", "--kubeconfig", kubeconfig, "--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s", "--leader-elect-retry-period", "2s"); code != exitUsage ||
		!strings.Contains(out, `--leader-elect-lease-duration: Invalid value: "10s": must be longer than --leader-elect-renew-deadline (10s)`) {
		t.Errorf("lease not longer than the renew deadline: exit %d, %q", code, out)
	}
	if code, out := run1("start", "--bogus"); code != exitUsage || !strings.Contains(out, "unknown flag") {
		t.Errorf("unknown flag: exit %d, %q", code, out)
	}
	if code, out := run1("version"); code != exitOK || !strings.HasPrefix(out, "manila-setup-operator ") {
		t.Errorf("version: exit %d, %q", code, out)
	}
}
