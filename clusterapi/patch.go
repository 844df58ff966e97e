package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// OpenShiftNamespace is where OpenShift keeps the Cluster API copies of its Machine API
// MachineSets (the Machine API → Cluster API migration).
const OpenShiftNamespace = "openshift-cluster-api"

// Scope says which MachineSets and MachineDeployments Patch works on, and what it leaves.
type Scope struct {
	// Namespace is where the MachineSets, MachineDeployments and templates are (required).
	Namespace string
	// Names picks by name: "NAME" (a MachineSet or a MachineDeployment of that name),
	// "machineset/NAME" or "machinedeployment/NAME". None: every one of the namespace.
	Names []string
	// Kinds restricts to these kinds (KindMachineSet, KindMachineDeployment); none: both.
	Kinds []string
	// KeepTemplates leaves the templates manila-setup replaced in place even when unused.
	KeepTemplates bool
}

// TemplateResult is what happened to a template manila-setup replaced earlier.
type TemplateResult struct {
	Name    string `json:"name"`
	Deleted bool   `json:"deleted"`
	// Reason says why it is kept (who uses it).
	Reason string `json:"reason,omitempty"`
}

// Report is what Patch did.
type Report struct {
	Results []attach.Result `json:"results"`
	// Templates are the replaced templates looked at after patching: deleted once unused.
	Templates []TemplateResult `json:"templates,omitempty"`
}

// Patch attaches the storage networks and security groups to the selected MachineSets and
// MachineDeployments of a namespace (attach.Patch over Target): one LIST of each kind and of the
// templates, then, per set that lacks something, one CREATE of its new template (shared by the
// sets that shared the old one) and one JSON PATCH of the set (with its resourceVersion,
// retried on conflict). Then the templates it replaced, in this run or before, are deleted
// where no set and no Machine uses them any more.
func Patch(ctx context.Context, dyn dynamic.Interface, scope Scope, opts attach.Options) (*Report, error) {
	if scope.Namespace == "" {
		return nil, fmt.Errorf("the namespace of the Cluster API objects is required")
	}
	results, err := attach.Patch(ctx, NewTarget(dyn, scope), opts)
	report := &Report{Results: results}
	if err != nil || opts.DryRun || scope.KeepTemplates {
		return report, err
	}
	report.Templates, err = prune(ctx, dyn, scope.Namespace)
	return report, err
}

// Target is the Cluster API MachineSets and MachineDeployments of a scope as an attach.Target.
// One Target serves one Patch: it keeps the namespace's templates and the CREATEs under way.
type Target struct {
	dyn   dynamic.Interface
	scope Scope

	mu        sync.Mutex
	templates map[string]*unstructured.Unstructured
	creating  map[string]*creation
}

// NewTarget is the Target of scope in the cluster of dyn.
func NewTarget(dyn dynamic.Interface, scope Scope) *Target {
	return &Target{dyn: dyn, scope: scope, creating: map[string]*creation{}}
}

// Select lists the sets, the deployments and the templates, and picks those of the scope.
func (t *Target) Select(ctx context.Context) ([]attach.Selected[object], error) {
	objects, err := listObjects(ctx, t.dyn, t.scope.Namespace, t.scope.Kinds)
	if err != nil {
		return nil, err
	}
	picked, err := pick(objects, t.scope.Names, t.scope.Namespace)
	if err != nil {
		return nil, err
	}
	templates, err := listTemplates(ctx, t.dyn, t.scope.Namespace)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.templates = templates
	t.mu.Unlock()
	out := make([]attach.Selected[object], len(picked))
	for i, o := range picked {
		out[i] = attach.Selected[object]{Object: o}
	}
	return out, nil
}

// Ref names a set or deployment in messages.
func (*Target) Ref(o object) attach.Ref {
	return attach.Ref{Kind: o.kind, Namespace: o.u.GetNamespace(), Name: o.u.GetName(), Resource: gvrOf(o.kind).GroupResource().String()}
}

// Plan plans o against the template it is made from now.
func (t *Target) Plan(ctx context.Context, o object, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	tmpl, err := t.template(ctx, o)
	if err != nil {
		return attach.Plan{}, err
	}
	pl, err := planFor(o, tmpl, a, by, now)
	if err != nil {
		return attach.Plan{}, err
	}
	return attach.Plan{Result: pl.result, Change: pl, Diff: pl.diff}, nil
}

