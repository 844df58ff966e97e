package controllers

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/internal/neutronid"
	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/shareclient"
)

// manilaController asks Manila, once per resync, whether it is there and which share types it
// offers. The first time it finds Manila with share types it installs the driver (the CSIDriver
// object, which the other controllers wait for); it keeps one StorageClass per share type.
//
// A cloud without Manila is a normal cloud: ManilaControllerDisabled=True, never Degraded. Once
// installed, the driver is never removed because Manila went away or failed: pods must still
// be able to unmount. StorageClasses are never deleted when a share type disappears; they are
// annotated instead.
//
// What it learns of Manila (the share types) it publishes as an immutable manilaFindings, which
// the StorageClass lint controller reads.
type manilaController struct {
	operands
	manilaInputs

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
}

// manilaInputs is what the Manila controller reads and writes besides its operands.
type manilaInputs struct {
	version          string
	resync           time.Duration
	gracePeriod      time.Duration
	openStackTimeout time.Duration
	newSource        func(*operator.Credentials, time.Duration) (ManilaSource, error)
	// installsDriver: the operator creates the CSIDriver object (driver mode); otherwise the
	// driver is the platform's, installed by it, and the controller keeps StorageClasses only.
	installsDriver bool
	classes        classNames
	// listShareClients: the driver that serves the classes takes a comma-separated
	// nfs-shareClient (see shareClientSource).
	listShareClients bool
	credentials      func() (*operator.Credentials, error)
	proxy            func(*http.Request) (*url.URL, error)
	storageClasses   storagelisters.StorageClassLister
	shareClients     func() (shareclient.Answer, error)
	patchAnnotations func(ctx context.Context, name string, annotations map[string]*string) error
	// upToDate tells whether applying a class would write nothing (machinery.Writer.UpToDate);
	// nil: always apply.
	upToDate func(runtime.Object) bool
	vars     func(*operatorv1.OperatorSpec) map[string]string
	recorder machinery.Recorder
	// storage is the storage network, as given or discovered: the Manila controller runs
	// discovery with its OpenStack client, and the storage network controller reports it.
	storage *storageNetworks
	// findings is where it publishes what it learned of Manila.
	findings *machinery.Published[manilaFindings]
	// accessRules counts the driver's volumes whose access rules are not active; nil where the
	// driver is the platform's.
	accessRules *accessRuleCheck
	// crdExists tells whether a CRD is served (the VolumeSnapshotClass's).
	crdExists func(name string) bool
}

// classNames are the names of the StorageClasses an operator of one mode keeps.
type classNames struct {
	// prefix starts their names.
	prefix string
	// secretNamespace holds the Secret they name.
	secretNamespace string
}

// manilaFindings is what the Manila controller learned at its last check of Manila, published
// for the other controllers. Nobody changes it once published.
type manilaFindings struct {
	// ShareTypes are the share types Manila offered; nil when it did not answer (Err).
	ShareTypes []operator.ShareType
	Err        error
	At         time.Time
}

// shareTypeNames are the names Manila offered at the last check; nil when it was not asked yet
// or did not answer.
func (f *manilaFindings) shareTypeNames() []string {
	if f == nil || f.Err != nil || f.ShareTypes == nil {
		return nil
	}
	names := make([]string, 0, len(f.ShareTypes))
	for _, t := range f.ShareTypes {
		names = append(names, t.Name)
	}
	return names
}

// discoveryEvery is how many resyncs apart discovery runs: it lists networks, subnets, shares
// and share networks, so it is much dearer than the share type check, and the storage network
// rarely changes.
const discoveryEvery = 10

const manilaName = "ManilaController"

