package nodepools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
)

func testOpts(a attach.Attachment) attach.Options {
	return attach.Options{Attachment: a, By: "test", Now: func() time.Time { return time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC) }}
}

// TestPatchFilePortSecurity: the port on a network without port security says
// portSecurityPolicy: Disabled (one on a network with port security says nothing), the
// record names it, and a second run changes nothing.
func TestPatchFilePortSecurity(t *testing.T) {
	const off, on = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c", "9a7c1e2b-3d4f-4a5b-8c6d-7e8f9a0b1c2d"
	opts := testOpts(attach.Attachment{Networks: []string{off, on}, PortSecurityDisabled: []string{off}})
	res, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile), Scope{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	for _, w := range []string{
		"        - network:\n            id: " + off + "\n          description: " + PortDescription + "\n          portSecurityPolicy: Disabled\n",
		"        - network:\n            id: " + on + "\n          description: " + PortDescription + "\n",
		`"portSecurityDisabled":["` + off + `"]`,
	} {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks\n%s\n--- output\n%s", w, out)
		}
	}
	if n := strings.Count(out, "portSecurityPolicy"); n != 2 {
		t.Errorf("%d ports say portSecurityPolicy, want 2 (one per NodePool)", n)
	}
	again, err := PatchFile(context.Background(), "pools.yaml", res.Output, Scope{}, opts)
	if err != nil || string(again.Output) != out || again.Results[0].Action != attach.ActionUnchanged || again.Results[0].Warning != "" {
		t.Errorf("a second run: %v, %+v", err, again.Results)
	}

	// A port written before without the policy is left alone, with the path to fix.
	plain, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile), Scope{}, testOpts(attach.Attachment{Networks: []string{off}}))
	if err != nil {
		t.Fatal(err)
	}
	again, err = PatchFile(context.Background(), "pools.yaml", plain.Output, Scope{}, testOpts(attach.Attachment{Networks: []string{off}, PortSecurityDisabled: []string{off}}))
	if err != nil || again.Results[1].Action != attach.ActionUnchanged || !strings.Contains(again.Results[1].Warning, "spec.platform.openstack.additionalPorts[1], its port, does not say portSecurityPolicy: Disabled") {
		t.Errorf("a port without the policy: %v, %+v", err, again.Results)
	}
}

const subnetsCluster = `---
apiVersion: hypershift.openshift.io/v1beta1
kind: HostedCluster
metadata:
  name: hc1
  namespace: clusters
spec:
  platform:
    type: OpenStack
    openstack:
      subnets:
      - id: 2c4e6a8b-1d3f-4b5a-9c7e-0f1a2b3c4d5e
`

// TestPatchFileRefusesIgnoredPorts: beside a HostedCluster that sets
// spec.platform.openstack.subnets, its NodePools are refused with the reason and nothing is
// written; without subnets they are patched.
func TestPatchFileRefusesIgnoredPorts(t *testing.T) {
	opts := testOpts(attach.Attachment{Networks: []string{"5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"}})
	res, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile+subnetsCluster), Scope{}, opts)
	var sel *attach.SelectionError
	if !errors.As(err, &sel) || res != nil {
		t.Fatalf("want a SelectionError and no output, got %v, %+v", err, res)
	}
	for _, w := range []string{"HostedCluster clusters/hc1 sets spec.platform.openstack.subnets", "ignore the storage port of NodePool clusters/hc1-workers, clusters/hc1-gpu", "nothing was patched"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("the error lacks %q: %v", w, err)
		}
	}
	noSubnets := strings.Replace(subnetsCluster, "      subnets:\n      - id: 2c4e6a8b-1d3f-4b5a-9c7e-0f1a2b3c4d5e\n", "      flavor: m1.large\n", 1)
	if res, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile+noSubnets), Scope{}, opts); err != nil || res.Results[0].Action != attach.ActionPatched {
		t.Errorf("a HostedCluster without subnets: %v", err)
	}
}
