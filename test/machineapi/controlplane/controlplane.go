// Package controlplane plays the two operators that move a cluster's masters, which the Go
// module proxy does not serve, by the rules of their public source:
//
//   - the control-plane-machine-set operator (github.com/openshift/cluster-control-plane-machine-set-operator,
//     pkg/controllers/controlplanemachineset: controller.go, updates.go, status.go): the masters
//     are grouped by index (the number that ends a master's name); a master whose providerSpec
//     differs from the template's needs replacing. RollingUpdate goes index by index, lowest first,
//     with a surge of one: a replacement is created for an outdated index only while no other
//     index has one, and the outdated master is deleted once its replacement is ready (a Node
//     that is Ready). OnDelete creates a replacement only for an index whose master is being
//     deleted. Recreate and unknown strategies make the set Degraded and move nothing. An
//     Inactive set is left alone. The status counts replicas, ready, updated and unavailable
//     masters, with Available, Degraded and Progressing conditions.
//   - the etcd operator's quorum guard (github.com/openshift/cluster-etcd-operator,
//     pkg/operator/machinedeletionhooks): a preDrain lifecycle hook EtcdQuorumOperator on every
//     master Machine, lifted from a deleting master only once the other masters are as many
//     ready etcd members as the set's replicas, so the machine controller drains and deletes
//     no master whose etcd member is still needed.
//
// Replacements are named <infraID>-master-<5 random characters>-<index>, as the operator names
// them, with the template's labels and spec.
package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Name is the one ControlPlaneMachineSet's name.
const Name = "cluster"

// EtcdHook is the etcd operator's preDrain hook on every master.
var EtcdHook = machinev1beta1.LifecycleHook{Name: "EtcdQuorumOperator", Owner: "clusteroperator/etcd"}

// Reconciler keeps the masters of the ControlPlaneMachineSet of its namespace.
type Reconciler struct {
	Client    client.Client
	Namespace string
	Log       logr.Logger

	// created are the replacements made that the cache has not shown yet, by index: the next
	// reconcile, which may come before the cache has them, must not make a second one.
	created map[int]createdMachine
}

type createdMachine struct {
	name string
	at   time.Time
}

// Add registers the reconciler with mgr: it runs on any change of the set, of a Machine or of
// a Node, always for the one set.
func Add(mgr ctrl.Manager, namespace string, log logr.Logger) error {
	r := &Reconciler{Client: mgr.GetClient(), Namespace: namespace, Log: log, created: map[int]createdMachine{}}
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: namespace, Name: Name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).Named("controlplanemachineset").
		For(&machinev1.ControlPlaneMachineSet{}).
		Watches(&machinev1beta1.Machine{}, one).
		Watches(&corev1.Node{}, one).
		Complete(r)
}

// master is one master Machine as the rules see it.
type master struct {
	m        *machinev1beta1.Machine
	index    int
	updated  bool // its providerSpec is the template's
	ready    bool // its Node is Ready
	deleting bool
}

// Reconcile applies the set's strategy once and writes its status.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Name != Name || req.Namespace != r.Namespace {
		return reconcile.Result{}, nil
	}
	cpms := &machinev1.ControlPlaneMachineSet{}
	if err := r.Client.Get(ctx, req.NamespacedName, cpms); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	masters, err := r.masters(ctx, cpms)
	if err != nil {
		return reconcile.Result{}, err
	}
	if err := r.hooks(ctx, cpms, masters); err != nil {
		return reconcile.Result{}, err
	}
	var degraded string
	busy := false
	if cpms.Spec.State == machinev1.ControlPlaneMachineSetStateActive {
		switch cpms.Spec.Strategy.Type {
		case machinev1.RollingUpdate, "":
			busy, err = r.rollingUpdate(ctx, cpms, masters)
		case machinev1.OnDelete:
			busy, err = r.onDelete(ctx, cpms, masters)
		case machinev1.Recreate:
			degraded = `invalid value for spec.strategy.type: update strategy "Recreate" is not supported`
		default:
			degraded = "invalid value for spec.strategy.type: unknown update strategy: " + string(cpms.Spec.Strategy.Type)
		}
		if err != nil {
			return reconcile.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, cpms, masters, degraded); err != nil {
		return reconcile.Result{}, err
	}
	if busy {
		// A Node turning Ready is an event too, but the operator also polls while it waits.
		return reconcile.Result{RequeueAfter: 2 * time.Second}, nil
	}
	return reconcile.Result{}, nil
}

