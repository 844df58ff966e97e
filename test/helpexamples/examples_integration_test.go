//go:build integration

package helpexamples

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// verdict says what becomes of one example here: run, with the exit code it must end with, or
// not run, and why.
type verdict struct {
	exit  int    // the exit code the example documents (0 unless it says otherwise)
	stdin string // a file of the working folder the example's shell line pipes in
	skip  string // why it cannot run against the sandbox; empty: it runs
}

// verdicts holds every runnable command line that a --help prints (synopses such as
// "machinesets rollout [--name N]" are only parsed, by cmd/manila-setup's
// TestHelpExamplesParse). A new example fails the test until it is added here.
var verdicts = map[string]verdict{
	// Read-only, or writing only files of the example's working folder.
	"manila-setup completion bash":                                                                                  {},
	"manila-setup installconfig validate install-config.yaml":                                                       {},
	"manila-setup installconfig validate --os-cloud openstack install-config.yaml":                                  {},
	"manila-setup installconfig validate -o json install-config.yaml":                                               {},
	"manila-setup installconfig validate -":                                                                         {stdin: "install-config.yaml"},
	"manila-setup installconfig patch install-config.yaml --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --dry-run": {},
	"manila-setup installconfig patch install-config.yaml --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --security-group 0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37": {},
	"manila-setup installconfig patch install-config.yaml --network ID --pool worker --control-plane":                                                           {},
	"manila-setup installconfig patch install-config.yaml --os-cloud mycloud --discover --dry-run":                                                              {},
	"manila-setup networks discover":                                                                                         {},
	"manila-setup networks discover --os-cloud mycloud":                                                                      {},
	"manila-setup networks discover --kubeconfig ~/ocp/auth/kubeconfig -o json":                                              {},
	"manila-setup networks discover --infra-id mycluster-x7k2p --security-group 5f3c...":                                     {},
	"manila-setup networks list --os-cloud mycloud":                                                                          {},
	"manila-setup networks list -o json":                                                                                     {},
	"manila-setup machinesets list":                                                                                          {},
	"manila-setup controlplane list":                                                                                         {},
	"manila-setup controlplane patch --network <storage network ID> --security-group <security group ID> --dry-run":          {},
	"manila-setup controlplane patch --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --security-group 77c0a1d2-... --dry-run": {},
	// The sandbox's masters are all on the template: nothing to replace.
	"manila-setup controlplane rollout": {},
	"manila-setup machinesets patch --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --dry-run":                                            {},
	"manila-setup machinesets patch -f clusters/prod/worker-machinesets.yaml --network 5f0c3b7e-... --in-place":                          {},
	"manila-setup clusterapi patch -f clusters/prod/machines.yaml --network 5f0c3b7e-... --in-place":                                     {},
	"manila-setup controlplane patch -f clusters/prod/controlplane.yaml --network 5f0c3b7e-... --security-group 77c0a1d2-... --in-place": {},
	"manila-setup operator render": {},
	// The sandbox's MachineSet and the fixtures carry no attachment record: nothing to remove.
	"manila-setup machinesets patch --remove --dry-run":                                                                                      {},
	"manila-setup machinesets patch --remove -f clusters/prod/worker-machinesets.yaml --in-place":                                            {},
	"manila-setup clusterapi patch --remove -f clusters/prod/machines.yaml --in-place":                                                       {},
	"manila-setup controlplane patch --remove --dry-run":                                                                                     {},
	"manila-setup installconfig patch install-config.yaml --remove --network 2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55 --control-plane --dry-run": {},
	"manila-setup operator uninstall --dry-run":                                                                                              {},
	"manila-setup operator bundle -d bundle":                                                                                                 {},
	"manila-setup storageclasses check":                                                                                                      {},
	"manila-setup must-gather --dest-dir ./manila-must-gather --os-cloud mycloud":                                                            {},
	"manila-setup storageclasses check --os-cloud mycloud -o json":                                                                           {},

	// Not run here.
	"manila-setup networks attach --os-cloud mycloud --kubeconfig ~/ocp/auth/kubeconfig":                                               {skip: "the interactive wizard: it needs a terminal (test/userguide drives it in tmux)"},
	"manila-setup networks attach --dry-run":                                                                                           {skip: "the interactive wizard, even when dry: it needs a terminal"},
	"manila-setup machinesets patch --network <storage network ID> --security-group <security group ID>":                               {skip: "writes the cluster's MachineSets (cmd/manila-setup's machinesets tests run it on a throw-away apiserver)"},
	"manila-setup machinesets patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --name mycluster-x7k2p-worker-0":              {skip: "writes the cluster's MachineSet"},
	"manila-setup machinesets rollout":                                                                                                 {skip: "replaces the cluster's machines"},
	"manila-setup controlplane patch --discover --security-group 77c0a1d2-...":                                                         {skip: "writes the cluster's ControlPlaneMachineSet, and its operator then replaces the three masters (test/e2e's TestCompactJourney runs it on real masters)"},
	"manila-setup controlplane patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --rollout":                                   {skip: "replaces the cluster's masters (test/realmachines' TestControlPlanePatchRollsRealMasters runs it on real masters)"},
	"manila-setup diagnose pod/app-0 -n shop":                                                                                          {skip: "the sandbox runs no application pod (test/e2e's TestDiagnose runs diagnose on pods and claims of its own)"},
	"manila-setup diagnose pvc/data -n shop --os-cloud mycloud -o json":                                                                {skip: "the sandbox has no application claim (test/e2e's TestDiagnose runs diagnose on pods and claims of its own)"},
	"manila-setup diagnose volumesnapshot/data-daily -n shop --os-cloud mycloud":                                                       {skip: "the sandbox has no application snapshot (test/e2e's TestDriverRunsOnARealNode runs diagnose on VolumeSnapshots of its own)"},
	"manila-setup clusterapi patch --network <storage network ID> --security-group <security group ID>":                                {skip: "writes Cluster API objects; the sandbox is a standalone cluster without Cluster API"},
	"manila-setup clusterapi patch --network 5f0c3b7e-... --security-group 77c0a1d2-... --dry-run":                                     {skip: "needs a Cluster API management cluster; the sandbox has none (clusterapi_integration_test.go runs patch on one)"},
	"manila-setup clusterapi patch -n capi-clusters --network 5f0c3b7e-... --name machinedeployment/md-0":                              {skip: "writes Cluster API objects; the sandbox has none"},
	"manila-setup clusterapi rollout":                                                                                                  {skip: "replaces machines of a Cluster API management cluster; the sandbox has none"},
	"manila-setup clusterapi rollout -n capi-clusters --name md-0-workers --max-surge 2":                                               {skip: "replaces machines of a Cluster API management cluster; the sandbox has none"},
	"manila-setup nodepools patch --kubeconfig mgmt.kubeconfig --network 5f0c3b7e-... --hosted-cluster hc1 --dry-run":                  {skip: "needs a HyperShift management cluster with HostedCluster hc1; the sandbox is a standalone cluster (nodepools_integration_test.go covers patch)"},
	"manila-setup operator install --os-cloud mycloud":                                                                                 {skip: "deploys the operator into the cluster and writes its credentials; the sandbox already runs it"},
	"manila-setup machinesets patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name mycluster-x7k2p-worker-0 --rollout": {skip: "writes and rolls the cluster's MachineSet (machinesets' TestMachineSetsRemoveRollout runs it)"},
	"manila-setup clusterapi patch --remove --dry-run":                                                                                 {skip: "needs a Cluster API management cluster; the sandbox has none (clusterapi's TestClusterAPIRemove runs it)"},
	"manila-setup clusterapi patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name machineset/ocp-worker-0":             {skip: "writes Cluster API objects; the sandbox has none"},
	"manila-setup nodepools patch --remove --hosted-cluster hc1 --dry-run":                                                             {skip: "needs a HyperShift management cluster; the sandbox has none (nodepools' TestNodePoolsRemove runs it)"},
	"manila-setup nodepools patch --remove --network 5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c --name clusters/hc1-workers --force":         {skip: "writes a NodePool of a HyperShift management cluster; the sandbox has none"},
	"manila-setup nodepools patch --remove -f clusters/hc1/nodepools.yaml --in-place":                                                  {skip: "no NodePool file among the fixtures (nodepools' TestNodePoolsRemove runs -f both ways)"},
	"manila-setup operator uninstall --keep-driver":                                                                                    {skip: "deletes the sandbox's operator (test/e2e's TestUninstall runs it)"},
	"manila-setup operator uninstall --force -o yaml":                                                                                  {skip: "deletes the sandbox's operator and driver (test/e2e's TestUninstall runs it)"},
}

