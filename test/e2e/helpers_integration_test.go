//go:build integration

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// manilaClient is a Manila v2 client acting as the given cloud of clouds.yaml, for checking
// what the driver did.
func manilaClient(t *testing.T, ctx context.Context, cloud string) *gophercloud.ServiceClient {
	t.Helper()
	c, err := testenv.ManilaClient(ctx, cloud)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// rwxClaim is what an application developer writes: ReadWriteMany on a csi-manila-* class.
func rwxClaim(namespace, name, class, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)},
			},
		},
	}
}

func createNamespace(t *testing.T, ctx context.Context, kc kubernetes.Interface, name string) {
	t.Helper()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// alive is what a wait checks besides its condition: the driver processes still running.
type alive func() error

// waitBound waits until the claim is Bound and returns its volume.
func waitBound(t *testing.T, ctx context.Context, kc kubernetes.Interface, pvc *corev1.PersistentVolumeClaim, timeout time.Duration, ok alive) *corev1.PersistentVolume {
	t.Helper()
	var last *corev1.PersistentVolumeClaim
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := ok(); err != nil {
			return false, err
		}
		c, err := kc.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = c
		return c.Status.Phase == corev1.ClaimBound, nil
	})
	if err != nil {
		phase := "not found"
		if last != nil {
			phase = string(last.Status.Phase)
		}
		t.Fatalf("claim %s/%s not Bound (%s): %v\nevents:\n%s", pvc.Namespace, pvc.Name, phase, err, events(ctx, kc, pvc.Namespace, pvc.Name))
	}
	pv, err := kc.CoreV1().PersistentVolumes().Get(ctx, last.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pv
}

// waitGone waits until get reports NotFound.
func waitGone(ctx context.Context, timeout time.Duration, ok alive, get func(context.Context) error) error {
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := ok(); err != nil {
			return false, err
		}
		err := get(ctx)
		switch {
		case err == nil:
			return false, nil
		case apierrors.IsNotFound(err), gophercloud.ResponseCodeIs(err, http.StatusNotFound):
			return true, nil
		default:
			return false, err
		}
	})
}

// shareGone waits until Manila no longer knows the share.
func shareGone(ctx context.Context, manila *gophercloud.ServiceClient, id string, timeout time.Duration, ok alive) error {
	var status string
	err := waitGone(ctx, timeout, ok, func(ctx context.Context) error {
		s, err := shares.Get(ctx, manila, id).Extract()
		if err == nil {
			status = s.Status
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("share %s still there (status %q): %w", id, status, err)
	}
	return nil
}

// events lists the events of one object, oldest first, one per line.
func events(ctx context.Context, kc kubernetes.Interface, namespace, name string) string {
	list, err := kc.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err.Error()
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].LastTimestamp.Before(&list.Items[j].LastTimestamp) })
	var b strings.Builder
	for _, e := range list.Items {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", e.Type, e.Reason, e.Source.Component, e.Message)
	}
	return b.String()
}

