package installconfig

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// Patching then removing the same IDs gives the file back, byte for byte where the lists were
// there before; removing is spliced (only lines go, or a list left empty becomes []) and a
// second removal changes nothing.
func TestRemoveUndoesPatch(t *testing.T) {
	remove := both
	remove.Remove = true
	identical := 0
	for _, name := range []string{"valid-typical", "valid-bom", "valid-crlf", "valid-comments-everywhere",
		"valid-control-plane", "valid-default-platform", "valid-full-machinepool", "valid-indented-seq",
		"valid-minimal", "valid-multi-pool", "valid-no-trailing-newline", "warn-case-variant", "warn-second-document"} {
		data := readFile(t, filepath.Join("testdata", "corpus", name+".yaml"))
		f, _ := Parse("ic.yaml", data)
		added, err := Patch(f, both)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f, _ = Parse("ic.yaml", added.Output)
		res, err := Patch(f, remove)
		if err != nil {
			t.Fatalf("%s: remove: %v", name, err)
		}
		if res.Reformatted || !res.Changed {
			t.Errorf("%s: reformatted %t, changed %t", name, res.Reformatted, res.Changed)
		}
		for _, c := range res.Changes {
			if len(c.Added) > 0 || len(c.Removed) == 0 {
				t.Errorf("%s: change %+v", name, c)
			}
		}
		if bytes.Equal(res.Output, data) {
			identical++
		} else if strings.Contains(string(res.Output), addNetwork) || strings.Contains(string(res.Output), addSG) {
			t.Errorf("%s: an ID is left:\n%s", name, res.Output)
		}
		f, _ = Parse("ic.yaml", res.Output)
		again, err := Patch(f, remove)
		if err != nil || again.Changed || len(again.Changes) != 0 {
			t.Errorf("%s: a second removal: %v %+v", name, err, again)
		}
	}
	if identical < 3 {
		t.Errorf("%d files came back byte for byte, want more", identical)
	}
}

// Only the IDs named go; a list that held only them is left empty ([]), not removed.
func TestRemoveKeepsTheOthers(t *testing.T) {
	const other = "6a7b8c9d-0e1f-4a2b-8c3d-4e5f6a7b8c9d"
	in := "apiVersion: v1\nmetadata:\n  name: c\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs:\n      - " + other + " # the user's\n      - " + addNetwork + "\n      additionalSecurityGroupIDs:\n      - " + addSG + "\nplatform:\n  openstack:\n    cloud: c\n"
	res := mustPatch(t, in, PatchOptions{Networks: []string{addNetwork}, SecurityGroups: []string{addSG}, Remove: true})
	want := strings.Replace(strings.Replace(in, "      - "+addNetwork+"\n", "", 1), "additionalSecurityGroupIDs:\n      - "+addSG+"\n", "additionalSecurityGroupIDs: []\n", 1)
	if string(res.Output) != want || res.Reformatted {
		t.Errorf("got (reformatted %t)\n%s\nwant\n%s", res.Reformatted, res.Output, want)
	}
}