// sandbox is what the examples run against: make demo's cluster and the loopback cloud.
type sandbox struct {
	top        string // the repository: bin/manila-setup, the fixtures
	dir        string // make demo's folder
	env        []string
	kubeconfig string
	cloud      *testenv.Cloud
	installCfg []byte // the install-config the sandbox cluster was installed with
}

// substitutions are the names the examples print and what stands for each here, word for word.
func (s *sandbox) substitutions() map[string]string {
	storage := s.cloud.Seed.Networks["storage"]
	nfs := s.cloud.Seed.SecurityGroups["nfs"]
	return map[string]string{
		// The cloud of clouds.yaml.
		"mycloud":   testenv.CloudDemo,
		"openstack": testenv.CloudDemo,
		// The cluster.
		"~/ocp/auth/kubeconfig":    s.kubeconfig,
		"mgmt.kubeconfig":          s.kubeconfig,
		"mycluster-x7k2p":          sandboxInfraID,
		"mycluster-x7k2p-worker-0": sandboxInfraID + "-worker-0",
		// The storage network.
		"5f0c3b7e-...":                         storage,
		"5f0c3b7e-2a4d-4c1e-9b8a-0d6e1f2a3b4c": storage,
		"2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55": storage,
		"ID":                                   storage,
		"storage_network_ID":                   storage, // <storage network ID>
		"security_group_ID":                    nfs,     // <security group ID>
		// The security group that lets NFS in.
		"77c0a1d2-...":                         nfs,
		"0b8e3c1d-52d4-4f7e-8a0c-6c9d2e4f1a37": nfs,
		"5f3c...":                              nfs,
	}
}

