//go:build integration

package datapath

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/assets"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestDriverOnGuestNodes is the product's promise end to end on real nodes: the driver's node
// DaemonSets as the operator renders them (the Manila node plugin and its NFS partner, from the
// images built here) run on two guest nodes attached to the storage network; a ReadWriteMany
// claim of a StorageClass built by the operator's code, with the driver Secret it makes from
// clouds.yaml, is provisioned by the real driver's controller as a Manila share whose access
// rule admits the storage subnet; two writer pods on the two nodes mount it through the node
// plugins, as the kubelet stages and publishes it, and read each other's lines. The share's only
// rule revoked in Manila stops a mounted pod's writes (the export is gone: Stale file handle);
// granted again, a pod started anew writes.
func TestDriverOnGuestNodes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	c := newClients(t, ctx, cloud)
	sim := testenv.NewSimCluster(t, testenv.SimOptions{APIServer: testenv.APIServerOptions{GuestNodes: true}})
	k := sim.Client

	images := driverImages()
	nodes, storageIP := bootGuestNodes(t, ctx, sim, cloud, c, images, "worker-one", "worker-two")

	ns := operator.DefaultNamespace
	storageSubnet := deployNodeSide(t, ctx, sim, cloud, images)

	// The kubelet of each node registered the Manila driver with the instance's ID, which the
	// node plugin read from the server's metadata service.
	for _, n := range nodes {
		var got string
		if !eventually(ctx, 5*time.Minute, func() bool {
			cn, err := k.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false
			}
			for _, d := range cn.Spec.Drivers {
				if d.Name == "manila.csi.openstack.org" {
					got = d.NodeID
					return true
				}
			}
			return false
		}) {
			t.Fatalf("CSINode %s does not list manila.csi.openstack.org after 5 minutes\n%s", n.Name, podsReport(ctx, sim, ns))
		}
		if got != n.InstanceID {
			t.Errorf("CSINode %s: node ID %q, want the instance's %s", n.Name, got, n.InstanceID)
		}
	}
	t.Log("the Manila driver is registered on both guest nodes with their instance IDs")

	// The controller side, and a claim of the class the operator builds for share type default,
	// admitting the storage subnet.
	sc, drv := deployControllerAndClass(t, ctx, sim, cloud, storageSubnet)
	const appNS = "rwx-demo"
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: appNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: appNS},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &sc.Name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	if _, err := k.CoreV1().PersistentVolumeClaims(appNS).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pv *corev1.PersistentVolume
	if !eventually(ctx, 3*time.Minute, func() bool {
		got, err := k.CoreV1().PersistentVolumeClaims(appNS).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.ClaimBound {
			return false
		}
		pv, err = k.CoreV1().PersistentVolumes().Get(ctx, got.Spec.VolumeName, metav1.GetOptions{})
		return err == nil
	}) {
		t.Fatalf("claim %s/%s not Bound after 3 minutes (driver logs in %s)", appNS, pvc.Name, drv.Dir)
	}
	share := pv.Spec.CSI.VolumeHandle
	t.Logf("claim Bound to %s: share %s", pv.Name, share)
	locations, err := c.exportLocations(ctx, share)
	if err != nil {
		t.Fatal(err)
	}
	var export string
	for _, l := range locations {
		if l.Preferred {
			export = l.Path
		}
	}
	if rules := c.rules(t, ctx, share); !strings.Contains(rules, storageSubnet) {
		t.Errorf("share %s: access rules %s do not admit the storage subnet %s", share, rules, storageSubnet)
	}

	writersShareTheClaim(t, ctx, sim, nodes, storageIP, appNS, pvc.Name, export)

	// The rule the driver granted, revoked in Manila (as an admin cleaning up would): the mounted
	// pods' writes fail, refused by the NFS server; granted again, they go on.
	var rule string
	rules, err := shareaccessrules.List(ctx, c.manila, share).Extract()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rules {
		if r.AccessTo == storageSubnet {
			rule = r.ID
		}
	}
	if rule == "" {
		t.Fatalf("share %s has no rule for %s: %s", share, storageSubnet, c.rules(t, ctx, share))
	}
	write := func() (string, error) {
		return execIn(ctx, sim, appNS, "writer-one", "sh", "-c", "echo probe >>/mnt/test/probe && echo written")
	}
	c.revoke(t, ctx, share, rule)
	var out string
	if !eventually(ctx, time.Minute, func() bool {
		out, err = write()
		// The share's only rule: ganesha drops the export, and the mounted client's handles
		// go stale. With another rule left, the export stays and the write is refused
		// (Permission denied, TestSharesAreRealNFSExports).
		return err != nil && strings.Contains(err.Error(), "Stale file handle")
	}) {
		t.Fatalf("writer-one wrote on after the rule %s was revoked: %q, %v", rule, out, err)
	}
	t.Logf("after the revoke, writer-one's write: %v", err)
	explained(t, err.Error(), "last access rule was revoked")
	c.grant(t, ctx, share, storageSubnet, "rw")
	// The export comes back as a new one: the pod's mount stays stale (what a user sees until
	// the pod is started again), and a new pod of the claim mounts and writes.
	time.Sleep(5 * time.Second)
	if out, err = write(); err == nil {
		t.Logf("granted again, writer-one writes on its old mount: %q", out)
	} else {
		t.Logf("granted again, writer-one's old mount is still stale: %v", err)
		old, err := k.CoreV1().Pods(appNS).Get(ctx, "writer-one", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := k.CoreV1().Pods(appNS).Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		if !eventually(ctx, 2*time.Minute, func() bool {
			_, err := k.CoreV1().Pods(appNS).Get(ctx, old.Name, metav1.GetOptions{})
			return err != nil
		}) {
			t.Fatal("writer-one not gone two minutes after its deletion")
		}
		again := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: appNS}, Spec: old.Spec}
		if _, err := k.CoreV1().Pods(appNS).Create(ctx, again, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !eventually(ctx, 3*time.Minute, func() bool {
			out, err = write()
			return err == nil && strings.Contains(out, "written")
		}) {
			t.Fatalf("writer-one, started again, could not write: %q, %v\n%s", out, err, podsReport(ctx, sim, appNS))
		}
		t.Log("writer-one, started again, mounts the export anew and writes")
	}
}

