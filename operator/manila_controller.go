package operator

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/manila-setup/manila-setup/machinesets"
	operatorv1 "github.com/openshift/api/operator/v1"
	applyoperatorv1 "github.com/openshift/client-go/operator/applyconfigurations/operator/v1"
	"github.com/openshift/library-go/pkg/controller/factory"
	"github.com/openshift/library-go/pkg/operator/resource/resourceapply"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
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
	lastTypes  []ShareType
	lastErr    error
	lastNets   []ShareNetwork
	lastNetErr error
}

const manilaName = "ManilaController"

// Conditions of the Manila controller besides Available/Degraded.
const (
	ConditionDisabled                = manilaName + "Disabled"
	ConditionStorageNetworkReachable = "StorageNetworkReachable"
)

func newManilaController(o *Operator) factory.Controller {
	c := &manilaController{o: o}
	return o.newController(manilaName, c.sync,
		o.nsInformers.Core().V1().Secrets().Informer(),
		o.scInformers.Storage().V1().StorageClasses().Informer(),
		o.sysInformers.Core().V1().ConfigMaps().Informer(),
		o.metaInformers.ForResource(crdGVR).Informer(),
	)
}

// sourceFor returns the ManilaSource for these credentials, reusing it (and its token) while
// the credentials stay the same.
func (c *manilaController) sourceFor(creds *Credentials) (ManilaSource, error) {
	y, _ := creds.authYAML()
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

// clusterCSIDriver returns the whole ClusterCSIDriver (for storageClassState) from the cache.
func (o *Operator) clusterCSIDriver() *operatorv1.ClusterCSIDriver {
	obj, err := o.opInformers.ForResource(clusterCSIDriverGVR).Lister().Get(DriverName)
	if err != nil {
		return nil
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil
	}
	var d operatorv1.ClusterCSIDriver
	if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d) != nil {
		return nil
	}
	return &d
}

func (c *manilaController) sync(ctx context.Context, syncCtx factory.SyncContext) error {
	o := c.o
	spec, _, err := o.spec()
	if err != nil || spec == nil || spec.ManagementState == operatorv1.Unmanaged {
		return err
	}
	meta, err := o.op.GetObjectMeta()
	if err != nil {
		return err
	}
	base := applyoperatorv1.OperatorStatus().WithObservedGeneration(meta.Generation).WithVersion(o.cfg.Version)

	if spec.ManagementState == operatorv1.Removed {
		err := c.remove(ctx)
		st := removedStatus(manilaName, err)
		st.WithObservedGeneration(meta.Generation).WithVersion(o.cfg.Version)
		st.WithConditions(condition(ConditionDisabled, operatorv1.ConditionFalse, "Removed", "managementState is Removed"))
		return firstErr(o.applyStatus(ctx, manilaName, st), err)
	}

	types, detectErr := c.detect(ctx)
	installed := o.enabled()
	if detectErr != nil {
		var me *ManilaError
		if !errors.As(detectErr, &me) {
			me = &ManilaError{Reason: ReasonUnreachable, Message: detectErr.Error()}
		}
		msg := me.Message
		if installed {
			msg += "; the Manila CSI driver stays installed so that mounted volumes keep working and can be unmounted"
		}
		c.noteTransition(me.Reason, msg)
		available := condition(manilaName+"Available", operatorv1.ConditionTrue, "ManilaNotUsed", "the cluster runs normally without Manila")
		if installed {
			available = condition(manilaName+"Available", operatorv1.ConditionFalse, me.Reason, msg)
		}
		base.WithConditions(
			condition(ConditionDisabled, operatorv1.ConditionTrue, me.Reason, msg),
			available,
			condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
			c.storageNetworkCondition(),
		)
		return o.applyStatus(ctx, manilaName, base)
	}

	// Manila is there with share types: install the driver (once) and the StorageClasses.
	c.noteTransition("", fmt.Sprintf("Manila found with %d share types", len(types)))
	var errs []error
	csiDriver, err := readAsset("csidriver.yaml", o.vars(spec))
	if err == nil {
		err = o.applyObject(ctx, csiDriver)
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("CSIDriver %s: %w", DriverName, err))
	}
	scMsg, scErr := c.syncStorageClasses(ctx, types)
	if scErr != nil {
		errs = append(errs, scErr)
	}
	err = errors.Join(errs...)
	disabled := condition(ConditionDisabled, operatorv1.ConditionFalse, "ManilaAvailable",
		fmt.Sprintf("Manila is in the Keystone catalog with %d share types", len(types)))
	if err != nil {
		base.WithConditions(disabled,
			condition(manilaName+"Available", operatorv1.ConditionFalse, "ApplyFailed", err.Error()),
			condition(manilaName+"Degraded", operatorv1.ConditionTrue, "ApplyFailed", err.Error()),
			c.storageNetworkCondition())
	} else {
		base.WithConditions(disabled,
			condition(manilaName+"Available", operatorv1.ConditionTrue, "AsExpected", scMsg),
			condition(manilaName+"Degraded", operatorv1.ConditionFalse, "AsExpected", ""),
			c.storageNetworkCondition())
	}
	return firstErr(o.applyStatus(ctx, manilaName, base), err)
}

