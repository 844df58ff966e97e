package deploy

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// obj is a live object as the apiserver returns it: kind, namespace/name, our label or not,
// and the field managers that wrote it.
func obj(apiVersion, kind, namespace, name, label string, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetUID(types.UID("uid-" + name))
	if label != "" {
		u.SetLabels(map[string]string{operator.LabelManagedBy: label})
	}
	var mf []metav1.ManagedFieldsEntry
	for _, m := range managers {
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: m})
	}
	u.SetManagedFields(mf)
	return u
}

// fakeLookups answers what a namespace holds and what custom resources exist.
type fakeLookups struct {
	namespaces map[string][]string // every object of the namespace, as objectKey
	crs        map[string][]string // every custom resource of a CRD, as objectKey
}

func (f fakeLookups) othersIn(_ context.Context, ns string, deleting map[string]bool) ([]string, error) {
	return notIn(f.namespaces[ns], deleting), nil
}

func (f fakeLookups) customResources(_ context.Context, crd *unstructured.Unstructured, deleting map[string]bool) ([]string, error) {
	return notIn(f.crs[crd.GetName()], deleting), nil
}

func notIn(keys []string, deleting map[string]bool) []string {
	var out []string
	for _, k := range keys {
		if !deleting[k] {
			out = append(out, k)
		}
	}
	slices.Sort(out) // as the cluster's lookups answer
	return out
}

const ns = "openshift-cluster-csi-drivers"

