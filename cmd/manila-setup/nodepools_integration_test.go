//go:build integration

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestNodePoolsCommands: `nodepools patch` and `nodepools list` on a HyperShift management
// cluster's apiserver: a dry run, the patch with its security-group warning, the list after,
// exit codes for what the user gets wrong.
func TestNodePoolsCommands(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	np := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(`{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"NodePool",
		"metadata":{"name":"hc1-workers","namespace":"clusters"},
		"spec":{"clusterName":"hc1","replicas":2,"management":{"upgradeType":"Replace"},"release":{"image":"quay.io/x/ocp-release:4.20.0"},
		"platform":{"type":"OpenStack","openstack":{"flavor":"m1.xlarge"}}}}`), &np.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dynamic.NewForConfigOrDie(api.Config).Resource(nodepools.GVR).Namespace("clusters").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const net, sg = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "77c0a1d2-1111-4111-8111-111111111111"
	base := []string{"--kubeconfig", kubeconfig, "nodepools"}

	code, out, _ := runCLI(t, append(base, "patch", "--network", net, "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "clusters/hc1-workers  would-patch  added network "+net) || !strings.Contains(out, "+  network:") || !strings.Contains(out, "Dry run: nothing was written.") {
		t.Errorf("dry run: exit %d\n%s", code, out)
	}
	code, out, errOut := runCLI(t, append(base, "patch", "--network", net, "--security-group", sg, "--hosted-cluster", "hc1")...)
	if code != exitOK || !strings.Contains(out, "clusters/hc1-workers  patched  added network "+net) || !strings.Contains(out, "1 NodePool(s) patched") ||
		!strings.Contains(errOut, "warning: NodePool clusters/hc1-workers: security groups "+sg+" were not added") {
		t.Errorf("patch: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append(base, "list")...)
	if code != exitOK || !strings.Contains(out, "clusters   hc1-workers  hc1             OpenStack  2         attached") {
		t.Errorf("list: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append(base, "patch", "--network", net, "--name", "clusters/hc1-workers", "--dry-run")...)
	if code != exitOK || !strings.Contains(out, "clusters/hc1-workers  unchanged") {
		t.Errorf("--name clusters/hc1-workers after the patch: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"patch", "--network", net, "--name", "hc1-workers"}, exitInvalid, `NodePool "hc1-workers": must be NAMESPACE/NAME`},
		{[]string{"patch", "--network", net, "--name", "clusters/nope"}, exitInvalid, "NodePool clusters/nope not found (there: clusters/hc1-workers)"},
		{[]string{"patch", "--network", net, "--name", "clusters/hc1-workers", "-f", "nodepools.yaml"}, exitUsage, "--name selects NodePools of the cluster"},
		{[]string{"patch"}, exitUsage, "--network is required"},
		{[]string{"patch", "--network", "not-a-uuid"}, exitInvalid, "not-a-uuid"},
		{[]string{"patch", "--network", net, "--hosted-cluster", "nope"}, exitInvalid, `no NodePool of HostedCluster "nope"`},
	} {
		code, _, errOut := runCLI(t, append(base, c.args...)...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s", c.args, code, c.code, c.want, errOut)
		}
	}
}
