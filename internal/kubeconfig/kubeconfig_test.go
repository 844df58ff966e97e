package kubeconfig

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeKubeconfig(t *testing.T, dir, name, server string, contexts ...string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  cluster: {server: '" + server + "/" + c + "'}\n")
	}
	b.WriteString("contexts:\n")
	for _, c := range contexts {
		b.WriteString("- name: " + c + "\n  context: {cluster: " + c + "}\n")
	}
	b.WriteString("current-context: " + contexts[0] + "\n")
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRESTConfig(t *testing.T) {
	dir := t.TempDir()
	a := writeKubeconfig(t, dir, "a", "https://a.example:6443", "ctx-a")
	b := writeKubeconfig(t, dir, "b", "https://b.example:6443", "ctx-b", "ctx-b2")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	cfg, err := RESTConfig(context.Background(), Options{Path: a, UserAgent: "manila-setup/test"})
	if err != nil || cfg.Host != "https://a.example:6443/ctx-a" || cfg.UserAgent != "manila-setup/test" || cfg.QPS != DefaultQPS || cfg.Burst != DefaultBurst {
		t.Fatalf("one file: %+v %v", cfg, err)
	}
	// A list as in $KUBECONFIG, and a context of the second file.
	cfg, err = RESTConfig(context.Background(), Options{Path: a + string(os.PathListSeparator) + b, Context: "ctx-b2"})
	if err != nil || cfg.Host != "https://b.example:6443/ctx-b2" {
		t.Fatalf("path list with a context: %+v %v", cfg, err)
	}
	// $KUBECONFIG when no path is given.
	t.Setenv("KUBECONFIG", b)
	if cfg, err = RESTConfig(context.Background(), Options{}); err != nil || cfg.Host != "https://b.example:6443/ctx-b" {
		t.Fatalf("$KUBECONFIG: %+v %v", cfg, err)
	}
	t.Setenv("KUBECONFIG", "")
	// Errors name the file and the context.
	if _, err := RESTConfig(context.Background(), Options{Path: a, Context: "nope"}); err == nil || !strings.Contains(err.Error(), "kubeconfig "+a+`, context "nope"`) {
		t.Errorf("unknown context: %v", err)
	}
	if _, err := RESTConfig(context.Background(), Options{Path: "/nonexistent/kubeconfig", InCluster: true}); err == nil || !strings.Contains(err.Error(), "kubeconfig /nonexistent/kubeconfig") {
		t.Errorf("a given path that does not exist must not fall back to the pod's account: %v", err)
	}
	if _, err := RESTConfig(context.Background(), Options{InCluster: true}); err == nil || !strings.Contains(err.Error(), "not running in a cluster") {
		t.Errorf("no file, not in a pod: %v", err)
	}
	raw, err := Raw(context.Background(), Options{Path: b})
	if err != nil || len(raw.Contexts) != 2 || raw.CurrentContext != "ctx-b" {
		t.Errorf("raw: %v %v", raw.Contexts, err)
	}
}

func TestDefaultPath(t *testing.T) {
	t.Setenv("KUBECONFIG", "/a"+string(os.PathListSeparator)+"/b")
	t.Setenv("HOME", "/home/admin")
	if got := DefaultPath(); got != "/a"+string(os.PathListSeparator)+"/b" {
		t.Errorf("$KUBECONFIG: %q", got)
	}
	if got := (Options{}).Paths(); len(got) != 2 || got[1] != "/b" {
		t.Errorf("paths of $KUBECONFIG: %q", got)
	}
	t.Setenv("KUBECONFIG", "")
	if got := DefaultPath(); got != "/home/admin/.kube/config" {
		t.Errorf("no $KUBECONFIG: %q", got)
	}
}
