package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	operatorv1 "github.com/openshift/api/operator/v1"
	"k8s.io/klog/v2"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
)

// manilaController installs the driver when it finds Manila with share types, and keeps one
// StorageClass per share type. It is made of small pieces, each in its own file:
//
//   - manila_poller.go: the manilaPoller asks Manila, once per resync, and publishes what it
//     found as an immutable manilaFindings, which other controllers read too;
//   - manila_csidriver.go: the CSIDriver object (driver mode);
//   - manila_storageclasses.go: the StorageClasses;
//   - manila_snapshotclass.go: the VolumeSnapshotClass (driver mode).
//
// Its sync is the one owner of the conditions (ManilaController*, ManilaReachable): it calls the
// poller, then the three owners in order, and makes the conditions of what they return. The
// owners are plain values rather than controllers of their own, so that they share one answer
// of Manila and one status write per sync, with no informer or goroutine of their own.
//
// A cloud without Manila is a normal cloud: ManilaControllerDisabled=True, never Degraded. Once
// installed, the driver is never removed because Manila went away or failed: pods must still
// be able to unmount.
type manilaController struct {
	self        func() *operatorv1.ClusterCSIDriver
	applyStatus func(ctx context.Context, manager string, st *machinery.Status) error
	version     string
	gracePeriod time.Duration
	recorder    machinery.Recorder

	poller  *manilaPoller
	classes *storageClassOwner
	// driver and snapshot are nil where the driver is the platform's, installed by it: then
	// the controller keeps StorageClasses only.
	driver   *csiDriverOwner
	snapshot *snapshotClassOwner

	mu         sync.Mutex
	lastReason string
	noted      bool
}

const manilaName = "ManilaController"

// newManilaController builds the Manila controller and its pieces. It is the only place that
// picks their inputs out of wiring. The controller watches the credentials, the StorageClasses,
// the install-config, the CRDs, and the MachineSets and Machines.
func newManilaController(w wiring) *machinery.Controller {
	c := &manilaController{
		self: w.ops.self, applyStatus: w.ops.applyStatus, version: w.cfg.Version, gracePeriod: w.cfg.ManilaGracePeriod, recorder: w.recorder,
	}
	var accessRules *accessRuleCheck
	if w.profile.deploysDriver {
		accessRules = &accessRuleCheck{volumes: driverVolumes(w.kube.Core), recorder: w.recorder, every: accessRulesEvery * w.cfg.Resync * 9 / 10}
		c.driver = newCSIDriverOwner(csiDriverInputs{exists: w.ops.enabled, vars: w.vars, apply: w.ops.apply, deleteIfPresent: w.ops.deleteIfPresent})
		c.snapshot = newSnapshotClassOwner(snapshotClassInputs{crdExists: w.inf.CRDExists, vars: w.vars, apply: w.ops.apply})
	}
	c.poller = newManilaPoller(manilaPollerInputs{
		resync: w.cfg.Resync, openStackTimeout: w.cfg.OpenStackTimeout,
		credentials: w.credentials, proxy: proxyFunc(proxyOf(w.l.Proxies)), newSource: w.cfg.NewManilaSource,
		storage: w.storage, accessRules: accessRules, findings: w.findings,
	})
	c.classes = newStorageClassOwner(storageClassInputs{
		prefix: w.profile.names.StorageClassPrefix, secretNamespace: w.secretNamespace, listShareClients: w.profile.listShareClients,
		state:          storageClassStateOf(w.ops.self),
		storageClasses: w.l.StorageClasses, shareClients: w.mounts.answer,
		storageNetwork: func() string { id, _, _ := w.storage.network(); return id },
		apply:          w.ops.apply, deleteIfPresent: w.ops.deleteIfPresent, patchAnnotations: w.writer.PatchStorageClassAnnotations,
		upToDate: w.writer.UpToDate, recorder: w.recorder,
	})
	ctrl := w.loop.Controller(manilaName, c.sync, w.inf.Credentials, w.inf.StorageClasses, w.inf.ClusterConfig, w.inf.CRDs)
	// The StorageClasses' nfs-shareClient follows where the workers mount from: the
	// MachineSets, the Machines they make, and what discovery finds.
	onMachineAPI(w.inf.OnDynamic, ctrl)
	w.storage.listen(ctrl.Enqueue)
	return ctrl
}

// storageClassStateOf reads spec.storageClassState of the operator's object (empty means
// Managed).
func storageClassStateOf(self func() *operatorv1.ClusterCSIDriver) func() operatorv1.StorageClassStateName {
	return func() operatorv1.StorageClassStateName {
		if d := self(); d != nil && d.Spec.StorageClassState != "" {
			return d.Spec.StorageClassState
		}
		return operatorv1.ManagedStorageClass
	}
}

