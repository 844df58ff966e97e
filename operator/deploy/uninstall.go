package deploy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/platform"
)

// DefaultUninstallTimeout bounds how long Uninstall waits for the workloads it deleted (their
// pods included) to be gone.
const DefaultUninstallTimeout = 5 * time.Minute

// UninstallOptions shape Uninstall.
type UninstallOptions struct {
	// Mode is the mode to uninstall; empty: what the cluster is (operator/platform).
	Mode platform.Mode
	// Namespace is the operator's; empty: the mode's.
	Namespace string
	// KeepDriver deletes only the operator's own objects (its Deployment, ServiceAccount, RBAC,
	// NetworkPolicy, CA bundle ConfigMap, Lease): the driver runs on, unmanaged.
	KeepDriver bool
	// Force deletes the driver also while PersistentVolumes or VolumeSnapshotContents of it
	// exist. A StorageClass a PersistentVolume names, and a VolumeSnapshotClass a
	// VolumeSnapshotContent names, are kept all the same; snapshots are never deleted.
	Force bool
	// DryRun deletes nothing: every delete is sent as a server-side dry run (admission runs).
	DryRun bool
	// Timeout bounds the wait for deleted workloads; zero: DefaultUninstallTimeout.
	Timeout time.Duration
}

// Action is what Uninstall does with one object.
type Action string

const (
	// ActionDelete: ours, deleted (or, in a dry run, would be).
	ActionDelete Action = "delete"
	// ActionKeep: ours, kept for the reason given.
	ActionKeep Action = "keep"
	// ActionLeave: not ours (another manager's, or controlled by another object): never touched.
	ActionLeave Action = "leave"
)

// PlannedObject is one object Uninstall found under the names or the label of manila-setup.
type PlannedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	Action     Action `json:"action"`
	// Reason says why an object is kept or left.
	Reason string `json:"reason,omitempty"`
	// Deleted: the delete was accepted (in a dry run: the dry run was).
	Deleted bool `json:"deleted"`
	// Terminating: it was being deleted already (by an earlier uninstall, say): no request is
	// sent, only its end awaited where it is a workload.
	Terminating bool `json:"terminating,omitempty"`

	gvr   schema.GroupVersionResource
	uid   types.UID
	role  role
	phase phase
}

// Key names the object as install does: kind/namespace/name.
func (p PlannedObject) Key() string {
	if p.Namespace == "" {
		return strings.ToLower(p.Kind) + "/" + p.Name
	}
	return strings.ToLower(p.Kind) + "/" + p.Namespace + "/" + p.Name
}

// UninstallReport is what Uninstall did, or would do.
type UninstallReport struct {
	Mode      platform.Mode `json:"mode"`
	Namespace string        `json:"namespace"`
	DryRun    bool          `json:"dryRun"`
	// Objects in the order they are deleted: the operator first, its operands, the
	// cluster-scoped objects, the CustomResourceDefinition last.
	Objects []PlannedObject `json:"objects"`
	// Volumes are the PersistentVolumes of the Manila CSI driver.
	Volumes []string `json:"volumes"`
	// Snapshots are the VolumeSnapshotContents of the Manila CSI driver: uninstall never
	// deletes them (nor their VolumeSnapshots, nor the Manila snapshots).
	Snapshots []string `json:"snapshots"`
	// Refused: volumes of the driver exist and the driver would go: nothing was deleted.
	Refused bool `json:"refused"`
	// Unmanaged (--keep-driver) are the driver's objects that stay, with nothing managing them.
	Unmanaged []string `json:"unmanaged,omitempty"`
	// VolumesWithoutDriver (--force) are the volumes whose driver was deleted.
	VolumesWithoutDriver []string `json:"volumesWithoutDriver,omitempty"`
	// SnapshotsWithoutDriver (--force) are the VolumeSnapshotContents whose driver was deleted.
	SnapshotsWithoutDriver []string `json:"snapshotsWithoutDriver,omitempty"`
	Deleted                int      `json:"deleted"`
	Kept                   int      `json:"kept"`
	Left                   int      `json:"left"`
	// WorkloadsGoneAfter is how long the deleted workloads took to be gone, pods included.
	WorkloadsGoneAfter string `json:"workloadsGoneAfter,omitempty"`
}

