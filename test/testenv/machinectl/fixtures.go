package machinectl

import (
	"context"
	"fmt"

	machinev1 "github.com/openshift/api/machine/v1"
	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
	machineclient "github.com/openshift/client-go/machine/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// WorkerMachineSet returns a worker MachineSet as openshift-install generates it for OpenStack
// (pkg/asset/machines/openstack): <infraID>-worker-<index>, its OpenstackProviderSpec on the
// machine network found by the cluster's subnet tag, the <infraID>-worker security group by name,
// a server group, tags, server metadata, plus a field openshift/api does not know
// (simFutureField) so tests can check that it survives.
func WorkerMachineSet(infraID string, index int, replicas int32) *machinev1beta1.MachineSet {
	return MachineSet(infraID, "worker", fmt.Sprintf("%s-worker-%d", infraID, index), replicas, WorkerProviderSpec(infraID, "nova"))
}

// MachineSet returns a MachineSet of the given role with the installer's labels and selector
// around providerSpec (JSON).
func MachineSet(infraID, role, name string, replicas int32, providerSpec string) *machinev1beta1.MachineSet {
	return &machinev1beta1.MachineSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: Namespace,
			Labels: map[string]string{
				ClusterIDLabel: infraID,
				RoleLabel:      role,
				"machine.openshift.io/cluster-api-machine-type": role,
			},
		},
		Spec: machinev1beta1.MachineSetSpec{
			Replicas: &replicas,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				MachineSetLabel: name,
				ClusterIDLabel:  infraID,
			}},
			Template: machinev1beta1.MachineTemplateSpec{
				ObjectMeta: machinev1beta1.ObjectMeta{Labels: map[string]string{
					MachineSetLabel: name,
					ClusterIDLabel:  infraID,
					RoleLabel:       role,
					"machine.openshift.io/cluster-api-machine-type": role,
				}},
				Spec: machinev1beta1.MachineSpec{
					ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(providerSpec)}},
				},
			},
		},
	}
}

// WorkerProviderSpec is the OpenstackProviderSpec the installer writes for workers in zone az.
func WorkerProviderSpec(infraID, az string) string {
	return fmt.Sprintf(`{
  "apiVersion": "machine.openshift.io/v1alpha1",
  "kind": "OpenstackProviderSpec",
  "metadata": {"creationTimestamp": null},
  "availabilityZone": %[2]q,
  "cloudName": "openstack",
  "cloudsSecret": {"name": "openstack-cloud-credentials", "namespace": "openshift-machine-api"},
  "flavor": "m1.xlarge",
  "image": "%[1]s-rhcos",
  "networks": [{"filter": {}, "subnets": [{"filter": {"tags": "openshiftClusterID=%[1]s"}}]}],
  "securityGroups": [{"filter": {}, "name": "%[1]s-worker"}],
  "serverGroupName": "%[1]s-worker-%[2]s",
  "serverMetadata": {"Name": "%[1]s-worker", "openshiftClusterID": %[1]q},
  "tags": ["openshiftClusterID=%[1]s"],
  "trunk": true,
  "userDataSecret": {"name": "worker-user-data"},
  "simFutureField": {"keep": ["me", 1, true]}
}`, infraID, az)
}

// MasterProviderSpec is the OpenstackProviderSpec the installer writes for the masters, without
// availability zones: the machine network found by the cluster's subnet tag, the
// <infraID>-master security group by name, the masters' server group and user data.
func MasterProviderSpec(infraID string) string {
	return fmt.Sprintf(`{
  "apiVersion": "machine.openshift.io/v1alpha1",
  "kind": "OpenstackProviderSpec",
  "metadata": {"creationTimestamp": null},
  "cloudName": "openstack",
  "cloudsSecret": {"name": "openstack-cloud-credentials", "namespace": "openshift-machine-api"},
  "flavor": "m1.xlarge",
  "image": "%[1]s-rhcos",
  "networks": [{"filter": {}, "subnets": [{"filter": {"tags": "openshiftClusterID=%[1]s"}}]}],
  "securityGroups": [{"filter": {}, "name": "%[1]s-master"}],
  "serverGroupName": "%[1]s-master",
  "serverMetadata": {"Name": "%[1]s-master", "openshiftClusterID": %[1]q},
  "tags": ["openshiftClusterID=%[1]s"],
  "trunk": true,
  "userDataSecret": {"name": "master-user-data"}
}`, infraID)
}

// ControlPlaneMachineSet returns the ControlPlaneMachineSet "cluster" as openshift-install writes
// it for OpenStack without availability zones: Active, 3 replicas, RollingUpdate, the masters'
// labels as selector, and MasterProviderSpec in its template. Its status says the 3 masters are
// at rest (as the control-plane-machine-set operator reports them), for a test that writes it.
func ControlPlaneMachineSet(infraID string) *machinev1.ControlPlaneMachineSet {
	labels := map[string]string{
		ClusterIDLabel: infraID,
		RoleLabel:      "master",
		"machine.openshift.io/cluster-api-machine-type": "master",
	}
	replicas := int32(3)
	return &machinev1.ControlPlaneMachineSet{
		ObjectMeta: metav1.ObjectMeta{Name: "cluster", Namespace: Namespace},
		Spec: machinev1.ControlPlaneMachineSetSpec{
			State:    machinev1.ControlPlaneMachineSetStateActive,
			Replicas: &replicas,
			Strategy: machinev1.ControlPlaneMachineSetStrategy{Type: machinev1.RollingUpdate},
			Selector: metav1.LabelSelector{MatchLabels: labels},
			Template: machinev1.ControlPlaneMachineSetTemplate{
				MachineType: machinev1.OpenShiftMachineV1Beta1MachineType,
				OpenShiftMachineV1Beta1Machine: &machinev1.OpenShiftMachineV1Beta1MachineTemplate{
					ObjectMeta: machinev1.ControlPlaneMachineSetTemplateObjectMeta{Labels: labels},
					Spec: machinev1beta1.MachineSpec{
						ProviderSpec: machinev1beta1.ProviderSpec{Value: &runtime.RawExtension{Raw: []byte(MasterProviderSpec(infraID))}},
					},
				},
			},
		},
		Status: machinev1.ControlPlaneMachineSetStatus{Replicas: 3, ReadyReplicas: 3, UpdatedReplicas: 3},
	}
}

// CreateAtRest creates the ControlPlaneMachineSet cpms and writes the status its operator
// reports at rest: cpms's own status, this generation seen.
func CreateAtRest(ctx context.Context, mc machineclient.Interface, cpms *machinev1.ControlPlaneMachineSet) (*machinev1.ControlPlaneMachineSet, error) {
	status := cpms.Status
	created, err := mc.MachineV1().ControlPlaneMachineSets(cpms.Namespace).Create(ctx, cpms, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	created.Status, created.Status.ObservedGeneration = status, created.Generation
	return mc.MachineV1().ControlPlaneMachineSets(cpms.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{})
}
