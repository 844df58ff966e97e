package main

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

func TestOperatorRender(t *testing.T) {
	t.Setenv("OPERATOR_IMAGE", "example.test/manila-setup:7")
	t.Setenv("DRIVER_IMAGE", "example.test/driver:7")
	t.Setenv("KUBECONFIG", t.TempDir()+"/none")
	code, out, errOut := runCLI(t, "operator", "render")
	if code != exitOK || !strings.HasPrefix(errOut, "mode driver: no cluster to ask") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Count(out, "\n---\n")+1 < 10 || strings.Contains(out, "${") {
		t.Errorf("render output is not the full manifest set:\n%.400s", out)
	}
	for _, want := range []string{"kind: CustomResourceDefinition", "kind: ClusterCSIDriver", "image: example.test/manila-setup:7", "value: example.test/driver:7"} {
		if !strings.Contains(out, want) {
			t.Errorf("render lacks %q", want)
		}
	}
	code, out, _ = runCLI(t, "operator", "render", "-o", "json", "--namespace", "other-ns")
	var list struct {
		Kind  string           `json:"kind"`
		Items []map[string]any `json:"items"`
	}
	if code != exitOK || json.Unmarshal([]byte(out), &list) != nil || list.Kind != "List" || len(list.Items) < 10 {
		t.Errorf("render -o json: exit %d, %d items", code, len(list.Items))
	}
	if !strings.Contains(out, `"namespace": "other-ns"`) {
		t.Errorf("--namespace not applied")
	}
}

// TestOperatorRenderCompanion: the companion's manifests share no object with driver mode's
// (whose names are the platform's), run nothing privileged, and live in their own namespace.
func TestOperatorRenderCompanion(t *testing.T) {
	t.Setenv("OPERATOR_IMAGE", "example.test/manila-setup:7")
	objects := func(args ...string) map[string]map[string]any {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"operator", "render", "-o", "json"}, args...)...)
		var list struct {
			Items []map[string]any `json:"items"`
		}
		if code != exitOK || json.Unmarshal([]byte(out), &list) != nil {
			t.Fatalf("render %v: exit %d: %s", args, code, errOut)
		}
		byKey := map[string]map[string]any{}
		for _, it := range list.Items {
			md := it["metadata"].(map[string]any)
			ns, _ := md["namespace"].(string)
			byKey[it["kind"].(string)+" "+ns+"/"+md["name"].(string)] = it
		}
		return byKey
	}
	driver, companion := objects("--mode", "driver"), objects("--mode", "companion")
	for key, obj := range companion {
		if _, shared := driver[key]; shared {
			t.Errorf("companion and driver mode both write %s", key)
		}
		md := obj["metadata"].(map[string]any)
		if ns, ok := md["namespace"].(string); ok && ns != "manila-setup" && ns != "kube-system" {
			t.Errorf("%s: namespace %s, want manila-setup", key, ns)
		}
		if strings.Contains(key, "ClusterCSIDriver") || strings.Contains(key, "openshift-cluster-csi-drivers") {
			t.Errorf("the companion writes %s, the platform's", key)
		}
	}
	for _, want := range []string{"CustomResourceDefinition /manilacompanions.manila-setup.io", "ManilaCompanion /cluster",
		"Deployment manila-setup/manila-setup-operator", "ClusterRole /manila-setup-operator"} {
		if companion[want] == nil {
			t.Errorf("companion render lacks %s", want)
		}
	}
	dep, _ := json.Marshal(companion["Deployment manila-setup/manila-setup-operator"])
	if !strings.Contains(string(dep), `"--mode=companion"`) || strings.Contains(string(dep), "DRIVER_IMAGE") || strings.Contains(string(dep), "privileged") {
		t.Errorf("companion Deployment: %s", dep)
	}
	if code, _, errOut := runCLI(t, "operator", "render", "--mode", "both"); code != exitUsage || !strings.Contains(errOut, `--mode: Invalid value: "both"`) {
		t.Errorf("--mode both: exit %d: %s", code, errOut)
	}
}

func TestOperatorCommandErrors(t *testing.T) {
	for _, k := range []string{"DRIVER_IMAGE", "NFS_DRIVER_IMAGE", "PROVISIONER_IMAGE", "SNAPSHOTTER_IMAGE", "RESIZER_IMAGE", "LIVENESS_PROBE_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE", "KUBE_RBAC_PROXY_IMAGE"} {
		t.Setenv(k, "")
	}
	t.Setenv("OS_CLOUD", "")
	tests := []struct {
		args []string
		code int
		err  string
	}{
		{[]string{"operator", "start"}, exitUsage, "manila-setup-operator was not found"},
		{[]string{"operator", "install", "--kubeconfig", "/nonexistent"}, exitUsage, "kubeconfig /nonexistent"},
		{[]string{"operator", "bogus"}, exitUsage, `unknown command "bogus"`},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(t, tt.args...)
		if code != tt.code || !strings.Contains(errOut, tt.err) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.err)
		}
	}
}

// TestCredentialsFromCloudsYAML: the command's wrapper of deploy.CredentialsFromCloudsYAML
// (whose output operator/deploy tests) gives a cloud that cannot be used exit 1.
func TestCredentialsFromCloudsYAML(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir+"/clouds.yaml", "clouds:\n  mine:\n    auth: {auth_url: \"https://k/v3\", username: u, password: pw, project_name: p}\n  other:\n    auth: {auth_url: \"https://o/v3\"}\n")
	if data, err := credentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "mine"); err != nil || len(data["clouds.yaml"]) == 0 {
		t.Errorf("a usable cloud: %v", err)
	}
	if _, err := credentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "nope"); exitCodeOf(err) != exitInvalid {
		t.Errorf("unknown cloud: %v", err)
	}
	if _, err := credentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "other"); exitCodeOf(err) != exitInvalid {
		t.Errorf("a cloud without credentials must be rejected: %v", err)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestOperatorBinaryLookup(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("PATH", dir)
	if _, err := operatorBinary(); err == nil || !strings.Contains(err.Error(), "make build") {
		t.Errorf("no operator binary anywhere: %v", err)
	}
	writeFile(t, dir+"/"+operatorBinaryName, "#!/bin/sh\n")
	if err := os.Chmod(dir+"/"+operatorBinaryName, 0o755); err != nil {
		t.Fatal(err)
	}
	if p, err := operatorBinary(); err != nil || p != dir+"/"+operatorBinaryName {
		t.Errorf("operator binary on $PATH: %q, %v", p, err)
	}
}

func TestOperatorStartArgs(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{nil, []string{}},
		{[]string{"--kubeconfig", "k", "-v"}, []string{"--kubeconfig", "k", "--v=3"}},
		{[]string{"-vv", "--namespace=x"}, []string{"--namespace=x", "--v=4"}},
		{[]string{"--verbose", "--v=6"}, []string{"--v=6"}},
		{[]string{"-", "--"}, []string{"-", "--"}},
	} {
		if got := operatorArgs(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("operatorArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
