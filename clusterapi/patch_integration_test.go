//go:build integration

package clusterapi

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/test/testenv"
)

const (
	ns         = "openshift-cluster-api"
	storageNet = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	secondNet  = "2d4e6f80-1a2b-4c3d-8e9f-0a1b2c3d4e5f"
	machineNet = "0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37"
	nfsGroup   = "77c0a1d2-1111-4111-8111-111111111111"
	nodeGroup  = "88d1b2e3-2222-4222-8222-222222222222"
)

func template(name string, ports []any, groups []any) *unstructured.Unstructured {
	spec := map[string]any{"flavor": "m1.xlarge", "image": map[string]any{"filter": map[string]any{"name": "rhcos-4.20"}}}
	if ports != nil {
		spec["ports"] = ports
	}
	if groups != nil {
		spec["securityGroups"] = groups
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachineTemplate",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": "ocp"}},
		"spec":     map[string]any{"template": map[string]any{"spec": spec}},
	}}
}

func set(kind, name, tmplKind, tmpl string, owner *unstructured.Unstructured) *unstructured.Unstructured {
	selector := map[string]any{"matchLabels": map[string]any{"pool": name}}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"clusterName": "ocp", "replicas": int64(2), "selector": selector,
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"pool": name}},
				"spec": map[string]any{
					"clusterName": "ocp",
					"bootstrap":   map[string]any{"dataSecretName": "worker-user-data"},
					"infrastructureRef": map[string]any{
						"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": tmplKind, "name": tmpl,
					},
				},
			},
		},
	}}
	if owner != nil {
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta1", Kind: owner.GetKind(), Name: owner.GetName(), UID: owner.GetUID()}})
	}
	return u
}

func machine(name, fromTemplate string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "OpenStackMachine",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": map[string]any{"cluster.x-k8s.io/set-name": strings.TrimSuffix(name, name[strings.LastIndex(name, "-"):])}, "annotations": map[string]any{
			"cluster.x-k8s.io/cloned-from-name": fromTemplate, "cluster.x-k8s.io/cloned-from-groupkind": "OpenStackMachineTemplate.infrastructure.cluster.x-k8s.io",
		}},
		"spec": map[string]any{"flavor": "m1.xlarge", "image": map[string]any{"filter": map[string]any{"name": "rhcos-4.20"}}},
	}}
}

func create(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	made, err := dyn.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return made
}

func get(t *testing.T, dyn dynamic.Interface, gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s: %v", gvr.Resource, name, err)
	}
	return u
}

func templateSpec(t *testing.T, dyn dynamic.Interface, name string) string {
	t.Helper()
	spec, _, _ := unstructured.NestedMap(get(t, dyn, TemplateGVR, name).Object, "spec", "template", "spec")
	b, _ := json.Marshal(map[string]any{"ports": spec["ports"], "securityGroups": spec["securityGroups"]})
	return string(b)
}

