package machinesets

import (
	"fmt"

	machinev1beta1 "github.com/openshift/api/machine/v1beta1"
)

// ClusterAPINamespace is where OpenShift keeps the Cluster API copies of migrated MachineSets.
const ClusterAPINamespace = "openshift-cluster-api"

// NotMachineAPIAuthoritative says why the Machine API spec of ms is not what its machines get,
// "" when it is. With the Machine API → Cluster API migration (feature gate
// MachineAPIMigration), a MachineSet whose authoritative API is ClusterAPI, or is on its way
// there, is reconciled from its Cluster API copy: a patch of this providerSpec would be
// overwritten by the synchronisation or, during the hand-over, converted by it, and a rollout
// would replace machines with ones that still lack the storage network. Patch, rollout, list and
// the wizard all leave such a set alone, with this reason.
func NotMachineAPIAuthoritative(ms *machinev1beta1.MachineSet) string {
	spec, status := ms.Spec.AuthoritativeAPI, ms.Status.AuthoritativeAPI
	capi := fmt.Sprintf("the Cluster API MachineSet %s/%s and its OpenStackMachineTemplate", ClusterAPINamespace, ms.Name)
	switch {
	case ClusterAPIAuthoritative(ms):
		return fmt.Sprintf("Cluster API is authoritative for it (status.authoritativeAPI ClusterAPI): its machines follow %s, not this providerSpec; the storage network is attached there (`manila-setup clusterapi patch --name machineset/%s`, which `machinesets patch` runs for it)", capi, ms.Name)
	case status == machinev1beta1.MachineAuthorityMigrating:
		return "it is migrating between the Machine API and Cluster API (status.authoritativeAPI Migrating); run again when the migration has settled (status.authoritativeAPI MachineAPI or ClusterAPI, condition Synchronized True)"
	case spec == machinev1beta1.MachineAuthorityClusterAPI:
		return fmt.Sprintf("it was asked to migrate to Cluster API (spec.authoritativeAPI ClusterAPI, status.authoritativeAPI %q): once migrated, its machines follow %s; attach the storage network there, or set spec.authoritativeAPI back to MachineAPI first", status, capi)
	}
	return ""
}

// ClusterAPIAuthoritative reports whether the machines of ms follow its Cluster API copy in
// ClusterAPINamespace: the migration to Cluster API is complete for it.
func ClusterAPIAuthoritative(ms *machinev1beta1.MachineSet) bool {
	return ms.Status.AuthoritativeAPI == machinev1beta1.MachineAuthorityClusterAPI
}

// MigrationWarning is what to check when a Machine API MachineSet of a cluster that runs the
// migration (status.authoritativeAPI is set) gets the storage network: the migration converts
// the providerSpec into an OpenStackMachineTemplate, and cluster-capi-operator's converter drops
// noAllowedAddressPairs (and portSecurity, vnicType, profile) of every network. "" on clusters
// without the migration.
func MigrationWarning(ms *machinev1beta1.MachineSet) string {
	if ms.Status.AuthoritativeAPI != machinev1beta1.MachineAuthorityMachineAPI {
		return ""
	}
	return fmt.Sprintf("this cluster runs the Machine API → Cluster API migration: if MachineSet %s/%s migrates, check the storage network's port in its OpenStackMachineTemplate (%s): the migration does not carry noAllowedAddressPairs over, so make sure the port has no allowedAddressPairs",
		Namespace, ms.Name, ClusterAPINamespace)
}
