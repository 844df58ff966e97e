//go:build integration

package machinesets

import (
	"context"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestClusterAPIAuthoritativeSetsAreLeftAlone: on a cluster that runs the Machine API → Cluster
// API migration (the TechPreviewNoUpgrade CRDs), MachineSets whose machines follow their Cluster
// API copy, or soon will, are not patched, listed as n/a and not rolled, each with the reason;
// a Machine API set is patched, with what to check if it migrates later.
func TestClusterAPIAuthoritativeSetsAreLeftAlone(t *testing.T) {
	ctx := context.Background()
	api := testenv.NewAPIServer(t)
	if err := api.UseMachineAPIFeatureSet("TechPreviewNoUpgrade"); err != nil {
		t.Fatal(err)
	}
	createNamespace(t, ctx, api.Config)
	mc, counter := countingClient(t, api.Config)
	sets := map[string]struct {
		spec, status machinev1beta1.MachineAuthority
		reason       string // "" for the set that is patched
	}{
		"ostest-worker-capi":      {machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityClusterAPI, "Cluster API is authoritative"},
		"ostest-worker-migrating": {machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMigrating, "migrating between the Machine API and Cluster API"},
		"ostest-worker-asked":     {machinev1beta1.MachineAuthorityClusterAPI, machinev1beta1.MachineAuthorityMachineAPI, "asked to migrate to Cluster API"},
		"ostest-worker-mapi":      {machinev1beta1.MachineAuthorityMachineAPI, machinev1beta1.MachineAuthorityMachineAPI, ""},
	}
	before := map[string]string{}
	for name, s := range sets {
		ms := createCorpus(t, ctx, mc, "installer-default", name, "")
		ms.Spec.AuthoritativeAPI = s.spec
		ms, err := mc.MachineV1beta1().MachineSets(Namespace).Update(ctx, ms, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ms.Status.AuthoritativeAPI = s.status
		if ms, err = mc.MachineV1beta1().MachineSets(Namespace).UpdateStatus(ctx, ms, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if ms.Spec.AuthoritativeAPI != s.spec || ms.Status.AuthoritativeAPI != s.status {
			t.Fatalf("%s: the apiserver kept authoritativeAPI %q/%q, want %q/%q (is the feature set's CRD served?)", name, ms.Spec.AuthoritativeAPI, ms.Status.AuthoritativeAPI, s.spec, s.status)
		}
		before[name] = ms.ResourceVersion
	}
	counter.reset()

	results, err := Patch(ctx, mc, Selection{}, attach.Options{Attachment: storageWant, By: "manila-setup test"})
	if err != nil {
		t.Fatal(err)
	}
	byName := resultsByName(results)
	for name, s := range sets {
		r := byName[name]
		switch {
		case s.reason == "" && (r.Action != attach.ActionPatched || !strings.Contains(r.Warning, "noAllowedAddressPairs")):
			t.Errorf("%s: %s (%s), warning %q; want patched, with the migration warning", name, r.Action, r.Reason, r.Warning)
		case s.reason != "" && (r.Action != attach.ActionSkipped || !strings.Contains(r.Reason, s.reason) || r.Warning != ""):
			t.Errorf("%s: %s (%s); want skipped because %s", name, r.Action, r.Reason, s.reason)
		}
	}
	if got := counter.get("PATCH machinesets"); got != 1 {
		t.Errorf("%d PATCH requests, want 1 (the Machine API set only): %s", got, counter)
	}
	for name, rv := range before {
		ms, err := mc.MachineV1beta1().MachineSets(Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if (ms.ResourceVersion != rv) != (sets[name].reason == "") {
			t.Errorf("%s: resourceVersion %s -> %s", name, rv, ms.ResourceVersion)
		}
	}

	listed, err := List(ctx, mc, storageWant)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range listed {
		s := sets[st.Name]
		if s.reason != "" && (st.StorageNetwork != attach.StateNA || !strings.Contains(st.Note, s.reason)) {
			t.Errorf("list %s: %s (%s); want n/a because %s", st.Name, st.StorageNetwork, st.Note, s.reason)
		}
		if s.reason == "" && st.StorageNetwork != attach.StateAttached {
			t.Errorf("list %s: %s, want attached", st.Name, st.StorageNetwork)
		}
	}

	progress, err := Rollout(ctx, mc, kubernetes.NewForConfigOrDie(api.Config), Selection{Names: []string{"ostest-worker-capi", "ostest-worker-migrating", "ostest-worker-asked"}}, rollout.Options{MaxSurge: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range progress {
		if p.State != rollout.Skipped || !strings.Contains(p.Phase, sets[p.Name].reason) {
			t.Errorf("rollout %s: %s (%s); want skipped because %s", p.Name, p.State, p.Phase, sets[p.Name].reason)
		}
	}
}