// newManilaController watches the credentials, the StorageClasses, the install-config, the CRDs,
// and the MachineSets and Machines.
func newManilaController(w wiring) *machinery.Controller {
	c := &manilaController{operands: w.ops, manilaInputs: manilaInputs{
		version: w.cfg.Version, resync: w.cfg.Resync, gracePeriod: w.cfg.ManilaGracePeriod, openStackTimeout: w.cfg.OpenStackTimeout,
		newSource: w.cfg.NewManilaSource, installsDriver: w.profile.deploysDriver,
		classes:          classNames{prefix: w.profile.names.StorageClassPrefix, secretNamespace: w.secretNamespace},
		listShareClients: w.profile.listShareClients,
		credentials:      w.credentials, proxy: proxyFunc(proxyOf(w.l.Proxies)),
		storageClasses: w.l.StorageClasses, shareClients: w.mounts.answer, patchAnnotations: w.writer.PatchStorageClassAnnotations,
		upToDate: w.writer.UpToDate,
		vars:     w.vars, recorder: w.recorder, storage: w.storage, findings: w.findings,
		crdExists: w.inf.CRDExists,
	}}
	if w.profile.deploysDriver {
		c.accessRules = &accessRuleCheck{volumes: driverVolumes(w.kube.Core), recorder: w.recorder, every: accessRulesEvery * w.cfg.Resync * 9 / 10}
	}
	ctrl := w.loop.Controller(manilaName, c.sync, w.inf.Credentials, w.inf.StorageClasses, w.inf.ClusterConfig, w.inf.CRDs)
	// The StorageClasses' nfs-shareClient follows where the workers mount from: the
	// MachineSets, the Machines they make, and what discovery finds.
	onMachineAPI(w.inf.OnDynamic, ctrl)
	w.storage.listen(ctrl.Enqueue)
	return ctrl
}

// sourceFor returns the ManilaSource for these credentials, reusing it (and its token) while
// the credentials stay the same.
func (c *manilaController) sourceFor(creds *operator.Credentials) (ManilaSource, error) {
	y, _ := creds.AuthYAML()
	key := sha256.Sum256(bytes.Join([][]byte{y, creds.CAPEM, creds.ClientCertPEM, creds.ClientKeyPEM}, []byte{0}))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.source != nil && key == c.sourceKey {
		return c.source, nil
	}
	s, err := c.newSource(creds, c.openStackTimeout)
	if err != nil {
		return nil, err
	}
	c.source, c.sourceKey = s, key
	return s, nil
}

