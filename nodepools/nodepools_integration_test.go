//go:build integration

package nodepools

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/test/testenv"
)

const (
	storageNet = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	otherNet   = "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	nfsGroup   = "77c0a1d2-1111-4111-8111-111111111111"
)

func nodePool(name, cluster, platform string, ports ...string) *unstructured.Unstructured {
	spec := map[string]any{
		"clusterName": cluster,
		"replicas":    int64(2),
		"management":  map[string]any{"upgradeType": "Replace"},
		"release":     map[string]any{"image": "quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64"},
		"platform":    map[string]any{"type": platform},
	}
	if platform == "OpenStack" {
		os := map[string]any{"flavor": "m1.xlarge"}
		if ports != nil {
			var list []any
			for _, p := range ports {
				list = append(list, map[string]any{"network": map[string]any{"id": p}})
			}
			os["additionalPorts"] = list
		}
		spec["platform"].(map[string]any)["openstack"] = os
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hypershift.openshift.io/v1beta1", "kind": "NodePool",
		"metadata": map[string]any{"name": name, "namespace": "clusters"},
		"spec":     spec,
	}}
}

// TestPatchNodePools: on an apiserver serving HyperShift's NodePool CRD, the OpenStack NodePools
// of one HostedCluster get a port on the storage network (appended to theirs, or as their
// first), the others are left alone with the reason, security groups are reported as not
// expressible per port, a dry run writes nothing, and a second run changes nothing.
func TestPatchNodePools(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	api := testenv.NewAPIServer(t)
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	full := make([]string, MaxAdditionalPorts)
	for i := range full {
		full[i] = fmt.Sprintf("0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a%02d", i)
	}
	for _, np := range []*unstructured.Unstructured{
		nodePool("hc1-workers", "hc1", "OpenStack"),
		nodePool("hc1-gpu", "hc1", "OpenStack", otherNet),
		nodePool("hc1-full", "hc1", "OpenStack", full...),
		nodePool("hc1-none", "hc1", "None"),
		nodePool("hc2-workers", "hc2", "OpenStack"),
	} {
		if _, err := dyn.Resource(GVR).Namespace("clusters").Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating NodePool %s: %v", np.GetName(), err)
		}
	}
	rv := func() map[string]string {
		l, err := dyn.Resource(GVR).Namespace("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, u := range l.Items {
			out[u.GetName()] = u.GetResourceVersion()
		}
		return out
	}
	scope, opts := Scope{HostedCluster: "hc1"}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{nfsGroup}}, By: "manila-setup test"}

	before := rv()
	dry := opts
	dry.DryRun = true
	results, err := Patch(ctx, dyn, scope, dry)
	if err != nil {
		t.Fatal(err)
	}
	if after := rv(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("a dry run wrote: %v -> %v", before, after)
	}
	byName := map[string]attach.Result{}
	for _, r := range results {
		byName[r.Name] = r
	}
	if r := byName["hc1-workers"]; r.Action != attach.ActionWouldPatch || !strings.Contains(r.Diff, "+- description: "+PortDescription) || !strings.Contains(r.Diff, "id: "+storageNet) {
		t.Errorf("dry run hc1-workers: %+v", r)
	}
	if _, ok := byName["hc2-workers"]; ok || len(results) != 4 {
		t.Errorf("--hosted-cluster hc1 selected %+v", results)
	}

	results, err = Patch(ctx, dyn, scope, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"hc1-workers": attach.ActionPatched, "hc1-gpu": attach.ActionPatched, "hc1-full": attach.ActionSkipped, "hc1-none": attach.ActionSkipped}
	for _, r := range results {
		if r.Action != want[r.Name] {
			t.Errorf("%s: %s (%s), want %s", r.Name, r.Action, r.Reason, want[r.Name])
		}
		if r.Action == attach.ActionPatched && !strings.Contains(r.Warning, "security groups "+nfsGroup+" were not added") {
			t.Errorf("%s: no warning about the security group: %q", r.Name, r.Warning)
		}
	}
	after := rv()
	for name, v := range before {
		if (after[name] != v) != (want[name] == attach.ActionPatched) {
			t.Errorf("%s: resourceVersion %s -> %s", name, v, after[name])
		}
	}
	for name, ports := range map[string][]string{"hc1-workers": {storageNet}, "hc1-gpu": {otherNet, storageNet}} {
		u, err := dyn.Resource(GVR).Namespace("clusters").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		list, _, _ := unstructured.NestedSlice(u.Object, "spec", "platform", "openstack", "additionalPorts")
		var got []string
		for _, p := range list {
			id, _, _ := unstructured.NestedString(p.(map[string]any), "network", "id")
			got = append(got, id)
		}
		if fmt.Sprint(got) != fmt.Sprint(ports) {
			t.Errorf("%s: ports on %v, want %v", name, got, ports)
		}
		if rec := record.Parse(u.GetAnnotations()); rec == nil || fmt.Sprint(rec.Networks) != fmt.Sprint([]string{storageNet}) || len(rec.SecurityGroups) != 0 {
			t.Errorf("%s: attachment record %+v", name, rec)
		}
	}

	listed, err := List(ctx, dyn, "clusters", "", attach.Attachment{})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]string{}
	for _, s := range listed {
		states[s.Name] = s.StorageNetwork
	}
	if states["hc1-workers"] != attach.StateAttached || states["hc1-none"] != attach.StateNA || states["hc2-workers"] != attach.StateUnknown {
		t.Errorf("list (from the records): %v", states)
	}

	again, err := Patch(ctx, dyn, scope, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Action == attach.ActionPatched {
			t.Errorf("a second run patched %s again", r.Name)
		}
	}
	if final := rv(); fmt.Sprint(final) != fmt.Sprint(after) {
		t.Errorf("a second run wrote: %v -> %v", after, final)
	}

	// Names: only the NodePools named, by namespace/name; one not there is refused before any
	// write.
	byNames, namedOpts := Scope{Names: []string{"clusters/hc2-workers"}}, attach.Options{Attachment: opts.Attachment, DryRun: true}
	named, err := Patch(ctx, dyn, byNames, namedOpts)
	if err != nil || len(named) != 1 || named[0].Name != "hc2-workers" || named[0].Action != attach.ActionWouldPatch {
		t.Errorf("Names clusters/hc2-workers: %+v, %v", named, err)
	}
	namedOpts.DryRun, byNames.Names = false, []string{"clusters/hc2-workers", "clusters/nope"}
	if _, err := Patch(ctx, dyn, byNames, namedOpts); err == nil || !strings.Contains(err.Error(), "NodePool clusters/nope not found") {
		t.Errorf("an unknown name: %v", err)
	}
	if final := rv(); fmt.Sprint(final) != fmt.Sprint(after) {
		t.Errorf("a selection with an unknown name wrote: %v -> %v", after, final)
	}

	// List reports what follows the rollout HyperShift does: the upgrade type, the nodes it
	// observed and the conditions of the new machine template.
	u, err := dyn.Resource(GVR).Namespace("clusters").Get(ctx, "hc1-workers", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().UTC().Format(time.RFC3339)
	u.Object["status"] = map[string]any{"replicas": int64(1), "conditions": []any{
		map[string]any{"type": "Ready", "status": "False", "reason": "WaitingForNodes", "message": "1 of 2 nodes ready", "lastTransitionTime": now},
		map[string]any{"type": "UpdatingPlatformMachineTemplate", "status": "True", "reason": "AsExpected", "message": "platform machine template update in progress", "lastTransitionTime": now},
		map[string]any{"type": "ValidReleaseImage", "status": "True", "reason": "AsExpected", "lastTransitionTime": now},
	}}
	if _, err := dyn.Resource(GVR).Namespace("clusters").UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	listed, err = List(ctx, dyn, "clusters", "hc1", attach.Attachment{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range listed {
		if s.Name != "hc1-workers" {
			continue
		}
		if s.UpgradeType != "Replace" || s.CurrentNodes != 1 || s.Replicas != 2 {
			t.Errorf("hc1-workers: upgrade type %q, %d of %d nodes", s.UpgradeType, s.CurrentNodes, s.Replicas)
		}
		got := fmt.Sprint(s.Conditions)
		if want := "[{UpdatingPlatformMachineTemplate True AsExpected platform machine template update in progress} {Ready False WaitingForNodes 1 of 2 nodes ready}]"; got != want {
			t.Errorf("hc1-workers conditions:\n got %s\nwant %s", got, want)
		}
	}

	if _, err := Patch(ctx, dyn, Scope{HostedCluster: "nope"}, attach.Options{Attachment: opts.Attachment}); err == nil || !strings.Contains(err.Error(), `no NodePool of HostedCluster "nope"`) {
		t.Errorf("an unknown HostedCluster: %v", err)
	}
}

// TestPatchFileMatchesTheCluster: the NodePools of the GitOps file, created on a real apiserver,
// then patched offline (the file) and on the cluster, end up with the same spec and record.
func TestPatchFileMatchesTheCluster(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	f, err := filepatch.Parse("pools.yaml", []byte(gitopsFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range f.Objects() {
		if o.Kind != "NodePool" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(o.JSON, &u.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(GVR).Namespace("clusters").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	opts := attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}}, By: "test",
		Now: func() time.Time { return time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC) }}
	offline, err := PatchFile(ctx, "pools.yaml", []byte(gitopsFile), Scope{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Patch(ctx, dyn, Scope{}, opts); err != nil {
		t.Fatal(err)
	}
	for _, raw := range offline.Objects {
		var want unstructured.Unstructured
		if err := json.Unmarshal(raw, &want.Object); err != nil {
			t.Fatal(err)
		}
		got, err := dyn.Resource(GVR).Namespace("clusters").Get(ctx, want.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, field := range [][]string{{"spec", "platform"}, {"metadata", "annotations", record.Annotation}} {
			w, _, _ := unstructured.NestedFieldNoCopy(want.Object, field...)
			g, _, _ := unstructured.NestedFieldNoCopy(got.Object, field...)
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			if w == nil || !filepatch.SameJSON(wj, gj) {
				t.Errorf("NodePool %s .%s:\n offline %s\ncluster %s", want.GetName(), strings.Join(field, "."), wj, gj)
			}
		}
	}
	if len(offline.Objects) != 2 {
		t.Errorf("%d NodePools compared, want 2", len(offline.Objects))
	}
}
