package nodepools

import (
	"context"
	"fmt"
	"slices"
	"strings"

	hyperv1 "github.com/openshift/hypershift/api/hypershift/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

// HostedClusterGVR is the HostedCluster resource of HyperShift.
var HostedClusterGVR = hyperv1.GroupVersion.WithResource("hostedclusters")

// subnetsField is the HostedCluster field that makes HyperShift ignore additionalPorts.
const subnetsField = "spec.platform.openstack.subnets"

// clusterRef names the HostedCluster of a NodePool: spec.clusterName, in the NodePool's
// namespace.
type clusterRef struct{ namespace, name string }

func (c clusterRef) String() string {
	if c.namespace == "" {
		return c.name
	}
	return c.namespace + "/" + c.name
}

// findCluster returns the HostedCluster a NodePool names, nil when it is not known.
type findCluster func(c clusterRef) (*unstructured.Unstructured, error)

// refuseIgnoredPorts refuses (*attach.SelectionError) the OpenStack NodePools of pools whose
// HostedCluster sets spec.platform.openstack.subnets: HyperShift then builds the machines'
// ports from the HostedCluster alone and ignores the NodePool's additionalPorts, silently
// (hypershift-operator/controllers/nodepool/openstack/openstack.go, MachineTemplateSpec: the
// additional ports are used only when the HostedCluster's subnets are empty). The storage port
// would never be created, so nothing is written. A HostedCluster that find does not know is not
// judged. choose says how to leave such NodePools out.
func refuseIgnoredPorts(pools []*unstructured.Unstructured, find findCluster, choose string) error {
	var order []clusterRef
	ignored := map[clusterRef][]string{}
	subnets := map[clusterRef]int{} // how many the HostedCluster sets; read once each
	for _, u := range pools {
		if t, _, _ := unstructured.NestedString(u.Object, "spec", "platform", "type"); t != string(hyperv1.OpenStackPlatform) {
			continue
		}
		name, _, _ := unstructured.NestedString(u.Object, "spec", "clusterName")
		ref := clusterRef{namespace: u.GetNamespace(), name: name}
		if _, seen := subnets[ref]; !seen {
			hc, err := find(ref)
			if err != nil {
				return err
			}
			subnets[ref] = 0
			if hc != nil {
				list, _, _ := unstructured.NestedSlice(hc.Object, "spec", "platform", "openstack", "subnets")
				subnets[ref] = len(list)
			}
		}
		if subnets[ref] == 0 {
			continue
		}
		if !slices.Contains(order, ref) {
			order = append(order, ref)
		}
		ignored[ref] = append(ignored[ref], u.GetNamespace()+"/"+u.GetName())
	}
	if len(order) == 0 {
		return nil
	}
	lines := make([]string, len(order))
	for i, ref := range order {
		lines[i] = fmt.Sprintf("HostedCluster %s sets %s: HyperShift uses a NodePool's spec.platform.openstack.additionalPorts only when its HostedCluster sets no subnets, so it would silently ignore the storage port of NodePool %s",
			ref, subnetsField, strings.Join(ignored[ref], ", "))
	}
	return attach.NewSelectionError(strings.Join(lines, "\n") + "\nnothing was patched; leave these NodePools out (" + choose + ")")
}

// clusterGetter reads HostedClusters from the cluster, once each. One that is not there (or a
// cluster that serves none) is not known; a refusal to read it is an error, since the NodePool
// cannot be judged without it.
func clusterGetter(ctx context.Context, dyn dynamic.Interface) findCluster {
	return func(c clusterRef) (*unstructured.Unstructured, error) {
		hc, err := dyn.Resource(HostedClusterGVR).Namespace(c.namespace).Get(ctx, c.name, metav1.GetOptions{})
		switch {
		case err == nil:
			return hc, nil
		case apierrors.IsNotFound(err):
			return nil, nil
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("reading HostedCluster %s was refused: %s; it needs the get verb on %s, to tell whether it sets %s (then its NodePools' additionalPorts are ignored)",
				c, attach.APIMessage(err), HostedClusterGVR.GroupResource(), subnetsField)
		}
		return nil, fmt.Errorf("reading HostedCluster %s: %w", c, err)
	}
}

// fileClusters finds HostedClusters among the objects of a file: those a GitOps repository
// keeps beside their NodePools. A NodePool and a HostedCluster without a namespace are taken
// to be in the same one.
func fileClusters(name string, objects []filepatch.Object) (findCluster, error) {
	var hcs []*unstructured.Unstructured
	for _, o := range objects {
		if !o.Is(hyperv1.GroupVersion.String(), "HostedCluster") {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(o.JSON); err != nil {
			return nil, filepatch.Errorf("%s: %s: %v", name, o.Where, err)
		}
		hcs = append(hcs, u)
	}
	return func(c clusterRef) (*unstructured.Unstructured, error) {
		for _, hc := range hcs {
			if hc.GetName() == c.name && (hc.GetNamespace() == c.namespace || hc.GetNamespace() == "" || c.namespace == "") {
				return hc, nil
			}
		}
		return nil, nil
	}, nil
}
