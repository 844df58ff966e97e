package machinesets

import (
	"context"
	"errors"

	machinev1 "github.com/openshift/api/machine/v1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
)

// ControlPlaneStatus is what `controlplane list` shows of the ControlPlaneMachineSet.
type ControlPlaneStatus struct {
	Name     string `json:"name"`
	State    string `json:"state"`
	Strategy string `json:"strategy"`
	Replicas int32  `json:"replicas"`
	// UpdatedReplicas and ReadyReplicas are the operator's own counts (its status).
	UpdatedReplicas int32 `json:"updatedReplicas"`
	ReadyReplicas   int32 `json:"readyReplicas"`
	// StorageNetwork and SecurityGroups are one of the attach State constants, for the template.
	StorageNetwork string `json:"storageNetwork"`
	SecurityGroups string `json:"securityGroups"`
	// Masters counts the master Machines not being deleted; OnNetworks those of them whose
	// providerSpec matches the template's networks and security groups.
	Masters    int `json:"masters"`
	OnNetworks int `json:"onTemplateNetworks"`
	// Note says why the set cannot be changed now (ControlPlaneSafety), or what is left to do.
	Note     string         `json:"note,omitempty"`
	Recorded *attach.Record `json:"recorded,omitempty"`
}

// ControlPlaneList reports the ControlPlaneMachineSet (nil when the cluster has none) and its
// masters against want, else against what its record says was attached.
func ControlPlaneList(ctx context.Context, client machineclient.Interface, operators dynamic.Interface, want attach.Attachment) (*ControlPlaneStatus, error) {
	cpms, err := GetControlPlane(ctx, client)
	var none *attach.SelectionError
	if errors.As(err, &none) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &ControlPlaneStatus{Name: cpms.Name, State: orInactive(cpms.Spec.State), Strategy: string(ControlPlaneStrategy(cpms)),
		Replicas: int32(ControlPlaneTarget{}.Replicas(cpms)), UpdatedReplicas: cpms.Status.UpdatedReplicas, ReadyReplicas: cpms.Status.ReadyReplicas,
		Recorded: attach.RecordIn(cpms.Annotations)}
	if err := (ControlPlaneTarget{Operators: operators}).safety(ctx, cpms); err != nil {
		var refused *ControlPlaneRefusedError
		if !errors.As(err, &refused) {
			return nil, err
		}
		st.Note = refused.Reason
	}
	spec, skip := controlPlaneSpec(cpms, attach.Result{})
	if skip != nil {
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, skip.Reason
		return st, nil
	}
	if len(want.Networks) == 0 && len(want.SecurityGroups) == 0 && st.Recorded != nil {
		want = st.Recorded.Attachment
	}
	st.StorageNetwork, st.SecurityGroups = spec.attachStates(want)
	selector, err := metav1.LabelSelectorAsSelector(&cpms.Spec.Selector)
	if err != nil {
		return st, nil //nolint:nilerr // a selector the API accepted; no masters counted otherwise
	}
	machines, err := client.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, listError("Machines", err)
	}
	for i := range machines.Items {
		m := &machines.Items[i]
		if m.DeletionTimestamp != nil {
			continue
		}
		st.Masters++
		if mspec, err := DecodeProviderSpec(machineProviderSpec(m)); err == nil && UpToDate(spec, mspec) {
			st.OnNetworks++
		}
	}
	if st.Note == "" && st.OnNetworks < st.Masters {
		st.Note = ControlPlaneNext(cpms)
	}
	return st, nil
}

// compile-time checks: the set is a Target, a Remover and a Counter like the other kinds.
var (
	_ attach.Target[*machinev1.ControlPlaneMachineSet]  = ControlPlaneTarget{}
	_ attach.Remover[*machinev1.ControlPlaneMachineSet] = ControlPlaneTarget{}
	_ attach.Counter[*machinev1.ControlPlaneMachineSet] = ControlPlaneTarget{}
)
