package machinesets

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/attach/rollout"
)

// SetStatus is one line of `machinesets list`.
type SetStatus struct {
	Name          string `json:"name"`
	Role          string `json:"role"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	// StorageNetwork and SecurityGroups are one of the State constants.
	StorageNetwork string `json:"storageNetwork"`
	SecurityGroups string `json:"securityGroups"`
	// Machines counts the set's Machines that are not being deleted. UpToDate counts those
	// replaced, as the rollout counts them (Replaced): on the template's networks and security
	// groups and running, at most one per old Machine gone, of Wanted, the replica count the set
	// returns to (its rollout.OriginalReplicasAnnotation during a rollout). So the list and the rollout's
	// progress say the same "N of M" at every moment.
	Machines int `json:"machines"`
	UpToDate int `json:"upToDate"`
	Wanted   int `json:"wanted"`
	// Note says why the set is n/a, or that a rollout is in progress.
	Note string `json:"note,omitempty"`
	// Recorded is what manila-setup attached to the set, from the attach.Annotation.
	Recorded *attach.Record `json:"recorded,omitempty"`
	// ClusterAPI says Cluster API is authoritative for the set (ClusterAPIAuthoritative): it is
	// n/a here, and its machines follow its Cluster API copy of the same name in
	// ClusterAPINamespace, which is where the storage network is attached.
	ClusterAPI bool `json:"clusterAPI,omitempty"`
	// Failed are the set's Machines that attach the storage network (their own providerSpec)
	// but failed without a Node: phase Failed, or an errorMessage. A storage subnet without free
	// addresses leaves its new Machines so, with Neutron's "No more IP addresses available on
	// network ..." as their errorMessage.
	Failed []FailedMachine `json:"failedMachines,omitempty"`
}

// FailedMachine is a Machine that failed without a Node, with what the Machine API said.
type FailedMachine struct {
	Name    string `json:"name"`
	Phase   string `json:"phase,omitempty"`
	Reason  string `json:"errorReason,omitempty"`
	Message string `json:"errorMessage,omitempty"`
}

// failedAttached returns m as a FailedMachine when it failed without a Node and its own spec
// attaches one of networks.
func failedAttached(m *machinev1beta1.Machine, mspec *ProviderSpec, networks []string) (FailedMachine, bool) {
	phase := ""
	if m.Status.Phase != nil {
		phase = *m.Status.Phase
	}
	if m.Status.NodeRef != nil || mspec == nil || (phase != machinev1beta1.PhaseFailed && m.Status.ErrorMessage == nil) ||
		!slices.ContainsFunc(networks, mspec.HasNetwork) {
		return FailedMachine{}, false
	}
	f := FailedMachine{Name: m.Name, Phase: phase}
	if m.Status.ErrorReason != nil {
		f.Reason = string(*m.Status.ErrorReason)
	}
	if m.Status.ErrorMessage != nil {
		f.Message = *m.Status.ErrorMessage
	}
	return f, true
}

// List reports every MachineSet in openshift-machine-api (two LISTs: MachineSets and Machines).
// It looks for the IDs of want; when want is empty, for those recorded on each set by Patch.
func List(ctx context.Context, client machineclient.Interface, want attach.Attachment) ([]SetStatus, error) {
	sets, err := client.MachineV1beta1().MachineSets(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("MachineSets", err)
	}
	machines, err := client.MachineV1beta1().Machines(Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, listError("Machines", err)
	}
	out := make([]SetStatus, 0, len(sets.Items))
	for i := range sets.Items {
		out = append(out, statusOf(&sets.Items[i], machines.Items, want))
	}
	slices.SortFunc(out, func(a, b SetStatus) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func statusOf(ms *machinev1beta1.MachineSet, machines []machinev1beta1.Machine, want attach.Attachment) SetStatus {
	st := SetStatus{
		Name:          ms.Name,
		Role:          Role(ms),
		ReadyReplicas: ms.Status.ReadyReplicas,
		Recorded:      attach.RecordIn(ms.Annotations),
	}
	if ms.Spec.Replicas != nil {
		st.Replicas = *ms.Spec.Replicas
	}
	if _, ok := ms.Annotations[rollout.OriginalReplicasAnnotation]; ok {
		st.Note = "rollout in progress: run `manila-setup machinesets rollout` to finish it"
	}
	if why := NotMachineAPIAuthoritative(ms); why != "" {
		st.StorageNetwork, st.SecurityGroups, st.Note = attach.StateNA, attach.StateNA, why
		st.ClusterAPI = ClusterAPIAuthoritative(ms)
		return st
	}
	spec, err := DecodeProviderSpec(templateProviderSpec(ms))
	if err != nil {
		st.StorageNetwork, st.SecurityGroups = attach.StateNA, attach.StateNA
		var notOpenStack *NotOpenStackError
		if errors.As(err, &notOpenStack) {
			st.Note = "not OpenStack: " + err.Error()
		} else {
			st.Note = err.Error()
		}
		return st
	}
	if len(want.Networks) == 0 && len(want.SecurityGroups) == 0 && st.Recorded != nil {
		want = st.Recorded.Attachment
	}
	st.StorageNetwork, st.SecurityGroups = spec.attachStates(want)
	st.Wanted = int(st.Replicas)
	if v, err := strconv.Atoi(ms.Annotations[rollout.OriginalReplicasAnnotation]); err == nil {
		st.Wanted = v
	}
	selector := machineSelector(ms)
	old, freshRunning := 0, 0
	for i := range machines {
		m := &machines[i]
		if !selector.Matches(labels.Set(m.Labels)) || m.DeletionTimestamp != nil {
			continue
		}
		st.Machines++
		mspec, merr := DecodeProviderSpec(machineProviderSpec(m))
		if merr == nil {
			if f, ok := failedAttached(m, mspec, want.Networks); ok {
				st.Failed = append(st.Failed, f)
			}
		}
		if merr == nil && UpToDate(spec, mspec) {
			if machineRunning(m) {
				freshRunning++
			}
		} else {
			old++
		}
	}
	st.UpToDate = rollout.ReplacedCount(freshRunning, old, st.Wanted)
	return st
}

// machineRunning: the Machine has a Node and is Running, what the list can tell without reading
// Nodes (the rollout also waits for the Node to be Ready).
func machineRunning(m *machinev1beta1.Machine) bool {
	return m.Status.NodeRef != nil && m.Status.Phase != nil && *m.Status.Phase == "Running"
}