// releaseVersion is the version bin/manila-setup is built with here.
const releaseVersion = "v0.0.0-helpexamples"

// sandboxInfraID is the infrastructure name of this test's make demo cluster (DEMO_INFRA_ID):
// not the default ostest-demo1 of test/userguide's sandbox, which runs on the same cloud at the
// same time. The sandboxes' servers are named after it, and each one's teardown deletes the
// servers of its name.
const sandboxInfraID = "ostest-helpex1"

// files are the files the examples name, relative to their working folder, and where each
// comes from: a fresh copy for every example, so that one that writes changes no other's.
func (s *sandbox) files(t *testing.T) map[string][]byte {
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(s.top, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return map[string][]byte{
		"install-config.yaml":                   s.installCfg, // the sandbox cluster's own, as test/userguide uses it
		"clusters/prod/worker-machinesets.yaml": read("machinesets/testdata/corpus/installer-default.yaml"),
		"clusters/prod/machines.yaml":           read("clusterapi/testdata/file/openshift-cluster-api.yaml"),
		"clusters/prod/controlplane.yaml":       read("machinesets/testdata/controlplane/gitops.yaml"),
	}
}

// TestHelpExamplesRun runs every example of every --help of the built binary that is safe to
// run against make demo's sandbox and the loopback cloud, each in a fresh folder with the
// fixtures, and checks its exit code; the others are listed in verdicts with the reason.
func TestHelpExamplesRun(t *testing.T) {
	s := startSandbox(t)
	examples := helpExamples(t, s)

	seen := map[string]bool{}
	for _, ex := range examples {
		if ex.Synopsis || seen[ex.Line] {
			continue
		}
		seen[ex.Line] = true
		v, ok := verdicts[ex.Line]
		switch {
		case !ok:
			t.Errorf("%q (%s of a --help) is neither run nor listed as not runnable: add it to verdicts", ex.Line, ex.Source)
		case v.skip != "":
			t.Logf("not run: %s: %s", ex.Line, v.skip)
		default:
			t.Run(ex.Line, func(t *testing.T) { s.run(t, ex, v) })
		}
	}
	for _, line := range sortedKeys(verdicts) {
		if !seen[line] {
			t.Errorf("verdicts lists %q, which no --help prints any more", line)
		}
	}
}

// startSandbox brings up make demo's sandbox in a folder of its own (it reuses the loopback
// cloud of MANILA_SETUP_RUN), as test/userguide does, and stops it when the test ends.
func startSandbox(t *testing.T) *sandbox {
	cloud := testenv.NewCloud(t)
	top, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// A short folder: the driver's unix socket lives in it.
	dir, err := os.MkdirTemp("", "helpex-")
	if err != nil {
		t.Fatal(err)
	}
	s := &sandbox{top: top, dir: dir, cloud: cloud, kubeconfig: filepath.Join(dir, "kubeconfig")}
	// Built as a release is, with a semantic version: operator bundle takes the build's version,
	// and refuses a commit hash (an untagged checkout) with a usage error that names --version.
	// No real node: the examples are the CLI's, which a kwok cluster answers alike, and the
	// machine's one real node is for the tests that run pods (test/e2e, test/userguide).
	s.env = append(os.Environ(), "MANILA_SETUP_SANDBOX="+dir, "VERSION="+releaseVersion, "DEMO_REAL_NODE=off",
		"DEMO_INFRA_ID="+sandboxInfraID)
	t.Cleanup(func() {
		if out, err := s.make("demo-down"); err != nil {
			t.Errorf("make demo-down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(dir)
	})
	start := time.Now()
	if out, err := s.make("demo"); err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	t.Logf("make demo in %s", time.Since(start).Round(time.Second))
	s.env = append(s.env, "KUBECONFIG="+s.kubeconfig)

	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm, err := kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-config-v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.installCfg = []byte(cm.Data["install-config"])
	return s
}

func (s *sandbox) make(target string) (string, error) {
	cmd := exec.Command("make", "--no-print-directory", "-C", s.top, target)
	cmd.Env = s.env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// helpExamples walks the command tree as a user would, through each command's --help (its
// subcommands as listed), and returns the examples of them all.
func helpExamples(t *testing.T, s *sandbox) []Example {
	var out []Example
	var walk func(path []string)
	walk = func(path []string) {
		help, code := s.cli(t, s.dir, "", append(path, "--help")...)
		if code != 0 {
			t.Fatalf("%s %s --help: exit %d\n%s", Program, strings.Join(path, " "), code, help)
		}
		out = append(out, FromHelp(help)...)
		for _, sub := range Subcommands(help) {
			walk(append(append([]string{}, path...), sub))
		}
	}
	walk(nil)
	if len(out) < 40 {
		t.Fatalf("only %d command lines in the help texts: the walk or the extraction is broken", len(out))
	}
	return out
}

// run runs one example, its names replaced as substitutions says, in a fresh folder holding
// the files, and checks its exit code.
func (s *sandbox) run(t *testing.T, ex Example, v verdict) {
	dir := t.TempDir()
	for name, content := range s.files(t) {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	subst := s.substitutions()
	args := make([]string, len(ex.Args))
	for i, a := range ex.Args {
		args[i] = a
		if to, ok := subst[a]; ok {
			args[i] = to
		}
	}
	stdin := ""
	if v.stdin != "" {
		stdin = filepath.Join(dir, v.stdin)
	}
	out, code := s.cli(t, dir, stdin, args...)
	if code != v.exit {
		t.Errorf("%s\nran as: %s %s\nexit %d, want %d\n%s", ex.Line, Program, strings.Join(args, " "), code, v.exit, out)
		return
	}
	t.Logf("%s %s: exit %d", Program, strings.Join(args, " "), code)
}

// cli runs bin/manila-setup (make demo built it) and returns its output and exit code.
func (s *sandbox) cli(t *testing.T, dir, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(s.top, "bin", Program), args...)
	cmd.Dir, cmd.Env = dir, s.env
	if stdin != "" {
		f, err := os.Open(stdin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		cmd.Stdin = f
	}
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return b.String(), exit.ExitCode()
	case err != nil:
		t.Fatalf("%s %s: %v", Program, strings.Join(args, " "), err)
	}
	return b.String(), 0
}

// sortedKeys is for stable messages.
func sortedKeys(m map[string]verdict) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
