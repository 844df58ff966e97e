package installconfig

import "testing"

// TestAddKeyAfterFlowList: a flow list whose closing line is indented like its key (yaml.v3
// reads it) is the end of its mapping; the new list goes in after it, spliced (the mapping
// used to be taken to end on the list's first line, and the file was written out again).
func TestAddKeyAfterFlowList(t *testing.T) {
	in := "apiVersion: v1\nmetadata:\n  name: x\nbaseDomain: example.com\ncompute:\n- name: worker\n  platform:\n    openstack:\n" +
		"      zones: [a,\n      b]  # two\nplatform:\n  openstack:\n    cloud: c\npullSecret: x\n"
	want := "apiVersion: v1\nmetadata:\n  name: x\nbaseDomain: example.com\ncompute:\n- name: worker\n  platform:\n    openstack:\n" +
		"      zones: [a,\n      b]  # two\n      additionalNetworkIDs:\n      - " + addNetwork + "\nplatform:\n  openstack:\n    cloud: c\npullSecret: x\n"
	res := mustPatch(t, in, PatchOptions{Networks: []string{addNetwork}})
	if string(res.Output) != want || res.Reformatted {
		t.Errorf("reformatted %v\n%s\nwant spliced\n%s", res.Reformatted, res.Output, want)
	}
}
