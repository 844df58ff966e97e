package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// storageClassInputs is what the StorageClasses' owner needs.
type storageClassInputs struct {
	// prefix starts the names of the classes an operator of this mode keeps; secretNamespace
	// holds the Secret they name.
	prefix          string
	secretNamespace string
	// listShareClients: the driver that serves the classes takes a comma-separated
	// nfs-shareClient (see shareClientSource).
	listShareClients bool
	// state reads spec.storageClassState.
	state          func() operatorv1.StorageClassStateName
	storageClasses storagelisters.StorageClassLister
	shareClients   func() (shareclient.Answer, error)
	// storageNetwork is the storage network's ID, as given or discovered; "" when unknown.
	storageNetwork   func() string
	apply            func(context.Context, runtime.Object) (runtime.Object, error)
	deleteIfPresent  func(context.Context, runtime.Object) error
	patchAnnotations func(ctx context.Context, name string, annotations map[string]*string) error
	// upToDate tells whether applying a class would write nothing (machinery.Writer.UpToDate);
	// nil: always apply.
	upToDate func(runtime.Object) bool
	recorder machinery.Recorder
}

// storageClassOwner keeps one StorageClass per share type Manila offers. Their nfs-shareClient
// admits where the workers mount from (shareClients); when that changes (the storage network was
// attached after the classes were made), the classes are recreated under the same names: the
// parameters cannot change, and volumes do not refer to them. A class whose share type went
// away is never deleted (claims may use it): it is annotated instead.
type storageClassOwner struct{ storageClassInputs }

func newStorageClassOwner(in storageClassInputs) *storageClassOwner { return &storageClassOwner{in} }

// storageClassesResult is what a sync of the classes did, for the conditions and the
// VolumeSnapshotClass.
type storageClassesResult struct {
	// message is ManilaControllerAvailable's when all went well.
	message string
	// classOf maps each share type to its class; nil when the classes were not written: not
	// managed (state), or not yet (the Machines are being read).
	classOf map[string]string
	state   operatorv1.StorageClassStateName
}

// existingClasses sorts the cluster's StorageClasses into the operator's and the others'.
type existingClasses struct {
	// ours maps the operator's classes to their share type.
	ours map[string]string
	// taken are the names of classes of others, which the operator's must not use.
	taken  map[string]bool
	byName map[string]*storagev1.StorageClass
}

// sync makes the classes the share types Manila offered (found, which has no error) call for.
func (s *storageClassOwner) sync(ctx context.Context, found *manilaFindings, requeue func(time.Duration)) (storageClassesResult, error) {
	res := storageClassesResult{state: s.state()}
	switch res.state {
	case operatorv1.UnmanagedStorageClass:
		res.message = "StorageClasses are not managed (storageClassState Unmanaged)"
		return res, nil
	case operatorv1.RemovedStorageClass:
		res.message = "StorageClasses removed (storageClassState Removed)"
		return res, s.remove(ctx)
	}
	all, err := s.storageClasses.List(labels.Everything())
	if err != nil {
		return res, err
	}
	ex := s.sortExisting(all)
	types := found.ShareTypes
	typeNames := make([]string, 0, len(types))
	for _, t := range types {
		typeNames = append(typeNames, t.Name)
	}
	assigned := operator.StorageClassNamesWithPrefix(s.prefix, typeNames, ex.ours, ex.taken)

	answer, err := s.shareClients()
	if errors.Is(err, errMachinesNotCached) {
		// Soon: writing the machine network now would mean recreating every class in a second.
		requeue(time.Second)
		res.message = "waiting for the MachineSets and Machines to be read"
		return res, nil
	}
	if err != nil {
		return res, err
	}
	shareNetwork, snErr := s.shareNetworkFor(found)
	params := operator.StorageClassParams{Namespace: s.secretNamespace, ShareClients: answer.Value(s.listShareClients), ShareNetworkID: shareNetwork}
	var skipped []string
	var reqs []*storagev1.StorageClass
	res.classOf = map[string]string{}
	for _, t := range types {
		if t.DHSS && shareNetwork == "" {
			skipped = append(skipped, t.Name)
			continue
		}
		res.classOf[t.Name] = assigned[t.Name]
		reqs = append(reqs, operator.BuildStorageClass(assigned[t.Name], t, params))
	}
	errs := s.applyClasses(ctx, reqs, ex.byName)
	errs = append(errs, s.markGone(ctx, ex, typeNames)...)
	res.message = classesMessage(len(types), skipped, snErr)
	return res, errors.Join(errs...)
}

func (s *storageClassOwner) sortExisting(all []*storagev1.StorageClass) existingClasses {
	ex := existingClasses{ours: map[string]string{}, taken: map[string]bool{}, byName: map[string]*storagev1.StorageClass{}}
	for _, sc := range all {
		ex.byName[sc.Name] = sc
		if ours(sc, s.prefix) {
			ex.ours[sc.Name] = sc.Annotations[operator.AnnotationShareType]
		} else {
			ex.taken[sc.Name] = true
		}
	}
	return ex
}

