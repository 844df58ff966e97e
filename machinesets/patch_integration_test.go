//go:build integration

package machinesets

//lint:file-ignore SA1019 MachineSets written before networks[].uuid name the network in filter.id: the count includes them

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/test/testenv"
)

var storageWant = attach.Attachment{Networks: []string{storageNet}, SecurityGroups: []string{storageSG}}

// corpusCluster is an apiserver holding a mix of MachineSets as a real OpenStack cluster has
// them, plus an infra set, an AWS set and the control plane.
type corpusCluster struct {
	api     *testenv.APIServer
	mc      machineclient.Interface
	counter *requestCounter
	sets    map[string]*machinev1beta1.MachineSet // as created, by name
}

var corpusSets = []struct{ file, name, role string }{
	{"installer-default", "ostest-worker-0", ""},
	{"primary-subnet", "ostest-worker-1", ""},
	{"ports-sriov", "ostest-worker-sriov", ""},
	{"unknown-fields", "ostest-worker-future", ""},
	{"rootvolume-no-securitygroups", "ostest-worker-az2", ""},
	{"already-attached", "ostest-worker-attached", ""},
	{"network-by-filter-id", "ostest-worker-filter", ""},
	{"aws", "ostest-worker-aws", ""},
	{"control-plane", "ostest-master", ""},
	{"installer-default", "ostest-infra-0", "infra"},
}

func newCorpusCluster(t *testing.T) *corpusCluster {
	t.Helper()
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	createNamespace(t, ctx, api.Config)
	mc, counter := countingClient(t, api.Config)
	c := &corpusCluster{api: api, mc: mc, counter: counter, sets: map[string]*machinev1beta1.MachineSet{}}
	for _, s := range corpusSets {
		c.sets[s.name] = createCorpus(t, ctx, mc, s.file, s.name, s.role)
	}
	counter.reset()
	return c
}

