package clusterapi

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
)

// templatePorts returns, by network ID, the ports of the new templates of a patched file.
func templatePorts(t *testing.T, res *attach.FileResult) map[string][]map[string]any {
	t.Helper()
	out := map[string][]map[string]any{}
	for _, raw := range res.Objects {
		var o struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Ports []map[string]any `json:"ports"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			t.Fatal(err)
		}
		if o.Kind != TemplateKind {
			continue
		}
		for _, p := range o.Spec.Template.Spec.Ports {
			network, _ := p["network"].(map[string]any)
			id, _ := network["id"].(string)
			out[id] = append(out[id], p)
		}
	}
	return out
}

// TestPatchFilePortSecurity: the port added on a network without port security says
// disablePortSecurity: true and has no securityGroups (the machine's stay on the machine),
// the port on a network with port security says nothing of it, and a second run is unchanged.
func TestPatchFilePortSecurity(t *testing.T) {
	const off, on = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "9a7c1e2b-3d4f-4a5b-8c6d-7e8f9a0b1c2d"
	data, err := os.ReadFile("testdata/file/openshift-cluster-api.yaml")
	if err != nil {
		t.Fatal(err)
	}
	opts := fileOpts()
	opts.Attachment = attach.Attachment{Networks: []string{off, on}, PortSecurityDisabled: []string{off}}
	res, err := PatchFile(context.Background(), "capi.yaml", data, Scope{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	ports := templatePorts(t, res)
	if len(ports[off]) == 0 || len(ports[on]) != len(ports[off]) {
		t.Fatalf("ports of the new templates: %v", ports)
	}
	for _, p := range ports[off] {
		if p["disablePortSecurity"] != true || p["securityGroups"] != nil {
			t.Errorf("port on the network without port security: %v", p)
		}
	}
	for _, p := range ports[on] {
		if _, ok := p["disablePortSecurity"]; ok {
			t.Errorf("port on the network with port security: %v", p)
		}
	}
	if !strings.Contains(string(res.Output), `"portSecurityDisabled":["`+off+`"]`) {
		t.Errorf("the records do not name %s as without port security:\n%s", off, res.Output)
	}
	again, err := PatchFile(context.Background(), "capi.yaml", res.Output, Scope{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again.Results {
		if r.Action == attach.ActionPatched || r.Warning != "" {
			t.Errorf("second run: %+v", r)
		}
	}

	// A port written before without the setting is left as it is, with the path to fix.
	plainOpts := fileOpts()
	plainOpts.Attachment = attach.Attachment{Networks: []string{off}}
	plain, err := PatchFile(context.Background(), "capi.yaml", data, Scope{}, plainOpts)
	if err != nil {
		t.Fatal(err)
	}
	again, err = PatchFile(context.Background(), "capi.yaml", plain.Output, Scope{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	warned := 0
	for _, r := range again.Results {
		if strings.Contains(r.Warning, "network "+off+" has port security disabled, but spec.template.spec.ports[") && strings.Contains(r.Warning, "does not say disablePortSecurity: true") {
			warned++
		}
	}
	if warned == 0 {
		t.Errorf("no warning about the port without disablePortSecurity: %+v", again.Results)
	}
}
