package machinesets

import (
	"context"
	"errors"
	"fmt"
	"golang.org/x/sync/errgroup"
	"slices"
	"strings"
	"sync"
	"time"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	machinev1beta1client "github.com/openshift/client-go/machine/clientset/versioned/typed/machine/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
)

// Selection says which MachineSets a command works on: Names, else those matching Selector,
// else every worker MachineSet.
type Selection struct {
	Names    []string
	Selector string
}

// PatchOptions are the inputs of Patch.
type PatchOptions struct {
	Attachment
	Selection
	// DryRun computes and returns the diffs without writing anything.
	DryRun bool
	// Checker, when set, looks the IDs up in Neutron before anything is written.
	Checker IDChecker
	// By is recorded in the AttachmentAnnotation, e.g. "manila-setup v0.3.0".
	By string
	// Now is the clock of the AttachmentAnnotation; nil means time.Now.
	Now func() time.Time
	// Concurrency is how many PATCHes may be in flight at once; zero: DefaultPatchConcurrency.
	Concurrency int
}

// DefaultPatchConcurrency bounds the PATCHes in flight: enough to hide the round trips, few
// enough not to load the apiserver (client-go's rate limit applies on top).
const DefaultPatchConcurrency = 8

// Patch outcomes.
const (
	ActionPatched    = "patched"     // the MachineSet was changed
	ActionWouldPatch = "would-patch" // --dry-run: it would have been changed
	ActionUnchanged  = "unchanged"   // it already has every network and security group
	ActionSkipped    = "skipped"     // it is not patched, see Reason
	ActionInvalid    = "invalid"     // its OpenstackProviderSpec is broken, see Reason
)

// PatchResult is what happened to one MachineSet.
type PatchResult struct {
	Name                string   `json:"name"`
	Role                string   `json:"role,omitempty"`
	Action              string   `json:"action"`
	Reason              string   `json:"reason,omitempty"`
	AddedNetworks       []string `json:"addedNetworks,omitempty"`
	AddedSecurityGroups []string `json:"addedSecurityGroups,omitempty"`
	// Warning is what to check later (see MigrationWarning).
	Warning string `json:"warning,omitempty"`
	// ClusterAPI says the set was skipped because Cluster API is authoritative for it: its
	// machines follow the Cluster API MachineSet of the same name in ClusterAPINamespace.
	ClusterAPI bool `json:"clusterAPI,omitempty"`
	// ConflictRetries counts the times a concurrent writer made the patch start over.
	ConflictRetries int    `json:"conflictRetries,omitempty"`
	Diff            string `json:"diff,omitempty"`
}

// Patch attaches opts.Attachment to the selected MachineSets: one LIST, then one PATCH per
// MachineSet that lacks something. It returns a result per MachineSet it looked at, in name
// order, also when it fails part way (the results then say what was already done).
func Patch(ctx context.Context, client machineclient.Interface, opts PatchOptions) ([]PatchResult, error) {
	now, err := opts.check(ctx)
	if err != nil {
		return nil, err
	}
	sets, err := selectMachineSets(ctx, client, opts.Selection)
	if err != nil {
		return nil, err
	}
	api := client.MachineV1beta1().MachineSets(Namespace)
	workers := opts.Concurrency
	if workers <= 0 {
		workers = DefaultPatchConcurrency
	}

	// A few PATCHes in flight at once. After a failure no new one starts, but those in flight
	// finish, so that the results say exactly what was written.
	results := make([]PatchResult, len(sets))
	done := make([]bool, len(sets))
	errs := make([]error, len(sets))
	var (
		mu     sync.Mutex
		failed bool
		g      errgroup.Group // no context: a failure must not cancel the PATCHes in flight
	)
	g.SetLimit(workers)
	for i, s := range sets {
		mu.Lock()
		stop := failed
		mu.Unlock()
		if stop || ctx.Err() != nil {
			break
		}
		if s.skip != "" {
			results[i], done[i] = PatchResult{Name: s.ms.Name, Role: Role(s.ms), Action: ActionSkipped, Reason: s.skip}, true
			continue
		}
		g.Go(func() error {
			res, err := patchOne(ctx, api, s.ms, opts, now)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs[i], failed = err, true
				return nil
			}
			results[i], done[i] = res, true
			return nil
		})
	}
	_ = g.Wait() // every error is in errs, by MachineSet
	finished := make([]PatchResult, 0, len(sets))
	for i := range sets {
		if done[i] {
			finished = append(finished, results[i])
		}
	}
	// Of several failures (the same RBAC refusal for every set, say), report the first by name.
	for i, err := range errs {
		if err != nil {
			return finished, patchError(sets[i].ms.Name, err, finished)
		}
	}
	if err := ctx.Err(); err != nil {
		return finished, fmt.Errorf("interrupted (%w): %s", err, alreadyDone(finished))
	}
	return finished, nil
}