func (c *manilaController) sync(ctx context.Context, syncCtx *machinery.Controller) error {
	self := c.self()
	if self == nil || self.Spec.ManagementState == operatorv1.Unmanaged {
		return nil
	}
	if self.Spec.ManagementState == operatorv1.Removed {
		return c.syncRemoved(ctx, self)
	}
	base := machinery.NewStatus().WithObservedGeneration(self.Generation).WithVersion(c.version)
	found, err := c.poller.poll(ctx)
	if err == nil {
		err = found.Err
	}
	if err != nil {
		return c.syncUnanswered(ctx, base, err)
	}

	// Manila is there with share types: install the driver (once) and the StorageClasses.
	types := len(found.ShareTypes)
	c.noteTransition("", fmt.Sprintf("Manila found with %d share types", types))
	msg, err := c.syncObjects(ctx, &self.Spec.OperatorSpec, found, syncCtx.RequeueAfter)
	disabled := machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable",
		fmt.Sprintf("Manila is in the Keystone catalog with %d share types", types))
	base.WithConditions(machinery.Condition(operator.ConditionManilaReachable, operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("Manila answered with %d share types", types)))
	if err != nil {
		base.WithConditions(disabled,
			machinery.Condition(manilaName+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			machinery.Condition(manilaName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()))
	} else {
		base.WithConditions(disabled,
			machinery.Condition(manilaName+"Available", operatorv1.ConditionTrue, "AsExpected", msg),
			machinery.Condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""))
	}
	return firstErr(c.applyStatus(ctx, manilaName, base), err)
}

// syncObjects hands what Manila answered to the owners of the CSIDriver, the StorageClasses and
// the VolumeSnapshotClass, in that order (the snapshot class names the StorageClasses). It
// returns ManilaControllerAvailable's message and what failed.
func (c *manilaController) syncObjects(ctx context.Context, spec *operatorv1.OperatorSpec, found *manilaFindings, requeue func(time.Duration)) (string, error) {
	var errs []error
	if c.driver != nil {
		errs = append(errs, c.driver.sync(ctx, spec))
	}
	classes, err := c.classes.sync(ctx, found, requeue)
	errs = append(errs, err)
	if c.snapshot != nil {
		errs = append(errs, c.snapshot.sync(ctx, spec, found, classes, requeue))
	}
	return classes.message, errors.Join(errs...)
}

// syncUnanswered reports that Manila could not be asked, or answered without share types
// (err, a *ManilaError when it has a reason).
func (c *manilaController) syncUnanswered(ctx context.Context, base *machinery.Status, err error) error {
	var me *ManilaError
	if !errors.As(err, &me) {
		me = &ManilaError{Reason: ReasonUnreachable, Message: err.Error()}
	}
	c.noteTransition(me.Reason, me.Message)
	unreachable := machinery.Condition(operator.ConditionManilaReachable, operatorv1.ConditionFalse, me.Reason, me.Message)
	if c.driver != nil && !c.driver.installed() {
		// A cloud without (usable) Manila is a normal cloud: nothing to install, nothing wrong.
		base.WithConditions(
			machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionTrue, me.Reason, me.Message),
			machinery.Condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaNotUsed", "the cluster runs normally without Manila"),
			machinery.Condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
			unreachable,
		)
		return c.applyStatus(ctx, manilaName, base)
	}
	// Installed (or the platform's): what exists keeps working (the driver, the StorageClasses,
	// mounted volumes) while Manila cannot be asked, so the driver is neither disabled nor
	// unavailable; what is lost is news from Manila (new share types). Degraded only once that
	// has lasted longer than the grace period: a Manila restart or a Keystone blip is not an
	// alarm.
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

// syncRemoved deletes what the Manila controller installed, for managementState Removed: the
// StorageClasses and the CSIDriver (the VolumeSnapshotClass is kept).
func (c *manilaController) syncRemoved(ctx context.Context, self *operatorv1.ClusterCSIDriver) error {
	err := c.classes.remove(ctx)
	if c.driver != nil {
		err = errors.Join(err, c.driver.remove(ctx))
	}
	st := machinery.RemovedStatus(manilaName, err)
	st.WithObservedGeneration(self.Generation).WithVersion(c.version)
	st.WithConditions(machinery.Condition(operator.ConditionDisabled, operatorv1.ConditionFalse, "Removed", "managementState is Removed"))
	return firstErr(c.applyStatus(ctx, manilaName, st), err)
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
