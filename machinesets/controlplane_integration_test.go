//go:build integration

package machinesets

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	machinev1 "github.com/openshift/api/machine/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// TestControlPlaneMachineSetPatchAndRemove: on a real apiserver with the
// ControlPlaneMachineSet CRD of openshift/api, the installer's set gets the storage network
// (uuid, noAllowedAddressPairs) after its machine network entry and the group after the master
// group, every other field kept, the record written; a second patch writes nothing; the
// removal gives the template's providerSpec back as it was and drops the record. A set whose
// masters are not at rest is refused, naming why, and --force overrules that.
func TestControlPlaneMachineSetPatchAndRemove(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	cpms := createControlPlane(t, ctx, mc, machinectl.ControlPlaneMachineSet("ostest-cp1"))
	original := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw
	want := attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}
	target := ControlPlaneTarget{Client: mc}

	dry, err := attach.Patch(ctx, target, attach.Options{Attachment: want, DryRun: true, By: "test"})
	if err != nil || len(dry) != 1 || dry[0].Action != attach.ActionWouldPatch || !strings.Contains(dry[0].Diff, "+- noAllowedAddressPairs: true") {
		t.Fatalf("dry run: %v %+v", err, dry)
	}
	if got := getControlPlane(t, ctx, mc); got.ResourceVersion != cpms.ResourceVersion {
		t.Fatalf("the dry run wrote the set (resourceVersion %s -> %s)", cpms.ResourceVersion, got.ResourceVersion)
	}
	res, err := attach.Patch(ctx, target, attach.Options{Attachment: want, By: "test"})
	if err != nil || len(res) != 1 || res[0].Action != attach.ActionPatched || !strings.Contains(res[0].Warning, "RollingUpdate") {
		t.Fatalf("patch: %v %+v", err, res)
	}
	patched := getControlPlane(t, ctx, mc)
	var spec struct {
		Networks       []map[string]any `json:"networks"`
		SecurityGroups []map[string]any `json:"securityGroups"`
		Trunk          bool             `json:"trunk"`
		UserDataSecret map[string]any   `json:"userDataSecret"`
	}
	if err := json.Unmarshal(patched.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw, &spec); err != nil {
		t.Fatal(err)
	}
	if len(spec.Networks) != 2 || spec.Networks[1]["uuid"] != storageNet || spec.Networks[1]["noAllowedAddressPairs"] != true ||
		len(spec.SecurityGroups) != 2 || spec.SecurityGroups[0]["name"] != "ostest-cp1-master" || spec.SecurityGroups[1]["uuid"] != storageSG ||
		!spec.Trunk || spec.UserDataSecret["name"] != "master-user-data" {
		t.Errorf("the set's providerSpec after the patch: %+v", spec)
	}
	if rec := attach.RecordIn(patched.Annotations); rec == nil || !reflect.DeepEqual(rec.Networks, []string{storageNet}) {
		t.Errorf("record after the patch: %+v", rec)
	}

	// Asked again before the operator has even seen the change: nothing to do, nothing refused.
	again, err := attach.Patch(ctx, target, attach.Options{Attachment: want, By: "test"})
	if err != nil || len(again) != 1 || again[0].Action != attach.ActionUnchanged {
		t.Fatalf("second patch: %v %+v", err, again)
	}
	if got := getControlPlane(t, ctx, mc); got.ResourceVersion != patched.ResourceVersion {
		t.Errorf("the second patch wrote the set")
	}
	// Removing while the operator has not seen the change: refused as a busy set.
	_, err = attach.Patch(ctx, target, attach.Options{Remove: &attach.Removal{}, By: "test"})
	if busy := (*ControlPlaneRefusedError)(nil); !errors.As(err, &busy) || !strings.Contains(err.Error(), "has not seen its current spec yet") {
		t.Fatalf("removal before the operator observed the patch: %v, want a refusal", err)
	}

	// The operator saw the change and replaced the masters.
	patched.Status.ObservedGeneration = patched.Generation
	if _, err := mc.MachineV1().ControlPlaneMachineSets(Namespace).UpdateStatus(ctx, patched, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	removed, err := attach.Patch(ctx, target, attach.Options{Remove: &attach.Removal{}, By: "test"})
	if err != nil || len(removed) != 1 || removed[0].Action != attach.ActionPatched {
		t.Fatalf("remove: %v %+v", err, removed)
	}
	back := getControlPlane(t, ctx, mc)
	if !jsonEqual(t, back.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw, original) {
		t.Errorf("after the removal the providerSpec is\n%s\nwant the original\n%s", back.Spec.Template.OpenShiftMachineV1Beta1Machine.Spec.ProviderSpec.Value.Raw, original)
	}
	if _, ok := back.Annotations[attach.Annotation]; ok {
		t.Errorf("the record is left after the removal: %v", back.Annotations)
	}

	// A master being replaced: refused, then forced.
	back.Status.UpdatedReplicas, back.Status.ObservedGeneration = 2, back.Generation
	if _, err := mc.MachineV1().ControlPlaneMachineSets(Namespace).UpdateStatus(ctx, back, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = attach.Patch(ctx, target, attach.Options{Attachment: want, By: "test"})
	var refused *ControlPlaneRefusedError
	if !errors.As(err, &refused) || !refused.Forceable || !strings.Contains(err.Error(), "updated 2") {
		t.Fatalf("a set with a master being replaced: %v, want a forceable refusal naming the counts", err)
	}
	forced, err := attach.Patch(ctx, ControlPlaneTarget{Client: mc, Force: true}, attach.Options{Attachment: want, By: "test"})
	if err != nil || len(forced) != 1 || forced[0].Action != attach.ActionPatched {
		t.Fatalf("--force: %v %+v", err, forced)
	}
}

// TestControlPlaneMachineSetMissing: a cluster without the set gets a selection error that says so.
func TestControlPlaneMachineSetMissing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc, err := machineclient.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	_, err = attach.Patch(ctx, ControlPlaneTarget{Client: mc}, attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}}})
	var selection *attach.SelectionError
	if !errors.As(err, &selection) || !strings.Contains(err.Error(), "no ControlPlaneMachineSet cluster in namespace openshift-machine-api") {
		t.Fatalf("got %v, want a selection error naming the missing set", err)
	}
	st, err := ControlPlaneList(ctx, mc, nil, attach.Attachment{})
	if err != nil || st != nil {
		t.Errorf("ControlPlaneList without a set: %+v, %v; want nil, nil", st, err)
	}
}

