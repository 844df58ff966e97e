package clusterapi

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	infrav1 "sigs.k8s.io/cluster-api-provider-openstack/api/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"

	"github.com/manila-setup/manila-setup/attach"
)

// Status is one line of `clusterapi list`.
type Status struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Replicas  int64  `json:"replicas"`
	// Template is the OpenStackMachineTemplate its new Machines are made from.
	Template string `json:"template"`
	// StorageNetwork and SecurityGroups are machinesets' State constants, for that template.
	StorageNetwork string `json:"storageNetwork"`
	SecurityGroups string `json:"securityGroups"`
	// Machines counts its OpenStackMachines; OnTemplate those made from Template (the others
	// were made from an older one and lack what it added).
	Machines   int `json:"machines"`
	OnTemplate int `json:"onTemplate"`
	// Note says why it is n/a.
	Note     string         `json:"note,omitempty"`
	Recorded *attach.Record `json:"recorded,omitempty"`
}

// List reports the MachineSets and MachineDeployments of a namespace (four LISTs: both kinds,
// the templates, the OpenStackMachines). It looks for the IDs of want; when want is empty, for
// those recorded on each by Patch.
func List(ctx context.Context, dyn dynamic.Interface, namespace string, want attach.Attachment) ([]Status, error) {
	objects, err := listObjects(ctx, dyn, namespace, nil)
	if err != nil {
		return nil, err
	}
	templates, err := listTemplates(ctx, dyn, namespace)
	if err != nil {
		return nil, err
	}
	machines, err := dyn.Resource(OpenStackMachineGVR).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("OpenStackMachines", OpenStackMachineGVR.GroupResource().String(), namespace, err)
	}
	out := make([]Status, 0, len(objects))
	for _, o := range objects {
		out = append(out, statusOf(o, templates, machines.Items, want))
	}
	return out, nil
}

func statusOf(o object, templates map[string]*unstructured.Unstructured, machines []unstructured.Unstructured, want attach.Attachment) Status {
	ref := refOf(o.u)
	st := Status{Kind: o.kind, Namespace: o.u.GetNamespace(), Name: o.u.GetName(), Template: ref.Name, Recorded: attach.RecordIn(o.u.GetAnnotations())}
	st.Replicas, _, _ = unstructured.NestedInt64(o.u.Object, "spec", "replicas")
	// Cluster API labels a Machine, and the OpenStackMachine cloned for it, with its set or
	// deployment.
	label := clusterv1.MachineSetNameLabel
	if o.kind == KindMachineDeployment {
		label = clusterv1.MachineDeploymentNameLabel
	}
	for _, m := range machines {
		if m.GetLabels()[label] != o.u.GetName() || m.GetDeletionTimestamp() != nil {
			continue
		}
		st.Machines++
		if m.GetAnnotations()[clusterv1.TemplateClonedFromNameAnnotation] == ref.Name {
			st.OnTemplate++
		}
	}
	tmpl := templates[ref.Name]
	switch {
	case paused(o) != "":
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, paused(o)
		return st
	case madeByDeployment(o) != "":
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, "made by MachineDeployment "+madeByDeployment(o)
		return st
	case !ref.isOpenStackTemplate():
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, fmt.Sprintf("machines made from a %s, not an OpenStackMachineTemplate", orNone(ref.Kind))
		return st
	case tmpl == nil:
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, fmt.Sprintf("OpenStackMachineTemplate %q not found", ref.Name)
		return st
	}
	var t infrav1.OpenStackMachineTemplate
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl.Object, &t); err != nil {
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, err.Error()
		return st
	}
	if len(want.Networks) == 0 && len(want.SecurityGroups) == 0 && st.Recorded != nil {
		want = st.Recorded.Attachment
	}
	spec := t.Spec.Template.Spec
	st.StorageNetwork = attach.AttachState(want.Networks, func(id string) bool { return hasPortOn(spec.Ports, id) })
	st.SecurityGroups = attach.AttachState(want.SecurityGroups, func(id string) bool { return hasGroup(spec.SecurityGroups, id) })
	if len(want.Networks) > 0 && len(want.SecurityGroups) == 0 {
		st.SecurityGroups = attach.StateAttached // nothing asked for, nothing missing
	}
	return st
}
