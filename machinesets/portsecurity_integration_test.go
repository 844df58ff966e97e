//go:build integration

package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// portSecurityCloud is a project of the loopback cloud with two storage networks Manila has
// share networks on (so that the policy takes them), one with port security disabled and one
// with it enabled, and a security group.
type portSecurityCloud struct {
	client  *openstack.Client
	off, on string
	group   string
}

func newPortSecurityCloud(t *testing.T, ctx context.Context, prefix string) portSecurityCloud {
	t.Helper()
	p := ostest.NewProject(t, testenv.NewCloud(t), prefix)
	fit := func(cidr string) map[string]any {
		return map[string]any{"cidr": cidr, "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
	}
	off := p.CreateNetworkWith(prefix+"-no-port-sec", map[string]any{"port_security_enabled": false}, fit("10.61.0.0/24"))
	on := p.CreateNetworkWith(prefix+"-port-sec", nil, fit("10.62.0.0/24"))
	p.CreateShareNetwork(prefix+"-off", off.ID, off.SubnetIDs[0])
	p.CreateShareNetwork(prefix+"-on", on.ID, on.SubnetIDs[0])
	client, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	return portSecurityCloud{client: client, off: off.ID, on: on.ID, group: p.CreateSecurityGroup(prefix+"-nfs", true)}
}

// options resolves ids as the patch commands do with --os-cloud, groups asked or not.
func (c portSecurityCloud) options(ctx context.Context, ids, groups []string) (attach.Options, error) {
	nets, err := attach.ResolveNetworks(ctx, c.client, ids, attach.NetworkPolicy{SecurityGroups: len(groups) > 0})
	return attach.Options{Attachment: nets.Attachment(groups), Checker: attach.NeutronChecker{Client: c.client}, By: "test"}, err
}

// storageEntries returns the networks[] entries of a MachineSet's template, by uuid.
func storageEntries(t *testing.T, c *corpusCluster, name string) map[string]map[string]any {
	t.Helper()
	var spec struct {
		Networks []map[string]any `json:"networks"`
	}
	if err := json.Unmarshal(templateProviderSpec(c.get(t, name)), &spec); err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, n := range spec.Networks {
		if id, _ := n["uuid"].(string); id != "" {
			out[id] = n
		}
	}
	return out
}

// TestPatchPortSecurityOff: networks read from the loopback Neutron, MachineSets on a real
// apiserver. A network with port security disabled, attached without security groups, gets
// portSecurity: false on its entry; with security groups it is refused before anything is
// written; a network with port security gets no such field; a second run writes nothing.
func TestPatchPortSecurityOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cloud := newPortSecurityCloud(t, ctx, "ms-portsec")
	c := newCorpusCluster(t)

	_, err := cloud.options(ctx, []string{cloud.off}, []string{cloud.group})
	var refused *attach.NetworkPolicyError
	if !errors.As(err, &refused) || len(refused.Problems) != 1 || refused.Problems[0].Finding == nil || refused.Problems[0].Finding.ID != attach.FindingPortSecurityOff {
		t.Fatalf("security groups on a network without port security: %v, want the %s refusal", err, attach.FindingPortSecurityOff)
	}

	opts, err := cloud.options(ctx, []string{cloud.off}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sel := Selection{Names: []string{"ostest-worker-0"}}
	if results, err := Patch(ctx, c.mc, sel, opts); err != nil || results[0].Action != attach.ActionPatched {
		t.Fatalf("patch: %v, %+v", err, results)
	}
	entry := storageEntries(t, c, "ostest-worker-0")[cloud.off]
	if entry["portSecurity"] != false || entry["noAllowedAddressPairs"] != true {
		t.Errorf("entry of the network without port security: %v, want portSecurity: false and noAllowedAddressPairs: true", entry)
	}
	rec := attach.RecordIn(c.get(t, "ostest-worker-0").Annotations)
	if rec == nil || len(rec.PortSecurityDisabled) != 1 || rec.PortSecurityDisabled[0] != cloud.off {
		t.Errorf("record %+v", rec)
	}

	// A network with port security, with security groups: taken, and written without the flag.
	withOn, err := cloud.options(ctx, []string{cloud.on}, []string{cloud.group})
	if err != nil || len(withOn.Attachment.PortSecurityDisabled) != 0 {
		t.Fatalf("port security on, groups asked: %v, %+v", err, withOn.Attachment)
	}
	if _, err := Patch(ctx, c.mc, Selection{Names: []string{"ostest-worker-1"}}, withOn); err != nil {
		t.Fatal(err)
	}
	if entry := storageEntries(t, c, "ostest-worker-1")[cloud.on]; entry == nil || entry["portSecurity"] != nil {
		t.Errorf("entry of the network with port security: %v, want one without portSecurity", entry)
	}

	c.counter.reset()
	before := c.get(t, "ostest-worker-0").ResourceVersion
	again, err := Patch(ctx, c.mc, sel, opts)
	if err != nil || again[0].Action != attach.ActionUnchanged || again[0].Warning != "" {
		t.Errorf("second run: %v, %+v", err, again)
	}
	if after := c.get(t, "ostest-worker-0").ResourceVersion; after != before || c.counter.get("PATCH machinesets") != 0 {
		t.Errorf("second run wrote: resourceVersion %s -> %s, requests %s", before, after, c.counter)
	}
}
