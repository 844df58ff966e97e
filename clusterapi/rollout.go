package clusterapi

//lint:file-ignore SA1019 a Machine's v1beta1 failureReason/failureMessage are deprecated for v1beta2's conditions, but they are what the v1beta1 objects clusters serve today carry

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/record"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// MachineGVR is the resource of Cluster API's Machines.
var MachineGVR = clusterv1.GroupVersion.WithResource("machines")

// Rollout replaces, set after set, the Machines of the standalone Cluster API MachineSets that
// were not made from their set's current template (their OpenStackMachine's cloned-from-name
// annotation names another), as `machinesets rollout` does for the Machine API: surge, wait
// for a new Machine to be Running with a Node, mark an old one with cluster.x-k8s.io/delete-machine
// (Cluster API deletes marked Machines first) and scale down, repeat, then restore the replica
// count. A MachineDeployment, and the MachineSets it owns, are left to the deployment's own
// rolling update. Killed at any point, it continues when called again.
func Rollout(ctx context.Context, dyn dynamic.Interface, namespace string, names []string, opts rollout.Options) ([]rollout.SetProgress, error) {
	if namespace == "" {
		return nil, fmt.Errorf("the namespace of the Cluster API MachineSets is required")
	}
	if err := opts.Complete(); err != nil {
		return nil, err
	}
	// A MachineDeployment is listed only to say, when it is named, that it rolls by itself.
	kinds := []string{KindMachineSet}
	if len(names) > 0 {
		kinds = nil
	}
	objects, err := listObjects(ctx, dyn, namespace, kinds)
	if err != nil {
		return nil, err
	}
	picked, err := pick(objects, names, namespace)
	if err != nil {
		return nil, err
	}
	progress := make([]rollout.SetProgress, len(picked))
	for i, o := range picked {
		progress[i] = rolloutLine(o, opts.Now())
	}
	target := &capiTarget{dyn: dyn, namespace: namespace}
	return rollout.RollSets(ctx, target, progress, opts)
}

// rolloutLine is the first progress line of o: pending, or skipped with the reason.
func rolloutLine(o object, now time.Time) rollout.SetProgress {
	p := rollout.SetProgress{Name: o.u.GetName(), State: rollout.Pending, Phase: "waiting for its turn", Since: now}
	replicas, _, _ := unstructured.NestedInt64(o.u.Object, "spec", "replicas")
	p.Total = int(replicas)
	if original, _, err := rollout.OriginalReplicas(o.u.GetAnnotations(), int32(replicas)); err == nil {
		p.Total = int(original)
	}
	ref := refOf(o.u)
	switch {
	case paused(o) != "":
		p.State, p.Phase = rollout.Skipped, paused(o)
	case o.kind == KindMachineDeployment:
		p.Name = "machinedeployment/" + o.u.GetName()
		p.State, p.Phase = rollout.Skipped, "a MachineDeployment replaces its Machines itself (its rolling update)"
	case madeByDeployment(o) != "":
		p.State, p.Phase = rollout.Skipped, fmt.Sprintf("made by MachineDeployment %s, which replaces its Machines itself", madeByDeployment(o))
	case !ref.isOpenStackTemplate():
		p.State, p.Phase = rollout.Skipped, fmt.Sprintf("its machines are made from a %s (%s), not an OpenStackMachineTemplate", orNone(ref.Kind), orNone(ref.APIVersion))
	}
	return p
}

// capiTarget is the rollout.Target of the Cluster API MachineSets of a namespace.
type capiTarget struct {
	dyn       dynamic.Interface
	namespace string
}

func (c *capiTarget) API() rollout.API {
	return rollout.API{Namespace: c.namespace, SetKind: "Cluster API MachineSet", MachineResource: "machines.cluster.x-k8s.io", Command: rolloutCommand(c.namespace)}
}

// rolloutCommand is the command that rolls the Cluster API MachineSets of namespace.
func rolloutCommand(namespace string) string {
	if namespace == OpenShiftNamespace {
		return "manila-setup clusterapi rollout"
	}
	return "manila-setup clusterapi rollout -n " + namespace
}

