//go:build integration

package nodepools

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// hostedCluster is an OpenStack HostedCluster as HyperShift's CRD accepts it; subnets, when
// given, are its spec.platform.openstack.subnets by ID.
func hostedCluster(name string, subnets ...string) *unstructured.Unstructured {
	openstack := map[string]any{"identityRef": map[string]any{"name": name + "-cloud-credentials", "cloudName": "openstack"}}
	if len(subnets) > 0 {
		var list []any
		for _, s := range subnets {
			list = append(list, map[string]any{"id": s})
		}
		openstack["subnets"] = list
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "HostedCluster",
		"metadata": map[string]any{"name": name, "namespace": "clusters"},
		"spec": map[string]any{
			"release":    map[string]any{"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
			"pullSecret": map[string]any{"name": name + "-pull-secret"},
			"etcd":       map[string]any{"managementType": "Managed", "managed": map[string]any{"storage": map[string]any{"type": "PersistentVolume"}}},
			"networking": map[string]any{"networkType": "OVNKubernetes",
				"clusterNetwork": []any{map[string]any{"cidr": "10.132.0.0/14"}}, "serviceNetwork": []any{map[string]any{"cidr": "172.31.0.0/16"}}},
			"services": []any{
				map[string]any{"service": "APIServer", "servicePublishingStrategy": map[string]any{"type": "LoadBalancer"}},
				map[string]any{"service": "Ignition", "servicePublishingStrategy": map[string]any{"type": "Route"}},
				map[string]any{"service": "Konnectivity", "servicePublishingStrategy": map[string]any{"type": "Route"}},
				map[string]any{"service": "OAuthServer", "servicePublishingStrategy": map[string]any{"type": "Route"}},
			},
			"platform": map[string]any{"type": "OpenStack", "openstack": openstack},
		},
	}}
}

// TestPatchNodePoolsPortSecurityAndSubnets: networks read from the loopback Neutron, NodePools
// and HostedClusters on a real apiserver serving HyperShift's CRDs.
//   - The port added on a network with port security disabled says portSecurityPolicy:
//     Disabled (security groups are never put on a NodePool's port, so none are refused); the
//     port on a network with port security says nothing of it; a second run writes nothing.
//   - The NodePools of a HostedCluster that sets spec.platform.openstack.subnets are refused,
//     with the HostedCluster, the field and the reason, and nothing at all is written.
func TestPatchNodePoolsPortSecurityAndSubnets(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := ostest.NewProject(t, testenv.NewCloud(t), "np-portsec")
	fit := func(cidr string) map[string]any {
		return map[string]any{"cidr": cidr, "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
	}
	off := p.CreateNetworkWith("np-no-port-sec", map[string]any{"port_security_enabled": false}, fit("10.65.0.0/24"))
	on := p.CreateNetworkWith("np-port-sec", nil, fit("10.66.0.0/24"))
	p.CreateShareNetwork("np-off", off.ID, off.SubnetIDs[0])
	p.CreateShareNetwork("np-on", on.ID, on.SubnetIDs[0])
	client, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	// As `nodepools patch --os-cloud` resolves them: NodePool ports take no security groups.
	nets, err := attach.ResolveNetworks(ctx, client, []string{off.ID, on.ID}, attach.NetworkPolicy{})
	if err != nil {
		t.Fatal(err)
	}
	opts := attach.Options{Attachment: nets.Attachment(nil), Checker: attach.NeutronChecker{Client: client}, By: "test"}

	api := testenv.NewAPIServer(t)
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	for _, hc := range []*unstructured.Unstructured{hostedCluster("hc1"), hostedCluster("byo", "2c4e6a8b-1d3f-4b5a-9c7e-0f1a2b3c4d5e")} {
		if _, err := dyn.Resource(HostedClusterGVR).Namespace("clusters").Create(ctx, hc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating HostedCluster %s: %v", hc.GetName(), err)
		}
	}
	for _, np := range []*unstructured.Unstructured{
		nodePool("hc1-workers", "hc1", "OpenStack"),
		nodePool("byo-workers", "byo", "OpenStack"),
		nodePool("byo-other", "byo", "None"),
	} {
		if _, err := dyn.Resource(GVR).Namespace("clusters").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NodePool %s: %v", np.GetName(), err)
		}
	}
	versions := func() string {
		l, err := dyn.Resource(GVR).Namespace("clusters").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range l.Items {
			out = append(out, u.GetName()+"@"+u.GetResourceVersion())
		}
		return strings.Join(out, " ")
	}

	before := versions()
	_, err = Patch(ctx, dyn, Scope{Namespace: "clusters"}, opts)
	var sel *attach.SelectionError
	if !errors.As(err, &sel) {
		t.Fatalf("NodePools of a HostedCluster with subnets: %v, want an attach.SelectionError", err)
	}
	for _, w := range []string{"HostedCluster clusters/byo sets spec.platform.openstack.subnets", "silently ignore the storage port of NodePool clusters/byo-workers\n", "nothing was patched"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the refusal lacks %q:\n%v", w, err)
		}
	}
	if after := versions(); after != before {
		t.Errorf("the refusal wrote: %s -> %s", before, after)
	}

	results, err := Patch(ctx, dyn, Scope{HostedCluster: "hc1"}, opts)
	if err != nil || len(results) != 1 || results[0].Action != attach.ActionPatched {
		t.Fatalf("hc1: %v, %+v", err, results)
	}
	u, err := dyn.Resource(GVR).Namespace("clusters").Get(ctx, "hc1-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ports, _, _ := unstructured.NestedSlice(u.Object, "spec", "platform", "openstack", "additionalPorts")
	policy := map[string]any{}
	for _, port := range ports {
		m, _ := port.(map[string]any)
		id, _, _ := unstructured.NestedString(m, "network", "id")
		policy[neutronid.Key(id)] = m["portSecurityPolicy"]
	}
	if want := fmt.Sprint(map[string]any{neutronid.Key(off.ID): "Disabled", neutronid.Key(on.ID): nil}); fmt.Sprint(policy) != want {
		t.Errorf("portSecurityPolicy by network: %v, want %s", policy, want)
	}

	before = versions()
	again, err := Patch(ctx, dyn, Scope{HostedCluster: "hc1"}, opts)
	if err != nil || again[0].Action != attach.ActionUnchanged || again[0].Warning != "" {
		t.Errorf("second run: %v, %+v", err, again)
	}
	if after := versions(); after != before {
		t.Errorf("the second run wrote: %s -> %s", before, after)
	}
}