// VolumesExistError says why Uninstall deleted nothing: the driver would go while volumes or
// snapshots of it exist, which then could not be mounted, expanded, restored or deleted.
type VolumesExistError struct {
	Volumes []string
	// Snapshots are VolumeSnapshotContents.
	Snapshots []string
}

func (e *VolumesExistError) Error() string {
	var what []string
	if len(e.Volumes) > 0 {
		what = append(what, fmt.Sprintf("%d PersistentVolume(s) (%s)", len(e.Volumes), Summarize(e.Volumes, 5)))
	}
	if len(e.Snapshots) > 0 {
		what = append(what, fmt.Sprintf("%d VolumeSnapshotContent(s) (%s)", len(e.Snapshots), Summarize(e.Snapshots, 5)))
	}
	return fmt.Sprintf("nothing deleted: %s of %s exist and uninstall would delete their driver: "+
		"delete their claims and snapshots first, or give --keep-driver to remove only the operator (the driver runs on, unmanaged), "+
		"or --force to delete the driver all the same (the StorageClasses and the VolumeSnapshotClass they name are kept, and snapshots are never deleted)",
		strings.Join(what, " and "), operator.DriverName)
}

// ModeNoneError says why Uninstall read nothing: the cluster is not one manila-setup installs
// into, and no mode was asked for.
type ModeNoneError struct{ Detection platform.Detection }

func (e *ModeNoneError) Error() string {
	return "nothing deleted: " + e.Detection.Message + "; give --mode driver or --mode companion to uninstall all the same"
}

// role is what an object is to the operator: it decides what --keep-driver keeps.
type role int

const (
	// roleOperator: the operator's own objects (its Deployment, identity, RBAC).
	roleOperator role = iota
	// roleConfig: what configures the operator and outlives it (its CRD and custom resource,
	// credentials, namespace).
	roleConfig
	// roleDriver: what the operator deploys (our managed-by label).
	roleDriver
)

// phase orders the deletes: the operator stops before its operands go, so it re-creates none.
type phase int

const (
	phaseOperator phase = iota
	phaseWorkloads
	phaseNamespaced
	phaseCustomResource
	phaseClusterScoped
	phaseNamespace
	phaseCRD
)

