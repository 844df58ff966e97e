//go:build integration

package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestRealDriverProvisionsFromGeneratedSecretAndClass runs the real Manila CSI driver's
// controller (manila-csi-plugin and csi-provisioner, as local processes) against the loopback
// Manila, with the driver Secret and the StorageClass built by the operator's own code from
// clouds.yaml: a ReadWriteMany claim on csi-manila-default becomes a Manila share of type
// default with an access rule for the machine network, the volume binds, and deleting the claim
// deletes the share.
func TestRealDriverProvisionsFromGeneratedSecretAndClass(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cloud string
	}{
		{"password", testenv.CloudDemo},
		{"application-credential", testenv.CloudAppCred},
	} {
		t.Run(tc.name, func(t *testing.T) { provisionWithGeneratedObjects(t, tc.cloud) })
	}
}

func provisionWithGeneratedObjects(t *testing.T, cloudName string) {
	t0 := time.Now()
	cloud := testenv.NewCloud(t)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{WorkerNodes: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	manila := manilaClient(t, ctx, testenv.CloudDemo)
	t.Logf("sim cluster up in %s", time.Since(t0).Round(time.Millisecond))

	// The driver Secret as the operator's credential translation writes it.
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(raw, cloudName, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := operator.DefaultNamespace
	createNamespace(t, ctx, sim.Client, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: ns}, Data: creds.DriverSecretData()}
	if _, err := sim.Client.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, 0, len(secret.Data))
	for k := range secret.Data {
		keys = append(keys, k)
	}
	t.Logf("Secret %s/%s keys: %v", ns, secret.Name, keys)

	// The StorageClass as the operator builds it for share type "default".
	machineNetwork := cloud.Seed.Subnets["tenant-subnet"].CIDR
	names := operator.StorageClassNames([]string{"default"}, nil, nil)
	sc := operator.BuildStorageClass(names["default"], operator.ShareType{ID: cloud.Seed.ShareTypes["default"], Name: "default"},
		operator.StorageClassParams{Namespace: ns, ShareClients: machineNetwork})
	if sc.Name != "csi-manila-default" {
		t.Fatalf("StorageClass for share type default is named %q, want csi-manila-default", sc.Name)
	}
	if _, err := sim.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	t1 := time.Now()
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: sim.Kubeconfig, ClusterID: "e2e-" + t.Name()})
	t.Logf("driver controller up in %s (logs in %s)", time.Since(t1).Round(time.Millisecond), drv.Dir)

	createNamespace(t, ctx, sim.Client, "app")
	t2 := time.Now()
	pvc, err := sim.Client.CoreV1().PersistentVolumeClaims("app").Create(ctx, rwxClaim("app", "shared", sc.Name, "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv := waitBound(t, ctx, sim.Client, pvc, 2*time.Minute, drv.Alive)
	t.Logf("claim Bound to %s (share %s) in %s", pv.Name, pv.Spec.CSI.VolumeHandle, time.Since(t2).Round(time.Millisecond))
	share := checkShare(t, ctx, manila, pv, "default", machineNetwork, 1)
	checkVolume(t, pv, sc.Name, ns, operator.DriverSecretName)
	if md, err := shares.GetMetadata(ctx, manila, share.ID).Extract(); err != nil {
		t.Error(err)
	} else if md["csi.storage.k8s.io/pvc/name"] != "shared" || md["csi.storage.k8s.io/pvc/namespace"] != "app" || md["manila.csi.openstack.org/cluster"] != "e2e-"+t.Name() {
		t.Errorf("share metadata %v: want the claim's name and namespace and the cluster ID", md)
	}

	t3 := time.Now()
	if err := sim.Client.CoreV1().PersistentVolumeClaims("app").Delete(ctx, pvc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, 2*time.Minute, drv.Alive, func(ctx context.Context) error {
		_, err := sim.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatalf("volume %s not deleted: %v\nevents:\n%s", pv.Name, err, events(ctx, sim.Client, "", pv.Name))
	}
	if err := shareGone(ctx, manila, share.ID, time.Minute, drv.Alive); err != nil {
		t.Fatal(err)
	}
	t.Logf("claim deleted: volume and share %s gone in %s; whole test %s", share.ID, time.Since(t3).Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
}