// detect asks Manila for its share types; an error is a *ManilaError with a reason.
func (c *manilaController) detect(ctx context.Context) ([]ShareType, error) {
	creds, err := c.o.credentials()
	if err != nil {
		return nil, err
	}
	creds.Proxy = c.o.proxyFunc()
	src, err := c.sourceFor(creds)
	if err != nil {
		if IsCredentialsError(err) {
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

func (c *manilaController) check(ctx context.Context, src ManilaSource) ([]ShareType, error) {
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

func (c *manilaController) syncStorageClasses(ctx context.Context, types []ShareType) (string, error) {
	o := c.o
	switch o.storageClassState() {
	case operatorv1.UnmanagedStorageClass:
		return "StorageClasses are not managed (storageClassState Unmanaged)", nil
	case operatorv1.RemovedStorageClass:
		return "StorageClasses removed (storageClassState Removed)", c.deleteStorageClasses(ctx)
	}
	all, err := o.scInformers.Storage().V1().StorageClasses().Lister().List(labels.Everything())
	if err != nil {
		return "", err
	}
	existing := map[string]string{}
	taken := map[string]bool{}
	byName := map[string]*storagev1.StorageClass{}
	for _, sc := range all {
		byName[sc.Name] = sc
		if sc.Labels[LabelManagedBy] == managedByValue && sc.Provisioner == DriverName {
			existing[sc.Name] = sc.Annotations[AnnotationShareType]
		} else {
			taken[sc.Name] = true
		}
	}
	names := make([]string, 0, len(types))
	byType := map[string]ShareType{}
	for _, t := range types {
		names = append(names, t.Name)
		byType[t.Name] = t
	}
	assigned := StorageClassNames(names, existing, taken)

	clients, err := c.machineNetworks()
	if err != nil {
		return "", err
	}
	shareNetwork, snErr := c.shareNetworkFor(ctx, types)
	var errs []error
	var skipped []string
	for _, t := range types {
		if t.DHSS && shareNetwork == "" {
			skipped = append(skipped, t.Name)
			continue
		}
		req := BuildStorageClass(assigned[t.Name], t, StorageClassParams{Namespace: o.cfg.Namespace, ShareClients: clients, ShareNetworkID: shareNetwork})
		ex := byName[req.Name]
		if ex != nil && storageClassUpToDate(ex, req) {
			continue
		}
		if ex == nil {
			o.recorder.Eventf("StorageClassCreated", "Created StorageClass %s for Manila share type %q", req.Name, t.Name)
		}
		if _, _, err := resourceapply.ApplyStorageClass(ctx, o.kube.StorageV1(), o.recorder, req); err != nil {
			errs = append(errs, fmt.Errorf("StorageClass %s: %w", req.Name, err))
			continue
		}
		if ex != nil && ex.Annotations[AnnotationShareTypeGone] != "" {
			if err := o.patchStorageClassAnnotations(ctx, req.Name, map[string]*string{AnnotationShareTypeGone: nil}); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// Classes whose share type went away stay (claims may use them); mark them.
	for name, t := range existing {
		if _, ok := byType[t]; ok {
			continue
		}
		if byName[name].Annotations[AnnotationShareTypeGone] == "" {
			now := time.Now().UTC().Format(time.RFC3339)
			if err := o.patchStorageClassAnnotations(ctx, name, map[string]*string{AnnotationShareTypeGone: &now}); err != nil {
				errs = append(errs, err)
				continue
			}
			o.recorder.Warningf("ShareTypeGone", "Manila no longer offers share type %q; StorageClass %s is kept (annotated %s)", t, name, AnnotationShareTypeGone)
		}
	}
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

// storageClassUpToDate compares what the operator sets; other annotations (a user's
// is-default-class) are not the operator's business.
func storageClassUpToDate(ex, req *storagev1.StorageClass) bool {
	return ex.Provisioner == req.Provisioner &&
		equality.Semantic.DeepEqual(ex.Parameters, req.Parameters) &&
		ptr.Deref(ex.ReclaimPolicy, "") == ptr.Deref(req.ReclaimPolicy, "") &&
		ptr.Deref(ex.AllowVolumeExpansion, false) == ptr.Deref(req.AllowVolumeExpansion, false) &&
		ptr.Deref(ex.VolumeBindingMode, "") == ptr.Deref(req.VolumeBindingMode, "") &&
		metaContains(ex, req) && ex.Annotations[AnnotationShareTypeGone] == ""
}

// machineNetworks is the nfs-shareClient value: the CIDRs the nodes' addresses come from.
func (c *manilaController) machineNetworks() (string, error) {
	if len(c.o.cfg.MachineNetworks) > 0 {
		return strings.Join(c.o.cfg.MachineNetworks, ","), nil
	}
	cm, err := c.o.sysInformers.Core().V1().ConfigMaps().Lister().ConfigMaps(clusterConfigNS).Get(clusterConfigName)
	if err != nil {
		return "", fmt.Errorf("the machine network CIDRs (for the StorageClasses' nfs-shareClient) are unknown: ConfigMap %s/%s not found; start the operator with --machine-network", clusterConfigNS, clusterConfigName)
	}
	cidrs, err := MachineNetworksFromInstallConfig([]byte(cm.Data["install-config"]))
	if err != nil {
		return "", fmt.Errorf("ConfigMap %s/%s: %v; start the operator with --machine-network", clusterConfigNS, clusterConfigName, err)
	}
	return strings.Join(cidrs, ","), nil
}

// MachineNetworksFromInstallConfig reads networking.machineNetwork[].cidr.
func MachineNetworksFromInstallConfig(b []byte) ([]string, error) {
	var ic struct {
		Networking struct {
			MachineNetwork []struct {
				CIDR string `json:"cidr"`
			} `json:"machineNetwork"`
		} `json:"networking"`
	}
	if err := yaml.Unmarshal(b, &ic); err != nil {
		return nil, fmt.Errorf("install-config is not valid YAML")
	}
	var out []string
	for _, n := range ic.Networking.MachineNetwork {
		p, err := netip.ParsePrefix(strings.TrimSpace(n.CIDR))
		if err != nil {
			return nil, fmt.Errorf("install-config networking.machineNetwork: %q is not a CIDR", n.CIDR)
		}
		out = append(out, p.Masked().String())
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("install-config has no networking.machineNetwork")
	}
	return out, nil
}

// shareNetworkFor finds the share network for DHSS=true types: the one on the storage network
// (StorageNetworkID), else the project's only one. Manila is asked only when such types exist.
func (c *manilaController) shareNetworkFor(ctx context.Context, types []ShareType) (string, error) {
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
	var candidates []ShareNetwork
	for _, n := range nets {
		if c.o.cfg.StorageNetworkID == "" || n.NeutronNetID == c.o.cfg.StorageNetworkID {
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

// storageNetworkCondition says whether every MachineSet attaches its machines to the storage
// network, so that nodes can reach the NFS exports.
func (c *manilaController) storageNetworkCondition() *applyoperatorv1.OperatorConditionApplyConfiguration {
	o := c.o
	id := o.cfg.StorageNetworkID
	if id == "" {
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "StorageNetworkUnknown",
			"the storage network is not configured (--storage-network); find it and attach the workers with: manila-setup networks attach")
	}
	if !o.crdExists("machinesets.machine.openshift.io") {
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "NoMachineAPI", "the cluster has no MachineSets to check")
	}
	lister, synced := o.dynamicLister(machineSetGVR)
	if !synced {
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "Checking", "reading MachineSets")
	}
	objs, err := lister.ByNamespace("openshift-machine-api").List(labels.Everything())
	if err != nil {
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "Checking", "reading MachineSets")
	}
	var missing []string
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		if !machineSetAttached(u, id) {
			missing = append(missing, u.GetName())
		}
	}
	if len(objs) == 0 {
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionUnknown, "NoMachineSets", "no MachineSets in openshift-machine-api")
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return condition(ConditionStorageNetworkReachable, operatorv1.ConditionFalse, "MachineSetsNotAttached",
			fmt.Sprintf("MachineSets %s do not attach their machines to the storage network %s, so their nodes cannot mount Manila shares: run manila-setup networks attach", strings.Join(missing, ", "), id))
	}
	return condition(ConditionStorageNetworkReachable, operatorv1.ConditionTrue, "AsExpected",
		fmt.Sprintf("all %d MachineSets attach their machines to the storage network %s", len(objs), id))
}

// machineSetAttached reports whether the MachineSet's machines get a port on the network: as
// recorded by `manila-setup machinesets patch`, or written into the providerSpec by anyone.
func machineSetAttached(u *unstructured.Unstructured, networkID string) bool {
	var record machinesets.AttachmentRecord
	if raw := u.GetAnnotations()[machinesets.AttachmentAnnotation]; raw != "" && json.Unmarshal([]byte(raw), &record) == nil {
		if slices.Contains(record.Networks, networkID) {
			return true
		}
	}
	nets, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "providerSpec", "value", "networks")
	for _, n := range nets {
		m, ok := n.(map[string]any)
		if !ok {
			continue
		}
		if m["uuid"] == networkID {
			return true
		}
		if f, ok := m["filter"].(map[string]any); ok && f["id"] == networkID {
			return true
		}
	}
	return false
}

// remove deletes what the Manila controller installed, for managementState Removed.
func (c *manilaController) remove(ctx context.Context) error {
	var errs []error
	errs = append(errs, c.deleteStorageClasses(ctx))
	errs = append(errs, c.o.deleteIfPresent(ctx, &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: DriverName}}))
	return errors.Join(errs...)
}

func (c *manilaController) deleteStorageClasses(ctx context.Context) error {
	all, err := c.o.scInformers.Storage().V1().StorageClasses().Lister().List(managedSelector)
	if err != nil {
		return err
	}
	var errs []error
	for _, sc := range all {
		if sc.Provisioner == DriverName {
			errs = append(errs, c.o.deleteIfPresent(ctx, sc))
		}
	}
	return errors.Join(errs...)
}
