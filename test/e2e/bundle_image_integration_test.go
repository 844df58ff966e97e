//go:build integration

package e2e

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/operator/bundle"
)

// TestBundleImage takes the OLM path of docs/install.md up to the push: `manila-setup operator
// bundle` writes the bundle, podman builds its image from the bundle.Dockerfile it wrote, and the
// image is what OLM reads: the bundle annotations as image labels, /manifests with the
// ClusterServiceVersion and /metadata/annotations.yaml, nothing else.
func TestBundleImage(t *testing.T) {
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatalf("podman is not installed (make test installs it with build/podman.sh): %v", err)
	}
	cli := buildCLI(t)
	dir := t.TempDir()
	out, err := exec.Command(cli, "operator", "bundle", "--output-dir", dir, "--version", "0.4.0",
		"--image", "quay.io/example/manila-setup-operator:v0.4.0").CombinedOutput()
	if err != nil {
		t.Fatalf("operator bundle: %v\n%s", err, out)
	}
	root := t.TempDir()
	t.Cleanup(func() { podmanCleanup(root) })
	const ref = "localhost/manila-setup-operator-bundle:v0.4.0"
	// As docs/install.md says: podman build -f bundle/bundle.Dockerfile -t <ref> bundle
	if out, err := podman(root, "build", "--pull=never", "-f", filepath.Join(dir, "bundle.Dockerfile"), "-t", ref, dir).CombinedOutput(); err != nil {
		t.Fatalf("podman build of the bundle image: %v\n%s", err, out)
	}

	var labels map[string]string
	if err := json.Unmarshal([]byte(podmanInspect(t, root, ref, "{{json .Labels}}")), &labels); err != nil {
		t.Fatal(err)
	}
	for k, v := range bundle.Annotations() {
		if labels[k] != v {
			t.Errorf("image label %s = %q, want %q (the bundle's annotations)", k, labels[k], v)
		}
	}

	// What the image holds, read from its filesystem as OLM's unpacker does.
	if out, err := podman(root, "create", "--name", "bundle", ref, "none").CombinedOutput(); err != nil {
		t.Fatalf("podman create: %v\n%s", err, out)
	}
	var tarball bytes.Buffer
	export := podman(root, "export", "bundle")
	export.Stdout = &tarball
	if err := export.Run(); err != nil {
		t.Fatalf("podman export: %v", err)
	}
	var files []string
	var csv string
	tr := tar.NewReader(&tarball)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		files = append(files, h.Name)
		if strings.HasSuffix(h.Name, ".clusterserviceversion.yaml") {
			b, _ := io.ReadAll(tr)
			csv = string(b)
		}
	}
	t.Logf("bundle image files: %v", files)
	if !slices.Contains(files, "metadata/annotations.yaml") {
		t.Errorf("the image lacks metadata/annotations.yaml: %v", files)
	}
	for _, f := range files {
		if !strings.HasPrefix(f, "manifests/") && !strings.HasPrefix(f, "metadata/") {
			t.Errorf("the bundle image holds %s, outside manifests/ and metadata/", f)
		}
	}
	if !strings.Contains(csv, "kind: ClusterServiceVersion") || !strings.Contains(csv, "quay.io/example/manila-setup-operator:v0.4.0") ||
		!strings.Contains(csv, "0.4.0") {
		t.Errorf("the image's ClusterServiceVersion is not the one written (version 0.4.0, the image given):\n%.600s", csv)
	}
}