// operatorImages are the references of the node plugins' images, as the operator renders them.
func operatorImages() map[string]string {
	images := map[string]string{}
	for env, ref := range operator.DefaultImages.ImageEnv() {
		switch env {
		case "DRIVER_IMAGE", "NFS_DRIVER_IMAGE", "NODE_DRIVER_REGISTRAR_IMAGE", "LIVENESS_PROBE_IMAGE":
			images[env] = *ref
		}
	}
	return images
}

// deployNodeSide creates what the operator keeps in its namespace for the node side: the
// driver Secret (from clouds.yaml), the node DaemonSets with their ServiceAccount and
// ConfigMaps (the runtime configuration matching the storage subnet's export addresses), the
// CSIDriver. It returns the storage subnet.
func deployNodeSide(t *testing.T, ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud, images map[string]string) string {
	t.Helper()
	k := sim.Client
	ns := operator.DefaultNamespace
	if _, err := k.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cloud.CloudsFile)
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(raw, testenv.CloudDemo, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverSecretName, Namespace: ns}, Data: creds.DriverSecretData()}
	if _, err := k.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	runtimeConfig, _ := json.Marshal(map[string]any{"nfs": map[string]string{"matchExportLocationAddress": storageSubnet}})
	vars := map[string]string{"NAMESPACE": ns, "LOG_LEVEL": "4", "RUNTIME_CONFIG": string(runtimeConfig)}
	for env, ref := range images {
		vars[env] = ref
	}
	for _, name := range []string{"csidriver.yaml", "node_sa.yaml", "cabundle_cm.yaml", "runtime_config_cm.yaml", "node_nfs.yaml", "node.yaml"} {
		applyAsset(t, ctx, sim, name, vars)
	}
	return storageSubnet
}

