package controllers

import (
	"errors"
	"strings"
	"testing"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

func TestMachineSetAttached(t *testing.T) {
	const storage = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	withSpec := func(field string, entries ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		_ = unstructured.SetNestedSlice(u.Object, entries, "spec", "template", "spec", "providerSpec", "value", field)
		return u
	}
	withNetworks := func(nets ...any) *unstructured.Unstructured { return withSpec("networks", nets...) }
	recorded := withNetworks()
	recorded.SetAnnotations(map[string]string{record.Annotation: `{"networks":["` + storage + `"],"time":"2026-11-22T07:00:00Z"}`})
	broken := withNetworks()
	broken.SetAnnotations(map[string]string{record.Annotation: `{not json`})

	tests := []struct {
		name string
		ms   *unstructured.Unstructured
		want bool
	}{
		{"network by uuid", withNetworks(map[string]any{"uuid": storage, "noAllowedAddressPairs": true}), true},
		{"network by filter id", withNetworks(map[string]any{"filter": map[string]any{"id": storage}}), true},
		{"port on the network", withSpec("ports", map[string]any{"networkID": storage, "nameSuffix": "storage"}), true},
		{"upper-case ID", withNetworks(map[string]any{"uuid": strings.ToUpper(storage)}), true},
		{"only other networks", withNetworks(map[string]any{"uuid": "0dd482e1-3ffd-4730-b40f-0fac550c4626"}), false},
		{"no networks at all", withNetworks(), false},
		{"no providerSpec", &unstructured.Unstructured{Object: map[string]any{}}, false},
		// The record says what was attached once; new machines get what the providerSpec says.
		{"recorded by machinesets patch only", recorded, false},
		{"unreadable record, no network", broken, false},
	}
	for _, tt := range tests {
		if got := machineSetAttached(tt.ms, storage); got != tt.want {
			t.Errorf("%s: attached = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The operator picks the storage network from discovery by the CLI's rule: evidence, no tie.
func TestStorageNetworkFrom(t *testing.T) {
	cand := func(id, name string, score int, c openstack.Confidence) openstack.Candidate {
		return openstack.Candidate{Network: openstack.Network{ID: id, Name: name}, Score: score, Confidence: c}
	}
	const a, b = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	tests := []struct {
		name    string
		ranking *openstack.Ranking
		err     error
		ran     bool
		id      string
		has     string
	}{
		{name: "not run", has: "has not run yet"},
		{name: "failed", ran: true, err: errors.New("timed out"), has: "discovery failed: timed out"},
		{name: "nothing found", ran: true, ranking: &openstack.Ranking{}, has: "no share export and no share network"},
		{name: "exports seen", ran: true, ranking: &openstack.Ranking{Candidates: []openstack.Candidate{cand(a, "storage", 20, openstack.ConfidenceHigh), cand(b, "other", 5, openstack.ConfidenceMedium)}},
			id: a, has: `found by discovery with high confidence: "storage" (` + a + ")"},
		{name: "a share network on it", ran: true, ranking: &openstack.Ranking{Candidates: []openstack.Candidate{cand(b, "", 8, openstack.ConfidenceMedium)}},
			id: b, has: "medium confidence: " + b},
		{name: "a guess from the name", ran: true, ranking: &openstack.Ranking{Candidates: []openstack.Candidate{cand(a, "manila-storage", 1, openstack.ConfidenceLow)}},
			has: "only a guess from its name"},
		{name: "a tie", ran: true, ranking: &openstack.Ranking{Candidates: []openstack.Candidate{cand(a, "one", 10, openstack.ConfidenceHigh), cand(b, "two", 10, openstack.ConfidenceHigh)}},
			has: "alike (same evidence, score 10): choose one with --storage-network"},
	}
	for _, tt := range tests {
		id, how, why := storageNetworkFrom(tt.ranking, tt.err, tt.ran)
		if id != tt.id {
			t.Errorf("%s: id %q, want %q (%s%s)", tt.name, id, tt.id, how, why)
		}
		if msg := how + why; !strings.Contains(msg, tt.has) {
			t.Errorf("%s: %q lacks %q", tt.name, msg, tt.has)
		}
	}
}

func TestStorageNetworkVerdict(t *testing.T) {
	const storage, other = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4", "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	set := func(name string, recorded string, nets ...any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetName(name)
		_ = unstructured.SetNestedSlice(u.Object, nets, "spec", "template", "spec", "providerSpec", "value", "networks")
		if recorded != "" {
			u.SetAnnotations(map[string]string{record.Annotation: `{"networks":["` + recorded + `"],"time":"2026-11-22T07:00:00Z"}`})
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
		{name: "known network, all attached", sets: []*unstructured.Unstructured{set("a", "", on), set("b", storage, on, off)}, id: storage,
			status: operatorv1.ConditionTrue, reason: "AsExpected", msgHas: []string{"every MachineSet (2) attaches its machines", storage, "found by discovery"}},
		{name: "known network, one only recorded", sets: []*unstructured.Unstructured{set("a", "", on), set("b", storage, off)}, id: storage,
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b ", "manila-setup networks attach"}},
		{name: "known network, one not attached", sets: []*unstructured.Unstructured{set("a", "", on), set("b", "", off)}, id: storage,
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b ", "manila-setup networks attach"}, msgHasNot: []string{"a, b"}},
		{name: "unknown network, nothing recorded", sets: []*unstructured.Unstructured{set("a", "", off)}, why: "discovery found no share export",
			status: operatorv1.ConditionUnknown, reason: "StorageNetworkUnknown", msgHas: []string{"discovery found no share export", "manila-setup networks attach"}},
		{name: "unknown network, all recorded and attached", sets: []*unstructured.Unstructured{set("a", storage, on), set("b", storage, off, on)}, why: "discovery failed: timed out",
			status: operatorv1.ConditionTrue, reason: "AttachedByManilaSetup", msgHas: []string{storage, "not known: discovery failed"}},
		{name: "unknown network, some recorded", sets: []*unstructured.Unstructured{set("a", storage, on), set("b", "")}, why: "x",
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b have no storage network attachment, unlike a", storage, "manila-setup networks attach"}},
		{name: "unknown network, recorded but no longer in the providerSpec", sets: []*unstructured.Unstructured{set("a", storage, on), set("b", storage, off)}, why: "x",
			status: operatorv1.ConditionFalse, reason: "MachineSetsNotAttached", msgHas: []string{"MachineSets b record an attachment", "no longer has", storage}},
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
