package controllers

import (
	configv1 "github.com/openshift/api/config/v1"
	operatorv1 "github.com/openshift/api/operator/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
)

// wiring is what build hands every controller's constructor, all of one shape,
// func(wiring) *machinery.Controller: the loop, the informers and their listers (each
// constructor picks the informers it watches, so build wires the controllers without knowing
// any of their informers), the writers, and the values several controllers share.
type wiring struct {
	cfg      Config
	profile  modeProfile
	loop     machinery.Loop
	inf      *machinery.Informers
	l        machinery.Listers
	kube     *machinery.Clients
	ops      operands
	writer   *machinery.Writer
	recorder machinery.Recorder

	// guard is the platform controller's answer, which gates the others; kickOthers makes
	// every controller but one sync at once (when the gate opens).
	guard      *platformGuard
	kickOthers func(except *machinery.Controller)
	// platformDriver is the ClusterCSIDriver manila.csi.openstack.org from the cache: the
	// operator's own in driver mode, the platform's in companion mode.
	platformDriver func() *operatorv1.ClusterCSIDriver

	credentials    func() (*operator.Credentials, error)
	storage        *storageNetworks
	installConfig  *installConfigs
	mounts         *shareClientSource
	infrastructure func() *configv1.Infrastructure
	vars           func(*operatorv1.OperatorSpec) map[string]string
	// tlsProfile is the cluster's TLS security profile (Intermediate, and why, when it cannot be
	// applied).
	tlsProfile func() (tlsprofile.Profile, error)
	// findings is what the Manila controller publishes of Manila for the others.
	findings *machinery.Published[manilaFindings]
	// secretNamespace holds the driver Secret the StorageClasses name.
	secretNamespace string
}

// newController is the shape of every controller's constructor.
type newController func(wiring) *machinery.Controller
