package workers

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/attach/rollout"
	"github.com/manila-setup/manila-setup/internal/openstack"
)

// Without a cloud the canary judges what the cluster shows: events, and the node IP against the
// machine network. The storage subnets need the cloud (canary integration tests).
func TestCanaryWithoutACloud(t *testing.T) {
	c := &Canary{MachineNetworks: []netip.Prefix{netip.MustParsePrefix("10.196.0.0/16")}}
	ok := rollout.Facts{Machine: "w-1", Node: "w-1", NodeIP: netip.MustParseAddr("10.196.3.4")}
	v, err := c.Check(context.Background(), ok)
	if err != nil || len(v.Problems) > 0 || !strings.Contains(strings.Join(v.Checked, "; "), "node IP 10.196.3.4 on the machine network") ||
		!strings.Contains(strings.Join(v.Checked, "; "), "storage addresses not checked (no cloud given)") {
		t.Errorf("a fit machine: %+v, %v", v, err)
	}
	bad := ok
	bad.NodeIP = netip.MustParseAddr("10.0.0.20")
	bad.Warnings = []string{"FailedCreatePort: PortSecurityAndIPRequiredForSecurityGroups"}
	v, _ = c.Check(context.Background(), bad)
	if len(v.Problems) != 2 || !strings.Contains(v.Problems[0], "the Machine reported FailedCreatePort") ||
		!strings.Contains(v.Problems[1], "node IP 10.0.0.20 is outside the machine network 10.196.0.0/16") {
		t.Errorf("an unfit machine: %+v", v.Problems)
	}
	none := ok
	none.NodeIP = netip.Addr{}
	if v, _ := c.Check(context.Background(), none); len(v.Problems) != 1 || !strings.Contains(v.Problems[0], "has no InternalIP") {
		t.Errorf("no node IP: %+v", v.Problems)
	}
	elsewhere := ok
	elsewhere.NodeIP, elsewhere.NodeElsewhere = netip.Addr{}, "its Node is in the workload cluster of namespace capi"
	if v, _ := c.Check(context.Background(), elsewhere); len(v.Problems) != 0 || !strings.Contains(strings.Join(v.Checked, "; "), "node IP not checked (its Node is in the workload cluster of namespace capi)") {
		t.Errorf("a Node of another cluster: %+v", v)
	}
	unknown := &Canary{}
	if v, _ := unknown.Check(context.Background(), bad); len(v.Problems) != 1 {
		t.Errorf("without the machine network only the event is a problem: %+v", v.Problems)
	}
}

func TestCanaryVIPPairs(t *testing.T) {
	vips := []netip.Addr{netip.MustParseAddr("10.196.0.5"), netip.MustParseAddr("10.196.0.7")}
	storage := openstack.Port{ID: "p-storage", Name: "w-1-1", NetworkID: "storage-net"}
	primary := openstack.Port{ID: "p-primary", Name: "w-1-0", NetworkID: "machine-net", AllowedAddressPairs: []string{"10.196.0.5", "10.196.0.7/32"}}
	if problem, checked := vipPairs([]openstack.Port{storage, primary}, []string{"storage-net"}, vips); problem != "" || checked != "VIPs allowed on primary port w-1-0" {
		t.Errorf("a primary port with the VIPs: %q, %q", problem, checked)
	}
	bare := primary
	bare.AllowedAddressPairs = []string{"10.196.0.5"}
	problem, _ := vipPairs([]openstack.Port{storage, bare}, []string{"storage-net"}, vips)
	if !strings.Contains(problem, "lacks the allowed address pairs of VIPs 10.196.0.7") || !strings.Contains(problem, "fix: openstack port set --allowed-address ip-address=10.196.0.7 p-primary") {
		t.Errorf("a primary port without a VIP: %q", problem)
	}
	if problem, checked := vipPairs([]openstack.Port{storage}, []string{"storage-net"}, vips); problem != "" || !strings.Contains(checked, "not checked") {
		t.Errorf("no primary port: %q, %q", problem, checked)
	}
}