func (c *corpusCluster) get(t *testing.T, name string) *machinev1beta1.MachineSet {
	t.Helper()
	ms, err := c.mc.MachineV1beta1().MachineSets(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// TestPatchOnARealAPIServer patches the corpus on a kube-apiserver with openshift/api's CRDs:
// the right sets change, in one LIST and one PATCH each, nothing else in them changes (unknown
// fields included, as the server stores them), and a second run writes nothing.
func TestPatchOnARealAPIServer(t *testing.T) {
	c := newCorpusCluster(t)
	ctx := context.Background()

	results, err := Patch(ctx, c.mc, Selection{}, attach.Options{Attachment: storageWant, By: "manila-setup test"})
	if err != nil {
		t.Fatal(err)
	}
	byName := resultsByName(results)
	want := map[string]string{
		"ostest-worker-0": attach.ActionPatched, "ostest-worker-1": attach.ActionPatched, "ostest-worker-sriov": attach.ActionPatched,
		"ostest-worker-future": attach.ActionPatched, "ostest-worker-az2": attach.ActionPatched, "ostest-worker-filter": attach.ActionPatched,
		"ostest-worker-attached": attach.ActionUnchanged, "ostest-worker-aws": attach.ActionSkipped, "ostest-master": attach.ActionSkipped,
		"ostest-infra-0": attach.ActionSkipped,
	}
	for name, action := range want {
		if byName[name].Action != action {
			t.Errorf("%s: %s (%s), want %s", name, byName[name].Action, byName[name].Reason, action)
		}
	}
	if len(results) != len(want) {
		t.Errorf("%d results, want %d: %+v", len(results), len(want), results)
	}
	if got := c.counter.get("LIST machinesets"); got != 1 || c.counter.get("PATCH machinesets") != 6 || c.counter.total() != 7 {
		t.Errorf("requests: %s; want 1 LIST and 6 PATCH, nothing else", c.counter)
	}

	for name, before := range c.sets {
		after := c.get(t, name)
		if want[name] != attach.ActionPatched {
			if after.ResourceVersion != before.ResourceVersion {
				t.Errorf("%s was %s but its resourceVersion moved", name, want[name])
			}
			continue
		}
		spec, err := DecodeProviderSpec(templateProviderSpec(after))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !spec.HasNetwork(storageNet) || !spec.HasSecurityGroup(storageSG) {
			t.Errorf("%s lacks the storage network or security group after patching", name)
		}
		// A ports-first providerSpec (no networks[]) gets it as a ports[] entry.
		list := "networks"
		count := 0
		for _, n := range spec.Spec.Networks {
			if strings.EqualFold(n.UUID, storageNet) || strings.EqualFold(n.Filter.ID, storageNet) {
				count++
			}
		}
		if len(spec.Spec.Networks) == 0 {
			list = "ports"
			for _, p := range spec.Spec.Ports {
				if strings.EqualFold(p.NetworkID, storageNet) {
					count++
				}
			}
		}
		if count != 1 {
			t.Errorf("%s has the storage network %d times in %s[]", name, count, list)
		}
		b, a := genericSpec(t, templateProviderSpec(before)), genericSpec(t, templateProviderSpec(after))
		for k, v := range b {
			if k != list && k != "securityGroups" && !reflect.DeepEqual(a[k], v) {
				t.Errorf("%s: providerSpec.%s changed on the server: %v -> %v", name, k, v, a[k])
			}
		}
		if rec := attach.RecordIn(after.Annotations); rec == nil || rec.By != "manila-setup test" || !reflect.DeepEqual(rec.Networks, []string{storageNet}) {
			t.Errorf("%s: annotation %q", name, after.Annotations[attach.Annotation])
		}
		if !reflect.DeepEqual(after.Spec.Template.Labels, before.Spec.Template.Labels) || *after.Spec.Replicas != *before.Spec.Replicas {
			t.Errorf("%s: something besides the providerSpec changed", name)
		}
	}
	future := genericSpec(t, templateProviderSpec(c.get(t, "ostest-worker-future")))
	if future["hypervisorHints"] == nil || future["volumeEncryption"] == nil {
		t.Errorf("unknown top-level fields were dropped: %v", future)
	}
	if nets := future["networks"].([]any); nets[0].(map[string]any)["futureNetworkOption"] == nil {
		t.Errorf("unknown field inside networks[0] was dropped: %v", nets[0])
	}

	// Idempotent: the second run reads once and writes nothing.
	c.counter.reset()
	again, err := Patch(ctx, c.mc, Selection{}, attach.Options{Attachment: storageWant})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range again {
		if r.Action == attach.ActionPatched {
			t.Errorf("second run patched %s again", r.Name)
		}
	}
	if c.counter.total() != 1 {
		t.Errorf("second run made requests %s, want the one LIST", c.counter)
	}

	// Named explicitly, a non-worker set is patched; the control plane never is.
	named, err := Patch(ctx, c.mc, Selection{Names: []string{"ostest-infra-0", "ostest-master"}}, attach.Options{Attachment: storageWant})
	if err != nil {
		t.Fatal(err)
	}
	if byName := resultsByName(named); byName["ostest-infra-0"].Action != attach.ActionPatched || byName["ostest-master"].Action != attach.ActionSkipped {
		t.Errorf("--name infra and master: %+v", named)
	}
}

func TestPatchSelectionAndDryRun(t *testing.T) {
	c := newCorpusCluster(t)
	ctx := context.Background()

	_, err := Patch(ctx, c.mc, Selection{Names: []string{"ostest-worker-0", "nope"}}, attach.Options{Attachment: storageWant})
	var selErr *attach.SelectionError
	if !errors.As(err, &selErr) || !strings.Contains(err.Error(), "MachineSet nope not found in namespace openshift-machine-api") {
		t.Errorf("unknown --name: %v", err)
	}
	if c.counter.get("PATCH machinesets") != 0 {
		t.Errorf("an unknown --name still patched: %s", c.counter)
	}

	c.counter.reset()
	results, err := Patch(ctx, c.mc, Selection{Selector: RoleLabel + "=worker"}, attach.Options{Attachment: storageWant, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if c.counter.total() != 1 {
		t.Errorf("dry run made requests %s, want the one LIST", c.counter)
	}
	byName := resultsByName(results)
	if r := byName["ostest-worker-0"]; r.Action != attach.ActionWouldPatch || !strings.Contains(r.Diff, "+- noAllowedAddressPairs: true\n+  uuid: "+storageNet) {
		t.Errorf("dry run of ostest-worker-0: %+v", r)
	}
	if _, ok := byName["ostest-infra-0"]; ok {
		t.Error("--selector role=worker returned the infra set")
	}
	for name, before := range c.sets {
		if c.get(t, name).ResourceVersion != before.ResourceVersion {
			t.Errorf("dry run changed %s", name)
		}
	}
}

// TestPatchRetriesOnConflict slips a concurrent writer between our LIST and our PATCH: the
// PATCH is refused (its resourceVersion is stale), the set is read again and patched on top of
// the other writer's change, which survives. When the other writer added the storage network
// itself, the retry finds it there and adds no duplicate.
func TestPatchRetriesOnConflict(t *testing.T) {
	c := newCorpusCluster(t)
	ctx := context.Background()
	other, err := machineclient.NewForConfig(c.api.Config)
	if err != nil {
		t.Fatal(err)
	}
	interfere := func(name string, patch string) {
		var once sync.Once
		c.counter.mu.Lock()
		c.counter.before = func(verb, resource string) {
			if verb == "PATCH" && resource == "machinesets" {
				once.Do(func() {
					if _, err := other.MachineV1beta1().MachineSets(Namespace).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
						t.Errorf("concurrent writer: %v", err)
					}
				})
			}
		}
		c.counter.mu.Unlock()
	}

	interfere("ostest-worker-0", `[{"op":"add","path":"/metadata/labels/team","value":"storage"},{"op":"replace","path":"/spec/replicas","value":5}]`)
	results, err := Patch(ctx, c.mc, Selection{Names: []string{"ostest-worker-0"}}, attach.Options{Attachment: storageWant})
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Action != attach.ActionPatched || r.ConflictRetries != 1 {
		t.Errorf("result %+v, want patched after 1 conflict", r)
	}
	if c.counter.get("GET machinesets") != 1 || c.counter.get("PATCH machinesets") != 2 {
		t.Errorf("requests %s: want the refused PATCH, one GET and the PATCH again", c.counter)
	}
	ms := c.get(t, "ostest-worker-0")
	spec, _ := DecodeProviderSpec(templateProviderSpec(ms))
	if ms.Labels["team"] != "storage" || *ms.Spec.Replicas != 5 || spec == nil || !spec.HasNetwork(storageNet) {
		t.Errorf("after the conflict: labels %v replicas %d, storage network %v", ms.Labels, *ms.Spec.Replicas, spec != nil && spec.HasNetwork(storageNet))
	}

	// The other writer attaches the same network (as another admin running the same command).
	c.counter.reset()
	interfere("ostest-worker-1", fmt.Sprintf(`[{"op":"add","path":"/spec/template/spec/providerSpec/value/networks/-","value":{"uuid":%q}},{"op":"add","path":"/spec/template/spec/providerSpec/value/securityGroups/-","value":{"uuid":%q}}]`, storageNet, storageSG))
	results, err = Patch(ctx, c.mc, Selection{Names: []string{"ostest-worker-1"}}, attach.Options{Attachment: storageWant})
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Action != attach.ActionUnchanged || r.ConflictRetries != 1 {
		t.Errorf("result %+v, want unchanged after 1 conflict", r)
	}
	spec, _ = DecodeProviderSpec(templateProviderSpec(c.get(t, "ostest-worker-1")))
	n := 0
	for _, net := range spec.Spec.Networks {
		if net.UUID == storageNet {
			n++
		}
	}
	if n != 1 {
		t.Errorf("storage network %d times after two writers attached it", n)
	}
}

// TestPatchAsReadOnlyUser: a user who may read MachineSets but not patch them gets a sentence
// naming the set and the missing permission, and nothing changes; one who may not even list
// them is told so.
func TestPatchAsReadOnlyUser(t *testing.T) {
	c := newCorpusCluster(t)
	ctx := context.Background()
	kc := mustKube(t, c.api.Config)
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "machinesets-view", Namespace: Namespace},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"machine.openshift.io"}, Resources: []string{"machinesets", "machines"}, Verbs: []string{"get", "list", "watch"}}},
	}
	if _, err := kc.RbacV1().Roles(Namespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer", Namespace: Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "viewer"}},
	}
	if _, err := kc.RbacV1().RoleBindings(Namespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	viewerCfg, err := c.api.UserConfig("viewer")
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := machineclient.NewForConfig(viewerCfg)
	if err != nil {
		t.Fatal(err)
	}

	// Reading works: list shows the sets.
	if sets, err := List(ctx, viewer, storageWant); err != nil || len(sets) != len(corpusSets) {
		t.Fatalf("viewer cannot list: %v (%d sets)", err, len(sets))
	}
	results, err := Patch(ctx, viewer, Selection{}, attach.Options{Attachment: storageWant})
	if err == nil {
		t.Fatalf("read-only user patched: %+v", results)
	}
	for _, want := range []string{
		"patching MachineSet openshift-machine-api/ostest-worker-0 was refused",
		`User "viewer" cannot patch resource "machinesets" in API group "machine.openshift.io"`,
		"needs the patch verb on machinesets.machine.openshift.io in openshift-machine-api",
		"nothing was changed",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\ndoes not say %q", err, want)
		}
	}
	for name, before := range c.sets {
		if c.get(t, name).ResourceVersion != before.ResourceVersion {
			t.Errorf("read-only user changed %s", name)
		}
	}

	nobodyCfg, _ := c.api.UserConfig("nobody")
	nobody, _ := machineclient.NewForConfig(nobodyCfg)
	_, err = Patch(ctx, nobody, Selection{}, attach.Options{Attachment: storageWant})
	if err == nil || !strings.Contains(err.Error(), "listing MachineSets in openshift-machine-api was refused") || !strings.Contains(err.Error(), `User "nobody" cannot list`) {
		t.Errorf("user without rights: %v", err)
	}
}

