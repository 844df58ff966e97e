package machinesets

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// Workers are the cluster's worker machines as the cloud knows them: what storage-network
// discovery checks for ports.
type Workers struct {
	// Selector names the servers: by Nova ID (from providerID), else by the infra ID prefix.
	Selector openstack.ServerSelector
	// Note says where they were found, for the command's output.
	Note string
}

var (
	machinesGVR       = schema.GroupVersionResource{Group: "machine.openshift.io", Version: "v1beta1", Resource: "machines"}
	infrastructureGVR = schema.GroupVersionResource{Group: "config.openshift.io", Version: "v1", Resource: "infrastructures"}
	nodesGVR          = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

// ClusterWorkers reads the cluster's non-control-plane Machines (else Nodes): their names and
// the Nova server IDs of their providerID, plus the infra ID as name prefix for servers whose
// ID is unknown. host names the cluster in messages.
func ClusterWorkers(ctx context.Context, dyn dynamic.Interface, host string) (*Workers, error) {
	out := &Workers{}
	infra, err := dyn.Resource(infrastructureGVR).Get(ctx, "cluster", metav1.GetOptions{})
	infraID := ""
	switch {
	case err == nil:
		infraID, _, _ = unstructured.NestedString(infra.Object, "status", "infrastructureName")
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading the cluster's Infrastructure from %s: %v", host, err)
	}

	source := "Machines"
	list, err := dyn.Resource(machinesGVR).Namespace("openshift-machine-api").List(ctx, metav1.ListOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("listing the cluster's Machines on %s: %v", host, err)
	}
	var items []unstructured.Unstructured
	if list != nil {
		items = list.Items
	}
	if len(items) == 0 {
		source = "Nodes"
		nodes, err := dyn.Resource(nodesGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the cluster's Nodes on %s: %v", host, err)
		}
		items = nodes.Items
	}
	for _, it := range items {
		if IsControlPlaneObject(it.GetLabels()) {
			continue
		}
		providerID, _, _ := unstructured.NestedString(it.Object, "spec", "providerID")
		id := ServerIDFromProviderID(providerID)
		if id == "" {
			id, _, _ = unstructured.NestedString(it.Object, "status", "providerStatus", "instanceId")
		}
		out.Selector.Servers = append(out.Selector.Servers, openstack.Server{ID: id, Name: it.GetName()})
	}
	if len(out.Selector.Servers) == 0 && infraID != "" {
		out.Selector.NamePrefix = infraID + "-"
	}
	out.Note = fmt.Sprintf("workers: %d from the cluster's %s at %s", len(out.Selector.Servers), source, host)
	if infraID != "" {
		out.Note += fmt.Sprintf(" (infra ID %s)", infraID)
	}
	return out, nil
}

// IsControlPlaneObject tells a control-plane Machine or Node by its labels.
func IsControlPlaneObject(labels map[string]string) bool {
	if IsControlPlane(labels["machine.openshift.io/cluster-api-machine-role"]) {
		return true
	}
	_, master := labels["node-role.kubernetes.io/master"]
	_, cp := labels["node-role.kubernetes.io/control-plane"]
	return master || cp
}

// ServerIDFromProviderID takes the Nova ID out of "openstack:///<id>" (or "openstack://<region>/<id>").
func ServerIDFromProviderID(p string) string {
	rest, ok := strings.CutPrefix(p, "openstack://")
	if !ok {
		return ""
	}
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		rest = rest[i+1:]
	}
	return rest
}