// Uninstall finds what manila-setup installed and what its operator created, and deletes what
// is ours: the operator first, then its operands, the cluster-scoped objects, the CRD last.
// Everything else found under our names is left. The report is returned also with an error,
// as far as it got.
func Uninstall(ctx context.Context, cfg *rest.Config, opts UninstallOptions) (*UninstallReport, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultUninstallTimeout
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mode := opts.Mode
	if mode == "" {
		d, err := platform.Detect(ctx, platform.Dynamic(dyn))
		if err != nil {
			return nil, err
		}
		if d.Mode == platform.ModeNone {
			return nil, &ModeNoneError{Detection: d}
		}
		mode = d.Mode
	}
	ns := opts.Namespace
	if ns == "" {
		ns = operator.NamesFor(mode).Namespace
	}
	u := &uninstaller{dyn: dyn, disco: dc, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
	report := &UninstallReport{Mode: mode, Namespace: ns, DryRun: opts.DryRun, Volumes: []string{}}
	cands, err := u.candidates(ctx, mode, ns)
	if err != nil {
		return nil, err
	}
	pvs, err := u.volumes(ctx)
	if err != nil {
		return nil, err
	}
	snaps, err := u.snapshotContents(ctx)
	if err != nil {
		return nil, err
	}
	plan := planUninstall(ctx, cands, pvs, snaps, opts, u)
	report.Objects, report.Volumes, report.Snapshots = plan.objects, plan.driverVolumes, plan.driverSnapshots
	if report.Objects == nil {
		report.Objects = []PlannedObject{} // "objects": [] in -o json, not null
	}
	report.count()
	if plan.err != nil {
		return report, plan.err
	}
	if len(plan.driverVolumes)+len(plan.driverSnapshots) > 0 && plan.deletesDriver() {
		switch {
		case opts.KeepDriver:
		case opts.Force:
			report.VolumesWithoutDriver = plan.driverVolumes
			report.SnapshotsWithoutDriver = plan.driverSnapshots
		default:
			report.Refused = true
			return report, &VolumesExistError{Volumes: plan.driverVolumes, Snapshots: plan.driverSnapshots}
		}
	}
	if opts.KeepDriver {
		for _, p := range plan.objects {
			if p.role == roleDriver && p.Action == ActionKeep {
				report.Unmanaged = append(report.Unmanaged, p.Key())
			}
		}
	}
	start := time.Now()
	waited, err := u.execute(ctx, report.Objects, opts)
	report.count()
	if waited {
		report.WorkloadsGoneAfter = time.Since(start).Round(100 * time.Millisecond).String()
	}
	return report, err
}

func (r *UninstallReport) count() {
	r.Deleted, r.Kept, r.Left = 0, 0, 0
	for _, p := range r.Objects {
		switch {
		case p.Action == ActionDelete && p.Deleted:
			r.Deleted++
		case p.Action == ActionKeep:
			r.Kept++
		case p.Action == ActionLeave:
			r.Left++
		}
	}
}

// candidate is an object found under our names (what render writes for the mode) or our
// operator's label, as it is in the cluster.
type candidate struct {
	gvr  schema.GroupVersionResource
	live *unstructured.Unstructured
	role role
	// rendered: one of the objects `operator render` writes (else found by the label).
	rendered bool
}

func (c candidate) key() string { return objectKey(c.live) }

// operandKinds are the kinds the operator writes (operator/controllers/machinery.Kinds; a test
// keeps the two lists equal), each listed by the operator's managed-by label.
var operandKinds = []schema.GroupVersionResource{
	{Version: "v1", Resource: "serviceaccounts"},
	{Version: "v1", Resource: "services"},
	{Version: "v1", Resource: "configmaps"},
	{Version: "v1", Resource: "secrets"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "roles"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"},
	{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
	{Group: "networking.k8s.io", Version: "v1", Resource: "networkpolicies"},
	{Group: "storage.k8s.io", Version: "v1", Resource: "csidrivers"},
	{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"},
	{Group: "apps", Version: "v1", Resource: "deployments"},
	{Group: "apps", Version: "v1", Resource: "daemonsets"},
	{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"},
	{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"},
	{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"},
}

// operatorKinds are the rendered kinds that are the operator's own: what --keep-driver deletes.
var operatorKinds = map[string]bool{"Deployment": true, "ServiceAccount": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"Role": true, "RoleBinding": true, "NetworkPolicy": true, "ConfigMap": true, "Lease": true}

// platformManagers write the platform's objects (as operator/platform knows them): an object
// one of them wrote is the platform's, whatever else it carries.
var platformManagers = []string{"cluster-storage-operator", "cluster-version-operator", "cloud-credential-operator", "csi-operator"}

type uninstaller struct {
	dyn    dynamic.Interface
	disco  discovery.DiscoveryInterface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

// uninstallImage stands in for the operator image when rendering only to learn the names.
const uninstallImage = "registry.invalid/manila-setup-operator:uninstall"

// renderedObjects are the objects install writes for the mode: render's, the credentials
// Secret, the CredentialsRequest (OpenShift's way), and the operator's leader election Lease.
func renderedObjects(mode platform.Mode, namespace string) ([]*unstructured.Unstructured, error) {
	rendered, err := operator.Render(operator.RenderOptions{Mode: mode, Namespace: namespace, OperatorImage: uninstallImage,
		Images: operator.DefaultImages, CredentialsRequest: true})
	if err != nil {
		return nil, err
	}
	objs, err := operator.Objects(rendered)
	if err != nil {
		return nil, err
	}
	secret := &unstructured.Unstructured{}
	secret.SetAPIVersion("v1")
	secret.SetKind("Secret")
	secret.SetNamespace(namespace)
	secret.SetName(operator.CredentialsSecretName)
	lease := &unstructured.Unstructured{}
	lease.SetAPIVersion("coordination.k8s.io/v1")
	lease.SetKind("Lease")
	lease.SetNamespace(namespace)
	lease.SetName(operator.NamesFor(mode).Operator + "-lock")
	return append(objs, secret, lease), nil
}

// candidates reads every object of ours that exists: render's for the mode, then those of the
// operator's label.
func (u *uninstaller) candidates(ctx context.Context, mode platform.Mode, namespace string) ([]candidate, error) {
	objs, err := renderedObjects(mode, namespace)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []candidate
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		m, err := u.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			continue // not served: it cannot exist
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", objectKey(o), err)
		}
		live, err := u.get(ctx, m.Resource, o.GetNamespace(), o.GetName())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", objectKey(o), err)
		}
		if live == nil {
			continue
		}
		r := roleConfig
		if operatorKinds[o.GetKind()] {
			r = roleOperator
		}
		seen[objectKey(live)] = true
		out = append(out, candidate{gvr: m.Resource, live: live, role: r, rendered: true})
	}
	selector := operator.LabelManagedBy + "=" + operator.ManagedByValue
	for _, gvr := range operandKinds {
		list, err := u.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if apierrors.IsNotFound(err) {
			continue // a kind of a CRD that is not installed
		}
		if err != nil {
			return nil, fmt.Errorf("listing %s labelled %s: %w", gvr.Resource, selector, err)
		}
		for i := range list.Items {
			live := &list.Items[i]
			if seen[objectKey(live)] {
				continue
			}
			seen[objectKey(live)] = true
			out = append(out, candidate{gvr: gvr, live: live, role: roleDriver})
		}
	}
	return out, nil
}

// get returns the object, nil when it does not exist.
func (u *uninstaller) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	var ri dynamic.ResourceInterface = u.dyn.Resource(gvr)
	if namespace != "" {
		ri = u.dyn.Resource(gvr).Namespace(namespace)
	}
	live, err := ri.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

// volume is what uninstall needs of a PersistentVolume.
type volume struct {
	name, driver, storageClass string
}

var pvGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}

func (u *uninstaller) volumes(ctx context.Context) ([]volume, error) {
	list, err := u.dyn.Resource(pvGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing PersistentVolumes: %w", err)
	}
	var out []volume
	for _, pv := range list.Items {
		driver, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "driver")
		class, _, _ := unstructured.NestedString(pv.Object, "spec", "storageClassName")
		out = append(out, volume{name: pv.GetName(), driver: driver, storageClass: class})
	}
	return out, nil
}

// snapshotContent is what uninstall needs of a VolumeSnapshotContent.
type snapshotContent struct {
	name, driver, class string
}

var snapshotContentGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}

// snapshotContents lists the VolumeSnapshotContents; none where the cluster does not serve them.
func (u *uninstaller) snapshotContents(ctx context.Context) ([]snapshotContent, error) {
	list, err := u.dyn.Resource(snapshotContentGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing VolumeSnapshotContents: %w", err)
	}
	out := make([]snapshotContent, 0, len(list.Items))
	for _, c := range list.Items {
		driver, _, _ := unstructured.NestedString(c.Object, "spec", "driver")
		class, _, _ := unstructured.NestedString(c.Object, "spec", "volumeSnapshotClassName")
		out = append(out, snapshotContent{name: c.GetName(), driver: driver, class: class})
	}
	return out, nil
}

// lookups are what the plan asks the cluster beyond the candidates: what else a namespace
// holds, and the custom resources of a CRD.
type lookups interface {
	// othersIn names the objects of the namespace that are none of deleting and would go with it.
	othersIn(ctx context.Context, namespace string, deleting map[string]bool) ([]string, error)
	// customResources names the objects of the CRD that are not deleting.
	customResources(ctx context.Context, crd *unstructured.Unstructured, deleting map[string]bool) ([]string, error)
}

type uninstallPlan struct {
	objects         []PlannedObject
	driverVolumes   []string
	driverSnapshots []string
	err             error
}

// deletesDriver: the plan deletes something of the driver the operator deployed, which its
// volumes need. Not a StorageClass or the VolumeSnapshotClass: a volume or snapshot needs none
// but the one it names, which is kept. The companion deploys no driver (the platform's serves
// the volumes), only StorageClasses.
func (p uninstallPlan) deletesDriver() bool {
	return slices.ContainsFunc(p.objects, func(o PlannedObject) bool {
		return o.role == roleDriver && o.Action == ActionDelete && o.Kind != "StorageClass" && o.Kind != "VolumeSnapshotClass"
	})
}

// planUninstall decides, for every candidate, delete, keep or leave, in the order of the deletes.
func planUninstall(ctx context.Context, cands []candidate, pvs []volume, snaps []snapshotContent, opts UninstallOptions, look lookups) uninstallPlan {
	plan := uninstallPlan{driverVolumes: []string{}, driverSnapshots: []string{}}
	namedBy := classUsers{storageClass: map[string][]string{}, snapshotClass: map[string][]string{}}
	for _, pv := range pvs {
		if pv.driver == operator.DriverName {
			plan.driverVolumes = append(plan.driverVolumes, pv.name)
		}
		if pv.storageClass != "" {
			namedBy.storageClass[pv.storageClass] = append(namedBy.storageClass[pv.storageClass], pv.name)
		}
	}
	for _, c := range snaps {
		if c.driver == operator.DriverName {
			plan.driverSnapshots = append(plan.driverSnapshots, c.name)
		}
		if c.class != "" {
			namedBy.snapshotClass[c.class] = append(namedBy.snapshotClass[c.class], c.name)
		}
	}
	sort.Strings(plan.driverVolumes)
	sort.Strings(plan.driverSnapshots)
	for _, c := range cands {
		p := PlannedObject{APIVersion: c.live.GetAPIVersion(), Kind: c.live.GetKind(), Namespace: c.live.GetNamespace(), Name: c.live.GetName(),
			gvr: c.gvr, uid: c.live.GetUID(), role: c.role, phase: phaseOf(c), Terminating: c.live.GetDeletionTimestamp() != nil}
		p.Action, p.Reason = judge(c, namedBy, opts)
		plan.objects = append(plan.objects, p)
	}
	sort.SliceStable(plan.objects, func(i, j int) bool { return plan.objects[i].phase < plan.objects[j].phase })
	// What goes with a namespace or hangs on a CRD is known only once the rest is decided.
	deleting := map[string]bool{}
	for _, p := range plan.objects {
		if p.Action == ActionDelete {
			deleting[p.Key()] = true
		}
	}
	for i := range plan.objects {
		p := &plan.objects[i]
		if p.Action != ActionDelete {
			continue
		}
		var others []string
		var err error
		var why string
		switch p.Kind {
		case "Namespace":
			others, err = look.othersIn(ctx, p.Name, deleting)
			why = "it holds %d object(s) that are not deleted, which would go with it: %s"
		case "CustomResourceDefinition":
			crd := cands[slices.IndexFunc(cands, func(c candidate) bool { return c.key() == p.Key() })].live
			others, err = look.customResources(ctx, crd, deleting)
			why = "%d custom resource(s) of it remain that are not deleted: %s"
		default:
			continue
		}
		if err != nil {
			plan.err = fmt.Errorf("%s: %w", p.Key(), err)
			return plan
		}
		if len(others) > 0 {
			p.Action, p.Reason = ActionKeep, fmt.Sprintf(why, len(others), Summarize(others, 5))
			delete(deleting, p.Key())
		}
	}
	return plan
}

// classUsers are the names of the objects that name each class: PersistentVolumes by
// StorageClass, VolumeSnapshotContents by VolumeSnapshotClass.
type classUsers struct {
	storageClass, snapshotClass map[string][]string
}

// judge is the fate of one candidate, with the reason when it is not deleted.
func judge(c candidate, namedBy classUsers, opts UninstallOptions) (Action, string) {
	if why := notOurs(c.live); why != "" {
		return ActionLeave, why
	}
	if c.live.GetKind() == "StorageClass" && len(namedBy.storageClass[c.live.GetName()]) > 0 {
		pvs := namedBy.storageClass[c.live.GetName()]
		sort.Strings(pvs)
		return ActionKeep, fmt.Sprintf("PersistentVolume(s) %s name it (spec.storageClassName)", Summarize(pvs, 5))
	}
	// Snapshots name their class as volumes do theirs: it stays while one does.
	if c.live.GetKind() == "VolumeSnapshotClass" && len(namedBy.snapshotClass[c.live.GetName()]) > 0 {
		contents := namedBy.snapshotClass[c.live.GetName()]
		sort.Strings(contents)
		return ActionKeep, fmt.Sprintf("VolumeSnapshotContent(s) %s name it (spec.volumeSnapshotClassName)", Summarize(contents, 5))
	}
	if opts.KeepDriver {
		switch c.role {
		case roleDriver:
			return ActionKeep, "--keep-driver: stays, unmanaged"
		case roleConfig:
			if c.live.GetKind() == "Namespace" {
				return ActionKeep, "--keep-driver: the driver runs in it"
			}
			return ActionKeep, "--keep-driver: the operator's configuration, read again by the next install"
		}
	}
	return ActionDelete, ""
}

// notOurs says why an object is not ours to delete, "" when it is: ours by label or field
// manager, no platform manager, no controller owner reference; a Secret only when nobody but
// manila-setup wrote it (it did not create one another manager wrote, such as the
// cloud-credential operator's, or one made by hand and applied over).
func notOurs(u *unstructured.Unstructured) string {
	if c := foreignController(u); c != "" {
		return "not ours: controlled by " + c
	}
	if !isOurs(u) {
		if len(u.GetManagedFields()) == 0 {
			return "not ours (no label of ours, no field manager)"
		}
		return "not ours (managers " + managersOf(u) + ")"
	}
	for _, f := range u.GetManagedFields() {
		if slices.Contains(platformManagers, f.Manager) {
			return "not ours: the platform writes it (managers " + managersOf(u) + ")"
		}
	}
	if u.GetKind() == "Secret" {
		for _, f := range u.GetManagedFields() {
			if !ourManagers[f.Manager] && f.Subresource == "" {
				return "not created by manila-setup (managers " + managersOf(u) + ")"
			}
		}
	}
	return ""
}

// phaseOf places a candidate in the order of the deletes.
func phaseOf(c candidate) phase {
	kind := c.live.GetKind()
	switch {
	case c.rendered && kind == "Deployment":
		return phaseOperator
	case kind == "Deployment" || kind == "DaemonSet":
		return phaseWorkloads
	case kind == "CustomResourceDefinition":
		return phaseCRD
	case kind == "Namespace":
		return phaseNamespace
	case c.rendered && c.role == roleConfig && c.live.GetNamespace() == "":
		return phaseCustomResource // the ClusterCSIDriver or ManilaCompanion
	case c.live.GetNamespace() != "":
		return phaseNamespaced
	}
	return phaseClusterScoped
}

func isWorkload(p PlannedObject) bool {
	return p.phase == phaseOperator || p.phase == phaseWorkloads
}

// execute deletes the plan's objects phase by phase, waiting for the workloads of a phase to be
// gone (their pods too) before the next. A delete is of the object judged (its UID): one made
// again since is not touched. It reports whether it waited.
func (u *uninstaller) execute(ctx context.Context, objs []PlannedObject, opts UninstallOptions) (bool, error) {
	deadline := time.Now().Add(opts.Timeout)
	waited := false
	for i := 0; i < len(objs); {
		j := i
		for j < len(objs) && objs[j].phase == objs[i].phase {
			j++
		}
		var workloads []*PlannedObject
		for k := i; k < j; k++ {
			p := &objs[k]
			if p.Action != ActionDelete {
				continue
			}
			if p.Terminating {
				p.Deleted = true
			} else if err := u.delete(ctx, p, opts.DryRun); err != nil {
				return waited, err
			}
			if isWorkload(*p) && !opts.DryRun {
				workloads = append(workloads, p)
			}
		}
		for _, p := range workloads {
			waited = true
			if err := u.waitGone(ctx, p, deadline, opts.Timeout); err != nil {
				return waited, err
			}
		}
		i = j
	}
	return waited, nil
}

func (u *uninstaller) delete(ctx context.Context, p *PlannedObject, dryRun bool) error {
	propagation := metav1.DeletePropagationBackground
	if isWorkload(*p) {
		propagation = metav1.DeletePropagationForeground // gone only once its pods are
	}
	var err error
	if dryRun {
		// The options as query parameters, not a body (the apiserver then reads no query): a
		// dry run shows as one in the request URI, which audit logs record.
		err = u.disco.RESTClient().Delete().AbsPath(resourcePath(p.gvr, p.Namespace, p.Name)...).
			Param("dryRun", metav1.DryRunAll).Param("propagationPolicy", string(propagation)).Do(ctx).Error()
	} else {
		var ri dynamic.ResourceInterface = u.dyn.Resource(p.gvr)
		if p.Namespace != "" {
			ri = u.dyn.Resource(p.gvr).Namespace(p.Namespace)
		}
		err = ri.Delete(ctx, p.Name, metav1.DeleteOptions{PropagationPolicy: &propagation, Preconditions: &metav1.Preconditions{UID: &p.uid}})
	}
	switch {
	case err == nil, apierrors.IsNotFound(err):
		p.Deleted = true
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%s: not deleted: it was made again since uninstall read it (another UID): %s", p.Key(), apiReason(err))
	case p.Kind == "Secret":
		return fmt.Errorf("%s: delete refused: %s", p.Key(), apiReason(err))
	}
	return fmt.Errorf("%s: delete refused: %w", p.Key(), err)
}

// resourcePath is the API path of one object.
func resourcePath(gvr schema.GroupVersionResource, namespace, name string) []string {
	path := []string{"/apis", gvr.Group, gvr.Version}
	if gvr.Group == "" {
		path = []string{"/api", gvr.Version}
	}
	if namespace != "" {
		path = append(path, "namespaces", namespace)
	}
	return append(path, gvr.Resource, name)
}

// waitGone waits until the object is gone (or another object took its name).
func (u *uninstaller) waitGone(ctx context.Context, p *PlannedObject, deadline time.Time, timeout time.Duration) error {
	left := time.Until(deadline)
	if left <= 0 {
		left = time.Millisecond
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, left, true, func(ctx context.Context) (bool, error) {
		live, err := u.get(ctx, p.gvr, p.Namespace, p.Name)
		if err != nil {
			return false, nil
		}
		return live == nil || live.GetUID() != p.uid, nil
	})
	if err != nil {
		return fmt.Errorf("%s: deleted, but still there after %s (its pods terminating?): give --timeout longer, or look at it with kubectl get %s -n %s %s",
			p.Key(), timeout, p.gvr.Resource, p.Namespace, p.Name)
	}
	return nil
}

// derivedKinds are made by the cluster for what is in a namespace, and go with it: they do not
// keep a namespace of ours.
var derivedKinds = map[string]bool{"Event": true, "Endpoints": true, "EndpointSlice": true, "Lease": true,
	"ControllerRevision": true, "Pod": true, "ReplicaSet": true, "PodMetrics": true}

// defaultObjects are what the cluster puts in every namespace.
var defaultObjects = map[string]bool{"serviceaccount/default": true, "serviceaccount/builder": true, "serviceaccount/deployer": true,
	"configmap/kube-root-ca.crt": true, "configmap/openshift-service-ca.crt": true}

// othersIn lists what the namespace holds besides deleting, leaving out what the cluster
// derives (events, endpoints, pods and replicas of workloads, objects with an owner, the
// tokens of ServiceAccounts) and what it puts in every namespace.
func (u *uninstaller) othersIn(ctx context.Context, namespace string, deleting map[string]bool) ([]string, error) {
	lists, err := u.disco.ServerPreferredNamespacedResources()
	if err != nil && len(lists) == 0 {
		return nil, fmt.Errorf("reading the cluster's resource kinds: %w", err)
	}
	// What cannot be read may hold something: the namespace is kept, saying what was not read.
	var others []string
	if err != nil {
		others = append(others, fmt.Sprintf("objects of API groups the cluster did not list (%s)", OneLine(err.Error())))
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if derivedKinds[r.Kind] || strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			list, err := u.dyn.Resource(gv.WithResource(r.Name)).Namespace(namespace).List(ctx, metav1.ListOptions{})
			if apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				continue
			}
			if err != nil {
				others = append(others, fmt.Sprintf("%s that could not be listed (%s)", r.Name, apiReason(err)))
				continue
			}
			for i := range list.Items {
				o := &list.Items[i]
				o.SetKind(r.Kind)
				if deleting[objectKey(o)] || derived(o) || defaultObjects[strings.ToLower(r.Kind)+"/"+o.GetName()] {
					continue
				}
				others = append(others, objectKey(o))
			}
		}
	}
	sort.Strings(others)
	return others, nil
}

