package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOperatorBundle(t *testing.T) {
	t.Setenv("OPERATOR_IMAGE", "example.test/manila-setup-operator:v0.4.0")
	t.Setenv("DRIVER_IMAGE", "example.test/driver:7")
	dir := filepath.Join(t.TempDir(), "bundle")
	code, out, errOut := runCLI(t, "operator", "bundle", "--output-dir", dir, "--version", "v0.4.0")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	csv, err := os.ReadFile(filepath.Join(dir, "manifests", "manila-setup-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"name: manila-setup-operator.v0.4.0", "image: example.test/manila-setup-operator:v0.4.0", "image: example.test/driver:7"} {
		if !strings.Contains(string(csv), want) {
			t.Errorf("the CSV lacks %q", want)
		}
	}
	// --must-gather-image names the image oc adm must-gather runs; "none" names none.
	mg := filepath.Join(t.TempDir(), "mg")
	if code, _, errOut := runCLI(t, "operator", "bundle", "-d", mg, "--version", "v0.4.0", "--must-gather-image", "example.test/manila-setup:v0.4.0"); code != exitOK {
		t.Fatalf("--must-gather-image: exit %d: %s", code, errOut)
	}
	if csv, err := os.ReadFile(filepath.Join(mg, "manifests", "manila-setup-operator.clusterserviceversion.yaml")); err != nil ||
		!strings.Contains(string(csv), "operators.openshift.io/must-gather-image: example.test/manila-setup:v0.4.0") {
		t.Errorf("--must-gather-image: the CSV lacks the annotation (%v)", err)
	}
	none := filepath.Join(t.TempDir(), "none")
	if code, _, errOut := runCLI(t, "operator", "bundle", "-d", none, "--version", "v0.4.0", "--must-gather-image", "none"); code != exitOK {
		t.Fatalf("--must-gather-image none: exit %d: %s", code, errOut)
	}
	if csv, _ := os.ReadFile(filepath.Join(none, "manifests", "manila-setup-operator.clusterserviceversion.yaml")); strings.Contains(string(csv), "must-gather-image") {
		t.Errorf("--must-gather-image none: the CSV names one")
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"operator", "bundle"}, "--output-dir is required"},
		{[]string{"operator", "bundle", "-d", dir, "--version", "0.4.0"}, "--output-dir: Invalid value: the directory is not empty"},
		{[]string{"operator", "bundle", "-d", t.TempDir(), "--version", "dev"}, `--version: Invalid value: "dev"`},
		{[]string{"operator", "bundle", "-d", t.TempDir(), "--version", "1.0.0", "--image", "example.test/op:latest"}, "--image: "},
		{[]string{"operator", "bundle", "-d", t.TempDir(), "--version", "1.0.0", "--must-gather-image", "example.test/mg"}, `--must-gather-image: Invalid value: "example.test/mg"`},
	} {
		code, _, errOut := runCLI(t, tt.args...)
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%v: exit %d, %q; want exit %d and %q", tt.args, code, errOut, exitUsage, tt.want)
		}
	}
}
