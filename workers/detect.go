package workers

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/nodepools"
)

// Served is what a cluster serves of the kinds of machines manila-setup works on.
type Served struct {
	// MachineAPI: the cluster serves Machine API MachineSets; MachineSets counts those of
	// openshift-machine-api.
	MachineAPI  bool
	MachineSets int
	// HyperShift: the cluster serves NodePools (a HyperShift management cluster); NodePools
	// counts them, in every namespace.
	HyperShift bool
	NodePools  int
	// ClusterAPI: the cluster serves Cluster API MachineSets (cluster.x-k8s.io), read in
	// openshift-cluster-api.
	ClusterAPI bool
	// Note says what of the cluster could not be read while the rest can be worked on (the
	// MachineSets of a management cluster whose NodePools are readable, or the reverse).
	Note string
}

// Kinds are the kinds of machines the cluster serves: those its inventory is read for. The
// ControlPlaneMachineSet is read where the Machine API is served (one object, or none).
func (s Served) Kinds() Kinds {
	return Kinds{MachineSets: s.MachineAPI, ClusterAPI: s.ClusterAPI, NodePools: s.HyperShift, ControlPlane: s.MachineAPI}
}

// Offered are the kinds the cluster has to choose from, as the screens name them: its
// MachineSets (also where it serves nothing else), its Cluster API objects, the NodePools of a
// management cluster that has some. Whether it has a ControlPlaneMachineSet is known once the
// inventory is read (Offer).
func (s Served) Offered() Kinds {
	return Kinds{MachineSets: s.MachineAPI || !s.HyperShift, ClusterAPI: s.ClusterAPI, NodePools: s.HyperShift && s.NodePools > 0}
}

// Detect finds the kinds of machines the cluster serves: it lists the MachineSets, the
// NodePools and (one item) the Cluster API MachineSets, all at once. What the cluster
// does not serve (NotFound) is simply not offered; what it refuses is an error unless the other
// kind can be worked on, and then a note.
func (cl Cluster) Detect(ctx context.Context, where string) (Served, error) {
	var (
		c             Served
		msErr, npErr  error
		sets, pools   int
		wg            sync.WaitGroup
		nodePoolsKind = nodepools.GVR.GroupResource().String()
	)
	wg.Add(3)
	go func() {
		defer wg.Done()
		// Only what is served counts: Cluster API is an addition to the Machine API or the
		// NodePools, never enough on its own, so a refusal here only leaves it out.
		_, err := cl.Dynamic.Resource(clusterapi.MachineSetGVR).Namespace(clusterapi.OpenShiftNamespace).List(ctx, metav1.ListOptions{Limit: 1})
		c.ClusterAPI = err == nil
	}()
	go func() {
		defer wg.Done()
		list, err := cl.Machines.MachineV1beta1().MachineSets(machinesets.Namespace).List(ctx, metav1.ListOptions{})
		if msErr = err; err == nil {
			sets = len(list.Items)
		}
	}()
	go func() {
		defer wg.Done()
		list, err := cl.Dynamic.Resource(nodepools.GVR).Namespace("").List(ctx, metav1.ListOptions{})
		if npErr = err; err == nil {
			pools = len(list.Items)
		}
	}()
	wg.Wait()
	c.MachineAPI, c.MachineSets = msErr == nil, sets
	c.HyperShift, c.NodePools = npErr == nil, pools

	var msProblem error
	switch {
	case msErr == nil, apierrors.IsNotFound(msErr):
	case apierrors.IsForbidden(msErr):
		msProblem = fmt.Errorf("%s refused to list MachineSets in %s: manila-setup needs list and patch on machinesets.machine.openshift.io there; log in as a cluster admin", where, machinesets.Namespace)
	case apierrors.IsUnauthorized(msErr):
		return c, fmt.Errorf("%s rejected the kubeconfig's credentials: log in again (oc login) or choose another context", where)
	default:
		msProblem = fmt.Errorf("%s cannot be reached: %v; check that it is up and that the kubeconfig is current", where, msErr)
	}
	switch {
	case c.HyperShift:
		if msProblem != nil {
			// A management cluster: its NodePools can be attached without its MachineSets.
			c.Note = msProblem.Error() + "; only its NodePools are offered"
		}
		return c, nil
	case msProblem != nil:
		return c, msProblem
	case !c.MachineAPI:
		if apierrors.IsForbidden(npErr) {
			return c, fmt.Errorf("%s has no MachineSet API (machine.openshift.io/v1beta1) and refused to list NodePools: manila-setup needs list and patch on %s; log in as a cluster admin", where, nodePoolsKind)
		}
		return c, fmt.Errorf("%s serves neither MachineSets (machine.openshift.io/v1beta1) nor NodePools (%s): manila-setup works on OpenShift clusters whose machines the Machine API manages, and on HyperShift management clusters", where, nodePoolsKind)
	case !apierrors.IsNotFound(npErr):
		// Not a management cluster as far as this user can tell: the MachineSets carry on.
		c.Note = fmt.Sprintf("NodePools (%s) could not be listed: %v; only the MachineSets are offered", nodePoolsKind, npErr)
	}
	return c, nil
}

// OwnNetworks is what tells the machines' own network from a storage network: the nodes'
// internal addresses (machinesets.NodeAddresses) and what the install-config says a storage
// subnet must neither overlap nor hold (its networks and VIPs, InstallConfigNetworks). Best
// effort: what cannot be read is left empty, and the warnings it feeds are then not given.
func (c Cluster) OwnNetworks(ctx context.Context) ([]netip.Addr, attach.FitnessOptions) {
	nodes, _ := machinesets.NodeAddresses(ctx, c.Kube)
	networks, _ := InstallConfigNetworks(ctx, c.Kube)
	return nodes, attach.FitnessOptions{MachineNetworks: networks.All(), VIPs: networks.VIPs}
}