// checkShare checks, in the Manila API, the share the driver created for a claim and its
// access rule, and returns the share.
func checkShare(t *testing.T, ctx context.Context, manila *gophercloud.ServiceClient, pv *corev1.PersistentVolume, shareType, shareClients string, sizeGiB int) *shares.Share {
	t.Helper()
	if pv.Spec.CSI == nil {
		t.Fatalf("volume %s is not a CSI volume: %+v", pv.Name, pv.Spec.PersistentVolumeSource)
	}
	share, err := shares.Get(ctx, manila, pv.Spec.CSI.VolumeHandle).Extract()
	if err != nil {
		t.Fatalf("the volume's share %s in Manila: %v", pv.Spec.CSI.VolumeHandle, err)
	}
	var problems []string
	if share.Status != "available" || share.ShareProto != "NFS" || share.Size != sizeGiB || share.ShareTypeName != shareType {
		problems = append(problems, fmt.Sprintf("share is %s/%s/%d GiB/type %s, want available/NFS/%d GiB/type %s",
			share.Status, share.ShareProto, share.Size, share.ShareTypeName, sizeGiB, shareType))
	}
	if share.Name != pv.Name {
		problems = append(problems, fmt.Sprintf("share name %q, want the volume's name %q", share.Name, pv.Name))
	}
	// The driver grants one rule per entry of nfs-shareClient (a comma-separated list since
	// cloud-provider-openstack v1.35.0) and returns; Manila applies them shortly after.
	want := strings.Split(shareClients, ",")
	var rules []shareaccessrules.ShareAccess
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rules, err = shareaccessrules.List(ctx, manila, share.ID).Extract()
		if err != nil || len(rules) != len(want) {
			return false, err
		}
		for _, r := range rules {
			if r.State == "queued_to_apply" || r.State == "applying" {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("access rules of share %s: %v (%+v)", share.ID, err, rules)
	}
	var got, ids []string
	for _, r := range rules {
		if r.AccessType != "ip" || r.AccessLevel != "rw" || r.State != "active" {
			problems = append(problems, fmt.Sprintf("access rule %+v, want an active rw ip rule", r))
		}
		got = append(got, r.AccessTo)
		ids = append(ids, r.ID)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		problems = append(problems, fmt.Sprintf("access rules for %v, want one for each of %v", got, want))
	}
	attrIDs := strings.Split(pv.Spec.CSI.VolumeAttributes["shareAccessIDs"], ",")
	slices.Sort(attrIDs)
	slices.Sort(ids)
	if !slices.Equal(attrIDs, ids) {
		problems = append(problems, fmt.Sprintf("volume attribute shareAccessIDs %q, want the rules' IDs %v", pv.Spec.CSI.VolumeAttributes["shareAccessIDs"], ids))
	}
	if pv.Spec.CSI.VolumeAttributes["shareID"] != share.ID {
		problems = append(problems, fmt.Sprintf("volume attribute shareID %q, want %s", pv.Spec.CSI.VolumeAttributes["shareID"], share.ID))
	}
	locations, err := shares.ListExportLocations(ctx, manila, share.ID).Extract()
	if err != nil || len(locations) == 0 {
		problems = append(problems, fmt.Sprintf("export locations: %v (%d)", err, len(locations)))
	}
	if len(problems) > 0 {
		t.Errorf("share %s of volume %s:\n  %s", share.ID, pv.Name, strings.Join(problems, "\n  "))
	}
	return share
}

// checkVolume checks what the kubelet on every node will get: the driver, RWX, and the node
// secrets pointing at the driver's Secret.
func checkVolume(t *testing.T, pv *corev1.PersistentVolume, class, secretNamespace, secretName string) {
	t.Helper()
	var problems []string
	csi := pv.Spec.CSI
	if csi.Driver != "manila.csi.openstack.org" {
		problems = append(problems, "driver "+csi.Driver)
	}
	if len(pv.Spec.AccessModes) != 1 || pv.Spec.AccessModes[0] != corev1.ReadWriteMany {
		problems = append(problems, fmt.Sprintf("access modes %v", pv.Spec.AccessModes))
	}
	if pv.Spec.StorageClassName != class || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		problems = append(problems, fmt.Sprintf("class %q, reclaim policy %s", pv.Spec.StorageClassName, pv.Spec.PersistentVolumeReclaimPolicy))
	}
	for what, ref := range map[string]*corev1.SecretReference{"nodeStageSecretRef": csi.NodeStageSecretRef, "nodePublishSecretRef": csi.NodePublishSecretRef, "controllerExpandSecretRef": csi.ControllerExpandSecretRef} {
		if ref == nil || ref.Name != secretName || ref.Namespace != secretNamespace {
			problems = append(problems, fmt.Sprintf("%s %+v, want %s/%s", what, ref, secretNamespace, secretName))
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		t.Errorf("volume %s: %s", pv.Name, strings.Join(problems, "; "))
	}
}

// tenantProject is a cluster's tenant: a project of its own, so that its installer-made network
// and servers stay apart from the other tests'. The storage network is the cloud's shared
// provider network, where Manila exports; the project's NFS group (returned) is as an
// administrator makes one; its one share is how discovery finds where Manila exports.
func tenantProject(t *testing.T, cloud *testenv.Cloud, prefix string) (project *ostest.Project, storageNet, nfsSG string) {
	t.Helper()
	project = ostest.NewProject(t, cloud, prefix)
	storageNet, nfsSG = cloud.Seed.Networks["storage"], project.CreateSecurityGroup("nfs", true)
	project.AllowIngress(nfsSG, "tcp:2049", "tcp:111", "udp:111")
	project.CreateShares("data", 1)
	return project, storageNet, nfsSG
}

// noSecretIn fails the test for each file under dir that holds the secret, plain, base64- or
// URL-encoded, and returns how many files it read.
func noSecretIn(t *testing.T, dir, secret string) int {
	t.Helper()
	forms := []string{secret, base64.StdEncoding.EncodeToString([]byte(secret)), url.QueryEscape(secret)}
	files := 0
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, form := range forms {
			if strings.Contains(string(b), form) {
				t.Errorf("%s holds the secret (as %q)", path, form)
			}
		}
		if strings.Contains(string(b), "kind: Secret\n") {
			t.Errorf("%s is a Secret", path)
		}
		return nil
	})
	if err != nil {
		t.Errorf("reading %s: %v", dir, err)
	}
	return files
}
