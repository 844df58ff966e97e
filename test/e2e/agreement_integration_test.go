//go:build integration

package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/openstack"
	"github.com/manila-setup/manila-setup/machinesets"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// attachmentViews is what the three tools that judge the workers' attachment say: the cloud's
// view (`networks discover`: ports whose device_id is a worker's server), the cluster's view
// (`machinesets list`: the MachineSet's providerSpec and how many Machines have it) and the
// operator's (StorageNetworkReachable).
type attachmentViews struct {
	discoverAttached, discoverTotal int
	listState                       string
	listUpToDate, listMachines      int
	operatorReachable               bool
}

func readAttachmentViews(t *testing.T, ctx context.Context, cli, kubeconfig, cloudsFile, cloudName string, sim *testenv.SimCluster, storageNet string) attachmentViews {
	t.Helper()
	var v attachmentViews
	out, err := exec.CommandContext(ctx, cli, "networks", "discover", "--kubeconfig", kubeconfig,
		"--os-cloud", cloudName, "--os-client-config-file", cloudsFile, "-o", "json").Output()
	if err != nil {
		t.Fatalf("networks discover: %v\n%s", err, out)
	}
	var d openstack.Discovery
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("networks discover -o json: %v\n%s", err, out)
	}
	for _, c := range d.Candidates {
		if c.Network.ID == storageNet && c.Attachment != nil {
			v.discoverAttached, v.discoverTotal = c.Attachment.Attached, c.Attachment.Total
		}
	}
	out, err = exec.CommandContext(ctx, cli, "machinesets", "list", "--kubeconfig", kubeconfig, "--network", storageNet, "-o", "json").Output()
	if err != nil {
		t.Fatalf("machinesets list: %v\n%s", err, out)
	}
	var sets []machinesets.SetStatus
	if err := json.Unmarshal(out, &sets); err != nil {
		t.Fatalf("machinesets list -o json: %v\n%s", err, out)
	}
	for _, s := range sets {
		if s.Role == "worker" {
			v.listState, v.listUpToDate, v.listMachines = s.StorageNetwork, s.UpToDate, s.Machines
		}
	}
	v.operatorReachable = storageNetworkReachable(ctx, t, sim)
	return v
}

// agree reports whether the three views say the same: every worker attached, or none.
func (v attachmentViews) agree(workers int, attached bool) bool {
	if !attached {
		return v.discoverAttached == 0 && v.discoverTotal == workers && v.listState == attach.StateMissing && !v.operatorReachable
	}
	return v.discoverAttached == workers && v.discoverTotal == workers && v.listState == attach.StateAttached &&
		v.listUpToDate == workers && v.listMachines == workers && v.operatorReachable
}
