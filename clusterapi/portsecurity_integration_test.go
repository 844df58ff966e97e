//go:build integration

package clusterapi

import (
	"context"
	"errors"
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

// storagePort returns the port on network id of the template a set points at now, nil if none.
func storagePort(t *testing.T, dyn dynamic.Interface, set, id string) map[string]any {
	t.Helper()
	name, _, _ := unstructured.NestedString(get(t, dyn, MachineSetGVR, set).Object, "spec", "template", "spec", "infrastructureRef", "name")
	ports, _, _ := unstructured.NestedSlice(get(t, dyn, TemplateGVR, name).Object, "spec", "template", "spec", "ports")
	for _, p := range ports {
		port, _ := p.(map[string]any)
		if nid, _, _ := unstructured.NestedString(port, "network", "id"); neutronid.Equal(nid, id) {
			return port
		}
	}
	return nil
}

// TestPatchPortSecurityOff: networks read from the loopback Neutron, Cluster API sets on a real
// apiserver serving CAPO's CRD. The port added on a network with port security disabled says
// disablePortSecurity: true and has no security groups, also when the template gives the
// machine security groups of its own (CAPO leaves them off such a port); security groups
// asked on it are refused before anything is written; the port on a network with port
// security says nothing of it; a second run writes nothing.
func TestPatchPortSecurityOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	p := ostest.NewProject(t, testenv.NewCloud(t), "capi-portsec")
	fit := func(cidr string) map[string]any {
		return map[string]any{"cidr": cidr, "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
	}
	off := p.CreateNetworkWith("capi-no-port-sec", map[string]any{"port_security_enabled": false}, fit("10.63.0.0/24"))
	on := p.CreateNetworkWith("capi-port-sec", nil, fit("10.64.0.0/24"))
	p.CreateShareNetwork("capi-off", off.ID, off.SubnetIDs[0])
	p.CreateShareNetwork("capi-on", on.ID, on.SubnetIDs[0])
	group := p.CreateSecurityGroup("capi-nfs", true)
	client, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	options := func(ids, groups []string) (attach.Options, error) {
		nets, err := attach.ResolveNetworks(ctx, client, ids, attach.NetworkPolicy{SecurityGroups: len(groups) > 0})
		return attach.Options{Attachment: nets.Attachment(groups), Checker: attach.NeutronChecker{Client: client}, By: "test"}, err
	}

	api := testenv.NewAPIServer(t)
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	create(t, dyn, TemplateGVR, template("workers-off", []any{map[string]any{"network": map[string]any{"id": machineNet}}}, []any{map[string]any{"id": nodeGroup}}))
	create(t, dyn, TemplateGVR, template("workers-on", nil, nil))
	create(t, dyn, MachineSetGVR, set(KindMachineSet, "ms-off", TemplateKind, "workers-off", nil))
	create(t, dyn, MachineSetGVR, set(KindMachineSet, "ms-on", TemplateKind, "workers-on", nil))

	_, err = options([]string{off.ID}, []string{group})
	var refused *attach.NetworkPolicyError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Finding == nil || refused.Problems[0].Finding.ID != attach.FindingPortSecurityOff {
		t.Fatalf("security groups on a network without port security: %v, want the %s refusal", err, attach.FindingPortSecurityOff)
	}

	opts, err := options([]string{off.ID}, nil)
	if err != nil {
		t.Fatal(err)
	}
	offScope := Scope{Namespace: ns, Names: []string{"ms-off"}}
	if report, err := Patch(ctx, dyn, offScope, opts); err != nil || report.Results[0].Action != attach.ActionPatched {
		t.Fatalf("patch: %v, %+v", err, report)
	}
	port := storagePort(t, dyn, "ms-off", off.ID)
	if port["disablePortSecurity"] != true || port["securityGroups"] != nil {
		t.Errorf("port on the network without port security: %v, want disablePortSecurity: true and no securityGroups", port)
	}

	withOn, err := options([]string{on.ID}, []string{group})
	if err != nil || len(withOn.Attachment.PortSecurityDisabled) != 0 {
		t.Fatalf("port security on, groups asked: %v, %+v", err, withOn.Attachment)
	}
	if _, err := Patch(ctx, dyn, Scope{Namespace: ns, Names: []string{"ms-on"}}, withOn); err != nil {
		t.Fatal(err)
	}
	if port := storagePort(t, dyn, "ms-on", on.ID); port == nil || port["disablePortSecurity"] != nil {
		t.Errorf("port on the network with port security: %v, want one without disablePortSecurity", port)
	}

	before := get(t, dyn, MachineSetGVR, "ms-off").GetResourceVersion()
	again, err := Patch(ctx, dyn, offScope, opts)
	if err != nil || again.Results[0].Action != attach.ActionUnchanged || again.Results[0].Warning != "" {
		t.Errorf("second run: %v, %+v", err, again)
	}
	if after := get(t, dyn, MachineSetGVR, "ms-off").GetResourceVersion(); after != before {
		t.Errorf("second run wrote: resourceVersion %s -> %s", before, after)
	}
}