func (c *manilaController) sync(ctx context.Context, syncCtx *machinery.Controller) error {
	self := c.self()
	if self == nil || self.Spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	spec := &self.Spec.OperatorSpec
	base := machinery.NewStatus().WithObservedGeneration(self.Generation).WithVersion(c.version)

	if spec.ManagementState == operatorv1.Removed {
		err := c.remove(ctx)
		st := machinery.RemovedStatus(manilaName, err)
		st.WithObservedGeneration(self.Generation).WithVersion(c.version)
		st.WithConditions(machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "Removed", "managementState is Removed"))
		return firstErr(c.applyStatus(ctx, manilaName, st), err)
	}

	types, detectErr := c.detect(ctx)
	// Unless this operator installs the driver, the driver is the platform's, installed by it.
	installed := !c.installsDriver || c.enabled()
	if detectErr != nil {
		var me *ManilaError
		if !errors.As(detectErr, &me) {
			me = &ManilaError{Reason: ReasonUnreachable, Message: detectErr.Error()}
		}
		c.noteTransition(me.Reason, me.Message)
		unreachable := machinery.Condition(operator.ConditionManilaReachable, operatorv1.ConditionFalse, me.Reason, me.Message)
		if !installed {
			// A cloud without (usable) Manila is a normal cloud: nothing to install, nothing wrong.
			base.WithConditions(
				machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionTrue, me.Reason, me.Message),
				machinery.Condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaNotUsed", "the cluster runs normally without Manila"),
				machinery.Condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
				unreachable,
			)
			return c.applyStatus(ctx, manilaName, base)
		}
		// Installed: what exists keeps working (the driver, the StorageClasses, mounted volumes)
		// while Manila cannot be asked, so the driver is neither disabled nor unavailable; what
		// is lost is news from Manila (new share types). Degraded only once that has lasted
		// longer than the grace period: a Manila restart or a Keystone blip is not an alarm.
		since := c.unreachableSince()
		degraded := machinery.Condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", "")
		if time.Since(since) >= c.gracePeriod {
			// No running duration in the message: it would change, and be written, every resync.
			degraded = machinery.Condition(manilaName+"Degraded", operatorv1.ConditionTrue, me.Reason,
				fmt.Sprintf("Manila has not answered since %s, longer than the grace period of %s: %s",
					since.UTC().Format(time.RFC3339), c.gracePeriod, me.Message))
		}
		base.WithConditions(
			machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "Installed",
				"the Manila CSI driver is installed; it stays so while Manila cannot be asked, so that volumes keep mounting and unmounting"),
			machinery.Condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaUnreachable",
				"the StorageClasses are in place and keep working; share types added in Manila meanwhile get theirs when Manila answers again"),
			degraded,
			unreachable,
		)
		return c.applyStatus(ctx, manilaName, base)
	}

	// Manila is there with share types: install the driver (once) and the StorageClasses.
	c.noteTransition("", fmt.Sprintf("Manila found with %d share types", len(types)))
	var errs []error
	if c.installsDriver {
		csiDriver, err := operator.ReadAsset("csidriver.yaml", c.vars(spec))
		if err == nil {
			_, err = c.apply(ctx, csiDriver)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("CSIDriver %s: %w", operator.DriverName, err))
		}
	}
	scMsg, classOf, scErr := c.syncStorageClasses(ctx, types, syncCtx.RequeueAfter)
	if scErr != nil {
		errs = append(errs, scErr)
	}
	if err := c.applySnapshotClass(ctx, spec, types, classOf, syncCtx.RequeueAfter); err != nil {
		errs = append(errs, fmt.Errorf("VolumeSnapshotClass %s: %w", operator.VolumeSnapshotClassName, err))
	}
	err := errors.Join(errs...)
	disabled := machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable",
		fmt.Sprintf("Manila is in the Keystone catalog with %d share types", len(types)))
	base.WithConditions(machinery.Condition(operator.ConditionManilaReachable, operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("Manila answered with %d share types", len(types))))
	if err != nil {
		base.WithConditions(disabled,
			machinery.Condition(manilaName+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			machinery.Condition(manilaName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()))
	} else {
		base.WithConditions(disabled,
			machinery.Condition(manilaName+"Available", operatorv1.ConditionTrue, "AsExpected", scMsg),
			machinery.Condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
	}
	return firstErr(c.applyStatus(ctx, manilaName, base), err)
}

// unreachableSince is when Manila stopped answering: the ManilaReachable condition's transition
// time when it is already False (so that a restarted operator keeps counting), else now.
func (c *manilaController) unreachableSince() time.Time {
	if d := c.self(); d != nil {
		if ex := machinery.FindCondition(d.Status.Conditions, operator.ConditionManilaReachable); ex != nil &&
			ex.Status == operatorv1.ConditionFalse && !ex.LastTransitionTime.IsZero() {
			return ex.LastTransitionTime.Time
		}
	}
	return time.Now()
}

// detect asks Manila for its share types; an error is a *ManilaError with a reason.
func (c *manilaController) detect(ctx context.Context) ([]operator.ShareType, error) {
	creds, err := c.credentials()
	if err != nil {
		return nil, err
	}
	creds.Proxy = c.proxy
	src, err := c.sourceFor(creds)
	if err != nil {
		if operator.IsCredentialsError(err) {
			return nil, &ManilaError{Reason: ReasonAuthFailed, Message: err.Error()}
		}
		return nil, err
	}
	c.mu.Lock()
	fresh := c.checkedSrc == src && time.Since(c.checkedAt) < c.resync*9/10
	types, err := c.lastTypes, c.lastErr
	c.mu.Unlock()
	if fresh {
		return types, err
	}
	types, err = c.check(ctx, src)
	now := time.Now()
	c.mu.Lock()
	c.checkedAt, c.checkedSrc, c.lastTypes, c.lastErr = now, src, types, err
	c.mu.Unlock()
	c.findings.Publish(&manilaFindings{ShareTypes: slices.Clone(types), Err: err, At: now})
	return types, err
}

func (c *manilaController) check(ctx context.Context, src ManilaSource) ([]operator.ShareType, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*c.openStackTimeout)
	defer cancel()
	if err := src.Detect(ctx); err != nil {
		return nil, err
	}
	// Discovery (networks, subnets, shares, share networks: Neutron's and Manila's answers)
	// runs beside the share type list rather than after it: the StorageClasses' nfs-shareClient
	// waits for both, and the first class is written as soon as both answered.
	discovered := func() {}
	if c.storage.due(src, discoveryEvery*c.resync) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.discover(src)
		}()
		discovered = func() { <-done }
	}
	defer discovered()
	types, err := src.ShareTypes(ctx)
	if err != nil {
		return nil, err
	}
	if c.accessRules != nil {
		c.accessRules.check(ctx, src)
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
	return types, nil
}