// masters lists the Machines of the set's selector, each with its index and state.
func (r *Reconciler) masters(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet) ([]master, error) {
	selector, err := metav1.LabelSelectorAsSelector(&cpms.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	list := &machinev1beta1.MachineList{}
	if err := r.Client.List(ctx, list, client.InNamespace(r.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return nil, err
	}
	var template []byte
	if t := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine; t != nil && t.Spec.ProviderSpec.Value != nil {
		template = t.Spec.ProviderSpec.Value.Raw
	}
	var out []master
	for i := range list.Items {
		m := &list.Items[i]
		idx, err := strconv.Atoi(m.Name[strings.LastIndexByte(m.Name, '-')+1:])
		if err != nil {
			continue // not a name the operator gives: not one of its indexes
		}
		ms := master{m: m, index: idx, deleting: m.DeletionTimestamp != nil}
		if m.Spec.ProviderSpec.Value != nil {
			ms.updated = sameJSON(m.Spec.ProviderSpec.Value.Raw, template)
		}
		if m.Status.NodeRef != nil {
			node := &corev1.Node{}
			if err := r.Client.Get(ctx, types.NamespacedName{Name: m.Status.NodeRef.Name}, node); err == nil {
				ms.ready = nodeReady(node)
			}
		}
		out = append(out, ms)
	}
	for idx, c := range r.created {
		if slices.ContainsFunc(out, func(m master) bool { return m.m.Name == c.name }) || time.Since(c.at) > 2*time.Minute {
			delete(r.created, idx)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].index < out[j].index || out[i].index == out[j].index && out[i].m.Name < out[j].m.Name
	})
	return out, nil
}

// byIndex groups the masters of indexes 0..replicas-1.
func byIndex(cpms *machinev1.ControlPlaneMachineSet, masters []master) [][]master {
	groups := make([][]master, replicas(cpms))
	for _, m := range masters {
		if m.index >= 0 && m.index < len(groups) {
			groups[m.index] = append(groups[m.index], m)
		}
	}
	return groups
}

// rollingUpdate: lowest index first, one replacement at a time; an outdated master goes once an
// updated one of its index is ready. It reports whether a replacement is under way.
func (r *Reconciler) rollingUpdate(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, masters []master) (bool, error) {
	groups := byIndex(cpms, masters)
	// Every master beyond the replicas counts, a deleting one too: the next index starts only
	// once the previous one's old master is gone; so do the replacements not cached yet.
	surge := len(masters) + len(r.created) - replicas(cpms)
	busy := false
	for idx, g := range groups {
		updatedReady := slices.ContainsFunc(g, func(m master) bool { return m.updated && m.ready && !m.deleting })
		updatedAny := slices.ContainsFunc(g, func(m master) bool { return m.updated && !m.deleting })
		for _, m := range g {
			if !m.updated && !m.deleting && updatedReady {
				r.Log.Info("Removing old machine", "index", idx, "name", m.m.Name)
				if err := r.Client.Delete(ctx, m.m); client.IgnoreNotFound(err) != nil {
					return busy, err
				}
				busy = true
			}
		}
		outdated := slices.ContainsFunc(g, func(m master) bool { return !m.updated && !m.deleting })
		if _, ok := r.created[idx]; ok {
			busy = true // its replacement is made, not cached yet
			continue
		}
		switch {
		case len(g) == 0 || !slices.ContainsFunc(g, func(m master) bool { return !m.deleting }):
			// An index without a master gets one, surge or not.
			if err := r.create(ctx, cpms, idx); err != nil {
				return busy, err
			}
			busy = true
		case outdated && !updatedAny:
			if surge >= 1 {
				r.Log.V(2).Info("Insufficient capacity for expansion, maximum surge has been reached", "index", idx)
				busy = true
				continue
			}
			if err := r.create(ctx, cpms, idx); err != nil {
				return busy, err
			}
			surge++
			busy = true
		case outdated || slices.ContainsFunc(g, func(m master) bool { return m.deleting }) || !updatedReady:
			busy = true
		}
	}
	return busy, nil
}

// onDelete: an index whose masters are all being deleted, or that has none, gets a replacement.
func (r *Reconciler) onDelete(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, masters []master) (bool, error) {
	busy := false
	for idx, g := range byIndex(cpms, masters) {
		if _, ok := r.created[idx]; ok {
			busy = true
			continue
		}
		if slices.ContainsFunc(g, func(m master) bool { return !m.deleting }) {
			busy = busy || slices.ContainsFunc(g, func(m master) bool { return m.deleting || !m.ready })
			continue
		}
		if err := r.create(ctx, cpms, idx); err != nil {
			return busy, err
		}
		busy = true
	}
	return busy, nil
}

// create makes the replacement master of index idx from the template.
func (r *Reconciler) create(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, idx int) error {
	t := cpms.Spec.Template.OpenShiftMachineV1Beta1Machine
	if t == nil {
		return fmt.Errorf("the set's template has no %s", machinev1.OpenShiftMachineV1Beta1MachineType)
	}
	prefix := cpms.Spec.MachineNamePrefix
	if prefix == "" {
		prefix = t.ObjectMeta.Labels["machine.openshift.io/cluster-api-cluster"] + "-master"
	}
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	const letters = "bcdfghjklmnpqrstvwxz2456789"
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	m := &machinev1beta1.Machine{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("%s-%s-%d", prefix, b, idx), Namespace: r.Namespace,
			Labels: copyMap(t.ObjectMeta.Labels), Annotations: copyMap(t.ObjectMeta.Annotations),
			OwnerReferences: []metav1.OwnerReference{{APIVersion: machinev1.GroupVersion.String(), Kind: "ControlPlaneMachineSet",
				Name: cpms.Name, UID: cpms.UID, Controller: new(true), BlockOwnerDeletion: new(true)}},
		},
		Spec: *t.Spec.DeepCopy(),
	}
	if err := r.Client.Create(ctx, m); err != nil {
		return err
	}
	r.created[idx] = createdMachine{name: m.Name, at: time.Now()}
	r.Log.Info("Created replacement machine", "index", idx, "name", m.Name)
	return nil
}

