package machinesets

import (
	"encoding/json"
	"path/filepath"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/manila-setup/manila-setup/attach"
)

// The list names the set's Machines that attach the storage network but failed without a
// Node, with the Machine API's words; the others are not named.
func TestListNamesFailedMachines(t *testing.T) {
	ms := loadMachineSet(t, filepath.Join("testdata", "corpus", "already-attached.yaml"))
	ms.Spec.Replicas = ptr.To(int32(3))
	selector := ms.Spec.Selector.MatchLabels
	machine := func(name string, spec []byte, phase string, message string, node bool) machinev1beta1.Machine {
		m := machinev1beta1.Machine{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: selector}}
		m.Spec.ProviderSpec.Value = &runtime.RawExtension{Raw: spec}
		m.Status.Phase = ptr.To(phase)
		if message != "" {
			m.Status.ErrorReason = ptr.To(machinev1beta1.InvalidConfigurationMachineError)
			m.Status.ErrorMessage = ptr.To(message)
		}
		if node {
			m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: name}
		}
		return m
	}
	attached := ms.Spec.Template.Spec.ProviderSpec.Value.Raw
	var spec map[string]any
	if err := json.Unmarshal(attached, &spec); err != nil {
		t.Fatal(err)
	}
	delete(spec, "networks")
	delete(spec, "ports")
	bare, _ := json.Marshal(spec)
	const full = "No more IP addresses available on network " + storageNet + "."
	machines := []machinev1beta1.Machine{
		machine("w-running", attached, "Running", "", true),
		machine("w-full", attached, "Failed", full, false),
		machine("w-old-failed", bare, "Failed", "flavor not found", false),
	}
	st := statusOf(ms, machines, attach.Attachment{Networks: []string{storageNet}})
	if len(st.Failed) != 1 || st.Failed[0].Name != "w-full" || st.Failed[0].Message != full || st.Failed[0].Reason != "InvalidConfiguration" || st.Failed[0].Phase != "Failed" {
		t.Errorf("failed machines %+v, want w-full alone with its reason and message", st.Failed)
	}
}
