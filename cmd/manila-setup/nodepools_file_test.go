package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodePoolsPatchFile: `nodepools patch -f` patches a file with no cluster, in place with a
// backup, and says that security groups are not added to NodePools.
func TestNodePoolsPatchFile(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	const pool = "apiVersion: hypershift.openshift.io/v1beta1\nkind: NodePool\nmetadata:\n  name: hc1-workers\n  namespace: clusters\n" +
		"spec:\n  clusterName: hc1\n  management:\n    upgradeType: Replace\n  release:\n    image: quay.io/x/ocp-release:4.20.0\n" +
		"  platform:\n    type: OpenStack\n    openstack:\n      flavor: m1.xlarge\n"
	path := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(path, []byte(pool), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, "nodepools", "patch", "-f", path, "--network", fileNet, "--security-group", fileSG)
	if code != exitOK || !onlyLinesAdded(pool, out) || !strings.Contains(out, "      additionalPorts:\n      - network:\n          id: "+fileNet+"\n") ||
		!strings.Contains(errOut, "clusters/hc1-workers  patched  added network "+fileNet) || !strings.Contains(errOut, "security groups "+fileSG+" were not added") {
		t.Errorf("to standard output: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "nodepools", "patch", "-f", path, "--network", fileNet, "--in-place")
	bak, _ := os.ReadFile(path + ".bak")
	now, _ := os.ReadFile(path)
	if code != exitOK || string(bak) != pool || !strings.Contains(string(now), "id: "+fileNet) || !strings.Contains(out, "written; the previous version is in "+path+".bak") {
		t.Errorf("in place: exit %d\n%s", code, out)
	}
	if code, _, errOut := runCLI(t, "nodepools", "patch", "-f", path, "--network", fileNet, "--hosted-cluster", "hc2"); code != exitInvalid || !strings.Contains(errOut, `is of HostedCluster "hc2"`) {
		t.Errorf("another HostedCluster: exit %d\n%s", code, errOut)
	}
}
