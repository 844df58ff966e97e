package controllers

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// classFakes records what the StorageClass owner writes.
type classFakes struct {
	mu      sync.Mutex
	applied []string
	patched []string
}

func testClassOwner(t *testing.T, state operatorv1.StorageClassStateName, existing []*storagev1.StorageClass, shareClientsErr error, upToDate func(runtime.Object) bool) (*storageClassOwner, *classFakes) {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, sc := range existing {
		if err := idx.Add(sc); err != nil {
			t.Fatal(err)
		}
	}
	f := &classFakes{}
	return newStorageClassOwner(storageClassInputs{
		prefix: "csi-manila-", secretNamespace: "ns", listShareClients: true,
		state:          func() operatorv1.StorageClassStateName { return state },
		storageClasses: storagelisters.NewStorageClassLister(idx),
		shareClients: func() (shareclient.Answer, error) {
			return shareclient.Answer{Clients: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/16")}}, shareClientsErr
		},
		storageNetwork: func() string { return "" },
		apply: func(_ context.Context, o runtime.Object) (runtime.Object, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.applied = append(f.applied, o.(*storagev1.StorageClass).Name)
			return o, nil
		},
		patchAnnotations: func(_ context.Context, name string, a map[string]*string) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			v := "<nil>"
			if p := a[operator.AnnotationShareTypeGone]; p != nil {
				v = "set"
			}
			f.patched = append(f.patched, name+"="+v)
			return nil
		},
		upToDate: upToDate,
		recorder: &eventLog{},
	}), f
}

// One class per share type, written unless up to date; a class whose share type went away is
// kept and annotated; a class whose type came back loses the annotation.
func TestStorageClassOwnerSync(t *testing.T) {
	types := []operator.ShareType{{Name: "default"}, {Name: "cephfs"}, {Name: "back"}}
	gone := operator.BuildStorageClass("csi-manila-old", operator.ShareType{Name: "old"}, operator.StorageClassParams{})
	back := operator.BuildStorageClass("csi-manila-back", operator.ShareType{Name: "back"}, operator.StorageClassParams{})
	back.Annotations[operator.AnnotationShareTypeGone] = "2026-01-01T00:00:00Z"
	upToDate := func(o runtime.Object) bool { return o.(*storagev1.StorageClass).Name != "csi-manila-cephfs" }
	s, f := testClassOwner(t, operatorv1.ManagedStorageClass, []*storagev1.StorageClass{gone, back}, nil, upToDate)
	res, err := s.sync(context.Background(), &manilaFindings{ShareTypes: types}, func(time.Duration) { t.Error("requeued") })
	if err != nil {
		t.Fatal(err)
	}
	if res.message != "3 StorageClasses for 3 Manila share types" || len(res.classOf) != 3 || res.classOf["default"] != "csi-manila-default" {
		t.Errorf("result %+v", res)
	}
	slices.Sort(f.applied)
	slices.Sort(f.patched)
	if got := strings.Join(f.applied, ","); got != "csi-manila-back,csi-manila-cephfs" {
		t.Errorf("applied %s, want the class not up to date and the one marked gone", got)
	}
	if got := strings.Join(f.patched, ","); got != "csi-manila-back=<nil>,csi-manila-old=set" {
		t.Errorf("patched %s", got)
	}
}

// Not managed, or the Machines not read yet: no class written, and no classOf for the
// VolumeSnapshotClass.
func TestStorageClassOwnerNotWriting(t *testing.T) {
	found := &manilaFindings{ShareTypes: []operator.ShareType{{Name: "default"}}}
	s, f := testClassOwner(t, operatorv1.UnmanagedStorageClass, nil, nil, nil)
	if res, err := s.sync(context.Background(), found, nil); err != nil || res.classOf != nil || res.message != "StorageClasses are not managed (storageClassState Unmanaged)" {
		t.Errorf("Unmanaged: %+v, %v", res, err)
	}
	s, f2 := testClassOwner(t, operatorv1.ManagedStorageClass, nil, errMachinesNotCached, nil)
	var requeued time.Duration
	res, err := s.sync(context.Background(), found, func(d time.Duration) { requeued = d })
	if err != nil || res.classOf != nil || requeued != time.Second || res.message != "waiting for the MachineSets and Machines to be read" {
		t.Errorf("Machines not read: %+v, %v, requeued after %s", res, err, requeued)
	}
	if len(f.applied)+len(f2.applied) != 0 {
		t.Errorf("wrote %v %v", f.applied, f2.applied)
	}
}

// A DHSS share type gets its class only with a share network, else the message says why.
func TestStorageClassOwnerShareNetwork(t *testing.T) {
	types := []operator.ShareType{{Name: "dhss", DHSS: true}, {Name: "plain"}}
	s, _ := testClassOwner(t, operatorv1.ManagedStorageClass, nil, nil, nil)
	res, err := s.sync(context.Background(), &manilaFindings{ShareTypes: types, ShareNetworks: []ShareNetwork{{ID: "a"}, {ID: "b"}}}, nil)
	if err != nil || res.message != "1 StorageClasses for 2 Manila share types; no StorageClass for share types dhss that need a share network: 2 share networks qualify; start the operator with --storage-network to choose" {
		t.Errorf("two share networks: %q, %v", res.message, err)
	}
	res, _ = s.sync(context.Background(), &manilaFindings{ShareTypes: types, NetErr: errors.New("refused")}, nil)
	if !strings.HasSuffix(res.message, "need a share network: refused") {
		t.Errorf("share networks not listed: %q", res.message)
	}
	res, _ = s.sync(context.Background(), &manilaFindings{ShareTypes: types, ShareNetworks: []ShareNetwork{{ID: "a"}}}, nil)
	if res.message != "2 StorageClasses for 2 Manila share types" {
		t.Errorf("one share network: %q", res.message)
	}
}
