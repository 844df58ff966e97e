package clusterapi

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"

	"github.com/manila-setup/manila-setup/internal/filepatch"
	"github.com/manila-setup/manila-setup/machinesets"
)

// Options say what to attach to which sets and deployments.
type Options struct {
	Attachment machinesets.Attachment
	// Namespace is where the MachineSets, MachineDeployments and templates are (required).
	Namespace string
	// Names picks by name: "NAME" (a MachineSet or a MachineDeployment of that name),
	// "machineset/NAME" or "machinedeployment/NAME". None: every one of the namespace.
	Names []string
	// Kinds restricts to these kinds (KindMachineSet, KindMachineDeployment); none: both.
	Kinds  []string
	DryRun bool
	// KeepTemplates leaves the templates manila-setup replaced in place even when unused.
	KeepTemplates bool
	// Checker looks the IDs up in Neutron before anything is written (nil: not checked).
	Checker machinesets.IDChecker
	By      string
	Now     func() time.Time
	// Concurrency is how many sets are patched at once; zero: machinesets.DefaultPatchConcurrency.
	Concurrency int
}

// Result is what happened to one MachineSet or MachineDeployment: what a Machine API
// MachineSet's patch says (Action one of machinesets' Action constants, Role unused), with its
// kind and the templates.
type Result struct {
	machinesets.PatchResult
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	// Template is the OpenStackMachineTemplate its machines are (or would be) made from now;
	// OldTemplate the one it was pointed away from.
	Template    string `json:"template,omitempty"`
	OldTemplate string `json:"oldTemplate,omitempty"`
	// Rolls says who replaces the running machines.
	Rolls string `json:"rolls,omitempty"`
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
	Results []Result `json:"results"`
	// Templates are the replaced templates looked at after patching: deleted once unused.
	Templates []TemplateResult `json:"templates,omitempty"`
}

// Patch attaches the storage networks and security groups to the selected MachineSets and
// MachineDeployments of a namespace: one LIST of each kind and of the templates, then, per set
// that lacks something, one CREATE of its new template (shared by the sets that shared the old
// one) and one JSON PATCH of the set (with its resourceVersion, retried on conflict). Then the
// templates it replaced, in this run or before, are deleted where no set and no Machine uses
// them any more.
func Patch(ctx context.Context, dyn dynamic.Interface, opts Options) (*Report, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("the namespace of the Cluster API objects is required")
	}
	now, err := opts.check(ctx)
	if err != nil {
		return nil, err
	}
	objects, err := listObjects(ctx, dyn, opts.Namespace, opts.Kinds)
	if err != nil {
		return nil, err
	}
	picked, err := pick(objects, opts.Names, opts.Namespace)
	if err != nil {
		return nil, err
	}
	templates, err := listTemplates(ctx, dyn, opts.Namespace)
	if err != nil {
		return nil, err
	}
	p := &patcher{dyn: dyn, opts: opts, now: now, templates: templates, creating: map[string]*creation{}}
	report := &Report{Results: make([]Result, len(picked))}
	workers := opts.Concurrency
	if workers <= 0 {
		workers = machinesets.DefaultPatchConcurrency
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	errs := make([]error, len(picked))
	for i, o := range picked {
		g.Go(func() error {
			report.Results[i], errs[i] = p.patchOne(gctx, o)
			return errs[i]
		})
	}
	if err := g.Wait(); err != nil {
		return report, fmt.Errorf("%w; %s", firstError(errs), alreadyDone(report.Results))
	}
	if opts.DryRun || opts.KeepTemplates {
		return report, nil
	}
	report.Templates, err = prune(ctx, dyn, opts.Namespace)
	return report, err
}

func (opts Options) check(ctx context.Context) (func() time.Time, error) {
	if errs := opts.Attachment.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if err := machinesets.CheckIDs(ctx, opts.Checker, opts.Attachment); err != nil {
		return nil, err
	}
	if opts.Now != nil {
		return opts.Now, nil
	}
	return time.Now, nil
}

// patcher patches sets concurrently; templates holds those of the namespace by name.
type patcher struct {
	dyn  dynamic.Interface
	opts Options
	now  func() time.Time

	mu        sync.Mutex
	templates map[string]*unstructured.Unstructured
	creating  map[string]*creation
}

// patchOne plans and applies one set, reading it again and starting over when a concurrent
// writer makes the PATCH conflict.
func (p *patcher) patchOne(ctx context.Context, o object) (Result, error) {
	gvr := gvrOf(o.kind)
	api := p.dyn.Resource(gvr).Namespace(o.u.GetNamespace())
	var res Result
	attempt, retries := 0, 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt++; attempt > 1 {
			retries++
			fresh, err := api.Get(ctx, o.u.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			o.u = fresh
		}
		tmpl, err := p.template(ctx, o)
		if err != nil {
			return err
		}
		pl, err := planFor(o, tmpl, p.opts, p.now())
		if err != nil {
			return err
		}
		res = pl.result
		res.ConflictRetries = retries
		switch {
		case res.Action != machinesets.ActionPatched:
			return nil
		case p.opts.DryRun:
			res.Action, res.Diff = machinesets.ActionWouldPatch, pl.diff()
			return nil
		}
		if err := p.create(ctx, pl.template); err != nil {
			return err
		}
		_, err = api.Patch(ctx, o.u.GetName(), types.JSONPatchType, pl.patch, metav1.PatchOptions{FieldManager: "manila-setup"})
		return err
	})
	if err != nil {
		return res, fmt.Errorf("patching %s: %w", o, err)
	}
	return res, nil
}

// template is the template o's machines are made from, nil when it does not exist.
func (p *patcher) template(ctx context.Context, o object) (*unstructured.Unstructured, error) {
	ref := refOf(o.u)
	if !ref.isOpenStackTemplate() {
		return nil, nil
	}
	ns := templateNamespace(o, ref)
	p.mu.Lock()
	t, ok := p.templates[ref.Name]
	p.mu.Unlock()
	if ok && ns == p.opts.Namespace {
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
func (p *patcher) create(ctx context.Context, t *unstructured.Unstructured) error {
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
			return nil, machinesets.NewSelectionError(fmt.Sprintf("--name: Not found: %q: no Cluster API MachineSet or MachineDeployment of that name in namespace %s", n, namespace))
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

func firstError(errs []error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return fmt.Errorf("interrupted")
}

// alreadyDone says which sets were patched before a failure.
func alreadyDone(results []Result) string {
	var names []string
	for _, r := range results {
		if r.Action == machinesets.ActionPatched {
			names = append(names, r.Kind+" "+r.Name)
		}
	}
	if len(names) == 0 {
		return "no set was changed"
	}
	return "already patched: " + strings.Join(names, ", ")
}