// driverModeCandidates is a driver-mode install with the operator's operands, as uninstall
// reads it: render's objects (role operator or config), the operator's (role driver).
func driverModeCandidates() []candidate {
	c := func(u *unstructured.Unstructured, r role, rendered bool) candidate {
		return candidate{live: u, role: r, rendered: rendered}
	}
	return []candidate{
		c(obj("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "clustercsidrivers.operator.openshift.io", "", "manila-setup"), roleConfig, true),
		c(obj("v1", "Namespace", "", ns, "manila-setup", "manila-setup"), roleConfig, true),
		c(obj("v1", "ServiceAccount", ns, "manila-csi-driver-operator", "manila-setup", "manila-setup"), roleOperator, true),
		c(obj("rbac.authorization.k8s.io/v1", "ClusterRole", "", "manila-csi-driver-operator", "manila-setup", "manila-setup"), roleOperator, true),
		c(obj("apps/v1", "Deployment", ns, "manila-csi-driver-operator", "manila-setup", "manila-setup", "kube-controller-manager"), roleOperator, true),
		c(obj("operator.openshift.io/v1", "ClusterCSIDriver", "", operator.DriverName, "manila-setup", "manila-setup"), roleConfig, true),
		c(obj("v1", "Secret", ns, operator.CredentialsSecretName, "manila-setup", "manila-setup"), roleConfig, true),
		c(obj("v1", "Secret", ns, operator.DriverSecretName, operator.ManagedByValue, operator.OperatorName), roleDriver, false),
		c(obj("apps/v1", "Deployment", ns, operator.ControllerDeploymentName, operator.ManagedByValue, operator.OperatorName), roleDriver, false),
		c(obj("apps/v1", "DaemonSet", ns, operator.NodeDaemonSetName, operator.ManagedByValue, operator.OperatorName), roleDriver, false),
		c(obj("storage.k8s.io/v1", "StorageClass", "", "csi-manila-default", operator.ManagedByValue, operator.OperatorName), roleDriver, false),
		c(obj("storage.k8s.io/v1", "StorageClass", "", "csi-manila-fast", operator.ManagedByValue, operator.OperatorName), roleDriver, false),
		c(obj("storage.k8s.io/v1", "CSIDriver", "", operator.DriverName, operator.ManagedByValue, operator.OperatorName), roleDriver, false),
	}
}

func planOf(t *testing.T, cands []candidate, pvs []volume, opts UninstallOptions, look lookups) (uninstallPlan, map[string]PlannedObject) {
	t.Helper()
	if look == nil {
		look = fakeLookups{}
	}
	plan := planUninstall(context.Background(), cands, pvs, nil, opts, look)
	if plan.err != nil {
		t.Fatal(plan.err)
	}
	byKey := map[string]PlannedObject{}
	for _, p := range plan.objects {
		byKey[p.Key()] = p
	}
	return plan, byKey
}

// Everything ours goes, in order: the operator's Deployment first, its operands, the
// ClusterCSIDriver before the other cluster-scoped objects, the namespace, the CRD last.
func TestUninstallPlanOrder(t *testing.T) {
	plan, _ := planOf(t, driverModeCandidates(), nil, UninstallOptions{}, nil)
	var order []string
	for _, p := range plan.objects {
		if p.Action != ActionDelete {
			t.Errorf("%s: %s (%s), want delete", p.Key(), p.Action, p.Reason)
		}
		order = append(order, p.Key())
	}
	want := []string{
		"deployment/" + ns + "/manila-csi-driver-operator",
		"deployment/" + ns + "/" + operator.ControllerDeploymentName,
		"daemonset/" + ns + "/" + operator.NodeDaemonSetName,
		"serviceaccount/" + ns + "/manila-csi-driver-operator",
		"secret/" + ns + "/" + operator.CredentialsSecretName,
		"secret/" + ns + "/" + operator.DriverSecretName,
		"clustercsidriver/" + operator.DriverName,
		"clusterrole/manila-csi-driver-operator",
		"storageclass/csi-manila-default",
		"storageclass/csi-manila-fast",
		"csidriver/" + operator.DriverName,
		"namespace/" + ns,
		"customresourcedefinition/clustercsidrivers.operator.openshift.io",
	}
	if !slices.Equal(order, want) {
		t.Errorf("order\n  %s\nwant\n  %s", strings.Join(order, "\n  "), strings.Join(want, "\n  "))
	}
	if plan.deletesDriver() {
		return
	}
	t.Error("deletesDriver is false for a plan that deletes the driver")
}

// What is not ours is left, saying whose it is; what is ours and needed is kept, saying why.
func TestUninstallPlanOwnership(t *testing.T) {
	cands := driverModeCandidates()
	controlled := obj("v1", "ServiceAccount", ns, "owned", operator.ManagedByValue, operator.OperatorName)
	ctrl := true
	controlled.SetOwnerReferences([]metav1.OwnerReference{{Kind: "Deployment", Name: "someone", Controller: &ctrl}})
	for i, c := range cands {
		switch c.key() {
		case "deployment/" + ns + "/manila-csi-driver-operator":
			// The platform's, as cluster-storage-operator applies it (the defensive case).
			cands[i].live = obj("apps/v1", "Deployment", ns, "manila-csi-driver-operator", "", "cluster-storage-operator")
		case "secret/" + ns + "/" + operator.CredentialsSecretName:
			// Made by hand, then applied over by an install with --os-cloud.
			cands[i].live = obj("v1", "Secret", ns, operator.CredentialsSecretName, "manila-setup", "kubectl-create", "manila-setup")
		case "clustercsidriver/" + operator.DriverName:
			// Ours once, and the platform's since.
			cands[i].live = obj("operator.openshift.io/v1", "ClusterCSIDriver", "", operator.DriverName, "manila-setup", "manila-setup", "cluster-storage-operator")
		}
	}
	cands = append(cands, candidate{live: controlled, role: roleDriver})
	pvs := []volume{{name: "pv-b", driver: operator.DriverName, storageClass: "csi-manila-default"}, {name: "pv-a", driver: "other.csi", storageClass: "csi-manila-default"}}
	look := fakeLookups{
		namespaces: map[string][]string{ns: {"secret/" + ns + "/" + operator.CredentialsSecretName, "persistentvolumeclaim/" + ns + "/app-data"}},
		crs:        map[string][]string{"clustercsidrivers.operator.openshift.io": {"clustercsidriver/" + operator.DriverName, "clustercsidriver/cinder.csi.openstack.org"}},
	}
	plan, got := planOf(t, cands, pvs, UninstallOptions{Force: true}, look)
	want := map[string]struct {
		action Action
		reason string
	}{
		"deployment/" + ns + "/manila-csi-driver-operator":                 {ActionLeave, `not ours (managers "cluster-storage-operator")`},
		"secret/" + ns + "/" + operator.CredentialsSecretName:              {ActionLeave, `not created by manila-setup (managers "kubectl-create", "manila-setup")`},
		"clustercsidriver/" + operator.DriverName:                          {ActionLeave, `the platform writes it`},
		"serviceaccount/" + ns + "/owned":                                  {ActionLeave, "controlled by Deployment someone"},
		"storageclass/csi-manila-default":                                  {ActionKeep, "PersistentVolume(s) pv-a, pv-b name it"},
		"storageclass/csi-manila-fast":                                     {ActionDelete, ""},
		"deployment/" + ns + "/" + operator.ControllerDeploymentName:       {ActionDelete, ""},
		"namespace/" + ns:                                                  {ActionKeep, "2 object(s) that are not deleted, which would go with it: persistentvolumeclaim/" + ns + "/app-data, secret/"},
		"customresourcedefinition/clustercsidrivers.operator.openshift.io": {ActionKeep, "2 custom resource(s) of it remain that are not deleted: clustercsidriver/cinder.csi.openstack.org, clustercsidriver/" + operator.DriverName},
	}
	for key, w := range want {
		p, ok := got[key]
		if !ok {
			t.Errorf("%s: not in the plan", key)
			continue
		}
		if p.Action != w.action || !strings.Contains(p.Reason, w.reason) {
			t.Errorf("%s: %s (%s), want %s (%s)", key, p.Action, p.Reason, w.action, w.reason)
		}
	}
	if !slices.Equal(plan.driverVolumes, []string{"pv-b"}) {
		t.Errorf("volumes of the driver %v, want [pv-b]", plan.driverVolumes)
	}
}

// An object being deleted already (an earlier uninstall's namespace, say) is not deleted again.
func TestUninstallPlanTerminating(t *testing.T) {
	cands := driverModeCandidates()
	now := metav1.Now()
	for _, c := range cands {
		if c.live.GetKind() == "Namespace" {
			c.live.SetDeletionTimestamp(&now)
		}
	}
	_, got := planOf(t, cands, nil, UninstallOptions{}, nil)
	if p := got["namespace/"+ns]; p.Action != ActionDelete || !p.Terminating {
		t.Errorf("a terminating namespace: %+v", p)
	}
	if got["deployment/"+ns+"/manila-csi-driver-operator"].Terminating {
		t.Error("an object not being deleted is planned as terminating")
	}
}

// --keep-driver deletes the operator's own objects only.
func TestUninstallPlanKeepDriver(t *testing.T) {
	plan, _ := planOf(t, driverModeCandidates(), []volume{{name: "pv", driver: operator.DriverName, storageClass: "csi-manila-default"}}, UninstallOptions{KeepDriver: true}, nil)
	for _, p := range plan.objects {
		wantDelete := p.role == roleOperator
		if (p.Action == ActionDelete) != wantDelete {
			t.Errorf("%s (role %d): %s (%s)", p.Key(), p.role, p.Action, p.Reason)
		}
		if p.role == roleDriver && p.Key() != "storageclass/csi-manila-default" && !strings.Contains(p.Reason, "unmanaged") {
			t.Errorf("%s kept: reason %q does not say the driver runs on unmanaged", p.Key(), p.Reason)
		}
	}
	if plan.deletesDriver() {
		t.Error("--keep-driver deletes the driver")
	}
}

// Companion mode: the platform's objects are never candidates; what the companion installed and
// its StorageClasses go, and nothing the companion does counts as deleting the driver.
func TestUninstallPlanCompanion(t *testing.T) {
	const cns = operator.CompanionNamespace
	cands := []candidate{
		{live: obj("apps/v1", "Deployment", cns, operator.CompanionOperatorName, "manila-setup", "manila-setup"), role: roleOperator, rendered: true},
		{live: obj("v1", "Namespace", "", cns, "manila-setup", "manila-setup"), role: roleConfig, rendered: true},
		{live: obj("manila-setup.io/v1alpha1", operator.CompanionKind, "", operator.CompanionName, "manila-setup", "manila-setup"), role: roleConfig, rendered: true},
		{live: obj("storage.k8s.io/v1", "StorageClass", "", "manila-setup-default", operator.ManagedByValue, operator.CompanionOperatorName), role: roleDriver},
	}
	plan, got := planOf(t, cands, []volume{{name: "pv", driver: operator.DriverName, storageClass: "csi-manila-default"}}, UninstallOptions{},
		fakeLookups{namespaces: map[string][]string{cns: {"deployment/" + cns + "/" + operator.CompanionOperatorName}}})
	for key, p := range got {
		if p.Action != ActionDelete {
			t.Errorf("%s: %s (%s), want delete", key, p.Action, p.Reason)
		}
	}
	if plan.deletesDriver() {
		t.Error("the companion's uninstall counts as deleting the driver: a volume of the platform's driver would refuse it")
	}
	if got["manilacompanion/cluster"].phase != phaseCustomResource || plan.objects[0].Key() != "deployment/"+cns+"/"+operator.CompanionOperatorName {
		t.Errorf("order: %+v", plan.objects)
	}
}

// The label list covers every kind the operator writes.
func TestOperandKindsAreTheOperators(t *testing.T) {
	var want, got []string
	for _, k := range machinery.Kinds {
		want = append(want, k.GVR().String())
	}
	for _, gvr := range operandKinds {
		got = append(got, gvr.String())
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("operandKinds\n  %v\nthe operator writes\n  %v", got, want)
	}
}

// What uninstall reads for a mode: render's names, the credentials Secret and the Lease.
func TestRenderedObjectsForUninstall(t *testing.T) {
	for _, mode := range []platform.Mode{platform.ModeDriver, platform.ModeCompanion} {
		objs, err := renderedObjects(mode, operator.NamesFor(mode).Namespace)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, objectKey(o))
		}
		names := operator.NamesFor(mode)
		for _, want := range []string{"deployment/" + names.Namespace + "/" + names.Operator, "secret/" + names.Namespace + "/" + operator.CredentialsSecretName,
			"lease/" + names.Namespace + "/" + names.Operator + "-lock", "namespace/" + names.Namespace} {
			if !slices.Contains(keys, want) {
				t.Errorf("mode %s: %s not among %v", mode, want, keys)
			}
		}
	}
}

