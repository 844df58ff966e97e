package controllers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"github.com/manila-setup/manila-setup/operator"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	operatorv1 "github.com/openshift/api/operator/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// manilaController asks Manila, once per resync, whether it is there and which share types it
// offers. The first time it finds Manila with share types it installs the driver (the CSIDriver
// object, which the other controllers wait for); it keeps one StorageClass per share type.
//
// A cloud without Manila is a normal cloud: ManilaControllerDisabled=True, never Degraded. Once
// installed, the driver is never removed because Manila went away or failed: pods must still
// be able to unmount. StorageClasses are never deleted when a share type disappears; they are
// annotated instead.
type manilaController struct {
	o *Operator

	mu         sync.Mutex
	sourceKey  [32]byte
	source     ManilaSource
	lastReason string
	noted      bool

	// The last answer from Manila, reused for syncs triggered by cluster events until the
	// next resync is due: one share-type list per resync, whatever happens in the cluster.
	checkedAt  time.Time
	checkedSrc ManilaSource
	lastTypes  []operator.ShareType
	lastErr    error
	lastNets   []ShareNetwork
	lastNetErr error

	// The storage network, as given or discovered; the Manila controller runs discovery with
	// its OpenStack client, and the storage network controller reports it.
	storage *storageNetworks
}

// discoveryEvery is how many resyncs apart discovery runs: it lists networks, subnets, shares
// and share networks, so it is much dearer than the share type check, and the storage network
// rarely changes.
const discoveryEvery = 10

const manilaName = "ManilaController"

func newManilaController(o *Operator, c *manilaController) *controller {
	ctrl := o.newController(manilaName, c.sync,
		o.inf.credentials,
		o.inf.storageClasses,
		o.inf.clusterConfig,
		o.inf.crds,
	)
	// The StorageClasses' nfs-shareClient follows where the workers mount from: the
	// MachineSets, the Machines they make, and what discovery finds.
	onMachineAPI(o, ctrl)
	o.storage.listen(func() { ctrl.queue.Add(queueKey) })
	return ctrl
}

// sourceFor returns the ManilaSource for these credentials, reusing it (and its token) while
// the credentials stay the same.
func (c *manilaController) sourceFor(creds *operator.Credentials) (ManilaSource, error) {
	y, _ := creds.AuthYAML()
	key := sha256.Sum256(append(append(y, 0), creds.CAPEM...))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.source != nil && key == c.sourceKey {
		return c.source, nil
	}
	s, err := c.o.cfg.NewManilaSource(creds, c.o.cfg.OpenStackTimeout)
	if err != nil {
		return nil, err
	}
	c.source, c.sourceKey = s, key
	return s, nil
}

