package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/machinesets"
)

func TestMachineSetAttached(t *testing.T) {
	const storage = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	withNetworks := func(nets ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		_ = unstructured.SetNestedSlice(u.Object, nets, "spec", "template", "spec", "providerSpec", "value", "networks")
		return u
	}
	recorded := withNetworks()
	recorded.SetAnnotations(map[string]string{machinesets.AttachmentAnnotation: `{"networks":["` + storage + `"],"time":"2026-11-22T07:00:00Z"}`})
	broken := withNetworks()
	broken.SetAnnotations(map[string]string{machinesets.AttachmentAnnotation: `{not json`})

	tests := []struct {
		name string
		ms   *unstructured.Unstructured
		want bool
	}{
		{"network by uuid", withNetworks(map[string]any{"uuid": storage, "noAllowedAddressPairs": true}), true},
		{"network by filter id", withNetworks(map[string]any{"filter": map[string]any{"id": storage}}), true},
		{"only other networks", withNetworks(map[string]any{"uuid": "0dd482e1-3ffd-4730-b40f-0fac550c4626"}), false},
		{"no networks at all", withNetworks(), false},
		{"recorded by machinesets patch", recorded, true},
		{"unreadable record, no network", broken, false},
	}
	for _, tt := range tests {
		if got := machineSetAttached(tt.ms, storage); got != tt.want {
			t.Errorf("%s: attached = %v, want %v", tt.name, got, tt.want)
		}
	}
}
