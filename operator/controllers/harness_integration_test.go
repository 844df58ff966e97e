//go:build integration

package controllers

import (
	"context"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configclient "github.com/openshift/client-go/config/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/deploy"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// openStackCluster makes the sim cluster an OpenShift-on-OpenStack one as far as the operator
// reads it: the Infrastructure (infraName, platform OpenStack), the install-config kept in
// kube-system/cluster-config-v1, and the openshift-machine-api namespace.
func (h *harness) openStackCluster(infraName, installConfig string) {
	h.t.Helper()
	cfgc := configclient.NewForConfigOrDie(h.sim.Config)
	infra, err := cfgc.ConfigV1().Infrastructures().Create(h.ctx, &configv1.Infrastructure{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	infra.Status = configv1.InfrastructureStatus{InfrastructureName: infraName, ControlPlaneTopology: configv1.HighlyAvailableTopologyMode,
		InfrastructureTopology: configv1.HighlyAvailableTopologyMode, PlatformStatus: &configv1.PlatformStatus{Type: configv1.OpenStackPlatformType}}
	if _, err := cfgc.ConfigV1().Infrastructures().UpdateStatus(h.ctx, infra, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.sim.Client.CoreV1().ConfigMaps(machinery.ClusterConfigNamespace).Create(h.ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: machinery.ClusterConfigName}, Data: map[string]string{"install-config": installConfig},
	}, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.sim.Client.CoreV1().Namespaces().Create(h.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinery.MachineAPINamespace}}, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// installAsServiceAccount installs the rendered operator with creds (a clouds.yaml) in its
// credentials Secret, as `operator install` does, and returns the client configuration of the
// operator's ServiceAccount, so that the operator runs with the RBAC it is rendered with. klog
// writes to h.logs until the test ends.
func (h *harness) installAsServiceAccount(creds []byte) *rest.Config {
	h.t.Helper()
	rendered, err := operator.Render(operator.RenderOptions{Namespace: testNS, OperatorImage: "example.test/op:1", Images: testImages})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := deploy.Install(h.ctx, h.sim.Config, rendered, testNS, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: creds}}); err != nil {
		h.t.Fatal(err)
	}
	return h.runAs(testNS, operator.OperatorName)
}

// runAs returns the client configuration of ServiceAccount namespace/name, and has klog write to
// h.logs until the test ends.
func (h *harness) runAs(namespace, name string) *rest.Config {
	h.t.Helper()
	saCfg, err := h.sim.UserConfig("system:serviceaccount:"+namespace+":"+name, "system:serviceaccounts", "system:serviceaccounts:"+namespace, "system:authenticated")
	if err != nil {
		h.t.Fatal(err)
	}
	klog.SetOutput(h.logs)
	h.t.Cleanup(func() { klog.SetOutput(os.Stderr) })
	return saCfg
}

// installCompanionAsServiceAccount installs the companion as `operator install` does beside the
// platform's Manila operator, with creds in its credentials Secret, and returns the client
// configuration of the companion's ServiceAccount. klog writes to h.logs until the test ends.
func (h *harness) installCompanionAsServiceAccount(creds []byte) *rest.Config {
	h.t.Helper()
	rendered, err := operator.Render(operator.RenderOptions{Mode: platform.ModeCompanion, OperatorImage: "example.test/manila-setup:1"})
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := deploy.Install(h.ctx, h.sim.Config, rendered, operator.CompanionNamespace, deploy.InstallOptions{Credentials: map[string][]byte{operator.CredentialsKey: creds}}); err != nil {
		h.t.Fatal(err)
	}
	return h.runAs(operator.CompanionNamespace, operator.CompanionOperatorName)
}

// start runs the operator made from cfg with saCfg until stop is called (h.op is it).
func (h *harness) start(saCfg *rest.Config, cfg Config) (stop func()) {
	h.t.Helper()
	op, err := New(saCfg, nil, cfg)
	if err != nil {
		h.t.Fatal(err)
	}
	h.op = op
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	h.started = time.Now()
	go func() { defer close(done); _ = op.Run(ctx) }()
	return func() { cancel(); <-done }
}
