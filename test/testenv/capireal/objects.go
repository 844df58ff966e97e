package capireal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
)

// Labels Cluster API selects a deployment's or a set's Machines by (what its webhook would
// default the selector to).
const (
	DeploymentLabel = "cluster.x-k8s.io/deployment-name"
	SetLabel        = "cluster.x-k8s.io/set-name"
)

// CreateTemplate makes an OpenStackMachineTemplate with no ports (CAPO then gives each machine
// one port, on the cluster's network): the flavor and image of the Env.
func (e *Env) CreateTemplate(t *testing.T, name string) {
	t.Helper()
	_, err := e.create(context.Background(), TemplateGVR, map[string]any{
		"apiVersion": TemplateGVR.GroupVersion().String(), "kind": "OpenStackMachineTemplate",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"flavor": e.Flavor, "image": map[string]any{"id": e.ImageID},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// machineTemplate is the Machine template of a set or deployment: the cluster, the bootstrap
// data Secret (Cluster API waits for one), the infrastructure template, and drain and deletion
// bounded so that a deleted Machine goes in seconds.
func (e *Env) machineTemplate(labels map[string]any, template string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": labels},
		"spec": map[string]any{
			"clusterName": ClusterName,
			"bootstrap":   map[string]any{"dataSecretName": e.BootstrapSecret()},
			"infrastructureRef": map[string]any{"apiVersion": TemplateGVR.GroupVersion().String(), "kind": "OpenStackMachineTemplate",
				"name": template, "namespace": e.Namespace},
			"nodeDrainTimeout":        "10s",
			"nodeVolumeDetachTimeout": "10s",
			"nodeDeletionTimeout":     "10s",
		},
	}
}

// CreateMachineDeployment makes a template of the same name and a MachineDeployment of
// replicas Machines made from it, defaulted as Cluster API's webhook would (selector, rolling
// update with one Machine of surge and none unavailable).
func (e *Env) CreateMachineDeployment(t *testing.T, name string, replicas int) {
	t.Helper()
	e.CreateTemplate(t, name)
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": ClusterName, DeploymentLabel: name}
	_, err := e.create(context.Background(), MachineDeploymentGVR, map[string]any{
		"apiVersion": MachineDeploymentGVR.GroupVersion().String(), "kind": "MachineDeployment",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": ClusterName}},
		"spec": map[string]any{
			"clusterName": ClusterName, "replicas": int64(replicas), "minReadySeconds": int64(0),
			"selector": map[string]any{"matchLabels": labels},
			"strategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxSurge": int64(1), "maxUnavailable": int64(0), "deletePolicy": "Oldest"}},
			"template": e.machineTemplate(labels, name),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// CreateMachineSet makes a template of the same name and a standalone MachineSet (no
// deployment) of replicas Machines made from it.
func (e *Env) CreateMachineSet(t *testing.T, name string, replicas int) {
	t.Helper()
	e.CreateTemplate(t, name)
	labels := map[string]any{"cluster.x-k8s.io/cluster-name": ClusterName, SetLabel: name}
	_, err := e.create(context.Background(), MachineSetGVR, map[string]any{
		"apiVersion": MachineSetGVR.GroupVersion().String(), "kind": "MachineSet",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"cluster.x-k8s.io/cluster-name": ClusterName}},
		"spec": map[string]any{
			"clusterName": ClusterName, "replicas": int64(replicas), "deletePolicy": "Oldest",
			"selector": map[string]any{"matchLabels": labels},
			"template": e.machineTemplate(labels, name),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Server reads a Nova server.
func (e *Env) Server(ctx context.Context, id string) (*servers.Server, error) {
	s, err := servers.Get(ctx, e.cloud.compute, id).Extract()
	if err != nil {
		return nil, fmt.Errorf("reading server %s: %w", id, err)
	}
	return s, nil
}

// Ports lists the Neutron ports of a server.
func (e *Env) Ports(ctx context.Context, serverID string) ([]Port, error) {
	return e.cloud.portsOf(ctx, serverID)
}

// PortsOnNetwork lists the ports on a network whose description is desc ("" for all).
func (e *Env) PortsOnNetwork(ctx context.Context, networkID, desc string) ([]ports.Port, error) {
	return e.cloud.portsOnNetwork(ctx, networkID, desc)
}

// Servers lists the servers of this Env (named with Prefix).
func (e *Env) Servers(ctx context.Context) ([]servers.Server, error) {
	return e.cloud.serversNamed(ctx, e.Prefix)
}

// waitTimeout bounds the waits of the tests for servers: Nova's fake driver makes one ACTIVE in
// about 4 s, 5 at once in 15 s, on two busy cores; three Machines run 14 s after they are made
// and a rollout of three takes about 70 s on a quiet machine. The bound is for a busy one: make
// test runs other clusters beside these on the same Nova.
const waitTimeout = 8 * time.Minute

// WaitTimeout is how long the tests wait for Machines to run.
func WaitTimeout() time.Duration { return waitTimeout }
