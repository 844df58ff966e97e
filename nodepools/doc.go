// Package nodepools is HyperShift's adapter (an attach.Target and attach.FileTarget): it attaches
// the storage network to the NodePools of hosted control planes
// (HyperShift) on OpenStack: a port on the network in spec.platform.openstack.additionalPorts,
// the way the HyperShift documentation attaches Manila's NFS network. The NodePool controller
// then builds a new machine template and replaces the NodePool's machines itself.
//
// Security groups cannot be given per additional port there: they are reported, not added.
// What was attached is recorded in the same annotation as on MachineSets.
package nodepools
