//go:build integration

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	operatorclient "github.com/openshift/client-go/operator/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDriverRunsOnPlainKubernetes is driver mode off OpenShift, on a real kubelet: a cluster that
// serves none of OpenShift's APIs (no Infrastructure, no service-ca, no Cloud Credential
// Operator, no cluster-config-v1). `operator install --machine-network` installs the operator,
// which runs as a pod and deploys the driver. Nothing plays service-ca, so the controller pod
// starts only if the operator wrote its metrics serving certificate itself. A claim is then
// provisioned by the controller pod, with no request of any ServiceAccount refused.
func TestDriverRunsOnPlainKubernetes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{ServiceAccountTokens: true, PlainKubernetes: true}})
	images := map[string]string{}
	im := operator.DefaultImages
	for env, ref := range im.ImageEnv() {
		images[env] = *ref
	}
	// A one-node cluster as kubeadm makes it: control plane, untainted for workloads.
	node := testenv.NewRealNode(t, sim, testenv.RealNodeOptions{Images: images,
		Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}})
	kc := sim.Client
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	ns := operator.DefaultNamespace
	t.Cleanup(func() { noRefusedRequests(t, sim) })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(podReport(context.Background(), kc, node, ns))
		}
	})

	// No install-config in the cluster: the machine network is the user's to give.
	out := installOnRealNode(t, ctx, sim, cloud, node, "--machine-network", node.Network)
	t.Logf("operator install:\n%s", out)
	start := time.Now()
	for _, w := range []struct{ kind, name string }{
		{"Deployment", operator.OperatorName},
		{"DaemonSet", operator.NFSNodeDaemonSetName},
		{"DaemonSet", operator.NodeDaemonSetName},
		{"Deployment", operator.ControllerDeploymentName},
	} {
		pod := waitPodReady(t, ctx, kc, ns, w.kind, w.name, node.Name)
		t.Logf("%s %s: pod %s Ready after %s", w.kind, w.name, pod.Name, time.Since(start).Round(time.Second))
	}

	// The controller's metrics serving certificate is the operator's own: nothing else writes it
	// here.
	const certSecret = "manila-csi-driver-controller-metrics-serving-cert"
	secret, err := kc.CoreV1().Secrets(ns).Get(ctx, certSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("Secret %s/%s: %v", ns, certSecret, err)
	}
	if secret.Labels[operator.LabelManagedBy] != operator.ManagedByValue {
		t.Errorf("Secret %s: labels %v, want the operator's", certSecret, secret.Labels)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil {
		t.Fatalf("Secret %s: no PEM certificate in %s", certSecret, corev1.TLSCertKey)
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if err := cert.VerifyHostname("manila-csi-driver-controller-metrics." + ns + ".svc"); err != nil {
		t.Errorf("Secret %s: %v", certSecret, err)
	}

	// A claim, provisioned by the controller pod's csi-provisioner.
	_, pv := claimProvisionedByTheDriver(t, ctx, kc, "app")
	t.Logf("claim Bound to %s (share %s) after %s", pv.Name, pv.Spec.CSI.VolumeHandle, time.Since(start).Round(time.Second))

	// The ClusterCSIDriver says the driver is available, off OpenShift too.
	err = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		st, err := clusterCSIDriverConditions(ctx, sim)
		return err == nil && st["ManilaDriverControllerServiceAvailable"] == "True" && st["MetricsServingCertAvailable"] == "True", nil
	})
	if err != nil {
		st, _ := clusterCSIDriverConditions(ctx, sim)
		t.Errorf("ClusterCSIDriver conditions: %v", st)
	}
}

// clusterCSIDriverConditions returns the ClusterCSIDriver's conditions, by type, to their status.
func clusterCSIDriverConditions(ctx context.Context, sim *testenv.SimCluster) (map[string]string, error) {
	oc, err := operatorclient.NewForConfig(sim.Config)
	if err != nil {
		return nil, err
	}
	d, err := oc.OperatorV1().ClusterCSIDrivers().Get(ctx, operator.DriverName, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range d.Status.Conditions {
		out[c.Type] = string(c.Status)
	}
	return out, nil
}