// derived: made by the cluster for another object.
func derived(o *unstructured.Unstructured) bool {
	if len(o.GetOwnerReferences()) > 0 {
		return true
	}
	a := o.GetAnnotations()
	return o.GetKind() == "Secret" && (a["kubernetes.io/service-account.name"] != "" || a["service.beta.openshift.io/originating-service-name"] != "")
}

// customResources names the objects of the CRD's served version that are not deleting.
func (u *uninstaller) customResources(ctx context.Context, crd *unstructured.Unstructured, deleting map[string]bool) ([]string, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			version, _ = m["name"].(string)
			if storage, _ := m["storage"].(bool); storage {
				break
			}
		}
	}
	if version == "" {
		return nil, nil // nothing served, nothing to list
	}
	list, err := u.dyn.Resource(schema.GroupVersionResource{Group: group, Version: version, Resource: plural}).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing its custom resources: %w", err)
	}
	var others []string
	for i := range list.Items {
		o := &list.Items[i]
		o.SetKind(kind)
		if !deleting[objectKey(o)] {
			others = append(others, objectKey(o))
		}
	}
	sort.Strings(others)
	return others, nil
}

// OneLine is s with every run of white space, line breaks included, made one space (a message
// for one line of a table or a log).
func OneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Summarize lists up to n names, and how many more.
func Summarize(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// IsUninstallRefusal: the error is a refusal (a check failed), not a failure of the cluster.
func IsUninstallRefusal(err error) bool {
	var volumes *VolumesExistError
	var none *ModeNoneError
	return errors.As(err, &volumes) || errors.As(err, &none)
}
