package controllers

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	operatorv1 "github.com/openshift/api/operator/v1"
	machinefake "github.com/openshift/client-go/machine/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/machinesets"
)

// The CLI (`machinesets list`, `machinesets patch`, the wizard) and the operator's
// StorageNetworkReachable condition must give the same answer for every MachineSet shape: each
// shape goes through the CLI's code (DecodeProviderSpec and List) and through the operator's
// verdict. The operator binary does not link machinesets; this test does.
func TestAttachmentSameInCLIAndOperator(t *testing.T) {
	const storage = "b1181383-3a48-4b5c-815c-1a4c8ec2c1b4"
	const other = "0dd482e1-3ffd-4730-b40f-0fac550c4626"
	recorded := `{"networks":["` + storage + `"],"time":"2026-11-22T07:00:00Z","by":"manila-setup test"}`
	tests := []struct {
		name   string
		value  map[string]any // the providerSpec value beside kind and apiVersion
		record bool
		want   bool
	}{
		{name: "network by uuid", value: map[string]any{"networks": []any{map[string]any{"uuid": other}, map[string]any{"uuid": storage}}}, want: true},
		{name: "network by filter id", value: map[string]any{"networks": []any{map[string]any{"filter": map[string]any{"id": storage}}}}, want: true},
		{name: "port on the network", value: map[string]any{"ports": []any{map[string]any{"networkID": storage, "nameSuffix": "storage"}}}, want: true},
		{name: "mixed case", value: map[string]any{"networks": []any{map[string]any{"uuid": strings.ToUpper(storage[:8]) + storage[8:]}}}, want: true},
		{name: "only other networks", value: map[string]any{"networks": []any{map[string]any{"uuid": other}}, "ports": []any{map[string]any{"networkID": other}}}},
		{name: "no networks", value: map[string]any{}},
		{name: "recorded only", value: map[string]any{"networks": []any{map[string]any{"uuid": other}}}, record: true},
		{name: "recorded and attached", value: map[string]any{"networks": []any{map[string]any{"uuid": storage}}}, record: true, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			value := map[string]any{"apiVersion": "machine.openshift.io/v1alpha1", "kind": machinesets.OpenstackProviderSpecKind, "flavor": "m1.large"}
			for k, v := range tt.value {
				value[k] = v
			}
			raw, err := json.Marshal(value)
			if err != nil {
				t.Fatal(err)
			}
			ms := &machinev1beta1.MachineSet{ObjectMeta: metav1.ObjectMeta{Name: "worker-a", Namespace: machinesets.Namespace}}
			ms.Spec.Template.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: raw}
			if tt.record {
				ms.Annotations = map[string]string{record.Annotation: recorded}
			}

			// The CLI: the providerSpec rule, and what `machinesets list` shows.
			spec, err := machinesets.DecodeProviderSpec(raw)
			if err != nil {
				t.Fatal(err)
			}
			cli := spec.HasNetwork(storage)
			list, err := machinesets.List(context.Background(), machinefake.NewSimpleClientset(ms), attach.Attachment{Networks: []string{storage}})
			if err != nil || len(list) != 1 {
				t.Fatalf("machinesets.List: %v, %d sets", err, len(list))
			}
			listed := list[0].StorageNetwork == attach.StateAttached

			// The operator: the MachineSet as its dynamic informer caches it.
			content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ms)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{Object: content}
			status, reason, msg := storageNetworkVerdict([]*unstructured.Unstructured{u}, storage, "given by --storage-network", "")
			operatorSays := status == operatorv1.ConditionTrue

			if cli != tt.want || listed != tt.want || operatorSays != tt.want {
				t.Errorf("attached: want %v; CLI providerSpec %v, machinesets list %q, operator %s %s (%s)",
					tt.want, cli, list[0].StorageNetwork, status, reason, msg)
			}

			// Storage network not known: the operator falls back on the record, as `machinesets
			// list` does when asked for nothing.
			if !tt.record {
				return
			}
			list, err = machinesets.List(context.Background(), machinefake.NewSimpleClientset(ms), attach.Attachment{})
			if err != nil || len(list) != 1 {
				t.Fatalf("machinesets.List: %v, %d sets", err, len(list))
			}
			status, reason, msg = storageNetworkVerdict([]*unstructured.Unstructured{u}, "", "", "discovery has not run yet")
			if got := list[0].StorageNetwork == attach.StateAttached; got != (status == operatorv1.ConditionTrue) || got != tt.want {
				t.Errorf("from the record: want %v; machinesets list %q, operator %s %s (%s)", tt.want, list[0].StorageNetwork, status, reason, msg)
			}
		})
	}
}
