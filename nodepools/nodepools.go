package nodepools

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/internal/neutronid"
)

// GVR is the NodePool resource of HyperShift.
var GVR = hyperv1.GroupVersion.WithResource("nodepools")

// MaxAdditionalPorts is what the NodePool API accepts in additionalPorts.
const MaxAdditionalPorts = 10

// PortDescription is the description of the ports manila-setup adds.
const PortDescription = "Manila storage network (manila-setup)"

// Scope says which NodePools Patch works on.
type Scope struct {
	// Namespace restricts to one namespace (default: all); HostedCluster to the NodePools of
	// one HostedCluster (spec.clusterName).
	Namespace     string
	HostedCluster string
	// Names, when set, are the only NodePools patched, each as NAMESPACE/NAME (NodePool names
	// are unique per namespace only); one that is not there (or not within Namespace and
	// HostedCluster) is a SelectionError before anything is written.
	Names []string
}

// Patch adds a port on each storage network to the OpenStack NodePools of scope, where there is
// none yet (attach.Patch over Target): one LIST, then one JSON PATCH per NodePool that lacks a
// network (with its resourceVersion as precondition, retried on conflict). Security groups
// cannot be given per port on a NodePool: they are only reported (Result.Warning).
func Patch(ctx context.Context, dyn dynamic.Interface, scope Scope, opts attach.Options) ([]attach.Result, error) {
	opts.NetworksOnly = true
	return attach.Patch(ctx, Target{Dyn: dyn, Scope: scope}, opts)
}

// Target is the NodePools of a scope as an attach.Target (and attach.FileTarget).
type Target struct {
	Dyn   dynamic.Interface
	Scope Scope
}

// Select lists the NodePools once and picks those of the scope. The OpenStack NodePools of a
// HostedCluster that sets spec.platform.openstack.subnets are refused (refuseIgnoredPorts):
// HyperShift would ignore the port.
func (t Target) Select(ctx context.Context) ([]attach.Selected[*unstructured.Unstructured], error) {
	if err := t.Scope.check(); err != nil {
		return nil, err
	}
	pools, err := list(ctx, t.Dyn, t.Scope.Namespace, t.Scope.HostedCluster)
	if err != nil {
		return nil, err
	}
	if pools, err = pick(pools, t.Scope.Names, t.Scope.Namespace, t.Scope.HostedCluster); err != nil {
		return nil, err
	}
	out := make([]attach.Selected[*unstructured.Unstructured], len(pools))
	objects := make([]*unstructured.Unstructured, len(pools))
	for i := range pools {
		out[i] = attach.Selected[*unstructured.Unstructured]{Object: &pools[i]}
		objects[i] = &pools[i]
	}
	if err := refuseIgnoredPorts(objects, clusterGetter(ctx, t.Dyn), "choose others with --hosted-cluster, -n or --name"); err != nil {
		return nil, err
	}
	return out, nil
}

// check refuses names that are not NAMESPACE/NAME.
func (s Scope) check() error {
	for _, n := range s.Names {
		if ns, name, ok := strings.Cut(n, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			return attach.NewSelectionError(fmt.Sprintf("NodePool %q: must be NAMESPACE/NAME, such as clusters/%s-workers", n, orNone(strings.Trim(n, "/"))))
		}
	}
	return nil
}

// Ref names a NodePool in messages.
func (Target) Ref(u *unstructured.Unstructured) attach.Ref {
	return attach.Ref{Kind: "NodePool", Namespace: u.GetNamespace(), Name: u.GetName(), Resource: GVR.GroupResource().String()}
}

// Plan is planPatch as attach.Patch takes it.
func (t Target) Plan(_ context.Context, u *unstructured.Unstructured, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	return t.PlanFile(u, a, now, by)
}

// PlanFile plans a NodePool of a file as of a cluster.
func (Target) PlanFile(u *unstructured.Unstructured, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	p, err := planPatch(u, a, by, now)
	if err != nil {
		return attach.Plan{}, err
	}
	return attach.Plan{Result: p.result, Change: attach.FileChange{Patch: p.patch}, Diff: p.diff}, nil
}

