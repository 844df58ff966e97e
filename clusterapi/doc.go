// Package clusterapi is Cluster API's adapter (an attach.Target, attach.FileTarget and
// attach/rollout target): it attaches the Manila storage network to Cluster API machines on OpenStack:
// MachineSets and MachineDeployments (cluster.x-k8s.io/v1beta1) whose machines are made from an
// OpenStackMachineTemplate (infrastructure.cluster.x-k8s.io/v1beta1, CAPO).
//
// A template is immutable (CAPO's webhook refuses a change of its spec), so attaching means: a
// new template, a copy of the old one with a port on each storage network appended to
// spec.template.spec.ports and the security groups added to spec.template.spec.securityGroups,
// then the set or deployment pointed at it. A MachineDeployment then replaces its Machines by
// itself; a MachineSet makes only its new Machines from it, and Rollout replaces its running
// ones (surge, wait for the new Machine to run, mark an old one with
// cluster.x-k8s.io/delete-machine, scale down), with the decisions of the Machine API's rollout
// (rollout.RollSets). The old template stays while a Machine or another set uses it, and is
// deleted by a later run once nothing does.
//
// This is the Cluster API side of OpenShift's Machine API → Cluster API migration (the copies
// in openshift-cluster-api of MachineSets whose authoritative API is ClusterAPI) and of any
// Cluster API management cluster on OpenStack.
package clusterapi
