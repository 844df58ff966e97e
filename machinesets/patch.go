package machinesets

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// Selection says which MachineSets a command works on: Names, else those matching Selector,
// else every worker MachineSet.
type Selection struct {
	Names    []string
	Selector string
}

// Target is the Machine API's MachineSets of Namespace that sel selects, as an attach.Target
// (and attach.FileTarget, for the MachineSets of a file).
type Target struct {
	Client    machineclient.Interface
	Selection Selection
}

// Patch attaches opts.Attachment to the selected MachineSets: one LIST, then one PATCH per
// MachineSet that lacks something (attach.Patch).
func Patch(ctx context.Context, client machineclient.Interface, sel Selection, opts attach.Options) ([]attach.Result, error) {
	return attach.Patch(ctx, Target{Client: client, Selection: sel}, opts)
}

// Select lists the MachineSets once and picks those of the selection.
func (t Target) Select(ctx context.Context) ([]attach.Selected[*machinev1beta1.MachineSet], error) {
	sets, err := selectMachineSets(ctx, t.Client, t.Selection)
	if err != nil {
		return nil, err
	}
	out := make([]attach.Selected[*machinev1beta1.MachineSet], len(sets))
	for i, s := range sets {
		out[i] = attach.Selected[*machinev1beta1.MachineSet]{Object: s.ms, Skip: s.skip, Result: &attach.Result{Kind: "MachineSet", Namespace: Namespace, Name: s.ms.Name, Role: Role(s.ms)}}
	}
	return out, nil
}

// Ref names a MachineSet in messages.
func (Target) Ref(ms *machinev1beta1.MachineSet) attach.Ref {
	return attach.Ref{Kind: "MachineSet", Namespace: Namespace, Name: ms.Name, Resource: "machinesets.machine.openshift.io"}
}

// Plan is PlanPatch as attach.Patch takes it; a MachineSet's plan never fails.
func (t Target) Plan(_ context.Context, ms *machinev1beta1.MachineSet, a attach.Attachment, now time.Time, by string) (attach.Plan, error) {
	return t.PlanFile(ms, a, now, by)
}

// Write sends the plan's JSON patch (whose resourceVersion makes a concurrent change conflict).
func (t Target) Write(ctx context.Context, ms *machinev1beta1.MachineSet, p attach.Plan) error {
	change := p.Change.(attach.FileChange)
	_, err := t.Client.MachineV1beta1().MachineSets(Namespace).Patch(ctx, ms.Name, types.JSONPatchType, change.Patch, metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}

// Get reads a MachineSet again.
func (t Target) Get(ctx context.Context, ms *machinev1beta1.MachineSet) (*machinev1beta1.MachineSet, error) {
	return t.Client.MachineV1beta1().MachineSets(Namespace).Get(ctx, ms.Name, metav1.GetOptions{})
}

// selected is one MachineSet a command looks at, with why it is left alone, if it is.
type selected struct {
	ms   *machinev1beta1.MachineSet
	skip string
}

// selectMachineSets lists the MachineSets once and picks those of sel (see pickMachineSets).
func selectMachineSets(ctx context.Context, client machineclient.Interface, sel Selection) ([]selected, error) {
	listOpts := metav1.ListOptions{}
	if sel.Selector != "" {
		if _, err := labels.Parse(sel.Selector); err != nil {
			return nil, attach.NewSelectionError(fmt.Sprintf("--selector: Invalid value: %q: %v", sel.Selector, err))
		}
		listOpts.LabelSelector = sel.Selector
	}
	list, err := client.MachineV1beta1().MachineSets(Namespace).List(ctx, listOpts)
	if err != nil {
		return nil, listError("MachineSets", err)
	}
	sets := make([]*machinev1beta1.MachineSet, len(list.Items))
	for i := range list.Items {
		sets[i] = &list.Items[i]
	}
	return pickMachineSets(sets, sel, "in namespace "+Namespace)
}

// pickMachineSets picks the sets of sel, sorted by name; where says where they were found, for
// errors. With Names, every name must exist; without Names or Selector, sets that are not
// workers come back with a skip reason.
func pickMachineSets(sets []*machinev1beta1.MachineSet, sel Selection, where string) ([]selected, error) {
	if sel.Selector != "" {
		selector, err := labels.Parse(sel.Selector)
		if err != nil {
			return nil, attach.NewSelectionError(fmt.Sprintf("--selector: Invalid value: %q: %v", sel.Selector, err))
		}
		sets = slices.DeleteFunc(slices.Clone(sets), func(ms *machinev1beta1.MachineSet) bool { return !selector.Matches(labels.Set(ms.Labels)) })
	}
	byName := map[string]*machinev1beta1.MachineSet{}
	for _, ms := range sets {
		byName[ms.Name] = ms
	}
	var out []selected
	switch {
	case len(sel.Names) > 0:
		var missing []string
		for _, n := range sel.Names {
			ms, ok := byName[n]
			if !ok {
				missing = append(missing, n)
				continue
			}
			if !slices.ContainsFunc(out, func(s selected) bool { return s.ms.Name == n }) {
				out = append(out, selected{ms: ms})
			}
		}
		if len(missing) > 0 {
			return nil, attach.NewSelectionError(fmt.Sprintf("MachineSet %s not found %s (there: %s)",
				strings.Join(missing, ", "), where, namesOf(sets)))
		}
	case sel.Selector != "":
		for _, ms := range sets {
			out = append(out, selected{ms: ms})
		}
		if len(out) == 0 {
			return nil, attach.NewSelectionError(fmt.Sprintf("no MachineSet %s matches --selector %q", where, sel.Selector))
		}
	default:
		for _, ms := range sets {
			s := selected{ms: ms}
			if role := Role(ms); role != "worker" && !IsControlPlane(role) {
				s.skip = fmt.Sprintf("role %q is not worker: select it with --name or --selector", role)
			}
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b selected) int { return strings.Compare(a.ms.Name, b.ms.Name) })
	return out, nil
}

func namesOf(items []*machinev1beta1.MachineSet) string {
	if len(items) == 0 {
		return "none"
	}
	names := make([]string, len(items))
	for i := range items {
		names[i] = items[i].Name
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// listError says which list failed and, when RBAC refused it, what is missing.
func listError(what string, err error) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("listing %s in %s was refused: %s", what, Namespace, attach.APIMessage(err))
	}
	return fmt.Errorf("listing %s in %s: %w", what, Namespace, err)
}

// Replicas is the MachineSet's replica count (attach.Counter): what the attachment reaches. A
// rollout under way counts the count it restores.
func (Target) Replicas(ms *machinev1beta1.MachineSet) int {
	n := int32(1) // the API's default
	if ms.Spec.Replicas != nil {
		n = *ms.Spec.Replicas
	}
	if orig, ok, err := rollout.OriginalReplicas(ms.Annotations, n); ok && err == nil {
		n = orig
	}
	return int(n)
}