// Observe reads a set, the Machines in the namespace and their OpenStackMachines (three
// requests): a Machine is the set's by the set-name label or a controller reference, and up to
// date when its OpenStackMachine was cloned from the template the set names now.
func (c *capiTarget) Observe(ctx context.Context, name string) (rollout.SetView, error) {
	ms, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return rollout.SetView{}, fmt.Errorf("reading Cluster API MachineSet %s/%s: %w", c.namespace, name, err)
	}
	replicas, _, _ := unstructured.NestedInt64(ms.Object, "spec", "replicas")
	v := rollout.SetView{Name: name, ResourceVersion: ms.GetResourceVersion(), Replicas: int32(replicas), HasAnnotations: len(ms.GetAnnotations()) > 0}
	if rec := record.Parse(ms.GetAnnotations()); rec != nil {
		v.StorageNetworks = rec.Networks
	}
	if v.Original, v.HasOriginal, err = rollout.OriginalReplicas(ms.GetAnnotations(), v.Replicas); err != nil {
		return rollout.SetView{}, fmt.Errorf("Cluster API MachineSet %s/%s: %v", c.namespace, name, err)
	}
	template := refOf(ms).Name
	machines, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rollout.SetView{}, listError("Machines", MachineGVR.GroupResource().String(), c.namespace, err)
	}
	infra, err := c.dyn.Resource(OpenStackMachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rollout.SetView{}, listError("OpenStackMachines", OpenStackMachineGVR.GroupResource().String(), c.namespace, err)
	}
	clonedFrom := map[string]string{}
	for _, m := range infra.Items {
		clonedFrom[m.GetName()] = m.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
	}
	for i := range machines.Items {
		u := &machines.Items[i]
		if !ofSet(u, name) {
			continue
		}
		var m clusterv1.Machine
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
			return rollout.SetView{}, fmt.Errorf("Machine %s/%s does not read as Cluster API's v1beta1: %v", c.namespace, u.GetName(), err)
		}
		v.Machines = append(v.Machines, machineView(&m, template, clonedFrom))
	}
	return v, nil
}

// ofSet reports whether Machine u belongs to MachineSet set.
func ofSet(u *unstructured.Unstructured, set string) bool {
	if u.GetLabels()[clusterv1.MachineSetNameLabel] == set {
		return true
	}
	owner := metav1.GetControllerOfNoCopy(u)
	return owner != nil && owner.Kind == KindMachineSet && owner.Name == set && strings.HasPrefix(owner.APIVersion, clusterv1.GroupVersion.Group+"/")
}

// machineView is what the rollout needs of m. A Machine whose OpenStackMachine is missing
// counts as outdated: nothing says which template it came from (Cluster API creates the
// OpenStackMachine before the Machine, so a new Machine always has one).
func machineView(m *clusterv1.Machine, template string, clonedFrom map[string]string) rollout.MachineView {
	_, marked := m.Annotations[clusterv1.DeleteMachineAnnotation]
	mv := rollout.MachineView{
		Name:     m.Name,
		Created:  m.CreationTimestamp.Time,
		Deleting: m.DeletionTimestamp != nil,
		Marked:   marked,
		Phase:    m.Status.Phase,
		Canary:   m.Annotations[rollout.CanaryAnnotation],
	}
	if m.DeletionTimestamp != nil {
		mv.DeletingSince = m.DeletionTimestamp.Time
	}
	from, known := clonedFrom[m.Spec.InfrastructureRef.Name]
	mv.Updated = known && from == template
	var reasons []string
	if m.Status.FailureReason != nil {
		reasons = append(reasons, string(*m.Status.FailureReason))
	}
	if m.Status.FailureMessage != nil {
		reasons = append(reasons, *m.Status.FailureMessage)
	}
	mv.Message = strings.Join(reasons, ": ")
	mv.Failed = m.Status.Phase == string(clusterv1.MachinePhaseFailed) || len(reasons) > 0
	mv.Ready = !mv.Deleting && !mv.Failed && m.Status.Phase == string(clusterv1.MachinePhaseRunning) && m.Status.NodeRef != nil && m.Status.NodeRef.Name != ""
	return mv
}

// Mark puts cluster.x-k8s.io/delete-machine on the Machines: Cluster API deletes such Machines
// first when it scales down.
func (c *capiTarget) Mark(ctx context.Context, names []string) error {
	for _, name := range names {
		mark := []byte(`{"metadata":{"annotations":{"` + clusterv1.DeleteMachineAnnotation + `":""}}}`)
		if _, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Patch(ctx, name, types.MergePatchType, mark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("marking Machine %s/%s for deletion: %w", c.namespace, name, err)
		}
	}
	return nil
}

// Scale scales the set (rollout.ScalePatch).
func (c *capiTarget) Scale(ctx context.Context, v rollout.SetView, replicas int32) error {
	_, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Patch(ctx, v.Name, types.JSONPatchType, rollout.ScalePatch(v, replicas), metav1.PatchOptions{FieldManager: "manila-setup"})
	return rollout.ScaleError(err)
}