// hooks plays the etcd operator: the preDrain hook on every master, lifted from a deleting one
// once the other masters are as many ready members as the set's replicas.
func (r *Reconciler) hooks(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, masters []master) error {
	readyOthers := countIf(masters, func(m master) bool { return m.ready && !m.deleting })
	for _, m := range masters {
		has := slices.ContainsFunc(m.m.Spec.LifecycleHooks.PreDrain, func(h machinev1beta1.LifecycleHook) bool { return h.Name == EtcdHook.Name })
		var hooks []machinev1beta1.LifecycleHook
		switch {
		case !m.deleting && !has:
			hooks = append(slices.Clone(m.m.Spec.LifecycleHooks.PreDrain), EtcdHook)
		case m.deleting && has && readyOthers >= replicas(cpms):
			hooks = slices.DeleteFunc(slices.Clone(m.m.Spec.LifecycleHooks.PreDrain), func(h machinev1beta1.LifecycleHook) bool { return h.Name == EtcdHook.Name })
			r.Log.Info("etcd: member no longer needed, lifting the preDrain hook", "name", m.m.Name)
		default:
			continue
		}
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"lifecycleHooks": map[string]any{"preDrain": hooks}}})
		if err := r.Client.Patch(ctx, m.m, client.RawPatch(types.MergePatchType, patch)); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("the preDrain hook of %s: %w", m.m.Name, err)
		}
	}
	return nil
}

// writeStatus reports the masters as the operator does.
func (r *Reconciler) writeStatus(ctx context.Context, cpms *machinev1.ControlPlaneMachineSet, masters []master, degraded string) error {
	want := replicas(cpms)
	st := machinev1.ControlPlaneMachineSetStatus{ObservedGeneration: cpms.Generation, Conditions: slices.Clone(cpms.Status.Conditions)}
	readyIndexes, updatedIndexes := 0, 0
	for _, g := range byIndex(cpms, masters) {
		if slices.ContainsFunc(g, func(m master) bool { return m.ready }) {
			readyIndexes++
		}
		if len(g) > 0 && !slices.ContainsFunc(g, func(m master) bool { return !m.updated }) && slices.ContainsFunc(g, func(m master) bool { return m.ready }) {
			updatedIndexes++
		}
	}
	st.Replicas = int32(countIf(masters, func(m master) bool { return true }))
	st.ReadyReplicas = int32(countIf(masters, func(m master) bool { return m.ready }))
	st.UpdatedReplicas = int32(updatedIndexes)
	st.UnavailableReplicas = int32(max(0, want-readyIndexes))
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg, ObservedGeneration: cpms.Generation})
	}
	set("Available", readyIndexes == want, "AllReplicasAvailable", "")
	set("Degraded", degraded != "", orDefault(degraded != "", "InvalidStrategy", "AsExpected"), degraded)
	progressing := cpms.Spec.State == machinev1.ControlPlaneMachineSetStateActive && (updatedIndexes < want || int(st.Replicas) != want)
	set("Progressing", progressing, orDefault(progressing, "NeedsUpdateReplicas", "AllReplicasUpdated"), "")
	if reflect.DeepEqual(st, cpms.Status) {
		return nil
	}
	cpms.Status = st
	if err := r.Client.Status().Update(ctx, cpms); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

func replicas(cpms *machinev1.ControlPlaneMachineSet) int {
	if cpms.Spec.Replicas == nil {
		return 3
	}
	return int(*cpms.Spec.Replicas)
}

func countIf(ms []master, f func(master) bool) int {
	n := 0
	for _, m := range ms {
		if f(m) {
			n++
		}
	}
	return n
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sameJSON compares two providerSpecs as the operator does: by value, not by bytes.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func orDefault(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}