// Write sends the plan's JSON patch.
func (t Target) Write(ctx context.Context, u *unstructured.Unstructured, p attach.Plan) error {
	_, err := t.Dyn.Resource(GVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.JSONPatchType, p.Change.(attach.FileChange).Patch, metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}

// Get reads a NodePool again.
func (t Target) Get(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	return t.Dyn.Resource(GVR).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
}

// plan is what patching one NodePool would do.
type plan struct {
	result attach.Result
	patch  []byte
	before *hyperv1.OpenStackNodePoolPlatform
	ports  []hyperv1.PortSpec // the ports added
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// planPatch decides what to do to one NodePool: skipped (not OpenStack, too many ports),
// unchanged (every network has a port), or patched with the JSON patch that appends the ports
// and records the attachment.
func planPatch(u *unstructured.Unstructured, a attach.Attachment, by string, now time.Time) (*plan, error) {
	var np hyperv1.NodePool
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
		return nil, fmt.Errorf("reading NodePool %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	p := &plan{result: attach.Result{Kind: "NodePool", Namespace: np.Namespace, Name: np.Name, HostedCluster: np.Spec.ClusterName}}
	r := &p.result
	if np.Spec.Platform.Type != hyperv1.OpenStackPlatform || np.Spec.Platform.OpenStack == nil {
		r.Action, r.Reason = attach.ActionSkipped, fmt.Sprintf("platform %s, not OpenStack", orNone(string(np.Spec.Platform.Type)))
		return p, nil
	}
	p.before = np.Spec.Platform.OpenStack
	existing := np.Spec.Platform.OpenStack.AdditionalPorts
	for _, id := range a.Networks {
		if !hasNetwork(existing, id) && !slices.ContainsFunc(p.ports, func(ps hyperv1.PortSpec) bool { return neutronid.Equal(*ps.Network.ID, id) }) {
			key := neutronid.Key(id)
			port := hyperv1.PortSpec{Network: &hyperv1.NetworkParam{ID: &key}, Description: PortDescription}
			if a.PortSecurityOff(id) {
				// HyperShift maps an empty policy to port security enabled on the port
				// (DisablePortSecurity false), not to the network's default.
				port.PortSecurityPolicy = hyperv1.PortSecurityDisabled
			}
			p.ports = append(p.ports, port)
			r.AddedNetworks = append(r.AddedNetworks, key)
		}
	}
	var warnings []string
	if len(a.SecurityGroups) > 0 {
		warnings = append(warnings, fmt.Sprintf("NodePool %s/%s: security groups %s were not added: a NodePool's additional ports take none of their own; NFS to the export addresses must be allowed by the security groups its HostedCluster gives the nodes, or the port's portSecurityPolicy set to Disabled",
			np.Namespace, np.Name, strings.Join(a.SecurityGroups, ", ")))
	}
	for _, id := range a.PortSecurityOffOf(a.Networks) {
		if i := slices.IndexFunc(existing, func(ps hyperv1.PortSpec) bool {
			return ps.Network != nil && ps.Network.ID != nil && neutronid.Equal(*ps.Network.ID, id) && ps.PortSecurityPolicy != hyperv1.PortSecurityDisabled
		}); i >= 0 {
			warnings = append(warnings, fmt.Sprintf("NodePool %s/%s: network %s has port security disabled, but spec.platform.openstack.additionalPorts[%d], its port, does not say portSecurityPolicy: Disabled: HyperShift creates that port with port security enabled and the nodes' security groups, which may block NFS; set portSecurityPolicy: Disabled there",
				np.Namespace, np.Name, neutronid.Key(id), i))
		}
	}
	r.Warning = strings.Join(warnings, "; ")
	switch {
	case len(p.ports) == 0:
		r.Action, r.Reason = attach.ActionUnchanged, "already attached"
		return p, nil
	case len(existing)+len(p.ports) > MaxAdditionalPorts:
		r.Action, r.Reason = attach.ActionSkipped, fmt.Sprintf("spec.platform.openstack.additionalPorts would hold %d ports, more than the %d the NodePool API allows", len(existing)+len(p.ports), MaxAdditionalPorts)
		r.AddedNetworks = nil
		return p, nil
	}
	r.Action = attach.ActionPatched

	var ops []jsonPatchOp
	if np.ResourceVersion != "" {
		// The apiserver answers 409 Conflict if the NodePool changed since it was read.
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/resourceVersion", Value: np.ResourceVersion})
	}
	const portsPath = "/spec/platform/openstack/additionalPorts"
	if _, found, _ := unstructured.NestedSlice(u.Object, "spec", "platform", "openstack", "additionalPorts"); found {
		for _, ps := range p.ports {
			ops = append(ops, jsonPatchOp{Op: "add", Path: portsPath + "/-", Value: ps})
		}
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: portsPath, Value: p.ports})
	}
	record, err := json.Marshal(attach.RecordIn(np.Annotations).Merged(attach.Attachment{Networks: r.AddedNetworks, PortSecurityDisabled: a.PortSecurityOffOf(r.AddedNetworks)}, now, by))
	if err != nil {
		return nil, err
	}
	if len(np.Annotations) == 0 {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations", Value: map[string]string{attach.Annotation: string(record)}})
	} else {
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/annotations/" + strings.ReplaceAll(attach.Annotation, "/", "~1"), Value: string(record)})
	}
	if p.patch, err = json.Marshal(ops); err != nil {
		return nil, err
	}
	return p, nil
}

// diff is spec.platform.openstack before and after, as a unified diff.
func (p *plan) diff() string {
	after := *p.before
	after.AdditionalPorts = append(slices.Clone(p.before.AdditionalPorts), p.ports...)
	return attach.YAMLDiff(fmt.Sprintf("NodePool %s/%s spec.platform.openstack", p.result.Namespace, p.result.Name), p.before, &after)
}

// hasNetwork reports whether a port of ports is on network id.
func hasNetwork(ports []hyperv1.PortSpec, id string) bool {
	return slices.ContainsFunc(ports, func(ps hyperv1.PortSpec) bool {
		return ps.Network != nil && ps.Network.ID != nil && neutronid.Equal(*ps.Network.ID, id)
	})
}

// list reads the NodePools once, those of one HostedCluster when cluster is set, sorted.
func list(ctx context.Context, dyn dynamic.Interface, namespace, cluster string) ([]unstructured.Unstructured, error) {
	l, err := dyn.Resource(GVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		switch {
		case apierrors.IsNotFound(err):
			return nil, fmt.Errorf("this cluster serves no NodePools (%s): it is not a HyperShift management cluster", GVR.GroupResource())
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("listing NodePools was refused: %v; it needs the list verb on %s", err, GVR.GroupResource())
		}
		return nil, fmt.Errorf("listing NodePools: %w", err)
	}
	var out []unstructured.Unstructured
	for _, u := range l.Items {
		if c, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); cluster == "" || c == cluster {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b unstructured.Unstructured) int {
		return strings.Compare(a.GetNamespace()+"/"+a.GetName(), b.GetNamespace()+"/"+b.GetName())
	})
	if len(out) == 0 && cluster != "" {
		return nil, attach.NewSelectionError(fmt.Sprintf("no NodePool of HostedCluster %q%s", cluster, inNamespace(namespace)))
	}
	return out, nil
}