func (c *manilaController) sync(ctx context.Context, syncCtx *controller) error {
	o := c.o
	spec, _, err := o.spec()
	if err != nil || spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return err
	}
	base := newStatus().WithObservedGeneration(o.clusterCSIDriver().Generation).WithVersion(o.cfg.Version)

	if spec.ManagementState == operatorv1.Removed {
		err := c.remove(ctx)
		st := removedStatus(manilaName, err)
		st.WithObservedGeneration(o.clusterCSIDriver().Generation).WithVersion(o.cfg.Version)
		st.WithConditions(condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "Removed", "managementState is Removed"))
		return firstErr(o.applyStatus(ctx, manilaName, st), err)
	}

	types, detectErr := c.detect(ctx)
	// In companion mode the driver is the platform's, installed by it.
	installed := o.companion() || o.enabled()
	if detectErr != nil {
		var me *ManilaError
		if !errors.As(detectErr, &me) {
			me = &ManilaError{Reason: ReasonUnreachable, Message: detectErr.Error()}
		}
		c.noteTransition(me.Reason, me.Message)
		unreachable := condition(operator.ConditionManilaReachable, operatorv1.ConditionFalse, me.Reason, me.Message)
		if !installed {
			// A cloud without (usable) Manila is a normal cloud: nothing to install, nothing wrong.
			base.WithConditions(
				condition(operator.ConditionDisabled, operatorv1.ConditionTrue, me.Reason, me.Message),
				condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaNotUsed", "the cluster runs normally without Manila"),
				condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
				unreachable,
			)
			return o.applyStatus(ctx, manilaName, base)
		}
		// Installed: what exists keeps working (the driver, the StorageClasses, mounted volumes)
		// while Manila cannot be asked, so the driver is neither disabled nor unavailable; what
		// is lost is news from Manila (new share types). Degraded only once that has lasted
		// longer than the grace period: a Manila restart or a Keystone blip is not an alarm.
		since := c.unreachableSince()
		degraded := condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", "")
		if time.Since(since) >= o.cfg.ManilaGracePeriod {
			// No running duration in the message: it would change, and be written, every resync.
			degraded = condition(manilaName+"Degraded", operatorv1.ConditionTrue, me.Reason,
				fmt.Sprintf("Manila has not answered since %s, longer than the grace period of %s: %s",
					since.UTC().Format(time.RFC3339), o.cfg.ManilaGracePeriod, me.Message))
		}
		base.WithConditions(
			condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "Installed",
				"the Manila CSI driver is installed; it stays so while Manila cannot be asked, so that volumes keep mounting and unmounting"),
			condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaUnreachable",
				"the StorageClasses are in place and keep working; share types added in Manila meanwhile get theirs when Manila answers again"),
			degraded,
			unreachable,
		)
		return o.applyStatus(ctx, manilaName, base)
	}

	// Manila is there with share types: install the driver (once) and the StorageClasses.
	c.noteTransition("", fmt.Sprintf("Manila found with %d share types", len(types)))
	var errs []error
	if !o.companion() {
		csiDriver, err := operator.ReadAsset("csidriver.yaml", o.vars(spec))
		if err == nil {
			_, err = o.apply(ctx, csiDriver)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CSIDriver %s: %w", operator.DriverName, err))
		}
	}
	scMsg, scErr := c.syncStorageClasses(ctx, types, syncCtx.requeueAfter)
	if scErr != nil {
		errs = append(errs, scErr)
	}
	err = errors.Join(errs...)
	disabled := condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable",
		fmt.Sprintf("Manila is in the Keystone catalog with %d share types", len(types)))
	base.WithConditions(condition(operator.ConditionManilaReachable, operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("Manila answered with %d share types", len(types))))
	if err != nil {
		base.WithConditions(disabled,
			condition(manilaName+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			condition(manilaName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()))
	} else {
		base.WithConditions(disabled,
			condition(manilaName+"Available", operatorv1.ConditionTrue, "AsExpected", scMsg),
			condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
	}
	return firstErr(o.applyStatus(ctx, manilaName, base), err)
}

// unreachableSince is when Manila stopped answering: the ManilaReachable condition's transition
// time when it is already False (so that a restarted operator keeps counting), else now.
func (c *manilaController) unreachableSince() time.Time {
	if d := c.o.clusterCSIDriver(); d != nil {
		if ex := findCondition(d.Status.Conditions, operator.ConditionManilaReachable); ex != nil &&
			ex.Status == operatorv1.ConditionFalse && !ex.LastTransitionTime.IsZero() {
			return ex.LastTransitionTime.Time
		}
	}
	return time.Now()
}

// detect asks Manila for its share types; an error is a *ManilaError with a reason.
func (c *manilaController) detect(ctx context.Context) ([]operator.ShareType, error) {
	creds, err := c.o.credentials()
	if err != nil {
		return nil, err
	}
	creds.Proxy = c.o.proxyFunc()
	src, err := c.sourceFor(creds)
	if err != nil {
		if operator.IsCredentialsError(err) {
			return nil, &ManilaError{Reason: ReasonAuthFailed, Message: err.Error()}
		}
		return nil, err
	}
	c.mu.Lock()
	fresh := c.checkedSrc == src && time.Since(c.checkedAt) < c.o.cfg.Resync*9/10
	types, err := c.lastTypes, c.lastErr
	c.mu.Unlock()
	if fresh {
		return types, err
	}
	types, err = c.check(ctx, src)
	c.mu.Lock()
	c.checkedAt, c.checkedSrc, c.lastTypes, c.lastErr = time.Now(), src, types, err
	c.mu.Unlock()
	return types, err
}

func (c *manilaController) check(ctx context.Context, src ManilaSource) ([]operator.ShareType, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*c.o.cfg.OpenStackTimeout)
	defer cancel()
	if err := src.Detect(ctx); err != nil {
		return nil, err
	}
	types, err := src.ShareTypes(ctx)
	if err != nil {
		return nil, err
	}
	if len(types) == 0 {
		return nil, &ManilaError{Reason: ReasonNoShareTypes, Message: "Manila is in the Keystone catalog but offers no share types to this project: ask the cloud admin for one"}
	}
	// Share networks matter only for share types with driver_handles_share_servers=true.
	var nets []ShareNetwork
	var netErr error
	for _, t := range types {
		if t.DHSS {
			nets, netErr = src.ShareNetworks(ctx)
			break
		}
	}
	c.mu.Lock()
	c.lastNets, c.lastNetErr = nets, netErr
	c.mu.Unlock()
	if c.storage.due(src, discoveryEvery*c.o.cfg.Resync) {
		dctx, cancel := context.WithTimeout(context.Background(), 3*c.o.cfg.OpenStackTimeout)
		found, err := src.Discover(dctx)
		cancel()
		c.storage.discovered(src, found, err)
		if err != nil {
			klog.Infof("discovering the storage network: %v", err)
		} else {
			for _, cand := range found.Candidates {
				klog.V(2).Infof("storage network candidate %s: score %d, %s confidence", cand.Network.Label(), cand.Score, cand.Confidence)
			}
		}
	}
	return types, nil
}

