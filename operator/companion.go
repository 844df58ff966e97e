package operator

import "github.com/manila-setup/manila-setup/operator/platform"

// Companion mode (operator/platform): the platform runs its own Manila CSI driver operator under
// the names of driver mode, so the companion uses names of its own, in a namespace of its own,
// and writes nothing the platform owns. It adds what the platform lacks: StorageClasses
// restricted to the machine network beside the platform's unrestricted ones, and a status of its
// own (the storage network, the platform driver's health).
const (
	// CompanionNamespace is where the companion operator runs and reads its credentials.
	CompanionNamespace = "manila-setup"
	// CompanionOperatorName names its Deployment, ServiceAccount, RBAC, lease and event source.
	CompanionOperatorName = "manila-setup-operator"
	// CompanionStorageClassPrefix starts its StorageClasses' names: the platform's start with
	// csi-manila-, so the two can never collide.
	CompanionStorageClassPrefix = "manila-setup-"

	// The companion's status object: ManilaCompanion "cluster" (manila-setup.io/v1alpha1), whose
	// spec and status have the shapes of the ClusterCSIDriver's.
	CompanionGroup    = "manila-setup.io"
	CompanionVersion  = "v1alpha1"
	CompanionKind     = "ManilaCompanion"
	CompanionResource = "manilacompanions"
	CompanionName     = "cluster"

	// PlatformDriverNamespace is where the platform's Manila CSI driver runs and keeps the
	// secret its StorageClasses name (DriverSecretName); the companion's StorageClasses name
	// the same one, since the platform's driver is the one that provisions them.
	PlatformDriverNamespace = "openshift-manila-csi-driver"

	// ConditionPlatformDriverAvailable, on the ManilaCompanion, is the platform's Manila driver
	// as its own ClusterCSIDriver reports it.
	ConditionPlatformDriverAvailable = "PlatformDriverAvailable"
)

// Names are the names an operator of one mode uses.
type Names struct {
	Mode platform.Mode
	// Namespace is the default namespace of the operator.
	Namespace string
	// Operator names the operator's Deployment, ServiceAccount, lease and event source.
	Operator string
	// StorageClassPrefix starts the names of its StorageClasses.
	StorageClassPrefix string
	// SecretNamespace is where the secret its StorageClasses name lives.
	SecretNamespace string
	// AssetDir holds the manifests that deploy the operator.
	AssetDir string
}

// NamesFor returns the names of a mode (driver for anything but companion).
func NamesFor(mode platform.Mode) Names {
	if mode == platform.ModeCompanion {
		return Names{Mode: mode, Namespace: CompanionNamespace, Operator: CompanionOperatorName,
			StorageClassPrefix: CompanionStorageClassPrefix, SecretNamespace: PlatformDriverNamespace, AssetDir: "companion"}
	}
	return Names{Mode: platform.ModeDriver, Namespace: DefaultNamespace, Operator: OperatorName,
		StorageClassPrefix: StorageClassPrefix, AssetDir: "operator"}
}