// Write creates the new template (once for the sets that share it), then points o at it.
func (t *Target) Write(ctx context.Context, o object, p attach.Plan) error {
	pl := p.Change.(*plan)
	if pl.template != nil { // nil: a removal that changes the record only
		if err := t.create(ctx, pl.template); err != nil {
			return err
		}
	}
	_, err := t.dyn.Resource(gvrOf(o.kind)).Namespace(o.u.GetNamespace()).Patch(ctx, o.u.GetName(), types.JSONPatchType, pl.patch, metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}

// Get reads o again.
func (t *Target) Get(ctx context.Context, o object) (object, error) {
	fresh, err := t.dyn.Resource(gvrOf(o.kind)).Namespace(o.u.GetNamespace()).Get(ctx, o.u.GetName(), metav1.GetOptions{})
	if err != nil {
		return o, err
	}
	return object{kind: o.kind, u: fresh}, nil
}

// template is the template o's machines are made from, nil when it does not exist.
func (p *Target) template(ctx context.Context, o object) (*unstructured.Unstructured, error) {
	ref := refOf(o.u)
	if !ref.isOpenStackTemplate() {
		return nil, nil
	}
	ns := templateNamespace(o, ref)
	p.mu.Lock()
	t, ok := p.templates[ref.Name]
	p.mu.Unlock()
	if ok && ns == p.scope.Namespace {
		return t, nil
	}
	t, err := p.dyn.Resource(TemplateGVR).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return t, err
}

// create creates a new template once; one that exists with the same spec (made by an earlier
// run that stopped before patching the set) is used as it is. Sets that share the new template
// wait for the one CREATE; the others go on in parallel.
func (p *Target) create(ctx context.Context, t *unstructured.Unstructured) error {
	p.mu.Lock()
	c, started := p.creating[t.GetName()]
	if !started {
		c = &creation{done: make(chan struct{})}
		p.creating[t.GetName()] = c
	}
	p.mu.Unlock()
	if started {
		<-c.done
		return c.err
	}
	defer close(c.done)
	api := p.dyn.Resource(TemplateGVR).Namespace(t.GetNamespace())
	_, err := api.Create(ctx, t, metav1.CreateOptions{FieldManager: "manila-setup"})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := api.Get(ctx, t.GetName(), metav1.GetOptions{})
		switch {
		case getErr != nil:
			err = getErr
		case !sameSpec(existing, t):
			err = fmt.Errorf("it exists with another spec than the one manila-setup would give it; rename or delete it")
		default:
			err = nil
		}
	}
	if err != nil {
		c.err = fmt.Errorf("creating OpenStackMachineTemplate %s/%s: %w", t.GetNamespace(), t.GetName(), err)
	}
	return c.err
}

// creation is one template's CREATE, which the sets that share it wait for.
type creation struct {
	done chan struct{}
	err  error
}

func sameSpec(a, b *unstructured.Unstructured) bool {
	sa, _, _ := unstructured.NestedMap(a.Object, "spec")
	sb, _, _ := unstructured.NestedMap(b.Object, "spec")
	ja, errA := json.Marshal(sa)
	jb, errB := json.Marshal(sb)
	return errA == nil && errB == nil && filepatch.SameJSON(ja, jb)
}

// listObjects reads the MachineSets and MachineDeployments of a namespace (of kinds, if any),
// sorted by kind then name.
func listObjects(ctx context.Context, dyn dynamic.Interface, namespace string, kinds []string) ([]object, error) {
	var out []object
	for _, kind := range []string{KindMachineDeployment, KindMachineSet} {
		if len(kinds) > 0 && !slices.Contains(kinds, kind) {
			continue
		}
		l, err := dyn.Resource(gvrOf(kind)).Namespace(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, listError(kind+"s", gvrOf(kind).GroupResource().String(), namespace, err)
		}
		for i := range l.Items {
			out = append(out, object{kind: kind, u: &l.Items[i]})
		}
	}
	slices.SortStableFunc(out, func(a, b object) int {
		if a.kind != b.kind {
			return strings.Compare(b.kind, a.kind) // MachineSets first, as the Machine API lists them
		}
		return strings.Compare(a.u.GetName(), b.u.GetName())
	})
	return out, nil
}

func listTemplates(ctx context.Context, dyn dynamic.Interface, namespace string) (map[string]*unstructured.Unstructured, error) {
	l, err := dyn.Resource(TemplateGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("OpenStackMachineTemplates", TemplateGVR.GroupResource().String(), namespace, err)
	}
	out := make(map[string]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[l.Items[i].GetName()] = &l.Items[i]
	}
	return out, nil
}

func listError(what, resource, namespace string, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("this cluster serves no %s (%s): Cluster API, or its OpenStack provider, is not installed", what, resource)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("listing %s in namespace %s was refused: %v; it needs the list verb on %s there", what, namespace, err, resource)
	}
	return fmt.Errorf("listing %s in namespace %s: %w", what, namespace, err)
}

// pick selects by names (every one must exist); none: all.
func pick(objects []object, names []string, namespace string) ([]object, error) {
	if len(names) == 0 {
		return objects, nil
	}
	var out []object
	for _, n := range names {
		kind, name, hasKind := strings.Cut(n, "/")
		if !hasKind {
			kind, name = "", n
		}
		found := false
		for _, o := range objects {
			if o.u.GetName() == name && (kind == "" || strings.EqualFold(kind, o.kind)) {
				if !slices.ContainsFunc(out, func(x object) bool { return x.kind == o.kind && x.u.GetName() == name }) {
					out = append(out, o)
				}
				found = true
			}
		}
		if !found {
			return nil, attach.NewSelectionError(fmt.Sprintf("--name: Not found: %q: no Cluster API MachineSet or MachineDeployment of that name in namespace %s", n, namespace))
		}
	}
	return out, nil
}

func gvrOf(kind string) schema.GroupVersionResource {
	if kind == KindMachineDeployment {
		return MachineDeploymentGVR
	}
	return MachineSetGVR
}

// Replicas is the replica count of a Cluster API MachineSet or MachineDeployment
// (attach.Counter): what the attachment reaches.
func (t *Target) Replicas(o object) int {
	n, found, err := unstructured.NestedInt64(o.u.Object, "spec", "replicas")
	if !found || err != nil {
		return 1 // the API's default
	}
	return int(n)
}