// noteTransition logs and records an event when the Manila state changes (not every resync).
func (c *manilaController) noteTransition(reason, msg string) {
	c.mu.Lock()
	prev, noted := c.lastReason, c.noted
	c.lastReason, c.noted = reason, true
	c.mu.Unlock()
	if noted && prev == reason {
		return
	}
	switch {
	case reason == "":
		klog.Infof("Manila available: %s", msg)
		c.o.recorder.Eventf("ManilaAvailable", "%s", msg)
	default:
		klog.Infof("Manila not usable (%s): %s", reason, msg)
		c.o.recorder.Warningf("ManilaUnavailable", "%s: %s", reason, msg)
	}
}

// storageClassState reads spec.storageClassState (empty means Managed).
func (o *Operator) storageClassState() operatorv1.StorageClassStateName {
	if d := o.clusterCSIDriver(); d != nil && d.Spec.StorageClassState != "" {
		return d.Spec.StorageClassState
	}
	return operatorv1.ManagedStorageClass
}

// syncStorageClasses keeps one class per share type. Their nfs-shareClient admits where the
// workers mount from (shareClients); when that changes (the storage network was attached after
// the classes were made), the classes are recreated under the same names: the parameters
// cannot change, and volumes do not refer to them.
func (c *manilaController) syncStorageClasses(ctx context.Context, types []operator.ShareType, requeue func(time.Duration)) (string, error) {
	o := c.o
	switch o.storageClassState() {
	case operatorv1.UnmanagedStorageClass:
		return "StorageClasses are not managed (storageClassState Unmanaged)", nil
	case operatorv1.RemovedStorageClass:
		return "StorageClasses removed (storageClassState Removed)", c.deleteStorageClasses(ctx)
	}
	all, err := o.lister.storageClasses.List(labels.Everything())
	if err != nil {
		return "", err
	}
	names := operator.NamesFor(o.cfg.Mode)
	existing := map[string]string{}
	taken := map[string]bool{}
	byName := map[string]*storagev1.StorageClass{}
	for _, sc := range all {
		byName[sc.Name] = sc
		if ours(sc, names.StorageClassPrefix) {
			existing[sc.Name] = sc.Annotations[operator.AnnotationShareType]
		} else {
			taken[sc.Name] = true
		}
	}
	typeNames := make([]string, 0, len(types))
	byType := map[string]operator.ShareType{}
	for _, t := range types {
		typeNames = append(typeNames, t.Name)
		byType[t.Name] = t
	}
	assigned := operator.StorageClassNamesWithPrefix(names.StorageClassPrefix, typeNames, existing, taken)
	secretNamespace := names.SecretNamespace
	if secretNamespace == "" {
		secretNamespace = o.cfg.Namespace
	}

	answer, err := o.shareClients()
	if errors.Is(err, errMachinesNotCached) {
		// Soon: writing the machine network now would mean recreating every class in a second.
		requeue(time.Second)
		return "waiting for the MachineSets and Machines to be read", nil
	}
	if err != nil {
		return "", err
	}
	clients := answer.Value(o.shareClientList())
	shareNetwork, snErr := c.shareNetworkFor(ctx, types)
	var errs []error
	var skipped []string
	for _, t := range types {
		if t.DHSS && shareNetwork == "" {
			skipped = append(skipped, t.Name)
			continue
		}
		req := operator.BuildStorageClass(assigned[t.Name], t, operator.StorageClassParams{Namespace: secretNamespace, ShareClients: clients, ShareNetworkID: shareNetwork})
		if _, err := o.apply(ctx, req); err != nil {
			errs = append(errs, fmt.Errorf("StorageClass %s: %w", req.Name, err))
			continue
		}
		if ex := byName[req.Name]; ex != nil && ex.Annotations[operator.AnnotationShareTypeGone] != "" {
			if err := o.patchStorageClassAnnotations(ctx, req.Name, map[string]*string{operator.AnnotationShareTypeGone: nil}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Classes whose share type went away stay (claims may use them); mark them.
	for name, t := range existing {
		if _, ok := byType[t]; ok {
			continue
		}
		if byName[name].Annotations[operator.AnnotationShareTypeGone] == "" {
			now := time.Now().UTC().Format(time.RFC3339)
			if err := o.patchStorageClassAnnotations(ctx, name, map[string]*string{operator.AnnotationShareTypeGone: &now}); err != nil {
				errs = append(errs, err)
				continue
			}
			o.recorder.Warningf("ShareTypeGone", "Manila no longer offers share type %q; StorageClass %s is kept (annotated %s)", t, name, operator.AnnotationShareTypeGone)
		}
	}
	// What the classes admit, and why, is StorageNetworkReachable's to say.
	msg := fmt.Sprintf("%d StorageClasses for %d Manila share types", len(types)-len(skipped), len(types))
	if len(skipped) > 0 {
		sort.Strings(skipped)
		why := "no share network on the storage network was found"
		if snErr != nil {
			why = snErr.Error()
		}
		msg += fmt.Sprintf("; no StorageClass for share types %s that need a share network: %s", strings.Join(skipped, ", "), why)
	}
	return msg, errors.Join(errs...)
}

// ours tells whether the operator keeps this StorageClass: its label, its driver, and a name of
// its mode (a companion leaves alone the classes an earlier driver-mode install made, which the
// platform's operator now keeps under the same names).
func ours(sc *storagev1.StorageClass, prefix string) bool {
	return sc.Labels[operator.LabelManagedBy] == operator.ManagedByValue && sc.Provisioner == operator.DriverName &&
		strings.HasPrefix(sc.Name, prefix)
}

// storageClassUpToDate compares what the operator sets; other annotations (a user's
// is-default-class) are not the operator's business, and the share-type-gone annotation is
// patched on its own.
func storageClassUpToDate(ex, req *storagev1.StorageClass) bool {
	return ex.Provisioner == req.Provisioner &&
		equality.Semantic.DeepEqual(ex.Parameters, req.Parameters) &&
		ptr.Deref(ex.ReclaimPolicy, "") == ptr.Deref(req.ReclaimPolicy, "") &&
		ptr.Deref(ex.AllowVolumeExpansion, false) == ptr.Deref(req.AllowVolumeExpansion, false) &&
		ptr.Deref(ex.VolumeBindingMode, "") == ptr.Deref(req.VolumeBindingMode, "") &&
		metaContains(ex, req)
}

// shareNetworkFor finds the share network for DHSS=true types: the one on the storage network
// (StorageNetworkID), else the project's only one. Manila is asked only when such types exist.
func (c *manilaController) shareNetworkFor(ctx context.Context, types []operator.ShareType) (string, error) {
	need := false
	for _, t := range types {
		need = need || t.DHSS
	}
	if !need {
		return "", nil
	}
	c.mu.Lock()
	nets, err := c.lastNets, c.lastNetErr
	c.mu.Unlock()
	if err != nil {
		return "", err
	}
	storage, _, _ := c.storage.network()
	var candidates []ShareNetwork
	for _, n := range nets {
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

// remove deletes what the Manila controller installed, for managementState Removed.
func (c *manilaController) remove(ctx context.Context) error {
	var errs []error
	errs = append(errs, c.deleteStorageClasses(ctx))
	if !c.o.companion() {
		errs = append(errs, c.o.deleteIfPresent(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverName}}))
	}
	return errors.Join(errs...)
}

func (c *manilaController) deleteStorageClasses(ctx context.Context) error {
	all, err := c.o.lister.storageClasses.List(managedSelector)
	if err != nil {
		return err
	}
	var errs []error
	prefix := operator.NamesFor(c.o.cfg.Mode).StorageClassPrefix
	for _, sc := range all {
		if ours(sc, prefix) {
			errs = append(errs, c.o.deleteIfPresent(ctx, sc))
		}
	}
	return errors.Join(errs...)
}