func templateNames(t *testing.T, dyn dynamic.Interface) []string {
	t.Helper()
	l, err := dyn.Resource(TemplateGVR).Namespace(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range l.Items {
		names = append(names, u.GetName())
	}
	slices.Sort(names)
	return names
}

func byName(report *Report) map[string]attach.Result {
	out := map[string]attach.Result{}
	for _, r := range report.Results {
		out[r.Kind+"/"+r.Name] = r
	}
	return out
}

// TestPatchClusterAPI: on an apiserver serving Cluster API's and CAPO's CRDs from the pinned
// modules, a standalone MachineSet, a MachineDeployment and two MachineSets sharing a template
// each get a new OpenStackMachineTemplate (the primary port written out where CAPO would add
// it, the storage port, the security group) and are pointed at it: one CREATE per new
// template and one PATCH per set; a MachineDeployment's own MachineSet, a set of another
// provider and one whose template is missing are left alone with the reason; a dry run writes
// nothing; a second run writes nothing; a conflict is retried; the replaced templates are
// deleted only once no set and no Machine uses them; a later attachment replaces manila-setup's
// template without growing its name.
func TestPatchClusterAPI(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	api := testenv.NewAPIServer(t)
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	admin := dynamic.NewForConfigOrDie(api.Config)
	w := &requests{counts: map[string]int{}}
	cfg := rest.CopyConfig(api.Config)
	cfg.WrapTransport = w.wrap
	dyn := dynamic.NewForConfigOrDie(cfg)

	create(t, admin, TemplateGVR, template("workers-a", nil, nil))
	create(t, admin, TemplateGVR, template("workers-b", []any{map[string]any{"network": map[string]any{"id": machineNet}}}, []any{map[string]any{"id": nodeGroup}}))
	create(t, admin, TemplateGVR, template("shared", nil, nil))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "ms-a", TemplateKind, "workers-a", nil))
	md := create(t, admin, MachineDeploymentGVR, set(KindMachineDeployment, "md-b", TemplateKind, "workers-b", nil))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "md-b-7f9c", TemplateKind, "workers-b", md))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "ms-s1", TemplateKind, "shared", nil))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "ms-s2", TemplateKind, "shared", nil))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "ms-docker", "DockerMachineTemplate", "docker", nil))
	create(t, admin, MachineSetGVR, set(KindMachineSet, "ms-missing", TemplateKind, "gone", nil))
	paused := set(KindMachineSet, "ms-paused", TemplateKind, "ostest-worker-mirror", nil)
	paused.SetAnnotations(map[string]string{"cluster.x-k8s.io/paused": ""})
	create(t, admin, MachineSetGVR, paused)
	create(t, admin, OpenStackMachineGVR, machine("ms-a-x2k9p", "workers-a"))
	now := func() time.Time { return time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC) }
	scope, opts := Scope{Namespace: ns}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{nfsGroup}}, By: "test", Now: now}
	before := templateNames(t, admin)

	t.Run("dry run writes nothing", func(t *testing.T) {
		dry := opts
		dry.DryRun = true
		report, err := Patch(ctx, dyn, scope, dry)
		if err != nil {
			t.Fatal(err)
		}
		if c := w.takeWrites(); len(c) != 0 {
			t.Errorf("a dry run wrote: %v", c)
		}
		r := byName(report)["MachineSet/ms-a"]
		if r.Action != attach.ActionWouldPatch || !strings.Contains(r.Diff, "+- {}") || !strings.Contains(r.Diff, storageNet) || !strings.Contains(r.Diff, "-name: workers-a") {
			t.Errorf("ms-a: %s, diff:\n%s", r.Action, r.Diff)
		}
		if got := templateNames(t, admin); !slices.Equal(got, before) {
			t.Errorf("templates after a dry run: %v, want %v", got, before)
		}
	})

	var newA, newB, newShared string
	t.Run("patch", func(t *testing.T) {
		// Another writer changes ms-s1 right before its PATCH: 409, read again, patched.
		w.beforePatch = map[string]func(){"ms-s1": func() {
			u := get(t, admin, MachineSetGVR, "ms-s1")
			u.SetLabels(map[string]string{"touched": "yes"})
			if _, err := admin.Resource(MachineSetGVR).Namespace(ns).Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
				t.Error(err)
			}
		}}
		report, err := Patch(ctx, dyn, scope, opts)
		if err != nil {
			t.Fatal(err)
		}
		got := byName(report)
		for key, want := range map[string]string{
			"MachineSet/ms-a": attach.ActionPatched, "MachineDeployment/md-b": attach.ActionPatched,
			"MachineSet/ms-s1": attach.ActionPatched, "MachineSet/ms-s2": attach.ActionPatched,
			"MachineSet/md-b-7f9c": attach.ActionSkipped, "MachineSet/ms-docker": attach.ActionSkipped,
			"MachineSet/ms-missing": attach.ActionInvalid, "MachineSet/ms-paused": attach.ActionSkipped,
		} {
			if got[key].Action != want {
				t.Errorf("%s: %s (%s), want %s", key, got[key].Action, got[key].Reason, want)
			}
		}
		if r := got["MachineSet/md-b-7f9c"]; !strings.Contains(r.Reason, "MachineDeployment md-b") {
			t.Errorf("md-b-7f9c's reason: %q", r.Reason)
		}
		if r := got["MachineSet/ms-paused"]; !strings.Contains(r.Reason, "paused (annotation cluster.x-k8s.io/paused)") {
			t.Errorf("ms-paused's reason: %q", r.Reason)
		}
		if r := got["MachineSet/ms-missing"]; !strings.Contains(r.Reason, `"gone"`) {
			t.Errorf("ms-missing's reason: %q", r.Reason)
		}
		if r := got["MachineSet/ms-s1"]; r.ConflictRetries != 1 {
			t.Errorf("ms-s1 was patched after %d conflicts, want 1", r.ConflictRetries)
		}
		newA, newB, newShared = got["MachineSet/ms-a"].Template, got["MachineDeployment/md-b"].Template, got["MachineSet/ms-s1"].Template
		if got["MachineSet/ms-s2"].Template != newShared {
			t.Errorf("sets that shared a template got two: %s and %s", newShared, got["MachineSet/ms-s2"].Template)
		}
		nameRE := regexp.MustCompile(`^workers-a-manila-[0-9a-f]{8}$`)
		if !nameRE.MatchString(newA) {
			t.Errorf("new template of ms-a: %q", newA)
		}
		// One CREATE per new template, one PATCH per set (and one more for the conflict), one
		// DELETE for the template nothing uses any more.
		c := w.takeWrites()
		if c["POST openstackmachinetemplates"] != 3 || c["PATCH machinesets"] != 4 || c["PATCH machinedeployments"] != 1 || c["DELETE openstackmachinetemplates"] != 1 {
			t.Errorf("writes: %v", c)
		}

		if got, want := templateSpec(t, admin, newA), `{"ports":[{},{"description":"Manila storage network (manila-setup)","network":{"id":"`+storageNet+`"}}],"securityGroups":[{"id":"`+nfsGroup+`"}]}`; got != want {
			t.Errorf("template %s:\n got %s\nwant %s", newA, got, want)
		}
		if got, want := templateSpec(t, admin, newB), `{"ports":[{"network":{"id":"`+machineNet+`"}},{"description":"Manila storage network (manila-setup)","network":{"id":"`+storageNet+`"}}],"securityGroups":[{"id":"`+nodeGroup+`"},{"id":"`+nfsGroup+`"}]}`; got != want {
			t.Errorf("template %s:\n got %s\nwant %s", newB, got, want)
		}
		nt := get(t, admin, TemplateGVR, newA)
		if nt.GetAnnotations()[ReplacesAnnotation] != "workers-a" || nt.GetLabels()["cluster.x-k8s.io/cluster-name"] != "ocp" || record.Parse(nt.GetAnnotations()) == nil {
			t.Errorf("new template's metadata: labels %v annotations %v", nt.GetLabels(), nt.GetAnnotations())
		}
		for name, want := range map[string]string{"ms-a": newA, "ms-s1": newShared, "ms-s2": newShared, "md-b-7f9c": "workers-b"} {
			if ref := refOf(get(t, admin, MachineSetGVR, name)); ref.Name != want {
				t.Errorf("MachineSet %s points at %s, want %s", name, ref.Name, want)
			}
		}
		if u := get(t, admin, MachineSetGVR, "ms-s1"); u.GetLabels()["touched"] != "yes" || record.Parse(u.GetAnnotations()) == nil {
			t.Errorf("ms-s1 lost the other writer's label or has no record: %v %v", u.GetLabels(), u.GetAnnotations())
		}
		if ref := refOf(get(t, admin, MachineDeploymentGVR, "md-b")); ref.Name != newB {
			t.Errorf("md-b points at %s, want %s", ref.Name, newB)
		}
		// workers-a: a Machine was made from it; workers-b: md-b's MachineSet still uses it;
		// shared: nothing does.
		tr := map[string]TemplateResult{}
		for _, r := range report.Templates {
			tr[r.Name] = r
		}
		if !tr["shared"].Deleted || tr["workers-a"].Deleted || !strings.Contains(tr["workers-a"].Reason, "1 Machine(s)") ||
			tr["workers-b"].Deleted || !strings.Contains(tr["workers-b"].Reason, "MachineSet md-b-7f9c") {
			t.Errorf("templates: %+v", report.Templates)
		}
	})

	t.Run("list", func(t *testing.T) {
		list, err := List(ctx, dyn, ns, attach.Attachment{})
		if err != nil {
			t.Fatal(err)
		}
		if c := w.takeWrites(); len(c) != 0 {
			t.Errorf("list wrote: %v", c)
		}
		got := map[string]Status{}
		for _, s := range list {
			got[s.Kind+"/"+s.Name] = s
		}
		// ms-a's template has everything recorded on it; its one Machine was made from the old one.
		if s := got["MachineSet/ms-a"]; s.Template != newA || s.StorageNetwork != attach.StateAttached || s.SecurityGroups != attach.StateAttached || s.Machines != 1 || s.OnTemplate != 0 {
			t.Errorf("ms-a: %+v", s)
		}
		if s := got["MachineSet/md-b-7f9c"]; s.StorageNetwork != attach.StateNA || !strings.Contains(s.Note, "MachineDeployment md-b") {
			t.Errorf("md-b-7f9c: %+v", s)
		}
		if s := got["MachineSet/ms-docker"]; s.StorageNetwork != attach.StateNA || !strings.Contains(s.Note, "DockerMachineTemplate") {
			t.Errorf("ms-docker: %+v", s)
		}
		other, err := List(ctx, dyn, ns, attach.Attachment{Networks: []string{secondNet}})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range other {
			if s.Name == "ms-a" && s.StorageNetwork != attach.StateMissing {
				t.Errorf("ms-a with another network asked: %+v", s)
			}
		}
	})

	t.Run("second run writes nothing", func(t *testing.T) {
		report, err := Patch(ctx, dyn, scope, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range report.Results {
			if r.Action == attach.ActionPatched {
				t.Errorf("%s %s patched again", r.Kind, r.Name)
			}
		}
		if c := w.takeWrites(); len(c) != 0 {
			t.Errorf("a second run wrote: %v", c)
		}
	})

	t.Run("old template deleted once unused", func(t *testing.T) {
		if err := admin.Resource(OpenStackMachineGVR).Namespace(ns).Delete(ctx, "ms-a-x2k9p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		report, err := Patch(ctx, dyn, scope, opts)
		if err != nil {
			t.Fatal(err)
		}
		if len(report.Templates) != 2 || !report.Templates[0].Deleted || report.Templates[0].Name != "workers-a" || report.Templates[1].Deleted {
			t.Errorf("templates: %+v", report.Templates)
		}
		if names := templateNames(t, admin); slices.Contains(names, "workers-a") || !slices.Contains(names, "workers-b") || !slices.Contains(names, newA) {
			t.Errorf("templates left: %v", names)
		}
	})

	t.Run("a later attachment replaces manila-setup's template", func(t *testing.T) {
		more, only := opts, scope
		more.Attachment.Networks = []string{storageNet, secondNet}
		only.Names = []string{"machineset/ms-a"}
		report, err := Patch(ctx, dyn, only, more)
		if err != nil {
			t.Fatal(err)
		}
		r := report.Results[0]
		if len(report.Results) != 1 || r.Action != attach.ActionPatched || !slices.Equal(r.AddedNetworks, []string{secondNet}) || r.OldTemplate != newA {
			t.Fatalf("results: %+v", report.Results)
		}
		if !regexp.MustCompile(`^workers-a-manila-[0-9a-f]{8}$`).MatchString(r.Template) || r.Template == newA {
			t.Errorf("the next template of ms-a is named %q (was %q)", r.Template, newA)
		}
		if got := get(t, admin, TemplateGVR, r.Template).GetAnnotations()[ReplacesAnnotation]; got != newA {
			t.Errorf("it replaces %q, want %q", got, newA)
		}
		// Nothing uses the previous one: no Machine was made from it.
		if names := templateNames(t, admin); slices.Contains(names, newA) {
			t.Errorf("templates left: %v", names)
		}
	})

	t.Run("an unknown name is a selection error", func(t *testing.T) {
		bad := scope
		bad.Names = []string{"nope"}
		_, err := Patch(ctx, dyn, bad, opts)
		var sel *attach.SelectionError
		if err == nil || !strings.Contains(err.Error(), `"nope"`) || !errors.As(err, &sel) {
			t.Errorf("error: %v", err)
		}
	})
}

// TestPatchFileMatchesTheCluster: the objects of testdata/file, created on a real apiserver,
// then exported as `oc get -o yaml` does (a List, server fields included) and patched offline,
// and patched on the cluster, give the same references, records and new templates. (The export
// is the input of both: the apiserver drops the fields CAPO's schema does not know, so the file
// itself would hash to other template names.)
func TestPatchFileMatchesTheCluster(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	if err := api.InstallClusterAPICRDs(); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dyn := dynamic.NewForConfigOrDie(api.Config)
	const path = "testdata/file/openshift-cluster-api.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := filepatch.Parse(path, data)
	if err != nil {
		t.Fatal(err)
	}
	gvrs := map[string]schema.GroupVersionResource{TemplateKind: TemplateGVR, KindMachineSet: MachineSetGVR, KindMachineDeployment: MachineDeploymentGVR}
	var export []any
	for _, o := range f.Objects() {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(o.JSON, &u.Object); err != nil {
			t.Fatal(err)
		}
		if gvr, ok := gvrs[o.Kind]; ok {
			made := create(t, dyn, gvr, u)
			made.SetManagedFields(nil)
			export = append(export, made.Object)
		}
	}
	list, err := sigsyaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": export})
	if err != nil {
		t.Fatal(err)
	}
	offline, err := PatchFile(ctx, "export.yaml", list, Scope{}, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	online, err := Patch(ctx, dyn, Scope{Namespace: ns}, fileOpts())
	if err != nil {
		t.Fatal(err)
	}
	if len(online.Results) != len(offline.Results) {
		t.Fatalf("%d results on the cluster, %d offline", len(online.Results), len(offline.Results))
	}
	compared := 0
	for _, raw := range offline.Objects {
		var want unstructured.Unstructured
		if err := json.Unmarshal(raw, &want.Object); err != nil {
			t.Fatal(err)
		}
		got := get(t, dyn, gvrs[want.GetKind()], want.GetName())
		for _, field := range [][]string{{"spec"}, {"metadata", "annotations"}, {"metadata", "labels"}} {
			w, _, _ := unstructured.NestedFieldNoCopy(want.Object, field...)
			g, _, _ := unstructured.NestedFieldNoCopy(got.Object, field...)
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			if !filepatch.SameJSON(wj, gj) {
				t.Errorf("%s %s .%s:\n offline %s\ncluster %s", want.GetKind(), want.GetName(), strings.Join(field, "."), wj, gj)
			}
		}
		compared++
	}
	if compared != 4 { // 2 sets, 2 new templates
		t.Errorf("compared %d objects, want 4", compared)
	}
}
