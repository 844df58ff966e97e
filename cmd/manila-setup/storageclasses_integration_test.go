//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/internal/testenv"
)

// `storageclasses check` against a real API server and the loopback Manila: a class with the
// documentation's nfs-ShareClient, one naming a Secret that does not exist, one with a share
// type Manila does not offer, and a correct one; exit 1 naming each bad one, nothing written.
func TestStorageClassesCheck(t *testing.T) {
	testenv.NewCloud(t) // sets OS_CLIENT_CONFIG_FILE and OS_CLOUD for the command
	api := testenv.NewAPIServer(t)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := api.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-secrets"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	params := func(edit func(map[string]string)) map[string]string {
		p := map[string]string{"type": "default", "nfs-shareClient": "10.196.0.0/16"} // a seeded share type
		for _, s := range []string{"provisioner", "node-stage", "node-publish", "controller-expand"} {
			p["csi.storage.k8s.io/"+s+"-secret-name"] = "csi-manila-secrets"
			p["csi.storage.k8s.io/"+s+"-secret-namespace"] = "default"
		}
		edit(p)
		return p
	}
	for name, edit := range map[string]func(map[string]string){
		"docs-example": func(p map[string]string) { p["nfs-ShareClient"] = p["nfs-shareClient"]; delete(p, "nfs-shareClient") },
		"no-secret":    func(p map[string]string) { p["csi.storage.k8s.io/node-stage-secret-name"] = "nope" },
		"gold":         func(p map[string]string) { p["type"] = "gold" },
		"fine":         func(map[string]string) {},
	} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "manila.csi.openstack.org", Parameters: params(edit)}
		if _, err := api.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "--kubeconfig", kubeconfig, "storageclasses", "check", "--machine-network", "10.196.0.0/16")
	t.Logf("$ manila-setup storageclasses check\n%s%s", out, errOut)
	if code != exitInvalid {
		t.Errorf("exit %d, want %d", code, exitInvalid)
	}
	for _, want := range []string{"docs-example nfs-ShareClient: the driver ignores this key: parameter keys are case-sensitive; spell it nfs-shareClient",
		"docs-example nfs-shareClient: not set", "no-secret csi.storage.k8s.io/node-stage-secret-name: Secret default/nope does not exist",
		`gold type: Manila offers no share type "gold"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "fine ") {
		t.Errorf("a correct class reported:\n%s", out)
	}

	code, out, _ = runCLI(t, "--kubeconfig", kubeconfig, "-o", "json", "storageclasses", "check", "--machine-network", "10.196.0.0/16")
	var report storageClassesReport
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitInvalid || len(report.Checked) != 4 || len(report.Findings) != 4 {
		t.Errorf("-o json: exit %d, %d checked, %d findings (%v)\n%s", code, len(report.Checked), len(report.Findings), err, out)
	}
	writes, err := api.Writes(testenv.ByUserAgent("manila-setup/")) // the CLI, not this test binary
	if err != nil || len(writes) != 0 {
		t.Errorf("the check wrote: %v %v", writes, err)
	}

	// Fixed: exit 0.
	for _, name := range []string{"docs-example", "no-secret", "gold"} {
		_ = api.Client.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{})
	}
	if code, out, errOut := runCLI(t, "--kubeconfig", kubeconfig, "storageclasses", "check", "--machine-network", "10.196.0.0/16"); code != exitOK || !strings.Contains(out, "1 Manila StorageClasses checked (fine): nothing wrong") {
		t.Errorf("after the fixes: exit %d\n%s%s", code, out, errOut)
	}
}
