//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/storagecheck"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
	"github.com/manila-setup/manila-setup/test/testenv/machinectl"
)

// `storageclasses check` against a real API server and the loopback Manila: a class with the
// documentation's nfs-ShareClient, one naming a Secret that does not exist, one with a share
// type Manila does not offer, and a correct one; exit 1 naming each bad one, nothing written.
func TestStorageClassesCheck(t *testing.T) {
	testenv.NewCloud(t) // sets OS_CLIENT_CONFIG_FILE and OS_CLOUD for the command
	api := testenv.NewAPIServer(t)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := api.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "csi-manila-secrets"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	params := func(edit func(map[string]string)) map[string]string {
		p := map[string]string{"type": "default", "nfs-shareClient": "10.196.0.0/16"} // a seeded share type
		for _, s := range []string{"provisioner", "node-stage", "node-publish", "controller-expand"} {
			p["csi.storage.k8s.io/"+s+"-secret-name"] = "csi-manila-secrets"
			p["csi.storage.k8s.io/"+s+"-secret-namespace"] = "default"
		}
		edit(p)
		return p
	}
	for name, edit := range map[string]func(map[string]string){
		"docs-example": func(p map[string]string) { p["nfs-ShareClient"] = p["nfs-shareClient"]; delete(p, "nfs-shareClient") },
		"no-secret":    func(p map[string]string) { p["csi.storage.k8s.io/node-stage-secret-name"] = "nope" },
		"gold":         func(p map[string]string) { p["type"] = "gold" },
		"fine":         func(map[string]string) {},
	} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "manila.csi.openstack.org", Parameters: params(edit)}
		if _, err := api.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runCLI(t, "--kubeconfig", kubeconfig, "storageclasses", "check", "--machine-network", "10.196.0.0/16")
	t.Logf("$ manila-setup storageclasses check\n%s%s", out, errOut)
	if code != exitInvalid {
		t.Errorf("exit %d, want %d", code, exitInvalid)
	}
	for _, want := range []string{"docs-example nfs-ShareClient: the driver ignores this key: parameter keys are case-sensitive; spell it nfs-shareClient",
		"docs-example nfs-shareClient: not set", "no-secret csi.storage.k8s.io/node-stage-secret-name: Secret default/nope does not exist",
		`gold type: Manila offers no share type "gold"`} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, "fine ") {
		t.Errorf("a correct class reported:\n%s", out)
	}

	code, out, _ = runCLI(t, "--kubeconfig", kubeconfig, "-o", "json", "storageclasses", "check", "--machine-network", "10.196.0.0/16")
	var report storagecheck.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitInvalid || len(report.Checked) != 4 || len(report.Findings) != 4 {
		t.Errorf("-o json: exit %d, %d checked, %d findings (%v)\n%s", code, len(report.Checked), len(report.Findings), err, out)
	}
	writes, err := api.Writes(testenv.ByUserAgent("manila-setup/")) // the CLI, not this test binary
	if err != nil || len(writes) != 0 {
		t.Errorf("the check wrote: %v %v", writes, err)
	}

	// Fixed: exit 0.
	for _, name := range []string{"docs-example", "no-secret", "gold"} {
		_ = api.Client.StorageV1().StorageClasses().Delete(ctx, name, metav1.DeleteOptions{})
	}
	if code, out, errOut := runCLI(t, "--kubeconfig", kubeconfig, "storageclasses", "check", "--machine-network", "10.196.0.0/16"); code != exitOK || !strings.Contains(out, "1 Manila StorageClasses checked (fine): nothing wrong") {
		t.Errorf("after the fixes: exit %d\n%s%s", code, out, errOut)
	}
}

