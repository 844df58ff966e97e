package controllers

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// merged keeps what others and the apiserver put in an object and sets what the operator owns.
func TestMerged(t *testing.T) {
	live := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "m", "namespace": "ns", "resourceVersion": "7",
			"labels":      map[string]any{"app": "old", "team": "storage"},
			"annotations": map[string]any{"storageclass.kubernetes.io/is-default-class": "true"}},
		"spec":   map[string]any{"clusterIP": "172.30.0.9", "ports": []any{map[string]any{"port": int64(1)}}, "type": "ClusterIP"},
		"status": map[string]any{"loadBalancer": map[string]any{}},
	}}
	required := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "m", "namespace": "ns", "labels": map[string]any{"app": "new"}},
		"spec":     map[string]any{"ports": []any{map[string]any{"port": int64(2)}}, "selector": map[string]any{"app": "new"}},
		"status":   map[string]any{"ignored": true},
		"rules":    []any{"top-level fields are replaced"},
	}}
	got := merged(live, required)
	want := map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "m", "namespace": "ns", "resourceVersion": "7",
			"labels":      map[string]any{"app": "new", "team": "storage"},
			"annotations": map[string]any{"storageclass.kubernetes.io/is-default-class": "true"}},
		"spec": map[string]any{"clusterIP": "172.30.0.9", "ports": []any{map[string]any{"port": int64(2)}}, "type": "ClusterIP",
			"selector": map[string]any{"app": "new"}},
		"status": map[string]any{"loadBalancer": map[string]any{}},
		"rules":  []any{"top-level fields are replaced"},
	}
	if !reflect.DeepEqual(got.Object, want) {
		t.Errorf("merged:\n got %v\nwant %v", got.Object, want)
	}
	if live.GetLabels()["app"] != "old" {
		t.Errorf("merged changed its input")
	}
	if again := merged(got, required); !reflect.DeepEqual(again.Object, got.Object) {
		t.Errorf("merging twice changes the object: nothing would stop the writes")
	}
}