// patchOne plans and applies the patch of one MachineSet, reading it again and starting over
// when a concurrent writer makes the PATCH conflict.
func patchOne(ctx context.Context, api machinev1beta1client.MachineSetInterface, ms *machinev1beta1.MachineSet, opts PatchOptions, now func() time.Time) (PatchResult, error) {
	res := PatchResult{Name: ms.Name, Role: Role(ms)}
	attempt := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if attempt > 0 {
			res.ConflictRetries++
			fresh, err := api.Get(ctx, ms.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ms = fresh
		}
		attempt++
		plan := PlanPatch(ms, opts.Attachment, now(), opts.By)
		if !plan.result(&res, opts.DryRun) {
			return nil
		}
		_, err := api.Patch(ctx, ms.Name, types.JSONPatchType, plan.Patch, metav1.PatchOptions{FieldManager: "manila-setup"})
		if err == nil {
			res.Action = ActionPatched
		}
		return err
	})
	return res, err
}

// check validates the attachment and, with a Checker, looks the IDs up; it returns the clock.
func (opts PatchOptions) check(ctx context.Context) (func() time.Time, error) {
	if errs := opts.Attachment.Validate(); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	if err := CheckIDs(ctx, opts.Checker, opts.Attachment); err != nil {
		return nil, err
	}
	if opts.Now != nil {
		return opts.Now, nil
	}
	return time.Now, nil
}

// patchError turns a failed PATCH into a sentence that says what was and was not changed.
func patchError(name string, err error, done []PatchResult) error {
	already := alreadyDone(done)
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("patching MachineSet %s/%s was refused: %v. Patching needs the patch verb on machinesets.machine.openshift.io in %s; %s",
			Namespace, name, apiMessage(err), Namespace, already)
	case apierrors.IsConflict(err):
		return fmt.Errorf("MachineSet %s/%s kept changing while it was being patched (%d attempts): %v; %s",
			Namespace, name, retry.DefaultRetry.Steps, apiMessage(err), already)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("MachineSet %s/%s was deleted while it was being patched; %s", Namespace, name, already)
	}
	return fmt.Errorf("patching MachineSet %s/%s: %w; %s", Namespace, name, err, already)
}

// alreadyDone says which MachineSets were patched before a failure.
func alreadyDone(done []PatchResult) string {
	var patched []string
	for _, r := range done {
		if r.Action == ActionPatched {
			patched = append(patched, r.Name)
		}
	}
	if len(patched) == 0 {
		return "nothing was changed"
	}
	return fmt.Sprintf("MachineSets that were patched: %s; the others were not changed", strings.Join(patched, ", "))
}

// apiMessage is the apiserver's sentence for err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
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
			return nil, &SelectionError{fmt.Sprintf("--selector: Invalid value: %q: %v", sel.Selector, err)}
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
			return nil, &SelectionError{fmt.Sprintf("--selector: Invalid value: %q: %v", sel.Selector, err)}
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
			return nil, &SelectionError{fmt.Sprintf("MachineSet %s not found %s (there: %s)",
				strings.Join(missing, ", "), where, namesOf(sets))}
		}
	case sel.Selector != "":
		for _, ms := range sets {
			out = append(out, selected{ms: ms})
		}
		if len(out) == 0 {
			return nil, &SelectionError{fmt.Sprintf("no MachineSet %s matches --selector %q", where, sel.Selector)}
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

// SelectionError says that --name or --selector selects nothing that exists.
type SelectionError struct{ msg string }

func (e *SelectionError) Error() string { return e.msg }

// NewSelectionError is a SelectionError saying msg.
func NewSelectionError(msg string) *SelectionError { return &SelectionError{msg} }

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
		return fmt.Errorf("listing %s in %s was refused: %s", what, Namespace, apiMessage(err))
	}
	return fmt.Errorf("listing %s in %s: %w", what, Namespace, err)
}
