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
// added by hand gets the storage port, then patch --remove (HyperShift would replace the nodes
// at once): refused while its hosted cluster cannot be read (no HostedCluster, then none
// published), shown by --dry-run; with the hosted cluster's apiserver published as HyperShift
// does, refused while a pod on the NodePool's node uses a Manila volume, naming it, and done
// without --force once the pod runs on another NodePool's node (the hand-added port stays,
// the record goes); unchanged the second time. The same
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

	// The hosted cluster cannot be read: refused, saying why, until --force.
	out := cli(exitInvalid, "--remove")
	if !strings.Contains(out, "refusing to remove the storage network: it replaces the machines of the objects below") || !strings.Contains(out, "NodePool clusters/hc1-workers (HostedCluster hc1): removed network "+net) ||
		!strings.Contains(out, `its hosted cluster could not be read: reading HostedCluster clusters/hc1: hostedclusters.hypershift.openshift.io "hc1" not found`) || !strings.Contains(out, "--force") {
		t.Errorf("refusal without a HostedCluster:\n%s", out)
	}
	out = cli(exitOK, "--remove", "--dry-run")
	if !strings.Contains(out, "clusters/hc1-workers  would-patch  removed network "+net) || !strings.Contains(out, "-    id: "+net) || strings.Contains(out, "-    id: "+hand) {
		t.Errorf("--remove --dry-run:\n%s", out)
	}
	out = cli(exitInvalid, "--remove", "--network", hand, "--force")
	if !strings.Contains(out, `--network[0]: Invalid value: "`+hand+`"`) {
		t.Errorf("--remove --network of the user's:\n%s", out)
	}
	hc := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(`{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"HostedCluster","metadata":{"name":"hc1","namespace":"clusters"},
		"spec":{"release":{"image":"quay.io/x/ocp-release:4.20.0"},"pullSecret":{"name":"ps"},
		"etcd":{"managementType":"Managed","managed":{"storage":{"type":"PersistentVolume"}}},
		"networking":{"networkType":"OVNKubernetes","clusterNetwork":[{"cidr":"10.132.0.0/14"}],"serviceNetwork":[{"cidr":"172.31.0.0/16"}]},
		"services":[{"service":"APIServer","servicePublishingStrategy":{"type":"LoadBalancer"}},{"service":"Ignition","servicePublishingStrategy":{"type":"Route"}},
			{"service":"Konnectivity","servicePublishingStrategy":{"type":"Route"}},{"service":"OAuthServer","servicePublishingStrategy":{"type":"Route"}}],
		"platform":{"type":"OpenStack","openstack":{"identityRef":{"name":"creds","cloudName":"openstack"}}}}}`), &hc.Object); err != nil {
		t.Fatal(err)
	}
	clusters := dynamic.NewForConfigOrDie(api.Config).Resource(nodepools.HostedClusterGVR).Namespace("clusters")
	if hc, err = clusters.Create(ctx, hc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out := cli(exitInvalid, "--remove"); !strings.Contains(out, "HostedCluster clusters/hc1 has no status.kubeconfig yet") {
		t.Errorf("refusal before the hosted cluster's API is published:\n%s", out)
	}

	// The hosted cluster: an apiserver of its own, its admin kubeconfig in the Secret the
	// HostedCluster's status names, as HyperShift publishes it; a node of the NodePool with a
	// pod on a Manila volume, and a node of another NodePool.
	hosted := testenv.NewAPIServer(t)
	hostedKubeconfig, err := hosted.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	kcData, err := os.ReadFile(hostedKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Secrets("clusters").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hc1-admin-kubeconfig"},
		Data: map[string][]byte{"kubeconfig": kcData}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(hc.Object, "hc1-admin-kubeconfig", "status", "kubeconfig", "name")
	if _, err := clusters.UpdateStatus(ctx, hc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, pool := range map[string]string{"hc1-workers-7xk2p": "hc1-workers", "hc1-infra-q8w4n": "hc1-infra"} {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"hypershift.openshift.io/nodePool": pool}}}
		if _, err := hosted.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	manilaVolumeInUse(t, ctx, hosted.Client, "hc1-workers-7xk2p")
	out = cli(exitInvalid, "--remove")
	if !strings.Contains(out, "refusing to replace the machines of 1 node(s) while pods on them use Manila volumes") ||
		!strings.Contains(out, "pod default/app on node hc1-workers-7xk2p in HostedCluster clusters/hc1 (claim default/data, PersistentVolume manila-pv)") ||
		strings.Contains(out, "apiVersion") || strings.Contains(out, "certificate-authority-data") {
		t.Errorf("refusal with a pod on a Manila volume in the hosted cluster:\n%s", out)
	}
	// --force removes anyway, saying which pod it cuts off, as for every other kind.
	if out := cli(exitOK, "--remove", "--force"); !strings.Contains(out, "warning: --force: replacing the machine of node hc1-workers-7xk2p although a pod there uses a Manila volume: pod default/app") {
		t.Errorf("--remove --force with a pod on a Manila volume:\n%s", out)
	}
	cli(exitOK, "--network", net)
	// The pod moves to a node of another NodePool: nothing in the way, no --force needed.
	if err := hosted.Client.CoreV1().Pods("default").Delete(ctx, "app", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if _, err := hosted.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app-moved", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "hc1-infra-q8w4n", Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, append(base, "--remove", "-o", "json")...)
	var results []attach.Result
	if err := json.Unmarshal([]byte(stdout), &results); code != exitOK || err != nil || len(results) != 1 || strings.Join(results[0].RemovedNetworks, ",") != net ||
		!strings.Contains(stderr, "checked: no pod on the nodes of 1 NodePool(s) uses a Manila volume") {
		t.Fatalf("--remove -o json once the hosted cluster's pods are off the NodePool: exit %d %v\n%s%s", code, err, stdout, stderr)
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
