package nodepools

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/internal/filepatch"
)

const gitopsFile = `# NodePools of the hosted clusters, synced by Argo CD
apiVersion: v1
kind: ConfigMap
metadata:
  name: kept
---
apiVersion: v1
kind: List
items:
- apiVersion: hypershift.openshift.io/v1beta1
  kind: NodePool
  metadata:
    name: hc1-workers
    namespace: clusters
  spec:
    clusterName: hc1   # production
    replicas: 3
    management:
      upgradeType: Replace
    release:
      image: quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64
    platform:
      type: OpenStack
      openstack:
        flavor: m1.xlarge
- apiVersion: hypershift.openshift.io/v1beta1
  kind: NodePool
  metadata:
    name: hc1-gpu
    namespace: clusters
  spec:
    clusterName: hc1
    management:
      upgradeType: Replace
    release:
      image: quay.io/openshift-release-dev/ocp-release:4.20.0-x86_64
    platform:
      type: OpenStack
      openstack:
        flavor: g1.large
        additionalPorts:
        - network:
            id: 0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37
          vnicType: direct
`

// TestPatchFile: the NodePools of a GitOps file get the port, only lines are added, the rest of
// the file (a ConfigMap, comments) is kept, and a second run changes nothing.
func TestPatchFile(t *testing.T) {
	const net = "5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c"
	scope, opts := Scope{}, attach.Options{Attachment: attach.Attachment{Networks: []string{net}}, By: "test",
		Now: func() time.Time { return time.Date(2026, 11, 25, 7, 0, 0, 0, time.UTC) }}
	res, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile), scope, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Output)
	if res.Reformatted || len(res.Results) != 2 || res.Results[0].Action != attach.ActionPatched || res.Results[1].Action != attach.ActionPatched {
		t.Fatalf("reformatted %t, results %+v", res.Reformatted, res.Results)
	}
	want := []string{
		"        flavor: m1.xlarge\n        additionalPorts:\n        - network:\n            id: " + net + "\n          description: " + PortDescription + "\n",
		"          vnicType: direct\n        - network:\n            id: " + net + "\n          description: " + PortDescription + "\n",
		"    clusterName: hc1   # production\n",
		"# NodePools of the hosted clusters, synced by Argo CD\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kept\n---\n",
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("the output lacks\n%s\n--- output\n%s", w, out)
		}
	}
	if len(res.Objects) != 2 {
		t.Errorf("%d NodePools in the output's objects", len(res.Objects))
	}
	again, err := PatchFile(context.Background(), "pools.yaml", res.Output, scope, opts)
	if err != nil || string(again.Output) != out || again.Results[0].Action != attach.ActionUnchanged {
		t.Errorf("a second run: %v, %+v", err, again)
	}

	only := scope
	only.HostedCluster = "hc2"
	var sel *attach.SelectionError
	if _, err := PatchFile(context.Background(), "pools.yaml", []byte(gitopsFile), only, opts); !errors.As(err, &sel) {
		t.Errorf("--hosted-cluster hc2: %v", err)
	}
	var fe *filepatch.Error
	if _, err := PatchFile(context.Background(), "cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"), scope, opts); !errors.As(err, &fe) ||
		!strings.Contains(err.Error(), "cm.yaml: no NodePool") {
		t.Errorf("a file without NodePools: %v", err)
	}
}