// deployControllerAndClass starts the driver's controller side (as local processes) and creates
// the class the operator builds for share type default, admitting the storage subnet.
func deployControllerAndClass(t *testing.T, ctx context.Context, sim *testenv.SimCluster, cloud *testenv.Cloud, storageSubnet string) (*storagev1.StorageClass, *testenv.CSIController) {
	t.Helper()
	ns := operator.DefaultNamespace
	drv := testenv.NewCSIController(t, testenv.CSIControllerOptions{Kubeconfig: sim.Kubeconfig, ClusterID: "datapath"})
	names := operator.StorageClassNames([]string{"default"}, nil, nil)
	sc := operator.BuildStorageClass(names["default"], operator.ShareType{ID: cloud.Seed.ShareTypes["default"], Name: "default"},
		operator.StorageClassParams{Namespace: ns, ShareClients: storageSubnet})
	if _, err := sim.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return sc, drv
}

// applyAsset renders one of the operator's assets and creates its objects.
func applyAsset(t *testing.T, ctx context.Context, sim *testenv.SimCluster, name string, vars map[string]string) {
	t.Helper()
	b, err := assets.Render(name, vars)
	if err != nil {
		t.Fatal(err)
	}
	k := sim.Client
	for _, doc := range assets.SplitDocuments(b) {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var create func() error
		switch meta.Kind {
		case "DaemonSet":
			var o appsv1.DaemonSet
			create = decodeThen(doc, &o, func() error {
				_, err := k.AppsV1().DaemonSets(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ConfigMap":
			var o corev1.ConfigMap
			create = decodeThen(doc, &o, func() error {
				_, err := k.CoreV1().ConfigMaps(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "ServiceAccount":
			var o corev1.ServiceAccount
			create = decodeThen(doc, &o, func() error {
				_, err := k.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, &o, metav1.CreateOptions{})
				return err
			})
		case "CSIDriver":
			var o storagev1.CSIDriver
			create = decodeThen(doc, &o, func() error { _, err := k.StorageV1().CSIDrivers().Create(ctx, &o, metav1.CreateOptions{}); return err })
		default:
			t.Fatalf("%s: no way to create a %s here", name, meta.Kind)
		}
		if err := create(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
}

func decodeThen(doc []byte, into any, create func() error) func() error {
	return func() error {
		if err := yaml.Unmarshal(doc, into); err != nil {
			return err
		}
		return create()
	}
}

// podsReport lists the namespace's pods with their nodes, phases and containers' states.
func podsReport(ctx context.Context, sim *testenv.SimCluster, ns string) string {
	pods, err := sim.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "pod %s on %s: %s\n", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			fmt.Fprintf(&b, "  %s ready=%v restarts=%d %+v\n", cs.Name, cs.Ready, cs.RestartCount, cs.State)
		}
	}
	return b.String()
}

func (c *clients) exportLocations(ctx context.Context, share string) ([]shares.ExportLocation, error) {
	return shares.ListExportLocations(ctx, c.manila, share).Extract()
}

// rules describes the share's access rules (to, level, state), for a check or a message.
func (c *clients) rules(t *testing.T, ctx context.Context, share string) string {
	t.Helper()
	rules, err := shareaccessrules.List(ctx, c.manila, share).Extract()
	if err != nil {
		t.Fatalf("access rules of share %s: %v", share, err)
	}
	var out []string
	for _, r := range rules {
		out = append(out, fmt.Sprintf("%s %s (%s)", r.AccessTo, r.AccessLevel, r.State))
	}
	return "[" + strings.Join(out, ", ") + "]"
}
