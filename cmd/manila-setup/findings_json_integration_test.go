//go:build integration

package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/manila-setup/manila-setup/attach"
	"github.com/manila-setup/manila-setup/clusterapi"
	"github.com/manila-setup/manila-setup/nodepools"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// findingRow is one object's row of a patch command's -o json, as a script reads it.
type findingRow struct {
	Kind          string   `json:"kind"`
	Name          string   `json:"name"`
	Action        string   `json:"action"`
	AddedNetworks []string `json:"addedNetworks"`
	Findings      []struct {
		attach.Finding
		Forced bool `json:"forced"`
	} `json:"findings"`
}

// ids is "severity:id[:forced]" per finding.
func (r findingRow) ids() []string {
	var out []string
	for _, f := range r.Findings {
		s := f.Severity + ":" + f.ID
		if f.Forced {
			s += ":forced"
		}
		out = append(out, s)
	}
	return out
}

// checkFindingRows: every row that adds the network carries want, naming the network; the
// others carry none. It returns how many rows add it.
func checkFindingRows(t *testing.T, what string, rows []findingRow, network string, want ...string) int {
	t.Helper()
	adding := 0
	for _, r := range rows {
		if len(r.AddedNetworks) == 0 {
			if len(r.Findings) > 0 {
				t.Errorf("%s: %s %s adds nothing, yet has findings %v", what, r.Kind, r.Name, r.ids())
			}
			continue
		}
		adding++
		if got := r.ids(); strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s: %s %s (%s): findings %v, want %v", what, r.Kind, r.Name, r.Action, got, want)
		}
		for _, f := range r.Findings {
			if !strings.Contains(f.Network, network) || f.Message == "" || f.Fix == "" {
				t.Errorf("%s: finding %+v does not name network %s, say what is wrong and the fix", what, f, network)
			}
		}
	}
	return adding
}

// TestPatchCommandsReportFindingsAsJSON: machinesets, clusterapi and nodepools patch -o json
// give each object that gets the storage network the findings of that network, with their
// stable IDs: the seeded subnet's warnings (a gateway, no DNS servers), and an error that
// --force let through, marked forced; without --force that network is refused with exit 1.
func TestPatchCommandsReportFindingsAsJSON(t *testing.T) {
	cloud := testenv.NewCloud(t) // OS_CLOUD: the demo project, where Manila exports on "storage"
	ctx := context.Background()
	api, _, dyn := newMigratingCluster(t)
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-worker-1"))
	capiObject(t, dyn, clusterapi.TemplateGVR, capiTemplate("ostest-md"))
	capiObject(t, dyn, clusterapi.MachineSetGVR, capiSet("MachineSet", "ostest-worker-1", "ostest-worker-1"))
	capiObject(t, dyn, clusterapi.MachineDeploymentGVR, capiSet("MachineDeployment", "ostest-md", "ostest-md"))
	if err := api.InstallHyperShiftCRDs(); err != nil {
		t.Fatal(err)
	}
	np := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(`{"apiVersion":"hypershift.openshift.io/v1beta1","kind":"NodePool",
		"metadata":{"name":"hc1-workers","namespace":"openshift-machine-api"},
		"spec":{"clusterName":"hc1","replicas":2,"management":{"upgradeType":"Replace"},"release":{"image":"quay.io/x/ocp-release:4.20.0"},
		"platform":{"type":"OpenStack","openstack":{"flavor":"m1.xlarge"}}}}`), &np.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(nodepools.GVR).Namespace("openshift-machine-api").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := api.KubeconfigFor(t.TempDir(), "admin", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	storage := cloud.Seed.Networks["storage"]
	warnings := []string{"warning:default-route", "warning:dns-announced"}

	code, out, errOut := runCLI(t, "machinesets", "patch", "--network", storage, "--dry-run", "-o", "json")
	var rows []findingRow
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("machinesets patch -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n := checkFindingRows(t, "machinesets patch", rows, storage, warnings...); n != 2 {
		t.Errorf("machinesets patch: %d rows add the network, want 2:\n%s", n, out)
	}
	// The text on standard error stays as it was.
	if !strings.Contains(errOut, "warning: --network[0] "+storage+": network storage") || !strings.Contains(errOut, "fix: openstack subnet set --gateway none storage-subnet") {
		t.Errorf("machinesets patch stderr:\n%s", errOut)
	}

	code, out, errOut = runCLI(t, "clusterapi", "patch", "--network", storage, "--dry-run", "-o", "json")
	var report struct {
		Results []findingRow `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &report); code != exitOK || err != nil {
		t.Fatalf("clusterapi patch -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n := checkFindingRows(t, "clusterapi patch", report.Results, storage, warnings...); n < 1 {
		t.Errorf("clusterapi patch: no row adds the network:\n%s", out)
	}

	code, out, errOut = runCLI(t, "nodepools", "patch", "--network", storage, "--dry-run", "-o", "json")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("nodepools patch -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n := checkFindingRows(t, "nodepools patch", rows, storage, warnings...); n != 1 {
		t.Errorf("nodepools patch: %d rows add the network, want 1:\n%s", n, out)
	}

	// A network with DHCP off (fit otherwise), in a project of its own where Manila places
	// share servers on it: refused, then forced.
	p := ostest.NewProject(t, cloud, "ms-cli-forced")
	off := p.CreateNetworkWith("fj-dhcp-off", nil, map[string]any{"cidr": "10.73.0.0/24", "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}, "enable_dhcp": false})
	p.CreateShareNetwork("fj-dhcp-off", off.ID, off.SubnetIDs[0])
	project := []string{"--os-cloud", ostest.CloudName, "--os-client-config-file", p.CloudsFile}
	code, out, errOut = runCLI(t, append(project, "machinesets", "patch", "--network", off.ID, "--dry-run", "-o", "json")...)
	if code != exitInvalid || out != "" || !strings.Contains(errOut, "no subnet has DHCP enabled") || !strings.Contains(errOut, "--force attaches it anyway") {
		t.Errorf("a DHCP-less network: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, append(project, "machinesets", "patch", "--network", off.ID, "--force", "--dry-run", "-o", "json")...)
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("machinesets patch --force -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n := checkFindingRows(t, "machinesets patch --force", rows, off.ID, "error:dhcp-off:forced"); n != 2 {
		t.Errorf("machinesets patch --force: %d rows add the network, want 2:\n%s", n, out)
	}
	if !strings.Contains(out, `"id": "dhcp-off"`) || !strings.Contains(out, `"forced": true`) {
		t.Errorf("-o json field names:\n%s", out)
	}

	// A file patched in place (GitOps): the rows of -o json carry the findings too.
	original, err := os.ReadFile("../../machinesets/testdata/corpus/installer-default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "worker.yaml")
	if err := os.WriteFile(file, original, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCLI(t, "machinesets", "patch", "-f", file, "--in-place", "--network", storage, "-o", "json")
	rows = nil
	if err := json.Unmarshal([]byte(out), &rows); code != exitOK || err != nil {
		t.Fatalf("machinesets patch -f --in-place -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	if n := checkFindingRows(t, "machinesets patch -f", rows, storage, warnings...); n != 1 {
		t.Errorf("machinesets patch -f: %d rows add the network, want 1:\n%s", n, out)
	}
}
