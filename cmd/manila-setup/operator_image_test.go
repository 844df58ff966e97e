package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// --image wins over OPERATOR_IMAGE, and an image without a version is refused naming the flag,
// before anything is contacted.
func TestOperatorImageFlag(t *testing.T) {
	t.Setenv("OPERATOR_IMAGE", "example.test/from-env:v1")
	code, out, errOut := runCLI(t, "operator", "render", "--image", "example.test/from-flag:v2")
	if code != exitOK || !strings.Contains(out, "image: example.test/from-flag:v2") || strings.Contains(out, "from-env") {
		t.Fatalf("render --image: exit %d, %s", code, errOut)
	}
	// A kubeconfig whose server does not answer: install must stop at the image, not there.
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"example.test/op:latest", "example.test/op"} {
		for _, cmd := range [][]string{{"operator", "render"}, {"operator", "install", "--no-credentials", "--kubeconfig", kubeconfig}} {
			code, _, errOut := runCLI(t, append(cmd, "--image", ref)...)
			if code != exitUsage || !strings.Contains(errOut, `--image: Invalid value: "`+ref+`"`) {
				t.Errorf("%v --image %s: exit %d, %q", cmd, ref, code, errOut)
			}
		}
	}
}
