// Package platform tells which kind of cluster manila-setup's operator is in, from the API
// alone, before anything is written: on OpenShift on OpenStack the platform's
// cluster-storage-operator (CSO) already runs its own Manila CSI driver operator under the same
// names (namespace openshift-cluster-csi-drivers, Deployment manila-csi-driver-operator,
// ClusterCSIDriver manila.csi.openstack.org), and what the platform owns must never be written
// by us. `manila-setup operator install|render|status` and the operator itself ask it, and ask
// again on every resync: a cluster can change mode (the Storage capability enabled later).
package platform

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// Mode is what the operator does in a cluster.
type Mode string

const (
	// ModeDriver: nobody else runs a Manila CSI driver; the operator deploys and manages it.
	ModeDriver Mode = "driver"
	// ModeCompanion: the platform runs the driver; the operator writes nothing the platform
	// owns and only adds, under its own names, what the platform lacks.
	ModeCompanion Mode = "companion"
	// ModeNone: not OpenStack; the operator does nothing and says why.
	ModeNone Mode = "none"
)

// Reasons, for conditions and `operator status`.
const (
	ReasonPlatformManilaOperator    = "PlatformManilaOperator"
	ReasonStorageCapabilityDisabled = "StorageCapabilityDisabled"
	ReasonNoPlatformManilaOperator  = "NoPlatformManilaOperator"
	ReasonNotOpenShift              = "NotOpenShift"
	ReasonNotOpenStack              = "NotOpenStack"
)

// The platform's names (the same as ours in driver mode, which is the whole problem).
const (
	PlatformNamespace      = "openshift-cluster-csi-drivers"
	PlatformOperatorName   = "manila-csi-driver-operator"
	PlatformControllerName = "manila-csi-driver-controller"
	PlatformSecretName     = "manila-cloud-credentials"
	DriverName             = "manila.csi.openstack.org"
	// StorageCapability is the ClusterVersion capability under which CSO runs CSI drivers.
	StorageCapability = "Storage"
)

// How objects are told apart. Ours carry our managed-by label, or were applied by
// `manila-setup operator install` (field manager "manila-setup"; installs of earlier versions put
// no label on the ClusterCSIDriver). The platform's are written by its operators, which record
// their user agents as field managers, and CSO's operands point at their owners.
var (
	managedByLabel = "app.kubernetes.io/managed-by"
	ourLabelValues = []string{"manila-setup", "manila-setup-operator"}
	ourInstaller   = "manila-setup"
	// Not "manila-csi-driver-operator": that is also the name our own operator's objects and
	// clients carry, so it tells nothing.
	platformManagers = []string{"cluster-storage-operator", "cluster-version-operator", "cloud-credential-operator", "csi-operator"}
)

var (
	gvrInfrastructure   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	gvrClusterVersion   = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusterversions"}
	gvrClusterOperator  = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "clusteroperators"}
	gvrDeployment       = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}
	gvrClusterCSIDriver = schema.GroupVersionResource{Group: "operator.openshift.io", Version: "v1", Resource: "clustercsidrivers"}
)

// Getter reads one object; a dynamic client (dynamic.Interface) or the operator's informer
// caches answer it. A missing object or a missing API is an error for which
// apierrors.IsNotFound is true.
type Getter interface {
	Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error)
}

// Detection is the mode with the evidence for it.
type Detection struct {
	Mode   Mode   `json:"mode"`
	Reason string `json:"reason"`
	// Message says why, naming the objects seen.
	Message string `json:"message"`
	// PlatformObjects are the Manila objects the platform owns, as "Kind namespace/name
	// (managed by X)": what must never be written.
	PlatformObjects []string `json:"platformObjects,omitempty"`
}