// classesMessage says how many of the share types got a class. What the classes admit, and
// why, is StorageNetworkReachable's to say.
func classesMessage(types int, skipped []string, snErr error) string {
	msg := fmt.Sprintf("%d StorageClasses for %d Manila share types", types-len(skipped), types)
	if len(skipped) > 0 {
		sort.Strings(skipped)
		why := "no share network on the storage network was found"
		if snErr != nil {
			why = snErr.Error()
		}
		msg += fmt.Sprintf("; no StorageClass for share types %s that need a share network: %s", strings.Join(skipped, ", "), why)
	}
	return msg
}

// markGone annotates, once, the operator's classes whose share type Manila no longer offers.
func (s *storageClassOwner) markGone(ctx context.Context, ex existingClasses, typeNames []string) []error {
	offered := make(map[string]bool, len(typeNames))
	for _, t := range typeNames {
		offered[t] = true
	}
	var errs []error
	for name, t := range ex.ours {
		if offered[t] || ex.byName[name].Annotations[operator.AnnotationShareTypeGone] != "" {
			continue
		}
		now := time.Now().UTC().Format(time.RFC3339)
		if err := s.patchAnnotations(ctx, name, map[string]*string{operator.AnnotationShareTypeGone: &now}); err != nil {
			errs = append(errs, err)
			continue
		}
		s.recorder.Warningf("ShareTypeGone", "Manila no longer offers share type %q; StorageClass %s is kept (annotated %s)", t, name, operator.AnnotationShareTypeGone)
	}
	return errs
}

// classWriters is how many StorageClasses are written at once: one at a time, the first sync of
// 200 share types took 8 to 10 s of round trips; the client's rate limit still applies.
const classWriters = 8

// applyClasses applies the classes (an apply writes only what differs from the cache), and takes
// the share-type-gone mark off those that had it, classWriters at a time; the errors come
// sorted, so that a condition message made of them does not change with the order of the writes.
func (s *storageClassOwner) applyClasses(ctx context.Context, reqs []*storagev1.StorageClass, byName map[string]*storagev1.StorageClass) []error {
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	markedGone := func(name string) bool {
		ex := byName[name]
		return ex != nil && ex.Annotations[operator.AnnotationShareTypeGone] != ""
	}
	// Every resync requires all the classes again, and nearly always they are as the operator
	// left them: those are sorted out here, in this goroutine, and only the rest go to the
	// writers. Before, all 200 went through the writers each minute, and the hand-offs woke
	// threads for nothing (docs/performance.md).
	var todo []*storagev1.StorageClass
	for _, req := range reqs {
		if s.upToDate != nil && !markedGone(req.Name) && s.upToDate(req) {
			continue
		}
		todo = append(todo, req)
	}
	// A few writers take the classes in turn, rather than a goroutine per class: 200 new
	// goroutines, each growing its stack through the apply, were a tenth of the operator's
	// steady CPU (perf, docs/performance.md).
	work := make(chan *storagev1.StorageClass)
	var wg sync.WaitGroup
	for range min(classWriters, len(todo)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range work {
				if _, err := s.apply(ctx, req); err != nil {
					fail(fmt.Errorf("StorageClass %s: %w", req.Name, err))
					continue
				}
				if markedGone(req.Name) {
					if err := s.patchAnnotations(ctx, req.Name, map[string]*string{operator.AnnotationShareTypeGone: nil}); err != nil {
						fail(err)
					}
				}
			}
		}()
	}
	for _, req := range todo {
		work <- req
	}
	close(work)
	wg.Wait()
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return errs
}

// ours tells whether the operator keeps this StorageClass: its label, its driver, and a name of
// its mode (a companion leaves alone the classes an earlier driver-mode install made, which the
// platform's operator now keeps under the same names).
func ours(sc *storagev1.StorageClass, prefix string) bool {
	return sc.Labels[operator.LabelManagedBy] == operator.ManagedByValue && sc.Provisioner == operator.DriverName &&
		strings.HasPrefix(sc.Name, prefix)
}

// shareNetworkFor finds the share network for DHSS=true types: the one on the storage network,
// else the project's only one. The poller lists them only when such types exist.
func (s *storageClassOwner) shareNetworkFor(found *manilaFindings) (string, error) {
	if !slices.ContainsFunc(found.ShareTypes, func(t operator.ShareType) bool { return t.DHSS }) {
		return "", nil
	}
	if found.NetErr != nil {
		return "", found.NetErr
	}
	storage := s.storageNetwork()
	var candidates []ShareNetwork
	for _, n := range found.ShareNetworks {
		if storage == "" || slices.ContainsFunc(n.NeutronNetIDs, func(id string) bool { return neutronid.Equal(id, storage) }) {
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 1 {
		return candidates[0].ID, nil
	}
	if len(candidates) == 0 {
		return "", fmt.Errorf("no Manila share network is on the storage network; create one (openstack share network create --neutron-net-id <storage network>)")
	}
	return "", fmt.Errorf("%d share networks qualify; start the operator with --storage-network to choose", len(candidates))
}

// remove deletes the operator's classes: for storageClassState Removed, and with the driver for
// managementState Removed.
func (s *storageClassOwner) remove(ctx context.Context) error {
	all, err := s.storageClasses.List(machinery.ManagedSelector)
	if err != nil {
		return err
	}
	var errs []error
	for _, sc := range all {
		if ours(sc, s.prefix) {
			errs = append(errs, s.deleteIfPresent(ctx, sc))
		}
	}
	return errors.Join(errs...)
}
