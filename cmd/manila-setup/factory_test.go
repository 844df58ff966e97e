package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machinefake "github.com/openshift/client-go/machine/clientset/versioned/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/machinesets"
)

// TestRolloutRefusesOnFakeClients runs `machinesets rollout` on fake clients (the factory's
// newClients): a Machine still has the storage network its set's template no longer names, and a
// pod on its node mounts a Manila volume. The rollout is refused with exit 1, naming the pod,
// before any Machine is touched: the Machine is still there.
func TestRolloutRefusesOnFakeClients(t *testing.T) {
	const storage = "7c2d3a9e-4f1b-4c8d-9e6a-2b5f8d1c3e4a"
	labels := map[string]string{"machine.openshift.io/cluster-api-machineset": "ostest-worker-0"}
	template := `{"apiVersion":"machine.openshift.io/v1alpha1","kind":"OpenstackProviderSpec","networks":[{"filter":{},"subnets":[{"filter":{"tags":"openshiftClusterID=ostest"}}]}]}`
	machine := `{"apiVersion":"machine.openshift.io/v1alpha1","kind":"OpenstackProviderSpec","networks":[{"filter":{},"subnets":[{"filter":{"tags":"openshiftClusterID=ostest"}}]},{"uuid":"` + storage + `","noAllowedAddressPairs":true}]}`
	one := int32(1)
	machines := machinefake.NewSimpleClientset(
		&machinev1beta1.MachineSet{
			ObjectMeta: metav1.ObjectMeta{Name: "ostest-worker-0", Namespace: machinesets.Namespace,
				Labels: map[string]string{"machine.openshift.io/cluster-api-machine-role": "worker"}},
			Spec: machinev1beta1.MachineSetSpec{Replicas: &one, Selector: metav1.LabelSelector{MatchLabels: labels},
				Template: machinev1beta1.MachineTemplateSpec{ObjectMeta: machinev1beta1.ObjectMeta{Labels: labels},
					Spec: machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(template)}}}}},
		},
		&machinev1beta1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "ostest-worker-0-a", Namespace: machinesets.Namespace, Labels: labels},
			Spec:       machinev1beta1.MachineSpec{ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(machine)}}},
			Status:     machinev1beta1.MachineStatus{NodeRef: &corev1.ObjectReference{Kind: "Node", Name: "worker-a"}},
		},
	)
	kube := kubefake.NewClientset(
		&corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "manila-pv"},
			Spec: corev1.PersistentVolumeSpec{ClaimRef: &corev1.ObjectReference{Namespace: "default", Name: "data"}, PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: attach.ManilaDriver, VolumeHandle: "share-1"}}}},
		&corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "manila-pv"}, Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: "worker-a", Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	)
	g := &GlobalOptions{newClients: func() (*clusterClients, error) {
		return &clusterClients{machines: machines, kube: kube, dynamic: dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())}, nil
	}}
	var out, errOut bytes.Buffer
	code := runWith(g, []string{"machinesets", "rollout", "--no-canary", "--timeout", "10s"}, IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
	if code != exitInvalid || !strings.Contains(errOut.String(), "refusing to replace the machines of 1 node(s) while pods on them use Manila volumes") ||
		!strings.Contains(errOut.String(), "pod default/app on node worker-a") || !strings.Contains(errOut.String(), "no Machine was replaced") {
		t.Fatalf("exit %d, want %d\n%s%s", code, exitInvalid, out.String(), errOut.String())
	}
	if _, err := machines.MachineV1beta1().Machines(machinesets.Namespace).Get(context.Background(), "ostest-worker-0-a", metav1.GetOptions{}); err != nil {
		t.Fatalf("the Machine is gone after a refusal: %v", err)
	}
}