// Detect reads the cluster: Infrastructure "cluster" (is it OpenShift, on OpenStack?), the
// platform's Manila operator Deployment and the ClusterCSIDriver (who manages them: labels,
// owner references, managedFields managers), ClusterVersion's enabled capabilities and the
// storage ClusterOperator's related objects.
func Detect(ctx context.Context, g Getter) (Detection, error) {
	infra, err := get(ctx, g, gvrInfrastructure, "", "cluster")
	if err != nil {
		return Detection{}, err
	}
	if infra == nil {
		return Detection{Mode: ModeDriver, Reason: ReasonNotOpenShift,
			Message: "no Infrastructure \"cluster\" (config.openshift.io/v1): Kubernetes without OpenShift's APIs, so nobody else runs a Manila CSI driver; the operator deploys it"}, nil
	}
	if t := platformType(infra); t != "" && t != "OpenStack" {
		return Detection{Mode: ModeNone, Reason: ReasonNotOpenStack,
			Message: fmt.Sprintf("Infrastructure \"cluster\" says the platform is %s, not OpenStack: there is no Manila to use, the operator does nothing", t)}, nil
	}

	var owned []string
	dep, err := get(ctx, g, gvrDeployment, PlatformNamespace, PlatformOperatorName)
	if err != nil {
		return Detection{}, err
	}
	if dep != nil && !ours(dep) {
		owned = append(owned, describe("Deployment", dep))
	}
	csi, err := get(ctx, g, gvrClusterCSIDriver, "", DriverName)
	if err != nil {
		return Detection{}, err
	}
	if csi != nil && !ours(csi) {
		owned = append(owned, describe("ClusterCSIDriver", csi))
	}
	if len(owned) > 0 {
		return Detection{Mode: ModeCompanion, Reason: ReasonPlatformManilaOperator, PlatformObjects: owned,
			Message: "the platform runs its own Manila CSI driver operator (" + strings.Join(owned, "; ") + "): the operator writes none of these and adds only what the platform lacks, under its own names"}, nil
	}

	cv, err := get(ctx, g, gvrClusterVersion, "", "version")
	if err != nil {
		return Detection{}, err
	}
	if cv != nil && !capabilityEnabled(cv, StorageCapability) {
		return Detection{Mode: ModeDriver, Reason: ReasonStorageCapabilityDisabled,
			Message: "the cluster's Storage capability is disabled, so the platform runs no CSI driver operator; the operator deploys the Manila CSI driver"}, nil
	}
	co, err := get(ctx, g, gvrClusterOperator, "", "storage")
	if err != nil {
		return Detection{}, err
	}
	if co != nil && relatesToManila(co) {
		obj := "ClusterCSIDriver " + DriverName + " (listed by ClusterOperator storage, not created yet)"
		if csi != nil {
			obj = "ClusterCSIDriver " + DriverName + " (listed by ClusterOperator storage)"
		}
		return Detection{Mode: ModeCompanion, Reason: ReasonPlatformManilaOperator, PlatformObjects: []string{obj},
			Message: "the platform's cluster-storage-operator is about to run its Manila CSI driver operator (" + obj + "): the operator leaves the driver to the platform"}, nil
	}
	why := "OpenShift on OpenStack without the platform's Manila CSI driver operator"
	if co == nil {
		why += " (no storage ClusterOperator)"
	}
	return Detection{Mode: ModeDriver, Reason: ReasonNoPlatformManilaOperator, Message: why + "; the operator deploys the Manila CSI driver"}, nil
}

// get returns the object, nil when it (or its API) does not exist.
func get(ctx context.Context, g Getter, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	u, err := g.Get(ctx, gvr, namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		where := name
		if namespace != "" {
			where = namespace + "/" + name
		}
		return nil, fmt.Errorf("reading %s %s to tell which kind of cluster this is: %w", gvr.Resource, where, err)
	}
	return u, nil
}

func platformType(infra *unstructured.Unstructured) string {
	for _, path := range [][]string{{"status", "platformStatus", "type"}, {"status", "platform"}, {"spec", "platformSpec", "type"}} {
		if t, _, _ := unstructured.NestedString(infra.Object, path...); t != "" {
			return t
		}
	}
	return ""
}

// ours reports whether manila-setup made the object and no platform component writes it. An
// object with a platform mark is the platform's even when it also carries ours (an install of
// an earlier version may have applied over it).
func ours(u *unstructured.Unstructured) bool {
	managers := managersOf(u)
	if len(u.GetOwnerReferences()) > 0 || slices.ContainsFunc(managers, func(m string) bool { return slices.Contains(platformManagers, m) }) {
		return false
	}
	return slices.Contains(ourLabelValues, u.GetLabels()[managedByLabel]) || slices.Contains(managers, ourInstaller)
}

func managersOf(u *unstructured.Unstructured) []string {
	var out []string
	for _, f := range u.GetManagedFields() {
		if f.Manager != "" && !slices.Contains(out, f.Manager) {
			out = append(out, f.Manager)
		}
	}
	return out
}

func describe(kind string, u *unstructured.Unstructured) string {
	name := u.GetName()
	if ns := u.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	by := managersOf(u)
	if l := u.GetLabels()[managedByLabel]; l != "" && !slices.Contains(by, l) {
		by = append([]string{l}, by...)
	}
	if len(by) == 0 {
		return kind + " " + name
	}
	return fmt.Sprintf("%s %s (managed by %s)", kind, name, strings.Join(by, ", "))
}

func capabilityEnabled(cv *unstructured.Unstructured, capability string) bool {
	enabled, found, _ := unstructured.NestedStringSlice(cv.Object, "status", "capabilities", "enabledCapabilities")
	if !found {
		// Clusters from before capabilities (4.10 and older) run everything.
		return true
	}
	return slices.Contains(enabled, capability)
}

func relatesToManila(co *unstructured.Unstructured) bool {
	related, _, _ := unstructured.NestedSlice(co.Object, "status", "relatedObjects")
	for _, r := range related {
		m, ok := r.(map[string]any)
		if !ok {
			continue
		}
		if m["resource"] == "clustercsidrivers" && m["name"] == DriverName {
			return true
		}
	}
	return false
}

// Dynamic answers Get with a dynamic client (what the CLI uses).
func Dynamic(c dynamic.Interface) Getter { return dynamicGetter{c} }

type dynamicGetter struct{ c dynamic.Interface }

func (d dynamicGetter) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if namespace == "" {
		return d.c.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	}
	return d.c.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}