// Snapshots are the users': none is a candidate, a VolumeSnapshotClass a snapshot names is
// kept, and snapshots of the driver stop an uninstall that would delete the driver, as volumes do.
func TestUninstallPlanKeepsWhatSnapshotsName(t *testing.T) {
	cands := append(driverModeCandidates(),
		candidate{live: obj("snapshot.storage.k8s.io/v1", "VolumeSnapshotClass", "", operator.VolumeSnapshotClassName, operator.ManagedByValue, operator.OperatorName), role: roleDriver})
	snaps := []snapshotContent{
		{name: "snapcontent-b", driver: operator.DriverName, class: operator.VolumeSnapshotClassName},
		{name: "snapcontent-a", driver: operator.DriverName, class: operator.VolumeSnapshotClassName},
		{name: "snapcontent-other", driver: "cinder.csi.openstack.org", class: "standard-csi"},
	}
	plan := planUninstall(context.Background(), cands, nil, snaps, UninstallOptions{}, fakeLookups{})
	if plan.err != nil {
		t.Fatal(plan.err)
	}
	if !slices.Equal(plan.driverSnapshots, []string{"snapcontent-a", "snapcontent-b"}) {
		t.Errorf("driver's snapshots %v, want snapcontent-a and snapcontent-b (sorted, not the other driver's)", plan.driverSnapshots)
	}
	for _, p := range plan.objects {
		if p.Kind != "VolumeSnapshotClass" {
			continue
		}
		if p.Action != ActionKeep || p.Reason != "VolumeSnapshotContent(s) snapcontent-a, snapcontent-b name it (spec.volumeSnapshotClassName)" {
			t.Errorf("%s: %s (%s), want kept because the snapshots name it", p.Key(), p.Action, p.Reason)
		}
	}
	if !plan.deletesDriver() {
		t.Fatal("the plan deletes no part of the driver")
	}
	err := (&VolumesExistError{Snapshots: plan.driverSnapshots}).Error()
	if !strings.Contains(err, "2 VolumeSnapshotContent(s) (snapcontent-a, snapcontent-b)") || strings.Contains(err, "PersistentVolume(s) (") {
		t.Errorf("refusal %q: want it to name the 2 snapshots and no volume", err)
	}
	// Without snapshots naming it, the class goes with the driver.
	plan = planUninstall(context.Background(), cands, nil, nil, UninstallOptions{}, fakeLookups{})
	for _, p := range plan.objects {
		if p.Kind == "VolumeSnapshotClass" && p.Action != ActionDelete {
			t.Errorf("%s: %s (%s), want delete", p.Key(), p.Action, p.Reason)
		}
	}
}