// Finish removes the delete mark of the Machines that stay and the original-replicas
// annotation of the set.
func (c *capiTarget) Finish(ctx context.Context, v rollout.SetView) error {
	for _, m := range v.Machines {
		if m.Marked && !m.Deleting {
			unmark := []byte(`{"metadata":{"annotations":{"` + clusterv1.DeleteMachineAnnotation + `":null}}}`)
			if _, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Patch(ctx, m.Name, types.MergePatchType, unmark, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("removing the delete mark of Machine %s/%s: %w", c.namespace, m.Name, err)
			}
		}
	}
	if !v.HasOriginal {
		return nil
	}
	patch := []byte(`{"metadata":{"annotations":{"` + rollout.OriginalReplicasAnnotation + `":null}}}`)
	if _, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Patch(ctx, v.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "manila-setup"}); err != nil {
		return fmt.Errorf("removing annotation %s from Cluster API MachineSet %s/%s: %w", rollout.OriginalReplicasAnnotation, c.namespace, v.Name, err)
	}
	return nil
}

// Core resources read through the dynamic client, for the canary.
var (
	nodeGVR  = corev1.SchemeGroupVersion.WithResource("nodes")
	eventGVR = corev1.SchemeGroupVersion.WithResource("events")
)

// Facts reads a Machine of the set, its Node and the Warning events about it, for the canary.
func (c *capiTarget) Facts(ctx context.Context, v rollout.SetView, machine string) (rollout.Facts, error) {
	u, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Get(ctx, machine, metav1.GetOptions{})
	if err != nil {
		return rollout.Facts{}, fmt.Errorf("reading Machine %s/%s: %w", c.namespace, machine, err)
	}
	var m clusterv1.Machine
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
		return rollout.Facts{}, fmt.Errorf("Machine %s/%s does not read as Cluster API's v1beta1: %v", c.namespace, machine, err)
	}
	f := rollout.Facts{Set: v.Name, Machine: machine, StorageNetworks: v.StorageNetworks}
	var addresses []corev1.NodeAddress
	for _, a := range m.Status.Addresses {
		addresses = append(addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	f.MachineAddresses = rollout.InternalIPs(addresses)
	if m.Spec.ProviderID != nil {
		f.ServerID = rollout.ServerID(*m.Spec.ProviderID)
	}
	if c.namespace != OpenShiftNamespace {
		// Outside OpenShift's own namespace a Machine's Node is a workload cluster's: not here.
		f.NodeElsewhere = fmt.Sprintf("its Node is in the workload cluster of namespace %s", c.namespace)
		if ref := m.Status.NodeRef; ref != nil {
			f.Node = ref.Name
		}
	} else if ref := m.Status.NodeRef; ref != nil && ref.Name != "" {
		un, err := c.dyn.Resource(nodeGVR).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return rollout.Facts{}, fmt.Errorf("reading Node %s of Machine %s/%s: %w", ref.Name, c.namespace, machine, err)
		}
		var node corev1.Node
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(un.Object, &node); err != nil {
			return rollout.Facts{}, fmt.Errorf("Node %s: %v", ref.Name, err)
		}
		f.Node = node.Name
		if ips := rollout.InternalIPs(node.Status.Addresses); len(ips) > 0 {
			f.NodeIP = ips[0]
		}
	}
	events, err := c.dyn.Resource(eventGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{
		FieldSelector: fields.Set{"involvedObject.name": machine, "involvedObject.kind": "Machine", "type": corev1.EventTypeWarning}.String()})
	if err != nil {
		return rollout.Facts{}, fmt.Errorf("listing the events of Machine %s/%s: %w", c.namespace, machine, err)
	}
	for _, e := range events.Items {
		reason, _, _ := unstructured.NestedString(e.Object, "reason")
		message, _, _ := unstructured.NestedString(e.Object, "message")
		f.Warnings = append(f.Warnings, reason+": "+message)
	}
	if f.RemovedNetworks, err = c.removedNetworks(ctx, v.Name); err != nil {
		return rollout.Facts{}, err
	}
	return f, nil
}

