//go:build integration

package controllers

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// companionWindow is how long the companion runs beside the platform under watch. Five minutes
// (150 resyncs) by default; MANILA_SETUP_COMPANION_WINDOW shortens it while developing.
func companionWindow(t *testing.T) time.Duration {
	if v := os.Getenv("MANILA_SETUP_COMPANION_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("MANILA_SETUP_COMPANION_WINDOW: %v", err)
		}
		return d
	}
	return 5 * time.Minute
}

// TestCompanionBesideThePlatform: on OpenShift on OpenStack whose cluster-storage-operator runs
// the platform's Manila CSI driver operator (the stand-in writes its objects with the platform's
// field managers), `operator install` puts the companion in its own namespace, and the companion,
// running as its ServiceAccount (so the rendered RBAC is what is tested), adds StorageClasses
// restricted to the machine network beside the platform's and reports on its ManilaCompanion.
// Over the window, with a share type added and removed, a Manila blip and the platform changing
// its own objects, the audit log shows no write of the companion's but to its StorageClasses,
// its status and Events, and none at all to an object of the platform's. Then the platform's
// operator goes away: the companion says so and deletes nothing.
func TestCompanionBesideThePlatform(t *testing.T) {
	window := companionWindow(t)
	cloud := testenv.NewCloud(t)
	api := testenv.NewAPIServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), window+10*time.Minute)
	defer cancel()
	cc := configclient.NewForConfigOrDie(api.Config)
	infra, err := cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: "ostest-comp1", PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType},
		ControlPlaneTopology: configv1.HighlyAvailableTopologyMode, InfrastructureTopology: configv1.HighlyAvailableTopologyMode}
	if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := testenv.InstallPlatform(ctx, api.Config, testenv.PlatformOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().ConfigMaps("kube-system").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: machinery.ClusterConfigName},
		Data:       map[string]string{"install-config": "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	platformSC, err := api.Client.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	proxy := newCatalogProxy(t, cloud.Seed.KeystoneURL)
	rendered, err := operator.Render(operator.RenderOptions{Mode: platform.ModeCompanion, OperatorImage: "example.test/manila-setup:1"})
	if err != nil {
		t.Fatal(err)
	}
	// A project of the test's own: the share type it adds is private to it, unseen by the tests
	// that share the cloud meanwhile.
	own := newOwnProject(t, ctx, cloud, proxy.URL+"/v3")
	creds := own.CloudsYAML
	// The installer as the CLI identifies itself, so that the audit below tells its writes.
	installCfg := rest.CopyConfig(api.Config)
	installCfg.UserAgent = "manila-setup/test"
	var skipped []string
	applied, err := deploy.Install(ctx, installCfg, rendered, operator.CompanionNamespace, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: creds},
		OnSkipped: func(object, why string) { skipped = append(skipped, object) }})
	if err != nil {
		t.Fatalf("installing the companion beside the platform: %v (applied %v)", err, applied)
	}
	t.Logf("installed: %s", strings.Join(applied, ", "))
	// This cluster has no Prometheus Operator: its two kinds are left out, the rest is there.
	if want := []string{"servicemonitor/manila-csi-driver-operator-monitor", "prometheusrule/manila-csi-driver-operator"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %v, want %v", skipped, want)
	}
	if !slices.Contains(applied, "service/manila-csi-driver-operator-metrics") {
		t.Errorf("the companion's metrics Service was not applied: %v", applied)
	}

	sa := "system:serviceaccount:" + operator.CompanionNamespace + ":" + operator.CompanionOperatorName
	opCfg, err := api.UserConfig(sa, "system:serviceaccounts", "system:serviceaccounts:"+operator.CompanionNamespace, "system:authenticated")
	if err != nil {
		t.Fatal(err)
	}
	const resync = 2 * time.Second
	op, err := New(opCfg, nil, Config{Mode: platform.ModeCompanion, Resync: resync, ManilaGracePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, ctx: ctx, kube: api.Client, dyn: dynamic.NewForConfigOrDie(api.Config), op: op, logs: &testenv.SyncBuffer{}}
	opCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = op.Run(opCtx) }()
	t.Cleanup(func() { stop(); <-done })

	// What the platform lacks, beside what it has.
	ours := operator.CompanionStorageClassPrefix + "default"
	h.eventually("StorageClass "+ours, settle, func() (bool, string) {
		sc, err := api.Client.StorageV1().StorageClasses().Get(ctx, ours, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		p := sc.Parameters
		return p["nfs-shareClient"] == "10.196.0.0/16" && p["csi.storage.k8s.io/provisioner-secret-namespace"] == operator.PlatformDriverNamespace &&
			p["csi.storage.k8s.io/node-stage-secret-name"] == operator.DriverSecretName && sc.Provisioner == operator.DriverName, fmt.Sprint(p)
	})
	h.eventually("DriverMode=False PlatformManilaOperator", settle, h.condIs(ConditionDriverMode, operatorv1.ConditionFalse, platform.ReasonPlatformManilaOperator))
	h.eventually("PlatformDriverAvailable=True", settle, h.condIs(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionTrue, "AsExpected"))
	h.eventually("ManilaReachable=True", settle, h.condIs(operator.ConditionManilaReachable, operatorv1.ConditionTrue, ""))
	h.eventually("StorageNetworkReachable reported", settle, func() (bool, string) {
		c := h.condition(operator.ConditionStorageNetworkReachable)
		if c == nil {
			return false, "not set"
		}
		return c.Reason != "Checking", c.Reason + ": " + c.Message
	})
	for _, typ := range []string{ConditionDriverMode, operator.ConditionPlatformDriverAvailable, operator.ConditionStorageNetworkReachable, operator.ConditionManilaReachable} {
		c := h.condition(typ)
		t.Logf("ManilaCompanion %s=%s (%s): %s", typ, c.Status, c.Reason, c.Message)
	}

	t.Run("its conditions, for Prometheus, with the companion's own RBAC", func(t *testing.T) {
		defer func(parent *testing.T) { h.t = parent }(h.t)
		h.t = t
		serveForPrometheus(t, h, opCfg, operator.CompanionNamespace).checkConditions(t, h)
	})

	t.Run("a VolumeSnapshot the platform's driver refused for its share type is explained", func(t *testing.T) {
		defer func(parent *testing.T) { h.t = parent }(h.t)
		h.t = t
		explainsRefusedSnapshot(t, h, api)
	})

	// The window.
	start := time.Now()
	at := func(frac float64) {
		if d := time.Until(start.Add(time.Duration(frac * float64(window)))); d > 0 {
			time.Sleep(d)
		}
	}
	at(0.1)
	name := fmt.Sprintf("Companion_%d", time.Now().UnixNano()%100000)
	_, removeType := own.privateShareType(t, ctx, name)
	newSC := operator.CompanionStorageClassPrefix + strings.ToLower(strings.ReplaceAll(name, "_", "-"))
	took := h.eventually("a StorageClass for the new share type", settle, func() (bool, string) {
		_, err := api.Client.StorageV1().StorageClasses().Get(ctx, newSC, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	t.Logf("new share type %s to StorageClass %s in %.1fs", name, newSC, took.Seconds())

	at(0.25)
	proxy.strip.Store(true)
	h.eventually("ManilaReachable=False during the blip", settle, h.condIs(operator.ConditionManilaReachable, operatorv1.ConditionFalse, ""))
	at(0.35)
	proxy.strip.Store(false)
	h.eventually("ManilaReachable=True after the blip", settle, h.condIs(operator.ConditionManilaReachable, operatorv1.ConditionTrue, ""))

	// The platform goes on with its own objects: its operator changes the ClusterCSIDriver's spec
	// and reports its controller degraded, then recovered.
	at(0.45)
	platformPatch := func(body string, subresource ...string) {
		t.Helper()
		if _, err := h.dyn.Resource(machinery.ClusterCSIDriverGVR).Patch(ctx, operator.DriverName, types.MergePatchType, []byte(body),
			metav1.PatchOptions{FieldManager: "csi-operator"}, subresource...); err != nil {
			t.Fatal(err)
		}
	}
	platformPatch(`{"spec":{"logLevel":"Debug"}}`)
	degraded := func(status string) string {
		return `{"status":{"conditions":[
			{"type":"ManilaDriverControllerServiceControllerAvailable","status":"True","reason":"AsExpected","lastTransitionTime":"2026-01-01T00:00:00Z"},
			{"type":"ManilaDriverControllerServiceControllerDegraded","status":"` + status + `","reason":"SyncError","lastTransitionTime":"2026-01-01T00:00:00Z"},
			{"type":"ManilaDriverNodeServiceControllerAvailable","status":"True","reason":"AsExpected","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`
	}
	platformPatch(degraded("True"), "status")
	h.eventually("PlatformDriverAvailable=False while the platform reports Degraded", settle,
		h.condIs(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionFalse, "PlatformDriverUnhealthy"))
	t.Logf("PlatformDriverAvailable: %s", h.condition(operator.ConditionPlatformDriverAvailable).Message)
	at(0.55)
	platformPatch(degraded("False"), "status")
	h.eventually("PlatformDriverAvailable=True again", settle, h.condIs(operator.ConditionPlatformDriverAvailable, operatorv1.ConditionTrue, "AsExpected"))

	at(0.7)
	if err := removeType(); err != nil {
		t.Fatal(err)
	}
	h.eventually("the gone share type's StorageClass kept and marked", settle, func() (bool, string) {
		sc, err := api.Client.StorageV1().StorageClasses().Get(ctx, newSC, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return sc.Annotations[operator.AnnotationShareTypeGone] != "", fmt.Sprint(sc.Annotations)
	})
	at(1)
	h.waitSyncs(2)

	// The audit log of the whole run: the companion's writes, and anything written to the
	// platform's objects by the companion or by its installer.
	writes, err := api.Writes(func(w testenv.AuditWrite) bool {
		return w.User == sa || testenv.ByUserAgent("manila-setup")(w)
	})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, w := range writes {
		if platformObject(w) {
			t.Errorf("written to an object of the platform's: %s", w)
		}
		if w.User != sa {
			count["by the installer"]++
			continue
		}
		switch {
		case w.Resource == "storageclasses" && strings.HasPrefix(w.Name, operator.CompanionStorageClassPrefix),
			w.Resource == operator.CompanionResource+"/status" && w.Name == operator.CompanionName,
			w.Resource == "events":
			count[w.Resource]++
		case w.Resource == "tokenreviews", w.Resource == "subjectaccessreviews":
			// Questions to the API server about a caller of /metrics: they store nothing.
			count["reviews (no object)"]++
		default:
			t.Errorf("the companion wrote outside its own objects: %s", w)
		}
	}
	t.Logf("companion writes over %s (%d resyncs): %v", time.Since(start).Round(time.Second), int(time.Since(start)/resync), count)
	if count["storageclasses"] == 0 || count[operator.CompanionResource+"/status"] == 0 || count["by the installer"] < len(applied) {
		t.Errorf("the audit filter sees none of the companion's own writes: %v", count)
	}
	after, err := api.Client.StorageV1().StorageClasses().Get(ctx, platformSC.Name, metav1.GetOptions{})
	if err != nil || after.ResourceVersion != platformSC.ResourceVersion {
		t.Errorf("the platform's StorageClass changed: %v", err)
	}

	// The platform's Manila operator goes away (the Storage capability cannot be disabled once
	// enabled, but CSO can stop running a driver): the companion says so, deletes nothing.
	if err := h.dyn.Resource(machinery.ClusterCSIDriverGVR).Delete(ctx, operator.DriverName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(configv1.GroupVersion.WithResource("clusteroperators")).Patch(ctx, "storage", types.MergePatchType,
		[]byte(`{"status":{"relatedObjects":[{"group":"","resource":"namespaces","name":"openshift-cluster-storage-operator"}]}}`),
		metav1.PatchOptions{FieldManager: "cluster-version-operator"}, "status"); err != nil {
		t.Fatal(err)
	}
	if err := api.Client.AppsV1().Deployments(platform.PlatformNamespace).Delete(ctx, platform.PlatformOperatorName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventually("DriverMode=False NoPlatformDriver", settle, h.condIs(ConditionDriverMode, operatorv1.ConditionFalse, ReasonNoPlatformDriver))
	t.Logf("after the platform left: %s", h.condition(ConditionDriverMode).Message)
	if _, err := api.Client.StorageV1().StorageClasses().Get(ctx, ours, metav1.GetOptions{}); err != nil {
		t.Errorf("the companion's StorageClass went with the platform: %v", err)
	}
	evs, err := api.Client.CoreV1().Events(operator.CompanionNamespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=NoPlatformDriver"})
	if err != nil || len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "operator install --mode driver") {
		t.Errorf("Event NoPlatformDriver: %v %v", evs, err)
	}
}

// platformObject tells whether an audited write touched an object of the platform's: its
// ClusterCSIDriver, anything in its namespaces, its CSIDriver, its StorageClasses.
func platformObject(w testenv.AuditWrite) bool {
	switch {
	case strings.HasPrefix(w.Resource, "clustercsidrivers"), strings.HasPrefix(w.Resource, "csidrivers"):
		return true
	case w.Namespace == platform.PlatformNamespace || w.Namespace == operator.PlatformDriverNamespace:
		return w.Resource != "events"
	case w.Resource == "namespaces":
		return strings.HasPrefix(w.Name, "openshift-")
	case w.Resource == "storageclasses":
		return strings.HasPrefix(w.Name, operator.StorageClassPrefix)
	}
	return false
}

// explainsRefusedSnapshot: beside the platform, a VolumeSnapshot of a claim on the companion's
// class of a share type that cannot take snapshots (cephfs-fast), left refused by the driver as
// the snapshot-controller leaves one, gets the companion's Warning naming the share type and the
// classes that can (the platform's csi-manila-default among them), under the companion's RBAC.
func explainsRefusedSnapshot(t *testing.T, h *harness, api *testenv.APIServer) {
	ctx := h.ctx
	if _, err := api.InstallSnapshotCRDs(ctx); err != nil {
		t.Fatal(err)
	}
	const ns = "app"
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	class := operator.CompanionStorageClassPrefix + "cephfs-fast"
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "fast", Namespace: ns}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: &class,
		Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := api.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	snaps := h.dyn.Resource(machinery.VolumeSnapshotGVR).Namespace(ns)
	snap, err := snaps.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": "fast-snap", "namespace": ns},
		"spec":     map[string]any{"volumeSnapshotClassName": operator.VolumeSnapshotClassName, "source": map[string]any{"persistentVolumeClaimName": "fast"}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// What the snapshot-controller writes when the driver refused it.
	snap.Object["status"] = map[string]any{"readyToUse": false, "error": map[string]any{
		"message": "Failed to check and update snapshot content: rpc error: code = InvalidArgument desc = cannot create snapshot: parent share must advertise snapshot_support and create_share_from_snapshot_support capabilities"}}
	if _, err := snaps.UpdateStatus(ctx, snap, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	var msg string
	took := h.eventually("the Warning on VolumeSnapshot fast-snap", settle, func() (bool, string) {
		evs, err := api.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=fast-snap,reason=" + operator.ReasonShareTypeCannotSnapshot})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		msg = evs.Items[0].Message
		return true, msg
	})
	t.Logf("explained %.1fs after the refusal: %s", took.Seconds(), msg)
	for _, want := range []string{`share type "cephfs-fast" lacks snapshot_support=True and create_share_from_snapshot_support=True`,
		"claim app/fast (StorageClass " + class + ")", "csi-manila-default"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Warning does not say %q: %s", want, msg)
		}
	}
	// The VolumeSnapshotClass is the platform's here: the companion does not point at an
	// annotation only its driver mode writes.
	if strings.Contains(msg, operator.AnnotationSnapshotStorageClasses) {
		t.Errorf("the Warning names the annotation of the driver mode's VolumeSnapshotClass: %s", msg)
	}
}
