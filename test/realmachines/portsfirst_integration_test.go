//go:build integration

package realmachines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/extensions/trunks"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/test/testenv/machineapi"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestRealMachinesPortsFirstKeepTheirPrimaryNIC: a hand-made MachineSet whose primary NIC is a
// ports[] entry (as SR-IOV and DPDK workers are written: no networks[], a fixed IP on the
// machine subnet, the spec's trunk on). `machinesets patch` adds the storage network as a
// ports[] entry after it, and the rollout's new server, made by the real Machine API, has the
// machine network as its first NIC (Nova's addresses, in the order the server got its ports),
// the storage port second, without allowed address pairs, not a trunk parent, with the group
// asked for. Before, the storage network went to networks[], whose ports the provider makes
// first: the storage port would have been the primary NIC. (A ports[] entry without its own
// trunk flag takes the spec's: the storage port was a trunk parent until the entry said
// trunk: false.)
func TestRealMachinesPortsFirstKeepTheirPrimaryNIC(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p, _, cl, mc, cli := realMachinesCluster(t, ctx, "portsfirst", machineapi.ClusterOptions{Workers: 1})
	storage := p.CreateNetworkWith("pf-storage", nil, map[string]any{"cidr": "10.79.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}})
	nfs := p.CreateSecurityGroup("pf-nfs", true)

	var spec map[string]any
	if err := json.Unmarshal([]byte(machinectl.WorkerProviderSpec(cl.InfraID, "nova")), &spec); err != nil {
		t.Fatal(err)
	}
	delete(spec, "networks")
	spec["ports"] = []any{map[string]any{
		"networkID": cl.Cloud.NetworkID, "nameSuffix": "nodes",
		"fixedIPs":            []any{map[string]any{"subnetID": cl.Cloud.SubnetID}},
		"allowedAddressPairs": []any{map[string]any{"ipAddress": machineapi.APIVIP}, map[string]any{"ipAddress": machineapi.IngressVIP}},
	}}
	raw, _ := json.Marshal(spec)
	set := cl.InfraID + "-worker-dpdk"
	if _, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Create(ctx, machinectl.MachineSet(cl.InfraID, "worker", set, 1, string(raw)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cl.WaitReady(ctx, set, 1, 8*time.Minute); err != nil {
		t.Fatalf("the ports-first MachineSet: %v\nmachine-api-openstack log:\n%s", err, cl.Log(30))
	}

	out := cli.must(t, 0, "machinesets", "patch", "--name", set, "--network", storage.ID, "--security-group", nfs, "--force")
	if !strings.Contains(out, "added network "+storage.ID) {
		t.Fatalf("patch: %s", out)
	}
	ms, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Get(ctx, set, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var patched map[string]any
	_ = json.Unmarshal(ms.Spec.Template.Spec.ProviderSpec.Value.Raw, &patched)
	if _, ok := patched["networks"]; ok {
		t.Errorf("the patch wrote networks[] into a ports-first providerSpec: %s", ms.Spec.Template.Spec.ProviderSpec.Value.Raw)
	}
	start := time.Now()
	cli.must(t, 0, "machinesets", "rollout", "--name", set, "--poll-interval", "1s", "--timeout", "8m")
	t.Logf("rollout of the ports-first MachineSet in %s", time.Since(start).Round(time.Second))

	live := liveMachines(t, ctx, mc, set)
	if len(live) != 1 {
		t.Fatalf("%d Machines after the rollout, want 1", len(live))
	}
	id, ps := serverPorts(t, ctx, cl, live[0])
	order := serverNetworkOrder(t, ctx, cl.Clients.Compute, id)
	machineNet, storageNet := cl.InfraID+"-openshift", "pf-storage"
	if len(order) != 2 || order[0] != machineNet || order[1] != storageNet {
		t.Errorf("server %s: its NICs by network, in order: %v; want %s first (the primary), then %s", id, order, machineNet, storageNet)
	}
	var sp *ports.Port
	for i := range ps {
		if ps[i].NetworkID == storage.ID {
			sp = &ps[i]
		}
	}
	if sp == nil {
		t.Fatalf("server %s has no port on the storage network: %+v", id, ps)
	}
	if len(sp.AllowedAddressPairs) != 0 || !slices.Equal(sp.SecurityGroups, []string{nfs}) || !strings.HasSuffix(sp.Name, "-manila-"+storage.ID[:8]) {
		t.Errorf("storage port %s (%s): allowed address pairs %v, security groups %v; want none and [%s]", sp.ID, sp.Name, sp.AllowedAddressPairs, sp.SecurityGroups, nfs)
	}
	pages, err := trunks.List(cl.Clients.Network, trunks.ListOpts{PortID: sp.ID}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tr, _ := trunks.ExtractTrunks(pages); len(tr) != 0 {
		t.Errorf("the storage port %s is the parent of trunk %s: the spec's trunk applies to its primary port only", sp.ID, tr[0].ID)
	}
	t.Logf("server %s: NICs %v; storage port %s: groups %v, no address pairs, no trunk", id, order, sp.Name, sp.SecurityGroups)

	// --remove takes the ports[] entry back: the providerSpec is as it was.
	cli.must(t, 0, "machinesets", "patch", "--name", set, "--remove")
	ms, err = mc.MachineV1beta1().MachineSets(machinectl.Namespace).Get(ctx, set, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ms.Spec.Template.Spec.ProviderSpec.Value.Raw); !jsonEqual(got, string(raw)) {
		t.Errorf("after --remove the providerSpec is\n%s\nwant\n%s", got, raw)
	}
}

// serverNetworkOrder returns the network names of a server's addresses in the order Nova lists
// them: the order of its NICs (Nova's network info, which keeps the order the ports were given
// to the server in). Read from the raw JSON, whose object keys keep that order.
func serverNetworkOrder(t *testing.T, ctx context.Context, compute *gophercloud.ServiceClient, id string) []string {
	t.Helper()
	resp, err := compute.Get(ctx, compute.ServiceURL("servers", id), nil, &gophercloud.RequestOpts{KeepResponseBody: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Server struct {
			Addresses json.RawMessage `json:"addresses"`
		} `json:"server"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(doc.Server.Addresses))
	var names []string
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("server %s: addresses %s", id, doc.Server.Addresses)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, fmt.Sprint(tok))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
