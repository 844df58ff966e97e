package controllers

import (
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/machinesets/attachment"
)

func TestMachineSetAttached(t *testing.T) {
	const storage = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	withNetworks := func(nets ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		_ = unstructured.SetNestedSlice(u.Object, nets, "spec", "template", "spec", "providerSpec", "value", "networks")
		return u
	}
	recorded := withNetworks()
	recorded.SetAnnotations(map[string]string{attachment.Annotation: `{"networks":["` + storage + `"],"time":"2026-11-22T07:00:00Z"}`})
	broken := withNetworks()
	broken.SetAnnotations(map[string]string{attachment.Annotation: `{not json`})

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

func TestStorageNetworkVerdict(t *testing.T) {
	const storage, other = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	set := func(name string, record string, nets ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(name)
		_ = unstructured.SetNestedSlice(u.Object, nets, "spec", "template", "spec", "providerSpec", "value", "networks")
		if record != "" {
			u.SetAnnotations(map[string]string{attachment.Annotation: `{"networks":["` + record + `"],"time":"2026-11-22T07:00:00Z"}`})
		}
		return u
	}
	on := map[string]any{"uuid": storage}
	off := map[string]any{"uuid": other}
	tests := []struct {
		name      string
		sets      []*unstructured.Unstructured
		id, why   string
		status    operatorv1.ConditionStatus
		reason    string
		msgHas    []string
		msgHasNot []string
	}{
		{name: "known network, all attached", sets: []*unstructured.Unstructured{set("a", "", on), set("b", storage, off)}, id: storage,
			status: operatorv1.ConditionTrue, reason: "AsExpected", msgHas: []string{"every MachineSet (2) attaches its machines", storage, "found by discovery"}},
		{name: "known network, one not attached", sets: []*unstructured.Unstructured{set("a", "", on), set("b", "", off)}, id: storage,
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b ", "manila-setup networks attach"}, msgHasNot: []string{"a, b"}},
		{name: "unknown network, nothing recorded", sets: []*unstructured.Unstructured{set("a", "", off)}, why: "discovery found no share export",
			status: operatorv1.ConditionUnknown, reason: "StorageNetworkUnknown", msgHas: []string{"discovery found no share export", "manila-setup networks attach"}},
		{name: "unknown network, all recorded", sets: []*unstructured.Unstructured{set("a", storage), set("b", storage)}, why: "discovery failed: timed out",
			status: operatorv1.ConditionTrue, reason: "AttachedByManilaSetup", msgHas: []string{storage, "not known: discovery failed"}},
		{name: "unknown network, some recorded", sets: []*unstructured.Unstructured{set("a", storage), set("b", "")}, why: "x",
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b have no storage network attachment, unlike a", storage, "manila-setup networks attach"}},
	}
	for _, tt := range tests {
		how := ""
		if tt.id != "" {
			how = "found by discovery with high confidence: storage (" + tt.id + ")"
		}
		status, reason, msg := storageNetworkVerdict(tt.sets, tt.id, how, tt.why)
		if status != tt.status || reason != tt.reason {
			t.Errorf("%s: %s %s, want %s %s (%s)", tt.name, status, reason, tt.status, tt.reason, msg)
		}
		for _, w := range tt.msgHas {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: message lacks %q: %s", tt.name, w, msg)
			}
		}
		for _, w := range tt.msgHasNot {
			if strings.Contains(msg, w) {
				t.Errorf("%s: message has %q: %s", tt.name, w, msg)
			}
		}
	}
}