// removedNetworks are the networks that the OpenStackMachines of the set's outdated Machines
// have a port on (by ID) and that its template no longer names: a removal being rolled, whose
// first new Machine the canary checks in Neutron for a port left there. Read only for the
// canary (four requests, once per set), not at every poll. Nil when the template names a
// port's network by filter: which network that is cannot be told without Neutron.
func (c *capiTarget) removedNetworks(ctx context.Context, set string) ([]string, error) {
	ms, err := c.dyn.Resource(MachineSetGVR).Namespace(c.namespace).Get(ctx, set, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading Cluster API MachineSet %s/%s: %w", c.namespace, set, err)
	}
	ref := refOf(ms)
	if !ref.isOpenStackTemplate() {
		return nil, nil
	}
	ns := templateNamespace(object{kind: KindMachineSet, u: ms}, ref)
	tu, err := c.dyn.Resource(TemplateGVR).Namespace(ns).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading OpenStackMachineTemplate %s/%s: %w", ns, ref.Name, err)
	}
	var tmpl infrav1.OpenStackMachineTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tu.Object, &tmpl); err != nil {
		return nil, fmt.Errorf("OpenStackMachineTemplate %s/%s does not read as CAPO's v1beta1: %v", ns, ref.Name, err)
	}
	ports := tmpl.Spec.Template.Spec.Ports
	if portsByFilter(ports) != "" {
		return nil, nil
	}
	machines, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("Machines", MachineGVR.GroupResource().String(), c.namespace, err)
	}
	infra, err := c.dyn.Resource(OpenStackMachineGVR).Namespace(c.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("OpenStackMachines", OpenStackMachineGVR.GroupResource().String(), c.namespace, err)
	}
	byName := map[string]*unstructured.Unstructured{}
	for i := range infra.Items {
		byName[infra.Items[i].GetName()] = &infra.Items[i]
	}
	var removed []string
	oldTemplates := map[string][]infrav1.PortOpts{}
	for i := range machines.Items {
		m := &machines.Items[i]
		if !ofSet(m, set) || m.GetDeletionTimestamp() != nil {
			continue
		}
		name, _, _ := unstructured.NestedString(m.Object, "spec", "infrastructureRef", "name")
		om := byName[name]
		from := ""
		if om != nil {
			from = om.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation]
		}
		if om == nil || from == ref.Name {
			continue
		}
		oldPorts, err := c.portsMadeBy(ctx, ns, from, om, oldTemplates)
		if err != nil {
			return nil, err
		}
		for _, p := range oldPorts {
			if p.Network == nil || p.Network.ID == nil {
				continue
			}
			if id := *p.Network.ID; !hasPortOn(ports, id) && !attach.ContainsID(removed, id) {
				removed = append(removed, id)
			}
		}
	}
	return removed, nil
}

// portsMadeBy are the ports an outdated Machine was made with: those of the template its
// OpenStackMachine was cloned from (read once per name into cache), or, when that template is
// gone, those of the OpenStackMachine. The template comes first because CAPO rewrites the
// OpenStackMachine's own ports: v0.12 gives every port without a network the cluster's network
// ID (and the machine's security groups) through a slice that shares the spec's array, and saves
// the spec (sigs.k8s.io/cluster-api-provider-openstack controllers/openstackmachine_controller.go,
// openStackMachineSpecToOpenStackServerSpec), so a default port `{}` reads there as a port on the
// cluster's network, which a new template's `{}` still gives: not a removed network.
func (c *capiTarget) portsMadeBy(ctx context.Context, ns, template string, om *unstructured.Unstructured, cache map[string][]infrav1.PortOpts) ([]infrav1.PortOpts, error) {
	if ports, ok := cache[template]; ok && template != "" {
		return ports, nil
	}
	if template != "" {
		tu, err := c.dyn.Resource(TemplateGVR).Namespace(ns).Get(ctx, template, metav1.GetOptions{})
		switch {
		case err == nil:
			var tmpl infrav1.OpenStackMachineTemplate
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tu.Object, &tmpl); err == nil {
				cache[template] = tmpl.Spec.Template.Spec.Ports
				return cache[template], nil
			}
		case !apierrors.IsNotFound(err):
			return nil, fmt.Errorf("reading OpenStackMachineTemplate %s/%s: %w", ns, template, err)
		}
	}
	var osm infrav1.OpenStackMachine
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(om.Object, &osm); err != nil {
		return nil, nil // an OpenStackMachine that does not read tells nothing about its ports
	}
	return osm.Spec.Ports, nil
}

// MarkCanary records the canary check on a Machine.
func (c *capiTarget) MarkCanary(ctx context.Context, machine, value string) error {
	_, err := c.dyn.Resource(MachineGVR).Namespace(c.namespace).Patch(ctx, machine, types.MergePatchType, rollout.CanaryPatch(value), metav1.PatchOptions{FieldManager: "manila-setup"})
	return err
}