// TestControlPlaneOperatorsCheck: the masters are not changed while etcd, kube-apiserver,
// machine-api or control-plane-machine-set is unavailable, progressing or degraded, or one of
// them is not reported (forceable, named with its condition's message, `controlplane list`
// saying the same); with all four Available the set is patched; a cluster reporting none of
// them (no cluster version operator) is not judged.
func TestControlPlaneOperatorsCheck(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc := machineclient.NewForConfigOrDie(api.Config)
	dyn := dynamic.NewForConfigOrDie(api.Config)
	createControlPlane(t, ctx, mc, machinectl.ControlPlaneMachineSet("ostest-co1"))
	want := attach.Attachment{Networks: []string{storageNet}}
	target := ControlPlaneTarget{Client: mc, Operators: dyn}
	dry := attach.Options{Attachment: want, DryRun: true, By: "test"}

	// No ClusterOperator at all: not judged.
	if res, err := attach.Patch(ctx, target, dry); err != nil || res[0].Action != attach.ActionWouldPatch {
		t.Fatalf("no ClusterOperators: %v %+v", err, res)
	}
	setOperator := func(name string, conds ...map[string]any) {
		t.Helper()
		co := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "metadata": map[string]any{"name": name}, "spec": map[string]any{}}}
		r := dyn.Resource(clusterOperatorGVR)
		got, err := r.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if got, err = r.Create(ctx, co, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		list := make([]any, 0, len(conds))
		for _, c := range conds {
			c["lastTransitionTime"] = "2026-11-27T10:00:00Z"
			list = append(list, c)
		}
		got.Object["status"] = map[string]any{"conditions": list}
		if _, err := r.UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	healthy := func(name string) {
		setOperator(name, map[string]any{"type": "Available", "status": "True"}, map[string]any{"type": "Progressing", "status": "False"},
			map[string]any{"type": "Degraded", "status": "False"})
	}
	healthy("etcd")
	healthy("kube-apiserver")
	refusedWith := func(what string, parts ...string) {
		t.Helper()
		_, err := attach.Patch(ctx, target, dry)
		var refused *ControlPlaneRefusedError
		if !errors.As(err, &refused) || !refused.Forceable {
			t.Fatalf("%s: got %v, want a forceable refusal", what, err)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %q does not say %q", what, err, p)
			}
		}
		st, err := ControlPlaneList(ctx, mc, dyn, want)
		if err != nil || !strings.Contains(st.Note, parts[0]) {
			t.Errorf("%s: controlplane list note %q (%v), want it to say %q", what, st.Note, err, parts[0])
		}
	}
	refusedWith("two of four reported", "ClusterOperators machine-api, control-plane-machine-set are not reported")
	healthy("machine-api")
	setOperator("control-plane-machine-set", map[string]any{"type": "Available", "status": "True"},
		map[string]any{"type": "Degraded", "status": "True", "reason": "UnmanagedNodes", "message": "found unmanaged control plane nodes"})
	refusedWith("degraded", "ClusterOperator control-plane-machine-set is Degraded (found unmanaged control plane nodes)")
	healthy("control-plane-machine-set")
	setOperator("etcd", map[string]any{"type": "Available", "status": "False", "message": "2 of 3 members are available"},
		map[string]any{"type": "Progressing", "status": "True", "reason": "NodeInstaller"})
	refusedWith("etcd short of a member", "ClusterOperator etcd is not Available (2 of 3 members are available) and is Progressing (NodeInstaller)")
	if res, err := attach.Patch(ctx, ControlPlaneTarget{Client: mc, Operators: dyn, Force: true}, dry); err != nil || res[0].Action != attach.ActionWouldPatch {
		t.Errorf("--force: %v %+v", err, res)
	}
	healthy("etcd")
	if res, err := attach.Patch(ctx, target, attach.Options{Attachment: want, By: "test"}); err != nil || res[0].Action != attach.ActionPatched {
		t.Errorf("all four Available: %v %+v", err, res)
	}
}

