// Package machinesets is the Machine API's adapter: it attaches the Manila storage network to the
// MachineSets of a running OpenShift-on-OpenStack cluster and rolls their Machines so the running
// nodes get the new port. Target implements attach.Target and attach.FileTarget; the rollout is
// an attach/rollout target. Package workers puts it together with the other kinds.
//
// Three operations:
//
//   - List reports every MachineSet in openshift-machine-api: role, replicas, ready, whether its
//     OpenstackProviderSpec already carries the storage networks and security groups, and how
//     many of its Machines were created from the current template.
//   - Patch appends networks[{uuid, noAllowedAddressPairs: true}] and securityGroups[{uuid}] to
//     the providerSpec where they are absent. The providerSpec is read through the
//     machine/v1alpha1 OpenstackProviderSpec type, but written as a JSON patch of "add"
//     operations on the stored JSON, so every other field (unknown ones included) stays exactly
//     as it was. The patch carries the resourceVersion it was computed from: a concurrent
//     writer makes it fail with a conflict, and it is recomputed and retried.
//   - Rollout replaces the Machines whose providerSpec lacks a network or security group of
//     their MachineSet's template: surge, wait for the new Node to be Ready, mark one old Machine
//     with machine.openshift.io/delete-machine and scale down, repeat. Every step is decided
//     from the cluster's state alone (the original replica count is kept in an annotation), so
//     a rollout killed at any point continues when run again.
package machinesets