// TestStorageClassesCheckVolumes: the workers were attached to the storage network after a
// volume was provisioned, so its share still admits only the machine network (the rule the
// driver made from the class of the time). The check names the volume, the network its rules
// lack and the command that adds it; a volume whose share Manila does not know is listed as not
// checked, not as a finding; once the rule is added the volume is fine.
func TestStorageClassesCheckVolumes(t *testing.T) {
	cloud := testenv.NewCloud(t)
	p := ostest.NewProject(t, cloud, "ms-sc-volumes")
	shareID := p.CreateShares("scvol", 1)[0] // exports on the seeded, shared storage network 10.0.0.0/24
	t.Setenv("OS_CLIENT_CONFIG_FILE", p.CloudsFile)
	t.Setenv("OS_CLOUD", ostest.CloudName)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	manila, err := testenv.ManilaClient(ctx, ostest.CloudName)
	if err != nil {
		t.Fatal(err)
	}
	grant := func(cidr string) {
		t.Helper()
		if _, err := shares.GrantAccess(ctx, manila, shareID, shares.GrantAccessOpts{AccessType: "ip", AccessTo: cidr, AccessLevel: "rw"}).Extract(); err != nil {
			t.Fatalf("granting %s: %v", cidr, err)
		}
	}
	grant("10.196.0.0/16") // what the class said before the attach

	api := testenv.NewAPIServer(t)
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: machinectl.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A worker MachineSet attached to the storage network, and its running Machine with an
	// address on each network (the Machine API reports every port's fixed IP).
	var spec map[string]any
	if err := json.Unmarshal([]byte(machinectl.WorkerProviderSpec("ostest", "nova")), &spec); err != nil {
		t.Fatal(err)
	}
	spec["networks"] = append(spec["networks"].([]any), map[string]any{"uuid": cloud.Seed.Networks["storage"]})
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	mc := machineclient.NewForConfigOrDie(api.Config)
	ms, err := mc.MachineV1beta1().MachineSets(machinectl.Namespace).Create(ctx, machinectl.MachineSet("ostest", "worker", "ostest-worker-0", 1, string(raw)), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mc.MachineV1beta1().Machines(machinectl.Namespace).Create(ctx, &machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{
		Name: "ostest-worker-0-abcde", Namespace: machinectl.Namespace,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "machine.openshift.io/v1beta1", Kind: "MachineSet", Name: ms.Name, UID: ms.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.196.0.11"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.11"},
		{Type: corev1.NodeHostName, Address: "ostest-worker-0-abcde"}}
	m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: "ostest-worker-0-abcde"}
	if _, err := mc.MachineV1beta1().Machines(machinectl.Namespace).UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The volume as the driver provisioned it, and one whose share is gone.
	pv := func(name, share, claim string) {
		t.Helper()
		v := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			ClaimRef:    &corev1.ObjectReference{Namespace: "app", Name: claim},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: "manila.csi.openstack.org", VolumeHandle: share,
				VolumeAttributes: map[string]string{"shareID": share, "shareAccessID": "0d3c2b1a-0000-4000-8000-000000000000"}}},
		}}
		if _, err := api.Client.CoreV1().PersistentVolumes().Create(ctx, v, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pv("pvc-5d1e2f3a-0000-4000-8000-000000000001", shareID, "data")
	const gone = "9e9e9e9e-0000-4000-8000-00000000dead"
	pv("pvc-5d1e2f3a-0000-4000-8000-000000000002", gone, "old")

	check := func(args ...string) (int, string, string) {
		t.Helper()
		code, out, errOut := runCLI(t, append([]string{"--kubeconfig", kubeconfig}, append(args, "storageclasses", "check", "--machine-network", "10.196.0.0/16")...)...)
		t.Logf("$ manila-setup %s\n%s%s", strings.Join(append(args, "storageclasses", "check"), " "), out, errOut)
		return code, out, errOut
	}
	code, out, errOut := check()
	if code != exitInvalid {
		t.Errorf("exit %d, want %d", code, exitInvalid)
	}
	for _, want := range []string{
		"volume pvc-5d1e2f3a-0000-4000-8000-000000000001 (share " + shareID + ", claim app/data): its access rules admit 10.196.0.0/16 but not 10.0.0.0/24, where the workers mount from (every worker has a port on the storage network",
		"; add the rule: openstack share access create " + shareID + " ip 10.0.0.0/24 --access-level rw\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if strings.Contains(out, gone) || !strings.Contains(errOut, "not checked: volume pvc-5d1e2f3a-0000-4000-8000-000000000002 (share "+gone+"): its share's access rules cannot be read: ") ||
		!strings.Contains(errOut, "there is no share with ID "+gone) {
		t.Errorf("the volume whose share is gone is not listed as not checked")
	}

	code, out, _ = check("-o", "json")
	var report storagecheck.Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != exitInvalid || len(report.Volumes) != 2 {
		t.Fatalf("-o json: exit %d, %d volumes (%v)\n%s", code, len(report.Volumes), err, out)
	}
	v, skipped := report.Volumes[0], report.Volumes[1]
	if v.ShareID != shareID || v.Claim != "app/data" || !slices.Equal(v.Admits, []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}) ||
		!slices.Equal(v.Missing, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/24")}) || len(v.Fix) != 1 || v.Skipped != "" {
		t.Errorf("-o json: volume %+v", v)
	}
	if skipped.ShareID != gone || skipped.Skipped == "" || len(skipped.Missing) != 0 {
		t.Errorf("-o json: the volume whose share is gone: %+v", skipped)
	}
	if report.Facts["mountFrom"] != "10.0.0.0/24" {
		t.Errorf("-o json: mountFrom %q, want 10.0.0.0/24", report.Facts["mountFrom"])
	}

	// The fix: the rule for the storage subnet; the volume is fine, the gone one still skipped.
	grant("10.0.0.0/24")
	code, out, errOut = check()
	if code != exitOK || strings.Contains(out, "volume pvc-") || !strings.Contains(out, "1 Manila volume checked: its share's access rules admit 10.0.0.0/24, where the workers mount from") ||
		!strings.Contains(errOut, "not checked: volume pvc-5d1e2f3a-0000-4000-8000-000000000002") {
		t.Errorf("after adding the rule: exit %d", code)
	}
	writes, err := api.Writes(testenv.ByUserAgent("manila-setup/"))
	if err != nil || len(writes) != 0 {
		t.Errorf("the check wrote: %v %v", writes, err)
	}
}
