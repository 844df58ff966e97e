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

	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestNodePoolsPatchPortSecurityAndSubnets: `nodepools patch --os-cloud` with a storage network
// whose port security is disabled in the loopback Neutron writes portSecurityPolicy: Disabled
// on the port and says so; the NodePools of a HostedCluster that sets
// spec.platform.openstack.subnets are refused (exit 1) with the reason, on the cluster and in a
// file, and nothing is written.
func TestNodePoolsPatchPortSecurityAndSubnets(t *testing.T) {
	ctx := context.Background()
	p := ostest.NewProject(t, testenv.NewCloud(t), "cli-np-portsec")
	off := p.CreateNetworkWith("cli-np-no-port-sec", map[string]any{"port_security_enabled": false},
		map[string]any{"cidr": "10.67.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	p.CreateShareNetwork("cli-np-off", off.ID, off.SubnetIDs[0])

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
	dyn := dynamic.NewForConfigOrDie(api.Config)
	create := func(gvrName string, doc string) {
		t.Helper()
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		gvr := nodepools.GVR
		if gvrName == "hostedclusters" {
			gvr = nodepools.HostedClusterGVR
		}
		if _, err := dyn.Resource(gvr).Namespace("clusters").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s: %v", u.GetName(), err)
		}
	}
	const byo = `{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"HostedCluster","metadata":{"name":"byo","namespace":"clusters"},
		"spec":{"release":{"image":"quay.io/x/ocp-release:4.20.0"},"pullSecret":{"name":"ps"},
		"etcd":{"managementType":"Managed","managed":{"storage":{"type":"PersistentVolume"}}},
		"networking":{"networkType":"OVNKubernetes","clusterNetwork":[{"cidr":"10.132.0.0/14"}],"serviceNetwork":[{"cidr":"172.31.0.0/16"}]},
		"services":[{"service":"APIServer","servicePublishingStrategy":{"type":"LoadBalancer"}},{"service":"Ignition","servicePublishingStrategy":{"type":"Route"}},
			{"service":"Konnectivity","servicePublishingStrategy":{"type":"Route"}},{"service":"OAuthServer","servicePublishingStrategy":{"type":"Route"}}],
		"platform":{"type":"OpenStack","openstack":{"identityRef":{"name":"creds","cloudName":"openstack"},"subnets":[{"id":"2c4e6a8b-1d3f-4b5a-9c7e-0f1a2b3c4d5e"}]}}}}`
	pool := func(name, cluster string) string {
		return `{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"NodePool","metadata":{"name":"` + name + `","namespace":"clusters"},
		"spec":{"clusterName":"` + cluster + `","replicas":2,"management":{"upgradeType":"Replace"},"release":{"image":"quay.io/x/ocp-release:4.20.0"},
		"platform":{"type":"OpenStack","openstack":{"flavor":"m1.xlarge"}}}}`
	}
	create("hostedclusters", byo)
	create("nodepools", pool("hc1-workers", "hc1"))
	create("nodepools", pool("byo-workers", "byo"))
	base := []string{"--kubeconfig", kubeconfig, "--os-cloud", ostest.CloudName, "--os-client-config-file", p.CloudsFile, "nodepools", "patch", "--network", off.ID}

	code, out, errOut := runCLI(t, append(base, "--hosted-cluster", "hc1")...)
	if code != exitOK || !strings.Contains(errOut, "note: network "+off.ID+" has port security disabled") {
		t.Fatalf("patch hc1: exit %d\n%s\n%s", code, out, errOut)
	}
	u, err := dyn.Resource(nodepools.GVR).Namespace("clusters").Get(ctx, "hc1-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "platform", "openstack", "additionalPorts")
	if len(ports) != 1 || ports[0].(map[string]any)["portSecurityPolicy"] != "Disabled" {
		t.Errorf("additionalPorts of hc1-workers: %v, want one port with portSecurityPolicy: Disabled", ports)
	}

	const refusal = "HostedCluster clusters/byo sets spec.platform.openstack.subnets: HyperShift uses a NodePool's spec.platform.openstack.additionalPorts only when its HostedCluster sets no subnets"
	before, _ := dyn.Resource(nodepools.GVR).Namespace("clusters").Get(ctx, "byo-workers", metav1.GetOptions{})
	code, out, errOut = runCLI(t, base...)
	if code != exitInvalid || !strings.Contains(errOut, refusal) || !strings.Contains(errOut, "NodePool clusters/byo-workers") || strings.Contains(out, "patched") {
		t.Errorf("patch of every NodePool: exit %d, want %d\n%s\n%s", code, exitInvalid, out, errOut)
	}
	after, _ := dyn.Resource(nodepools.GVR).Namespace("clusters").Get(ctx, "byo-workers", metav1.GetOptions{})
	if before.GetResourceVersion() != after.GetResourceVersion() {
		t.Errorf("the refusal wrote NodePool byo-workers")
	}

	file := filepath.Join(t.TempDir(), "byo.yaml")
	if err := os.WriteFile(file, []byte(byo+"\n---\n"+pool("byo-workers", "byo")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, append(base, "-f", file, "--in-place")...)
	data, _ := os.ReadFile(file)
	if code != exitInvalid || !strings.Contains(errOut, refusal) || strings.Contains(string(data), "additionalPorts") {
		t.Errorf("patch -f: exit %d, want %d\n%s\n%s\nfile:\n%s", code, exitInvalid, out, errOut, data)
	}
}
