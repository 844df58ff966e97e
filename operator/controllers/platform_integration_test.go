//go:build integration

package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestOperatorStepsAsideForThePlatform: the operator deploys the driver on OpenShift on
// OpenStack with the Storage capability disabled; then the capability is enabled, as an admin
// can do on a running cluster, and the platform's cluster-storage-operator starts its own Manila
// operator under the same names. From the moment the operator sees it, the apiserver's audit log
// shows no write of the operator's but Events and its lease, whatever the platform changes, and
// nothing it deployed is deleted.
func TestOperatorStepsAsideForThePlatform(t *testing.T) {
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cc := configclient.NewForConfigOrDie(api.Config)
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ostest-mode1", PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallPlatform(ctx, api.Config, testenv.PlatformOptions{StorageCapabilityDisabled: true}); err != nil {
		t.Fatal(err)
	}
	h := installAndRun(t, ctx, api, cloudsYAMLFor(t, cloud, testenv.CloudDemo, strings.TrimSuffix(cloud.Seed.KeystoneURL, "/v3")))
	op, dyn := h.op, h.dyn

	h.eventually("DriverMode=True StorageCapabilityDisabled", settle, h.condIs(ConditionDriverMode, operatorv1.ConditionTrue, platform.ReasonStorageCapabilityDisabled))
	h.eventually("operands deployed", settle, h.operandsExist)

	// The admin enables the Storage capability: ClusterVersion says so, the storage
	// ClusterOperator lists the Manila ClusterCSIDriver, and CSO writes to it.
	patchStatus := func(resource, name, body string) {
		t.Helper()
		gvr := configv1.GroupVersion.WithResource(resource)
		if _, err := dyn.Resource(gvr).Patch(ctx, name, types.MergePatchType, []byte(body), metav1.PatchOptions{FieldManager: "cluster-version-operator"}, "status"); err != nil {
			t.Fatal(err)
		}
	}
	patchStatus("clusterversions", "version", `{"status":{"capabilities":{"enabledCapabilities":["baremetal","Console","Insights","Storage","CSISnapshot","MachineAPI"]}}}`)
	patchStatus("clusteroperators", "storage", `{"status":{"relatedObjects":[{"group":"","resource":"namespaces","name":"openshift-cluster-storage-operator"},
		{"group":"operator.openshift.io","resource":"clustercsidrivers","name":"manila.csi.openstack.org"}]}}`)
	h.eventually("the operator sees the platform", settle, func() (bool, string) {
		d := op.Detection()
		if d == nil || d.Mode != platform.ModeCompanion {
			return false, fmt.Sprintf("detection %+v", d)
		}
		return true, ""
	})
	// A write that passed its gate before the switch may still be on its way to the apiserver:
	// count from the moment every controller has finished a sync begun after the switch.
	h.waitSyncs(2)
	seen := time.Now()
	// What would make the operator write in driver mode: the platform's operator changes the
	// ClusterCSIDriver's spec (log level: every workload would be re-rendered).
	if _, err := dyn.Resource(machinery.ClusterCSIDriverGVR).Patch(ctx, operator.DriverName, types.MergePatchType,
		[]byte(`{"spec":{"logLevel":"Debug"}}`), metav1.PatchOptions{FieldManager: "cluster-storage-operator"}); err != nil {
		t.Fatal(err)
	}
	h.waitSyncs(3)

	writes, err := api.Writes(func(w testenv.AuditWrite) bool {
		return testenv.ByUserAgent(operator.OperatorName)(w) && w.Time.After(seen) &&
			w.Resource != "events" && w.Resource != "leases"
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 0 {
		t.Errorf("the operator wrote after the platform took over:\n%v", writes)
	}
	// The filter sees the operator's writes at all: those before the switch.
	if before, err := api.Writes(func(w testenv.AuditWrite) bool {
		return testenv.ByUserAgent(operator.OperatorName)(w) && w.Resource == "deployments"
	}); err != nil || len(before) == 0 {
		t.Errorf("the audit filter sees no Deployment written by the operator before the switch (%v): it could not see one after", err)
	}
	if ok, msg := h.operandsExist(); !ok {
		t.Errorf("an operand was deleted on the mode change: %s", msg)
	}
	ctrl, err := api.Client.AppsV1().Deployments(testNS).Get(ctx, operator.ControllerDeploymentName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(ctrl.Spec.Template.Spec.Containers[0].Args, " "); strings.Contains(args, "--v=4") {
		t.Errorf("the controller Deployment was re-rendered for the platform's log level: %s", args)
	}
	evs, err := api.Client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{FieldSelector: "reason=PlatformTookOver"})
	if err != nil || len(evs.Items) != 1 {
		t.Fatalf("PlatformTookOver events: %v %v", evs, err)
	}
	t.Logf("Event PlatformTookOver: %s", evs.Items[0].Message)
	if !strings.Contains(evs.Items[0].Message, "deleted nothing") {
		t.Errorf("the Event does not say that nothing was deleted: %s", evs.Items[0].Message)
	}
}

// TestOperatorOffOpenStackDoesNothing: on a cluster whose Infrastructure says another platform,
// the running operator writes nothing but DriverMode=False (NotOpenStack) on its own
// ClusterCSIDriver, and Events.
func TestOperatorOffOpenStackDoesNothing(t *testing.T) {
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cc := configclient.NewForConfigOrDie(api.Config)
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ostest-aws1", PlatformStatus: &configv1.PlatformStatus{Type: configv1.AWSPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// What `operator render | kubectl apply` leaves: the ClusterCSIDriver, ours by its label.
	dyn := dynamic.NewForConfigOrDie(api.Config)
	csi := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operator.openshift.io/v1", "kind": "ClusterCSIDriver",
		"metadata": map[string]any{"name": operator.DriverName, "labels": map[string]any{operator.LabelManagedBy: "manila-setup"}},
		"spec":     map[string]any{"managementState": "Managed"}}}
	if _, err := dyn.Resource(machinery.ClusterCSIDriverGVR).Create(ctx, csi, metav1.CreateOptions{FieldManager: "manila-setup"}); err != nil {
		t.Fatal(err)
	}
	op, err := New(api.Config, nil, Config{Namespace: testNS, Images: testImages, Resync: 2 * time.Second, MachineNetworks: []string{"10.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, kube: api.Client, dyn: dyn, op: op, logs: &testenv.SyncBuffer{}}
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = op.Run(opCtx) }()
	t.Cleanup(func() { stop(); <-done })
	h.eventually("DriverMode=False NotOpenStack", settle, h.condIs(ConditionDriverMode, operatorv1.ConditionFalse, platform.ReasonNotOpenStack))
	t.Logf("DriverMode: %s", h.condition(ConditionDriverMode).Message)
	h.waitSyncs(3)
	writes, err := api.Writes(testenv.ByUserAgent(operator.OperatorName))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range writes {
		if w.Resource != "clustercsidrivers/status" && w.Resource != "events" {
			t.Errorf("the operator wrote off OpenStack: %s", w)
		}
	}
	if len(writes) == 0 {
		t.Error("the audit log shows not even the condition's write")
	}
}