// createControlPlane creates the set and writes its status, as the operator reports it.
func createControlPlane(t *testing.T, ctx context.Context, mc machineclient.Interface, cpms *machinev1.ControlPlaneMachineSet) *machinev1.ControlPlaneMachineSet {
	t.Helper()
	created, err := machinectl.CreateAtRest(ctx, mc, cpms)
	if err != nil {
		t.Fatal(err)
	}
	return created
}

func getControlPlane(t *testing.T, ctx context.Context, mc machineclient.Interface) *machinev1.ControlPlaneMachineSet {
	t.Helper()
	cpms, err := mc.MachineV1().ControlPlaneMachineSets(Namespace).Get(ctx, ControlPlaneName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cpms
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestControlPlaneQuotaForOneMoreMaster: with a cloud, a patch of the masters is refused while
// the project's quotas (real Nova and Neutron) cannot hold the one more master a replacement
// makes, each short quota named; --force overrules; with room, it is patched.
func TestControlPlaneQuotaForOneMoreMaster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p := ostest.NewProject(t, testenv.NewCloud(t), "cpquota")
	cloud, err := openstack.Connect(ctx, openstack.Config{Cloud: ostest.CloudName, CloudsFile: p.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc := machineclient.NewForConfigOrDie(api.Config)
	createControlPlane(t, ctx, mc, machinectl.ControlPlaneMachineSet("ostest-cq1"))
	dry := attach.Options{Attachment: attach.Attachment{Networks: []string{storageNet}}, DryRun: true, By: "test"}
	target := ControlPlaneTarget{Client: mc, Room: cloud.RoomForServer}

	// The installer's template: flavor m1.xlarge (8 cores, 16 GiB), one network; with the
	// storage network, two ports.
	uses, err := cloud.RoomForServer(ctx, openstack.ServerNeeds{Flavor: "m1.xlarge", Ports: 2})
	if err != nil || len(uses) != 4 || uses[1].Needs != 8 || uses[2].Needs != 16384 || uses[3].Needs != 2 {
		t.Fatalf("a new project's room for one master: %v %+v", err, uses)
	}
	if res, err := attach.Patch(ctx, target, dry); err != nil || res[0].Action != attach.ActionWouldPatch {
		t.Fatalf("with room: %v %+v", err, res)
	}

	p.SetNovaQuota(0, 4, 51200)
	p.SetNeutronQuota(10, 10, 1)
	_, err = attach.Patch(ctx, target, dry)
	var refused *ControlPlaneRefusedError
	if !errors.As(err, &refused) || !refused.Forceable {
		t.Fatalf("no room: got %v, want a forceable refusal", err)
	}
	for _, want := range []string{"replacing a master makes one more first (flavor m1.xlarge, 2 ports)", fmt.Sprintf("project %q", p.Name),
		"Nova instances: 0 of 0 in use (0 reserved), one more server needs 1", "Nova cores: 0 of 4 in use (0 reserved), one more server needs 8",
		"Neutron ports: 0 of 1 in use (0 reserved), one more server needs 2", "openstack quota set"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if strings.Contains(err.Error(), "ram") {
		t.Errorf("the refusal names the RAM, which has room: %v", err)
	}
	forced := ControlPlaneTarget{Client: mc, Room: cloud.RoomForServer, Force: true}
	if res, err := attach.Patch(ctx, forced, dry); err != nil || res[0].Action != attach.ActionWouldPatch {
		t.Errorf("--force: %v %+v", err, res)
	}
	if _, err := cloud.RoomForServer(ctx, openstack.ServerNeeds{Flavor: "no-such-flavor", Ports: 1}); openstack.KindOf(err) != openstack.KindNotFound ||
		!strings.Contains(err.Error(), `flavor "no-such-flavor"`) {
		t.Errorf("an unknown flavor: %v", err)
	}
}