// pick keeps the NodePools named (NAMESPACE/NAME) in the order of pools; with no names, all.
func pick(pools []unstructured.Unstructured, names []string, namespace, cluster string) ([]unstructured.Unstructured, error) {
	if len(names) == 0 {
		return pools, nil
	}
	var out []unstructured.Unstructured
	for _, u := range pools {
		if slices.Contains(names, u.GetNamespace()+"/"+u.GetName()) {
			out = append(out, u)
		}
	}
	var missing []string
	for _, n := range names {
		if !slices.ContainsFunc(out, func(u unstructured.Unstructured) bool { return u.GetNamespace()+"/"+u.GetName() == n }) && !slices.Contains(missing, n) {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		where := inNamespace(namespace)
		if cluster != "" {
			where = fmt.Sprintf(" among the NodePools of HostedCluster %q%s", cluster, where)
		}
		there := make([]string, len(pools))
		for i, u := range pools {
			there[i] = u.GetNamespace() + "/" + u.GetName()
		}
		return nil, attach.NewSelectionError(fmt.Sprintf("NodePool %s not found%s (there: %s)", strings.Join(missing, ", "), where, orNone(strings.Join(there, ", "))))
	}
	return out, nil
}

// Status is one NodePool as `nodepools list` shows it.
type Status struct {
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	HostedCluster  string `json:"hostedCluster"`
	Platform       string `json:"platform"`
	Replicas       int32  `json:"replicas"`
	StorageNetwork string `json:"storageNetwork"` // one of machinesets' State constants
	Note           string `json:"note,omitempty"`
	// UpgradeType is spec.management.upgradeType: Replace (HyperShift replaces the machines
	// when the platform spec changes) or InPlace (platform changes reach new machines only).
	UpgradeType string `json:"upgradeType,omitempty"`
	// CurrentNodes is status.replicas, the nodes HyperShift last observed in the pool.
	CurrentNodes int32 `json:"currentNodes"`
	// Conditions are those of status.conditions that tell how a change of the platform spec
	// is rolled out (ProgressConditions), in that order.
	Conditions []Condition `json:"conditions,omitempty"`
}

// Condition is one condition of a NodePool's status.
type Condition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// ProgressConditions are the NodePool conditions that follow an attachment: the new machine
// template being rolled out, the machines and nodes it brings, and the pool as a whole.
var ProgressConditions = []string{
	hyperv1.NodePoolUpdatingPlatformMachineTemplateConditionType,
	hyperv1.NodePoolUpdatingConfigConditionType,
	hyperv1.NodePoolAllMachinesReadyConditionType,
	hyperv1.NodePoolAllNodesHealthyConditionType,
	hyperv1.NodePoolReadyConditionType,
}

// List says, per NodePool, whether it has a port on the storage networks: want's, else those
// recorded in its annotation.
func List(ctx context.Context, dyn dynamic.Interface, namespace, cluster string, want attach.Attachment) ([]Status, error) {
	pools, err := list(ctx, dyn, namespace, cluster)
	if err != nil {
		return nil, err
	}
	out := make([]Status, 0, len(pools))
	for _, u := range pools {
		var np hyperv1.NodePool
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
			return nil, fmt.Errorf("reading NodePool %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		st := Status{Namespace: np.Namespace, Name: np.Name, HostedCluster: np.Spec.ClusterName, Platform: string(np.Spec.Platform.Type)}
		if np.Spec.Replicas != nil {
			st.Replicas = *np.Spec.Replicas
		}
		st.UpgradeType, st.CurrentNodes = string(np.Spec.Management.UpgradeType), np.Status.Replicas
		for _, t := range ProgressConditions {
			if i := slices.IndexFunc(np.Status.Conditions, func(c hyperv1.NodePoolCondition) bool { return c.Type == t }); i >= 0 {
				c := np.Status.Conditions[i]
				st.Conditions = append(st.Conditions, Condition{Type: c.Type, Status: string(c.Status), Reason: c.Reason, Message: c.Message})
			}
		}
		nets := want.Networks
		if rec := attach.RecordIn(np.Annotations); len(nets) == 0 && rec != nil {
			nets = rec.Networks
		}
		switch {
		case np.Spec.Platform.Type != hyperv1.OpenStackPlatform || np.Spec.Platform.OpenStack == nil:
			st.StorageNetwork, st.Note = attach.StateNA, "not OpenStack"
		default:
			st.StorageNetwork = attach.AttachState(nets, func(id string) bool { return hasNetwork(np.Spec.Platform.OpenStack.AdditionalPorts, id) })
		}
		out = append(out, st)
	}
	return out, nil
}

func inNamespace(ns string) string {
	if ns == "" {
		return ""
	}
	return " in namespace " + ns
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// PatchFile does what Patch does, to the NodePools of a file (GitOps), with no cluster: the
// same plan, spliced into the text and checked against it (attach.PatchFile).
func PatchFile(ctx context.Context, name string, data []byte, scope Scope, opts attach.Options) (*attach.FileResult, error) {
	opts.NetworksOnly = true
	return attach.PatchFile(ctx, Target{Scope: scope}, name, data, opts)
}

// FromFile decodes the NodePools of a file and keeps those of the scope's namespace and
// HostedCluster, in file order.
func (t Target) FromFile(name string, objects []filepatch.Object) ([]attach.FileSelected[*unstructured.Unstructured], int, error) {
	var out []attach.FileSelected[*unstructured.Unstructured]
	found := 0
	for i, o := range objects {
		if !o.Is(hyperv1.GroupVersion.String(), "NodePool") {
			continue
		}
		found++
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(o.JSON, &u.Object); err != nil {
			return nil, 0, filepatch.Errorf("%s: %s: %v", name, o.Where, err)
		}
		if c, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName"); t.Scope.HostedCluster != "" && c != t.Scope.HostedCluster {
			continue
		}
		if t.Scope.Namespace != "" && u.GetNamespace() != t.Scope.Namespace {
			continue
		}
		out = append(out, attach.FileSelected[*unstructured.Unstructured]{Selected: attach.Selected[*unstructured.Unstructured]{Object: u}, Index: i})
	}
	switch {
	case found == 0:
		return nil, 0, filepatch.Errorf("%s: no NodePool (apiVersion %s, kind NodePool) in it", name, hyperv1.GroupVersion)
	case len(out) == 0:
		return nil, 0, attach.NewSelectionError(fmt.Sprintf("no NodePool in %s is of HostedCluster %q%s", name, t.Scope.HostedCluster, inNamespace(t.Scope.Namespace)))
	}
	// Only a HostedCluster of the same file can be judged: without a cluster, one elsewhere is
	// not known.
	find, err := fileClusters(name, objects)
	if err != nil {
		return nil, 0, err
	}
	picked := make([]*unstructured.Unstructured, len(out))
	for i := range out {
		picked[i] = out[i].Object
	}
	if err := refuseIgnoredPorts(picked, find, "choose others with --hosted-cluster or -n"); err != nil {
		return nil, 0, err
	}
	return out, found, nil
}

// Output: the NodePools of the patched file go to the structured output.
func (Target) Output(o filepatch.Object) bool { return o.Is(hyperv1.GroupVersion.String(), "NodePool") }

// Replicas is the NodePool's node count (attach.Counter): spec.replicas, or with autoscaling
// the most it may grow to.
func (Target) Replicas(u *unstructured.Unstructured) int {
	if m, found, _ := unstructured.NestedInt64(u.Object, "spec", "autoScaling", "max"); found {
		return int(m)
	}
	n, _, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	return int(n)
}
