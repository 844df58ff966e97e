//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestNodePoolsRemove: on a management cluster's apiserver, a NodePool with a port the user
// added by hand gets the storage port, then patch --remove: refused without --force (HyperShift
// would replace the nodes and their pods are out of sight), shown by --dry-run, done with
// --force (the hand-added port stays, the record goes), unchanged the second time. The same
// NodePool's file goes there and back with -f, byte for byte.
func TestNodePoolsRemove(t *testing.T) {
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
	const net, hand = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	doc := `apiVersion: hypershift.openshift.io/v1beta1
kind: NodePool
metadata:
  name: hc1-workers
  namespace: clusters
spec:
  clusterName: hc1 # production
  replicas: 2
  management:
    upgradeType: Replace
  release:
    image: quay.io/x/ocp-release:4.20.0
  platform:
    type: OpenStack
    openstack:
      flavor: m1.xlarge
      additionalPorts:
      - network:
          id: ` + hand + `
        vnicType: direct
`
	np := &unstructured.Unstructured{}
	if err := json.Unmarshal(yamlToJSON(t, doc), &np.Object); err != nil {
		t.Fatal(err)
	}
	pools := dynamic.NewForConfigOrDie(api.Config).Resource(nodepools.GVR).Namespace("clusters")
	if _, err := pools.Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	base := []string{"--kubeconfig", kubeconfig, "nodepools", "patch"}
	cli := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runCLI(t, append(base, args...)...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	cli(exitOK, "--network", net)

	out := cli(exitInvalid, "--remove")
	if !strings.Contains(out, "refusing to remove the storage network from 1 NodePool(s)") || !strings.Contains(out, "NodePool clusters/hc1-workers (HostedCluster hc1): removed network "+net) || !strings.Contains(out, "--force") {
		t.Errorf("refusal:\n%s", out)
	}
	out = cli(exitOK, "--remove", "--dry-run")
	if !strings.Contains(out, "clusters/hc1-workers  would-patch  removed network "+net) || !strings.Contains(out, "-    id: "+net) || strings.Contains(out, "-    id: "+hand) {
		t.Errorf("--remove --dry-run:\n%s", out)
	}
	out = cli(exitInvalid, "--remove", "--network", hand, "--force")
	if !strings.Contains(out, `--network[0]: Invalid value: "`+hand+`"`) {
		t.Errorf("--remove --network of the user's:\n%s", out)
	}
	code, stdout, _ := runCLI(t, append(base, "--remove", "--force", "-o", "json")...)
	var results []attach.Result
	if err := json.Unmarshal([]byte(stdout), &results); code != exitOK || err != nil || len(results) != 1 || strings.Join(results[0].RemovedNetworks, ",") != net {
		t.Fatalf("--remove --force -o json: exit %d %v\n%s", code, err, stdout)
	}
	got, err := pools.Get(ctx, "hc1-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(got.Object, "spec", "platform", "openstack", "additionalPorts")
	if b, _ := json.Marshal(ports); len(ports) != 1 || !strings.Contains(string(b), hand) {
		t.Errorf("additionalPorts after the removal: %s", b)
	}
	if _, ok := got.GetAnnotations()[attach.Annotation]; ok {
		t.Errorf("the record is left: %v", got.GetAnnotations())
	}
	if out := cli(exitOK, "--remove"); !strings.Contains(out, "clusters/hc1-workers  unchanged  no attachment record") {
		t.Errorf("second removal:\n%s", out)
	}

	// The file form: there and back, byte for byte, with --in-place.
	file := filepath.Join(t.TempDir(), "nodepools.yaml")
	if err := os.WriteFile(file, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	cli(exitOK, "-f", file, "--network", net, "--in-place")
	out = cli(exitOK, "-f", file, "--remove", "--in-place")
	if b, _ := os.ReadFile(file); string(b) != doc || !strings.Contains(out, "clusters/hc1-workers  patched  removed network "+net) {
		t.Errorf("-f there and back:\n%s\n%s", b, out)
	}
}

func yamlToJSON(t *testing.T, doc string) []byte {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return b
}
