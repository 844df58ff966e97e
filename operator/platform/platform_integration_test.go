//go:build integration

package platform_test

import (
	"context"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/operator/platform"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDetectOnAPIServer walks one real API server through the kinds of cluster, as objects
// written by their real writers' field managers make them, and a second one through a cluster
// whose Storage capability is off.
func TestDetectOnAPIServer(t *testing.T) {
	ctx := context.Background()
	detect := func(t *testing.T, api *testenv.APIServer, mode platform.Mode, reason string, mentions ...string) {
		t.Helper()
		dyn, err := dynamic.NewForConfig(api.Config)
		if err != nil {
			t.Fatal(err)
		}
		d, err := platform.Detect(ctx, platform.Dynamic(dyn))
		if err != nil {
			t.Fatal(err)
		}
		if d.Mode != mode || d.Reason != reason {
			t.Errorf("mode %s (%s), want %s (%s): %s", d.Mode, d.Reason, mode, reason, d.Message)
		}
		for _, m := range mentions {
			if !strings.Contains(d.Message, m) {
				t.Errorf("message %q does not mention %q", d.Message, m)
			}
		}
	}
	infrastructure := func(t *testing.T, api *testenv.APIServer, platformType configv1.PlatformType) {
		t.Helper()
		cc, err := configclient.NewForConfig(api.Config)
		if err != nil {
			t.Fatal(err)
		}
		infra, err := cc.ConfigV1().Infrastructures().Get(ctx, "cluster", metav1.GetOptions{})
		if err != nil {
			infra, err = cc.ConfigV1().Infrastructures().Create(ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{FieldManager: "cluster-bootstrap"})
			if err != nil {
				t.Fatal(err)
			}
		}
		infra.Status.PlatformStatus = &configv1.PlatformStatus{Type: platformType}
		infra.Status.InfrastructureName = "ostest-8x2kq"
		infra.Status.ControlPlaneTopology = configv1.HighlyAvailableTopologyMode
		infra.Status.InfrastructureTopology = configv1.HighlyAvailableTopologyMode
		if _, err := cc.ConfigV1().Infrastructures().UpdateStatus(ctx, infra, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	api := testenv.NewAPIServer(t)
	detect(t, api, platform.ModeDriver, platform.ReasonNotOpenShift)
	infrastructure(t, api, configv1.AWSPlatformType)
	detect(t, api, platform.ModeNone, platform.ReasonNotOpenStack, "AWS")
	infrastructure(t, api, configv1.OpenStackPlatformType)
	detect(t, api, platform.ModeDriver, platform.ReasonNoPlatformManilaOperator)
	if err := testenv.InstallPlatform(ctx, api.Config, testenv.PlatformOptions{}); err != nil {
		t.Fatal(err)
	}
	detect(t, api, platform.ModeCompanion, platform.ReasonPlatformManilaOperator,
		"Deployment openshift-cluster-csi-drivers/manila-csi-driver-operator (managed by cluster-storage-operator)",
		"ClusterCSIDriver manila.csi.openstack.org (managed by cluster-storage-operator)")
	// Detection only reads; the audit log shows the stand-in's one create and nothing else.
	writes, err := api.Writes(func(w testenv.AuditWrite) bool { return w.Name == platform.PlatformOperatorName })
	if err != nil {
		t.Fatal(err)
	}
	if len(writes) != 2 || writes[0].Verb != "create" || writes[0].Code != 201 {
		t.Errorf("writes to %s: %v, want the stand-in's creates of its ServiceAccount and Deployment", platform.PlatformOperatorName, writes)
	}

	off := testenv.NewAPIServer(t)
	infrastructure(t, off, configv1.OpenStackPlatformType)
	if err := testenv.InstallPlatform(ctx, off.Config, testenv.PlatformOptions{StorageCapabilityDisabled: true}); err != nil {
		t.Fatal(err)
	}
	detect(t, off, platform.ModeDriver, platform.ReasonStorageCapabilityDisabled)

	pending := testenv.NewAPIServer(t)
	infrastructure(t, pending, configv1.OpenStackPlatformType)
	if err := testenv.InstallPlatform(ctx, pending.Config, testenv.PlatformOptions{ManilaPending: true}); err != nil {
		t.Fatal(err)
	}
	detect(t, pending, platform.ModeCompanion, platform.ReasonPlatformManilaOperator, "not created yet")
}
