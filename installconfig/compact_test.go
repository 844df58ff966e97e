package installconfig

import (
	"strings"
	"testing"
)

// A compact install (every compute pool with replicas 0): the masters run the workloads, so a
// patch that names no pool takes the control plane too and says why; naming a pool warns that
// it makes no machine; --remove takes the IDs off the control plane as well. An install whose
// workers are made (replicas absent or not 0) is patched as before.
func TestPatchCompactInstall(t *testing.T) {
	const compact = "controlPlane:\n  name: master\n  replicas: 3\ncompute:\n- name: worker\n  replicas: 0\n" + osPlatform
	res := mustPatch(t, compact, PatchOptions{Networks: []string{addNetwork}})
	var fields []string
	note := ""
	for _, c := range res.Changes {
		fields = append(fields, c.Field)
		if strings.HasPrefix(c.Field, "controlPlane.") {
			note = c.Note
		}
	}
	want := "controlPlane.platform.openstack.additionalNetworkIDs compute[0].platform.openstack.additionalNetworkIDs"
	if strings.Join(fields, " ") != want {
		t.Errorf("changes %v, want %s", fields, want)
	}
	if !strings.Contains(note, `a compact install (compute[0] "worker" has replicas 0)`) || !strings.Contains(note, "the masters run the workloads") {
		t.Errorf("the control plane's change says %q", note)
	}
	if strings.Count(string(res.Output), addNetwork) != 2 {
		t.Errorf("output:\n%s", res.Output)
	}

	removed := mustPatch(t, string(res.Output), PatchOptions{Networks: []string{addNetwork}, Remove: true})
	if strings.Contains(string(removed.Output), addNetwork) {
		t.Errorf("--remove left the network in:\n%s", removed.Output)
	}

	named := mustPatch(t, compact, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"worker"}})
	if len(named.Changes) != 1 || named.Changes[0].Field != "compute[0].platform.openstack.additionalNetworkIDs" {
		t.Errorf("--pool worker changed %+v", named.Changes)
	}
	if w := named.Warnings; len(w) != 1 || w[0].Rule() != RuleCompact || w[0].Field != "compute[0].replicas" || w[0].Line != 6 ||
		!strings.Contains(w[0].Detail, `pool "worker" makes no machine`) || !strings.Contains(w[0].Detail, "add --control-plane") {
		t.Errorf("--pool worker warnings %+v", w)
	}
	if both := mustPatch(t, compact, PatchOptions{Networks: []string{addNetwork}, Pools: []string{"worker"}, ControlPlane: true}); len(both.Warnings) != 0 || len(both.Changes) != 2 {
		t.Errorf("--pool worker --control-plane: %+v %+v", both.Changes, both.Warnings)
	}

	for name, data := range map[string]string{
		"workers made":                 "compute:\n- name: worker\n  replicas: 3\n" + osPlatform,
		"replicas absent (default 3)":  "compute:\n- name: worker\n" + osPlatform,
		"one pool of two makes no one": "compute:\n- name: worker\n  replicas: 2\n- name: gpu\n  replicas: 0\n" + osPlatform,
	} {
		res := mustPatch(t, data, PatchOptions{Networks: []string{addNetwork}})
		for _, c := range res.Changes {
			if strings.HasPrefix(c.Field, "controlPlane.") {
				t.Errorf("%s: the control plane was patched", name)
			}
		}
	}
}