// TestPatchChecksIDsInNeutron runs the --os-cloud check against the loopback OpenStack: real IDs
// pass, an unknown ID and a security group given as a network are refused before the cluster
// is even read.
func TestPatchChecksIDsInNeutron(t *testing.T) {
	cloud := testenv.NewCloud(t)
	c := newCorpusCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := openstack.Connect(ctx, openstack.Config{Cloud: testenv.CloudDemo, CloudsFile: cloud.CloudsFile})
	if err != nil {
		t.Fatal(err)
	}
	checker := attach.NeutronChecker{Client: client}
	storage, nfsSG := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]

	tests := []struct {
		name    string
		a       attach.Attachment
		wantErr string
	}{
		{"unknown network", attach.Attachment{Networks: []string{"0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"}}, "network 0a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d does not exist"},
		{"security group as network", attach.Attachment{Networks: []string{storage, nfsSG}}, nfsSG + " is a security group, not a network"},
		{"network as security group", attach.Attachment{Networks: []string{storage}, SecurityGroups: []string{storage}}, storage + " is a network, not a security group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c.counter.reset()
			_, err := Patch(ctx, c.mc, Selection{}, attach.Options{Attachment: tt.a, Checker: checker})
			var unknown *attach.UnknownIDsError
			if !errors.As(err, &unknown) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "nothing was changed") {
				t.Errorf("error %v, want an attach.UnknownIDsError saying %q", err, tt.wantErr)
			}
			if c.counter.total() != 0 {
				t.Errorf("the cluster was contacted before the IDs were checked: %s", c.counter)
			}
		})
	}

	results, err := Patch(ctx, c.mc, Selection{}, attach.Options{Attachment: attach.Attachment{Networks: []string{storage}, SecurityGroups: []string{nfsSG}}, Checker: checker})
	if err != nil {
		t.Fatal(err)
	}
	if r := resultsByName(results)["ostest-worker-0"]; r.Action != attach.ActionPatched || r.AddedNetworks[0] != storage {
		t.Errorf("patch with real IDs: %+v", r)
	}
}