// discover runs discovery of the storage network and records what it found.
func (c *manilaController) discover(src ManilaSource) {
	dctx, cancel := context.WithTimeout(context.Background(), 3*c.openStackTimeout)
	found, err := src.Discover(dctx)
	cancel()
	c.storage.discovered(src, found, err)
	if err != nil {
		klog.Infof("discovering the storage network: %v", err)
		return
	}
	for _, cand := range found.Candidates {
		klog.V(2).Infof("storage network candidate %s: score %d, %s confidence", cand.Network.Label(), cand.Score, cand.Confidence)
	}
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
		c.recorder.Eventf("ManilaAvailable", "%s", msg)
	default:
		klog.Infof("Manila not usable (%s): %s", reason, msg)
		c.recorder.Warningf("ManilaUnavailable", "%s: %s", reason, msg)
	}
}

// storageClassState reads spec.storageClassState (empty means Managed).
func (c *manilaController) storageClassState() operatorv1.StorageClassStateName {
	if d := c.self(); d != nil && d.Spec.StorageClassState != "" {
		return d.Spec.StorageClassState
	}
	return operatorv1.ManagedStorageClass
}

// syncStorageClasses keeps one class per share type. Their nfs-shareClient admits where the
// workers mount from (shareClients); when that changes (the storage network was attached after
// the classes were made), the classes are recreated under the same names: the parameters
// cannot change, and volumes do not refer to them.
func (c *manilaController) syncStorageClasses(ctx context.Context, types []operator.ShareType, requeue func(time.Duration)) (msg string, classOf map[string]string, err error) {
	switch c.storageClassState() {
	case operatorv1.UnmanagedStorageClass:
		return "StorageClasses are not managed (storageClassState Unmanaged)", nil, nil
	case operatorv1.RemovedStorageClass:
		return "StorageClasses removed (storageClassState Removed)", nil, c.deleteStorageClasses(ctx)
	}
	all, err := c.storageClasses.List(labels.Everything())
	if err != nil {
		return "", nil, err
	}
	existing := map[string]string{}
	taken := map[string]bool{}
	byName := map[string]*storagev1.StorageClass{}
	for _, sc := range all {
		byName[sc.Name] = sc
		if ours(sc, c.classes.prefix) {
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
	assigned := operator.StorageClassNamesWithPrefix(c.classes.prefix, typeNames, existing, taken)

	answer, err := c.shareClients()
	if errors.Is(err, errMachinesNotCached) {
		// Soon: writing the machine network now would mean recreating every class in a second.
		requeue(time.Second)
		return "waiting for the MachineSets and Machines to be read", nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	clients := answer.Value(c.listShareClients)
	shareNetwork, snErr := c.shareNetworkFor(ctx, types)
	var skipped []string
	var reqs []*storagev1.StorageClass
	classOf = map[string]string{}
	for _, t := range types {
		if t.DHSS && shareNetwork == "" {
			skipped = append(skipped, t.Name)
			continue
		}
		classOf[t.Name] = assigned[t.Name]
		reqs = append(reqs, operator.BuildStorageClass(assigned[t.Name], t, operator.StorageClassParams{Namespace: c.classes.secretNamespace, ShareClients: clients, ShareNetworkID: shareNetwork}))
	}
	errs := c.applyClasses(ctx, reqs, byName)
	// Classes whose share type went away stay (claims may use them); mark them.
	for name, t := range existing {
		if _, ok := byType[t]; ok {
			continue
		}
		if byName[name].Annotations[operator.AnnotationShareTypeGone] == "" {
			now := time.Now().UTC().Format(time.RFC3339)
			if err := c.patchAnnotations(ctx, name, map[string]*string{operator.AnnotationShareTypeGone: &now}); err != nil {
				errs = append(errs, err)
				continue
			}
			c.recorder.Warningf("ShareTypeGone", "Manila no longer offers share type %q; StorageClass %s is kept (annotated %s)", t, name, operator.AnnotationShareTypeGone)
		}
	}
	// What the classes admit, and why, is StorageNetworkReachable's to say.
	msg = fmt.Sprintf("%d StorageClasses for %d Manila share types", len(types)-len(skipped), len(types))
	if len(skipped) > 0 {
		sort.Strings(skipped)
		why := "no share network on the storage network was found"
		if snErr != nil {
			why = snErr.Error()
		}
		msg += fmt.Sprintf("; no StorageClass for share types %s that need a share network: %s", strings.Join(skipped, ", "), why)
	}
	return msg, classOf, errors.Join(errs...)
}

// snapshotClassCRD is the CRD the driver's VolumeSnapshotClass needs: on OpenShift, the
// platform's csi-snapshot-controller-operator installs it.
const snapshotClassCRD = "volumesnapshotclasses.snapshot.storage.k8s.io"

// applySnapshotClass applies the driver's VolumeSnapshotClass (driver mode, once the CRD is
// served), annotated with the StorageClasses whose share types can take snapshots (classOf maps
// share type to class; nil when the classes are not managed): what a user reads before taking
// one. It is kept when the driver is removed, as OpenShift's own operator keeps it.
func (c *manilaController) applySnapshotClass(ctx context.Context, spec *operatorv1.OperatorSpec, types []operator.ShareType, classOf map[string]string, requeue func(time.Duration)) error {
	if !c.installsDriver || c.crdExists == nil || !c.crdExists(snapshotClassCRD) {
		return nil
	}
	vsc, err := operator.ReadUnstructuredAsset("volumesnapshotclass.yaml", c.vars(spec))
	if err != nil {
		return err
	}
	which := operator.SnapshotStorageClasses(types, classOf)
	if classOf == nil {
		state := c.storageClassState()
		if state == operatorv1.ManagedStorageClass {
			// The classes are not written yet (the Machines are being read): the sync that
			// writes them applies the class.
			return nil
		}
		which = "not known: the StorageClasses are not managed (storageClassState " + string(state) + ")"
	}
	annotations := vsc.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[operator.AnnotationSnapshotStorageClasses] = which
	vsc.SetAnnotations(annotations)
	_, err = c.apply(ctx, vsc)
	if errors.Is(err, machinery.ErrNotCached) {
		// The informer of VolumeSnapshotClasses starts with the CRD and has not listed yet.
		requeue(500 * time.Millisecond)
		return nil
	}
	return err
}

// classWriters is how many StorageClasses are written at once: one at a time, the first sync of
// 200 share types took 8 to 10 s of round trips; the client's rate limit still applies.
const classWriters = 8

// applyClasses applies the classes (an apply writes only what differs from the cache), and takes
// the share-type-gone mark off those that had it, classWriters at a time; the errors come
// sorted, so that a condition message made of them does not change with the order of the writes.
func (c *manilaController) applyClasses(ctx context.Context, reqs []*storagev1.StorageClass, byName map[string]*storagev1.StorageClass) []error {
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}
	// Every resync requires all the classes again, and nearly always they are as the operator
	// left them: those are sorted out here, in this goroutine, and only the rest go to the
	// writers. Before, all 200 went through the writers each minute, and the hand-offs woke
	// threads for nothing (docs/performance.md).
	var todo []*storagev1.StorageClass
	for _, req := range reqs {
		ex := byName[req.Name]
		markedGone := ex != nil && ex.Annotations[operator.AnnotationShareTypeGone] != ""
		if c.upToDate != nil && !markedGone && c.upToDate(req) {
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
				if _, err := c.apply(ctx, req); err != nil {
					fail(fmt.Errorf("StorageClass %s: %w", req.Name, err))
					continue
				}
				if ex := byName[req.Name]; ex != nil && ex.Annotations[operator.AnnotationShareTypeGone] != "" {
					if err := c.patchAnnotations(ctx, req.Name, map[string]*string{operator.AnnotationShareTypeGone: nil}); err != nil {
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
	if c.installsDriver {
		errs = append(errs, c.deleteIfPresent(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: operator.DriverName}}))
	}
	return errors.Join(errs...)
}

func (c *manilaController) deleteStorageClasses(ctx context.Context) error {
	all, err := c.storageClasses.List(machinery.ManagedSelector)
	if err != nil {
		return err
	}
	var errs []error
	for _, sc := range all {
		if ours(sc, c.classes.prefix) {
			errs = append(errs, c.deleteIfPresent(ctx, sc))
		}
	}
	return errors.Join(errs...)
}
