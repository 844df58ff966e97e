package platform

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// objects is a Getter over a fixed set of objects, for the decision table; the integration test
// runs the same decisions against a real API server.
type objects map[string]*unstructured.Unstructured

func key(gvr schema.GroupVersionResource, namespace, name string) string {
	return gvr.Resource + "/" + namespace + "/" + name
}

func (o objects) Get(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if u, ok := o[key(gvr, namespace, name)]; ok {
		if u == nil {
			return nil, errors.New("connection refused")
		}
		u = u.DeepCopy()
		u.SetName(name)
		u.SetNamespace(namespace)
		return u, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func obj(fields map[string]any, labels map[string]string, managers ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: fields}
	u.SetLabels(labels)
	var mf []metav1.ManagedFieldsEntry
	for _, m := range managers {
		mf = append(mf, metav1.ManagedFieldsEntry{Manager: m, Operation: metav1.ManagedFieldsOperationUpdate})
	}
	u.SetManagedFields(mf)
	return u
}

func TestDetect(t *testing.T) {
	openstack := obj(map[string]any{"status": map[string]any{"platformStatus": map[string]any{"type": "OpenStack"}}}, nil)
	aws := obj(map[string]any{"status": map[string]any{"platformStatus": map[string]any{"type": "AWS"}}}, nil)
	specOnly := obj(map[string]any{"spec": map[string]any{"platformSpec": map[string]any{"type": "OpenStack"}}}, nil)
	ours := map[string]string{managedByLabel: "manila-setup"}
	csoDeployment := obj(map[string]any{}, map[string]string{"app": "manila-csi-driver-operator"}, "cluster-storage-operator")
	csoDriver := obj(map[string]any{}, nil, "cluster-storage-operator", "ManilaDriverStaticResourcesController")
	ourDeployment := obj(map[string]any{}, ours, "manila-setup", "kube-controller-manager")
	ourDriverOldInstall := obj(map[string]any{}, nil, "manila-setup", "ManilaController", "kubectl-edit")
	damaged := obj(map[string]any{}, ours, "cluster-storage-operator", "manila-setup")
	owned := obj(map[string]any{}, ours, "manila-setup")
	owned.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "operator.openshift.io/v1", Kind: "ClusterCSIDriver", Name: DriverName, UID: "1"}})
	storageOff := obj(map[string]any{"status": map[string]any{"capabilities": map[string]any{"enabledCapabilities": []any{"baremetal", "Console"}}}}, nil)
	storageOn := obj(map[string]any{"status": map[string]any{"capabilities": map[string]any{"enabledCapabilities": []any{"Storage", "Console"}}}}, nil)
	csoListsManila := obj(map[string]any{"status": map[string]any{"relatedObjects": []any{
		map[string]any{"group": "operator.openshift.io", "resource": "clustercsidrivers", "name": DriverName}}}}, nil)
	csoWithout := obj(map[string]any{"status": map[string]any{"relatedObjects": []any{
		map[string]any{"group": "operator.openshift.io", "resource": "clustercsidrivers", "name": "cinder.csi.openstack.org"}}}}, nil)

	infraKey := key(gvrInfrastructure, "", "cluster")
	depKey := key(gvrDeployment, PlatformNamespace, PlatformOperatorName)
	csiKey := key(gvrClusterCSIDriver, "", DriverName)
	cvKey := key(gvrClusterVersion, "", "version")
	coKey := key(gvrClusterOperator, "", "storage")

	tests := []struct {
		name       string
		cluster    objects
		mode       Mode
		reason     string
		mentioning string
	}{
		{"Kubernetes without OpenShift APIs", objects{}, ModeDriver, ReasonNotOpenShift, "Kubernetes"},
		{"another platform", objects{infraKey: aws}, ModeNone, ReasonNotOpenStack, "AWS"},
		{"OpenStack, no CSO", objects{infraKey: openstack}, ModeDriver, ReasonNoPlatformManilaOperator, "no storage ClusterOperator"},
		{"OpenStack by spec only", objects{infraKey: specOnly}, ModeDriver, ReasonNoPlatformManilaOperator, ""},
		{"CSO's Deployment", objects{infraKey: openstack, depKey: csoDeployment}, ModeCompanion, ReasonPlatformManilaOperator,
			"Deployment openshift-cluster-csi-drivers/manila-csi-driver-operator (managed by cluster-storage-operator)"},
		{"CSO's ClusterCSIDriver alone", objects{infraKey: openstack, csiKey: csoDriver}, ModeCompanion, ReasonPlatformManilaOperator,
			"ClusterCSIDriver manila.csi.openstack.org (managed by cluster-storage-operator, ManilaDriverStaticResourcesController)"},
		{"our own install, edited by a user", objects{infraKey: openstack, depKey: ourDeployment, csiKey: ourDriverOldInstall, cvKey: storageOff}, ModeDriver, ReasonStorageCapabilityDisabled, ""},
		{"CSO's Deployment that an old install applied over", objects{infraKey: openstack, depKey: damaged}, ModeCompanion, ReasonPlatformManilaOperator, "cluster-storage-operator"},
		{"our label on an object with an owner", objects{infraKey: openstack, depKey: owned}, ModeCompanion, ReasonPlatformManilaOperator, ""},
		{"Storage capability disabled", objects{infraKey: openstack, cvKey: storageOff, coKey: csoListsManila}, ModeDriver, ReasonStorageCapabilityDisabled, "disabled"},
		{"CSO about to run Manila", objects{infraKey: openstack, cvKey: storageOn, coKey: csoListsManila}, ModeCompanion, ReasonPlatformManilaOperator, "not created yet"},
		{"CSO without Manila", objects{infraKey: openstack, cvKey: storageOn, coKey: csoWithout}, ModeDriver, ReasonNoPlatformManilaOperator, ""},
		{"a cluster from before capabilities", objects{infraKey: openstack, cvKey: obj(map[string]any{}, nil), coKey: csoListsManila}, ModeCompanion, ReasonPlatformManilaOperator, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := Detect(context.Background(), tt.cluster)
			if err != nil {
				t.Fatal(err)
			}
			if d.Mode != tt.mode || d.Reason != tt.reason {
				t.Errorf("mode %s (%s), want %s (%s): %s", d.Mode, d.Reason, tt.mode, tt.reason, d.Message)
			}
			if !strings.Contains(d.Message, tt.mentioning) {
				t.Errorf("message %q does not mention %q", d.Message, tt.mentioning)
			}
			if (d.Mode == ModeCompanion) != (len(d.PlatformObjects) > 0) {
				t.Errorf("mode %s with platform objects %v", d.Mode, d.PlatformObjects)
			}
		})
	}

	// An API that cannot be read is an error, never a guess.
	if _, err := Detect(context.Background(), objects{infraKey: openstack, depKey: nil}); err == nil || !strings.Contains(err.Error(), "deployments openshift-cluster-csi-drivers/manila-csi-driver-operator") {
		t.Errorf("an unreadable Deployment: %v, want an error naming it", err)
	}
}