// TestListOnARealAPIServer: list reports each set's state for the IDs asked, or for those
// recorded by a patch.
func TestListOnARealAPIServer(t *testing.T) {
	c := newCorpusCluster(t)
	ctx := context.Background()
	if _, err := Patch(ctx, c.mc, Selection{Names: []string{"ostest-worker-0"}}, attach.Options{Attachment: storageWant}); err != nil {
		t.Fatal(err)
	}
	c.counter.reset()
	sets, err := List(ctx, c.mc, attach.Attachment{})
	if err != nil {
		t.Fatal(err)
	}
	if c.counter.total() != 2 {
		t.Errorf("list made requests %s, want two LISTs", c.counter)
	}
	got := map[string]SetStatus{}
	for _, s := range sets {
		got[s.Name] = s
	}
	if s := got["ostest-worker-0"]; s.StorageNetwork != attach.StateAttached || s.SecurityGroups != attach.StateAttached || s.Recorded == nil || s.Replicas != 3 {
		t.Errorf("patched set: %+v", s)
	}
	if s := got["ostest-worker-1"]; s.StorageNetwork != attach.StateUnknown {
		t.Errorf("set without a record and no IDs asked: %+v", s)
	}
	if s := got["ostest-worker-aws"]; s.StorageNetwork != attach.StateNA || !strings.Contains(s.Note, "not OpenStack") {
		t.Errorf("aws set: %+v", s)
	}

	sets, err = List(ctx, c.mc, storageWant)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		got[s.Name] = s
	}
	for name, want := range map[string][2]string{
		"ostest-worker-0": {attach.StateAttached, attach.StateAttached}, "ostest-worker-1": {attach.StateMissing, attach.StateMissing},
		"ostest-worker-filter": {attach.StateAttached, attach.StateMissing}, "ostest-worker-attached": {attach.StateAttached, attach.StateAttached},
	} {
		if s := got[name]; s.StorageNetwork != want[0] || s.SecurityGroups != want[1] {
			t.Errorf("%s: network %s, security groups %s; want %v", name, s.StorageNetwork, s.SecurityGroups, want)
		}
	}
}
