//go:build integration

package userguide

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shareaccessrules"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/shares"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/controllers/machinery"
	"github.com/manila-setup/manila-setup/test/testenv"
)

var update = flag.Bool("update", false, "write this run's samples into docs/user-guide.md")

const guidePath = "../../docs/user-guide.md"

// The sandbox's folder as the guide names it: where `make demo` keeps it.
const guideSandbox = "/tmp/manila-setup/sandbox"

// TestUserGuideSamples produces every sample of docs/user-guide.md the way a reader would: `make
// demo` (in a folder of its own), then each command as the guide prints it, in the guide's
// order of events (install-config, discover, the wizard in a terminal, list, status, a claim),
// and compares each with the guide's.
func TestUserGuideSamples(t *testing.T) {
	cloud := testenv.NewCloud(t) // and OS_CLIENT_CONFIG_FILE, OS_CLOUD, as the guide exports them
	top, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(guidePath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	samples, err := samplesOf(lines)
	if err != nil {
		t.Fatalf("%s: %v", guidePath, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	got := map[string]string{}
	g := &guideRun{t: t, top: top, env: os.Environ()}

	// A short folder: the driver's unix socket lives in it.
	g.sandbox, err = os.MkdirTemp("", "guide-")
	if err != nil {
		t.Fatal(err)
	}
	g.env = append(g.env, "MANILA_SETUP_SANDBOX="+g.sandbox)
	t.Cleanup(func() {
		if out, err := g.make("demo-down"); err != nil {
			t.Errorf("make demo-down: %v\n%s", err, out)
		}
		_ = os.RemoveAll(g.sandbox)
	})

	// The endpoint of the guide's DeadlineExceeded: it accepts connections and never answers. The
	// driver's pods on the sandbox's real node reach it at 127.0.0.1, as they reach the cloud.
	unanswering := listenNeverAnswer(t)
	g.env = append(g.env, fmt.Sprintf("DEMO_POD_LOOPBACK_PORTS=%d", unanswering.Addr().(*net.TCPAddr).Port))

	// make demo, without a terminal: it prints the wizard's command instead of opening it.
	start := time.Now()
	out, err := g.make("demo")
	if err != nil {
		t.Fatalf("make demo: %v\n%s", err, out)
	}
	t.Logf("make demo in %s", time.Since(start).Round(time.Second))
	got["make-demo"] = "$ make demo\n" + strings.SplitN(g.asPrinted(out), "\n\n", 2)[0]
	wizard := lineAfter(out, "Run it in a terminal:")
	if !strings.Contains(wizard, "networks attach") {
		t.Fatalf("make demo printed no wizard command:\n%s", out)
	}
	kubeconfig := filepath.Join(g.sandbox, "kubeconfig")
	g.env = append(g.env, "KUBECONFIG="+kubeconfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(cfg)

	// Started now, read at the end: the provisioner waits 120 s before it gives up.
	stuck := startStuckClaim(t, ctx, kc, unanswering.Addr().String())

	// Install time, on the install-config the sandbox's cluster was installed with.
	g.dir = t.TempDir()
	cm, err := kc.CoreV1().ConfigMaps("kube-system").Get(ctx, "cluster-config-v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(g.dir, "install-config.yaml"), []byte(cm.Data["install-config"]), 0o600); err != nil {
		t.Fatal(err)
	}
	nfs := cloud.Seed.SecurityGroups["nfs"]
	got["installconfig-validate"] = g.cli(0, "manila-setup installconfig validate install-config.yaml")
	got["installconfig-patch"] = g.cli(0, "manila-setup installconfig patch install-config.yaml --discover --security-group "+nfs) +
		g.cli(0, "manila-setup installconfig validate install-config.yaml")

	// Day 2, before the attach.
	got["networks-discover"] = g.cli(0, "manila-setup networks discover")
	status := g.waitStatus(ctx, nil, `StorageNetworkReachable\s+False`)
	got["storage-network-not-reachable"] = regexp.MustCompile(`(?m)^StorageNetworkReachable\s.*$`).FindString(status)

	// The wizard, as make demo printed it, in a terminal.
	term := testenv.NewTmux(t, 100, 16, fmt.Sprintf("cd %s && env TERM=xterm-256color %s; echo EXIT=$?; sleep 600", top, wizard))
	term.WaitFor(2*time.Minute, "1/7 Connect", "✓ cloud manila-setup")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "2/7 Storage network", "› * storage")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "3/7 Security groups", "› [ ] nfs")
	term.Keys("Space")
	term.WaitFor(2*time.Minute, "[x] nfs")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "4/7 MachineSets", "ostest-demo1-worker-0")
	term.Keys("Enter")
	// The sandbox's storage subnet is as Neutron makes one: its warnings are acknowledged first.
	term.WaitFor(2*time.Minute, "5/7 Review", "! 2 warnings to acknowledge (a) before applying")
	term.Keys("a")
	term.WaitFor(2*time.Minute, "✓ 2 warnings of the storage network acknowledged")
	term.Keys("Enter")
	// Two of the three new workers boot as guest nodes (a real kernel and kubelet each): the
	// roll takes minutes, not seconds.
	rolled := term.WaitFor(12*time.Minute, "6/7 Apply and roll", "every chosen MachineSet was patched and its machines replaced")
	got["wizard-rolled"] = strings.TrimRight(trimLines(rolled), "\n")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "7/7 Verify")
	term.Keys("Enter")
	term.WaitFor(2*time.Minute, "EXIT=0")

	// After the attach: the list, then the claim of the guide, as its YAML says, provisioned by the
	// real driver.
	got["machinesets-list"] = g.cli(0, "manila-setup machinesets list")

	// The seed's demo, on the two attached workers with real kernels: make demo, run again, says
	// where the writers are; each reads the other's lines; a claim restored from a snapshot
	// holds what was written before the snapshot.
	g.rwxDemo(ctx, cfg, lines, got)
	// The operator follows the Machines a moment after the wizard ends (it coalesces their events):
	// the guide's claim is of the settled class, which admits the storage subnet only.
	storageSubnet := cloud.Seed.Subnets["storage-subnet"].CIDR
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		sc, err := kc.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{})
		return err == nil && sc.Parameters["nfs-shareClient"] == storageSubnet, nil
	}); err != nil {
		t.Fatalf("StorageClass csi-manila-default never admitted the storage subnet %s only after the rollout: %v", storageSubnet, err)
	}
	claim, share := g.claimFromGuide(ctx, kc, lines)
	got["claim"] = claim
	got["share"] = share
	got["diagnose"] = g.podFromGuide(ctx, kc, lines)

	// The stuck claim's class gone (it would show in the status), the operator's view of it all.
	got["deadline-exceeded"] = stuck.eventsThenDelete(ctx)
	// Other tests share the cloud and add share types of their own for a while; the operator
	// keeps a class when its share type goes (by design), so those classes are removed here.
	dropForeign := func() { dropForeignClasses(t, ctx, kc, cloud.Seed.ShareTypes) }
	// The NFS node plugin runs on every node: the masters, the workers and the real node.
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	everyNode := fmt.Sprintf(`daemonset/manila-csi-driver-nfs-node\s+%d/%d`, len(nodes.Items), len(nodes.Items))
	g.waitStatus(ctx, dropForeign, `StorageNetworkReachable\s+True`, `StorageClassesValid\s+True`, `healthy`, everyNode,
		`(?m)^StorageClasses: csi-manila-cephfs-fast, csi-manila-default$`, `2 StorageClasses for 2 Manila share types`)
	got["operator-status"] = g.cli(0, "manila-setup operator status")

	compare(t, lines, samples, got)
}

// rwxDemo waits for the sandbox's writers (test/env/sandbox/rwx-demo.yaml) to read each
// other's lines, samples what make demo then says and the guide's kubectl exec commands, and
// restores the claim from a snapshot as the guide's YAML says, checking that the restored share
// holds the lines written before the snapshot and none written after.
func (g *guideRun) rwxDemo(ctx context.Context, cfg *rest.Config, lines []string, got map[string]string) {
	t := g.t
	marker := filepath.Join(g.sandbox, "rwx-demo")
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 8*time.Minute, true, func(context.Context) (bool, error) {
		_, err := os.Stat(marker)
		return err == nil, nil
	}); err != nil {
		log, _ := os.ReadFile(filepath.Join(g.sandbox, "sandbox.log"))
		t.Fatalf("the sandbox's writers never read each other's lines (%s): %v\nsandbox log:\n%s", marker, err, tailText(string(log), 40))
	}
	out, err := g.make("demo")
	if err != nil {
		t.Fatalf("make demo (again): %v\n%s", err, out)
	}
	i := strings.Index(out, "Two pods on two workers")
	if i < 0 {
		t.Fatalf("make demo (again) does not say where the writers are:\n%s", out)
	}
	got["rwx-demo"] = "$ make demo\n...\n" + strings.SplitN(out[i:], "\n\n", 2)[0]

	kubectlExec := func(pod string, command ...string) string {
		t.Helper()
		out, err := testenv.ExecInPod(ctx, cfg, rwxNamespace, pod, command...)
		if err != nil {
			t.Fatalf("kubectl exec -n %s %s -- %s: %v", rwxNamespace, pod, strings.Join(command, " "), err)
		}
		return "$ kubectl exec -n " + rwxNamespace + " " + pod + " -- " + strings.Join(command, " ") + "\n" + out
	}
	var both string
	for _, pair := range [][2]string{{"writer-one", "writer-two"}, {"writer-two", "writer-one"}} {
		text := kubectlExec(pair[0], "tail", "-n", "3", "/mnt/test/"+pair[1])
		if !strings.Contains(text, pair[1]+" line ") {
			t.Fatalf("%s does not read %s's lines:\n%s", pair[0], pair[1], text)
		}
		both += text
	}
	got["rwx-demo-exec"] = both

	// The snapshot, the claim restored from it and a reader beside a writer, as the guide says.
	lineOf := func(text string) int {
		m := regexp.MustCompile(`writer-one line (\d+) `).FindAllStringSubmatch(text, -1)
		if len(m) == 0 {
			t.Fatalf("no line of writer-one in %q", text)
		}
		n, _ := strconv.Atoi(m[len(m)-1][1])
		return n
	}
	before := lineOf(kubectlExec("writer-one", "tail", "-n", "1", "/mnt/test/writer-one"))
	docs := strings.Split(yamlBlock(lines, "kind: VolumeSnapshot\n"), "\n---\n")
	if len(docs) != 3 {
		t.Fatalf("the guide's restore block: %d YAML documents, want the VolumeSnapshot, the claim and the reader", len(docs))
	}
	var snap unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(docs[0]), &snap.Object); err != nil {
		t.Fatalf("the guide's VolumeSnapshot: %v", err)
	}
	dyn := dynamic.NewForConfigOrDie(cfg)
	snapshots := dyn.Resource(schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}).Namespace(rwxNamespace)
	if _, err := snapshots.Create(ctx, &snap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		o, err := snapshots.Get(ctx, snap.GetName(), metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready, _, _ := unstructured.NestedBool(o.Object, "status", "readyToUse")
		return ready, nil
	}); err != nil {
		t.Fatalf("VolumeSnapshot %s/%s never ready to use: %v", rwxNamespace, snap.GetName(), err)
	}
	after := lineOf(kubectlExec("writer-one", "tail", "-n", "1", "/mnt/test/writer-one"))
	kc := kubernetes.NewForConfigOrDie(cfg)
	var claim corev1.PersistentVolumeClaim
	var reader corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(docs[1]), &claim); err != nil {
		t.Fatalf("the guide's restored claim: %v", err)
	}
	if err := yaml.UnmarshalStrict([]byte(docs[2]), &reader); err != nil {
		t.Fatalf("the guide's reader: %v", err)
	}
	if _, err := kc.CoreV1().PersistentVolumeClaims(rwxNamespace).Create(ctx, &claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.CoreV1().Pods(rwxNamespace).Create(ctx, &reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		p, err := kc.CoreV1().Pods(rwxNamespace).Get(ctx, reader.Name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	}); err != nil {
		p, _ := kc.CoreV1().Pods(rwxNamespace).Get(ctx, reader.Name, metav1.GetOptions{})
		t.Fatalf("the guide's reader of the restored claim never Running: %v (%+v)", err, p.Status)
	}
	restoredText := kubectlExec(reader.Name, "tail", "-n", "2", "/mnt/restored/writer-one")
	restored := lineOf(restoredText)
	if restored < before || restored > after {
		t.Errorf("the restored share's last line of writer-one is %d: want one written between the snapshot's request (%d) and its readiness (%d)", restored, before, after)
	}
	liveText := kubectlExec("writer-one", "tail", "-n", "1", "/mnt/test/writer-one")
	if live := lineOf(liveText); live <= restored {
		t.Errorf("writer-one's live file ends at line %d, the restored one at %d: the lines written after the snapshot should be in the live share only", live, restored)
	}
	got["rwx-demo-restore"] = restoredText + liveText
}

// The sandbox's demo namespace (test/env/sandbox/rwx-demo.yaml).
const rwxNamespace = "rwx-demo"

func tailText(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// guideRun runs what the guide prints, as a reader would, and returns it as the guide shows it.
type guideRun struct {
	t       *testing.T
	top     string
	dir     string // where the reader is: install-config.yaml is there
	sandbox string
	env     []string
}

func (g *guideRun) make(target string) (string, error) {
	cmd := exec.Command("make", "--no-print-directory", "-C", g.top, target)
	cmd.Env = g.env
	cmd.Stdin = nil // no terminal, as in CI
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	return b.String(), err
}

// asPrinted names the sandbox's folder as the guide does.
func (g *guideRun) asPrinted(s string) string {
	s = strings.ReplaceAll(s, g.sandbox, guideSandbox)
	return strings.ReplaceAll(s, g.top+"/", "")
}

// cli runs one command line of the guide (a space-separated manila-setup command) with the
// binary make demo built, and returns it with its output, checking the exit code.
func (g *guideRun) cli(wantExit int, line string) string {
	g.t.Helper()
	args := strings.Fields(line)
	cmd := exec.Command(filepath.Join(g.top, "bin", args[0]), args[1:]...)
	cmd.Dir, cmd.Env = g.dir, g.env
	var b bytes.Buffer
	cmd.Stdout, cmd.Stderr = &b, &b
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		g.t.Fatalf("%s: %v", line, err)
	}
	if code != wantExit {
		g.t.Fatalf("%s: exit %d, want %d\n%s", line, code, wantExit, b.String())
	}
	return "$ " + line + "\n" + g.asPrinted(b.String())
}

// waitStatus runs `operator status` until its output matches every pattern (the operator
// resyncs on its own time) and stays the same for longer than machinery.MessageRefresh, and
// returns it; prepare, when set, runs before each try. The wait for a steady output is what
// makes the guide's samples of it repeatable: a condition's message may follow its status by up
// to MessageRefresh (a count of pods, say), and a sample must show the settled words.
func (g *guideRun) waitStatus(ctx context.Context, prepare func(), patterns ...string) string {
	g.t.Helper()
	var out, matched string
	var matchedAt time.Time
	err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(context.Context) (bool, error) {
		if prepare != nil {
			prepare()
		}
		out = g.cli(0, "manila-setup operator status")
		for _, p := range patterns {
			if !regexp.MustCompile(p).MatchString(out) {
				matched = ""
				return false, nil
			}
		}
		if out != matched {
			matched, matchedAt = out, time.Now()
			return false, nil
		}
		return time.Since(matchedAt) > machinery.MessageRefresh+2*time.Second, nil
	})
	if err != nil {
		g.t.Fatalf("operator status never matched %q: %v\n%s", patterns, err, out)
	}
	return out
}

// claimFromGuide creates the claim of the guide's YAML, waits until the real driver binds it,
// and returns the two samples about it: kubectl's tables (the apiserver's own, as `kubectl get`
// prints them) and the share in Manila. It deletes the claim, and so the share, afterwards.
// podFromGuide creates the guide's pod that mounts its claim, waits until diagnose passes every
// check (the pod scheduled and running, the node plugins registered in its node's CSINode), and
// returns that run of diagnose as the guide prints it.
func (g *guideRun) podFromGuide(ctx context.Context, kc kubernetes.Interface, lines []string) string {
	t := g.t
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(yamlBlock(lines, "\nkind: Pod\n")), &pod); err != nil {
		t.Fatalf("the guide's pod: %v", err)
	}
	if _, err := kc.CoreV1().Pods(pod.Namespace).Create(ctx, &pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Before the claim's own cleanup: a claim a pod uses is not deleted.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = kc.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, *metav1.NewDeleteOptions(0))
	})
	line := "manila-setup diagnose pod/" + pod.Name + " -n " + pod.Namespace
	var out string
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(g.top, "bin", "manila-setup"), strings.Fields(line)[1:]...)
		cmd.Dir, cmd.Env = g.dir, g.env
		b, err := cmd.CombinedOutput()
		out = string(b)
		return err == nil, nil
	}); err != nil {
		t.Fatalf("%s never passed every check: %v\n%s", line, err, out)
	}
	return g.cli(0, line)
}

func (g *guideRun) claimFromGuide(ctx context.Context, kc kubernetes.Interface, lines []string) (string, string) {
	t := g.t
	var pvc corev1.PersistentVolumeClaim
	if err := yaml.UnmarshalStrict([]byte(yamlBlock(lines, "kind: PersistentVolumeClaim")), &pvc); err != nil {
		t.Fatalf("the guide's claim: %v", err)
	}
	ensureNamespace(t, ctx, kc, pvc.Namespace)
	if _, err := kc.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, &pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var bound *corev1.PersistentVolumeClaim
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		c, err := kc.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(ctx, pvc.Name, metav1.GetOptions{})
		bound = c
		return err == nil && c.Status.Phase == corev1.ClaimBound, err
	}); err != nil {
		t.Fatalf("the guide's claim was not bound: %v (%+v)", err, bound)
	}
	pv, err := kc.CoreV1().PersistentVolumes().Get(ctx, bound.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = kc.CoreV1().PersistentVolumeClaims(pvc.Namespace).Delete(ctx, pvc.Name, metav1.DeleteOptions{})
		// The driver deletes the share before the volume goes: wait, or the share outlives the sandbox.
		_ = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := kc.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		})
	})
	var claim strings.Builder
	fmt.Fprintf(&claim, "$ kubectl get pvc -n %s %s\n", pvc.Namespace, pvc.Name)
	claim.WriteString(serverTable(t, ctx, kc, pvc.Namespace, "persistentvolumeclaims", pvc.Name, nil))
	fmt.Fprintf(&claim, "$ kubectl get pv %s -o custom-columns=CLAIM:.spec.claimRef.name,SHARE:.spec.csi.volumeHandle\n", pv.Name)
	w := tabwriter.NewWriter(&claim, 5, 8, 3, ' ', 0)
	fmt.Fprintf(w, "CLAIM\tSHARE\n%s\t%s\n", pv.Spec.ClaimRef.Name, pv.Spec.CSI.VolumeHandle)
	_ = w.Flush()

	manila, err := testenv.ManilaClient(ctx, testenv.CloudDemo)
	if err != nil {
		t.Fatal(err)
	}
	id := pv.Spec.CSI.VolumeHandle
	s, err := shares.Get(ctx, manila, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	var rules []shareaccessrules.ShareAccess
	if err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		rules, err = shareaccessrules.List(ctx, manila, id).Extract()
		return err == nil && len(rules) > 0 && rules[0].State == "active", err
	}); err != nil {
		t.Fatalf("access rules of share %s: %v (%+v)", id, err, rules)
	}
	locations, err := shares.ListExportLocations(ctx, manila, id).Extract()
	if err != nil {
		t.Fatal(err)
	}
	var share strings.Builder
	fmt.Fprintf(&share, "name %s, status %s, size %d, share_proto %s, share_type_name %s\n", s.Name, s.Status, s.Size, s.ShareProto, s.ShareTypeName)
	keys := make([]string, 0, len(s.Metadata))
	for k := range s.Metadata {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var md []string
	for _, k := range keys {
		md = append(md, k+" "+s.Metadata[k])
	}
	fmt.Fprintf(&share, "metadata: %s\n", strings.Join(md, ", "))
	for _, r := range rules {
		fmt.Fprintf(&share, "access: %s %s %s %s\n", r.AccessType, r.AccessTo, r.AccessLevel, r.State)
	}
	for _, l := range locations {
		pref := ""
		if l.Preferred {
			pref = " (preferred)"
		}
		fmt.Fprintf(&share, "export: %s%s\n", l.Path, pref)
	}
	return claim.String(), share.String()
}

// stuckClaim is the guide's DeadlineExceeded: a StorageClass whose Secret points at an auth URL
// where something accepts connections and never answers.
type stuckClaim struct {
	t         *testing.T
	class     string
	kc        kubernetes.Interface
	namespace string
	name      string
}

// listenNeverAnswer listens on a port of 127.0.0.1, accepts every connection and never answers,
// until the test ends.
func listenNeverAnswer(t *testing.T) net.Listener {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	return l
}

func startStuckClaim(t *testing.T, ctx context.Context, kc kubernetes.Interface, authAddress string) *stuckClaim {
	const class = "demo-keystone-unreachable"
	s := &stuckClaim{t: t, kc: kc, class: class, namespace: "demo-app", name: "stuck"}
	ensureNamespace(t, ctx, kc, s.namespace)
	// The driver's Secret, with the auth URL of nothing that answers.
	var secret *corev1.Secret
	var err error
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		secret, err = kc.CoreV1().Secrets(operator.DefaultNamespace).Get(ctx, operator.DriverSecretName, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the driver Secret: %v", err)
	}
	// A copy of the driver's default class and Secret, but for the auth URL.
	def, err := kc.StorageV1().StorageClasses().Get(ctx, "csi-manila-default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{}
	for k, v := range secret.Data {
		data[k] = v
	}
	data["os-authURL"] = []byte("http://" + authAddress + "/v3")
	// In the driver's namespace: the only one whose Secrets its controller may read.
	if _, err := kc.CoreV1().Secrets(operator.DefaultNamespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: class}, Data: data}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: def.Provisioner,
		ReclaimPolicy: def.ReclaimPolicy, Parameters: map[string]string{}}
	for k, v := range def.Parameters {
		switch {
		case strings.HasSuffix(k, "-secret-name"):
			v = class
		case strings.HasSuffix(k, "-secret-namespace"):
			v = operator.DefaultNamespace
		}
		sc.Parameters[k] = v
	}
	if _, err := kc.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		s.delete(ctx)
	})
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := kc.CoreV1().PersistentVolumeClaims(s.namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return s
}

// eventsThenDelete waits for the provisioner to give up on the stuck claim, returns the failure
// as `kubectl get events` prints it, and deletes the claim and its class.
func (s *stuckClaim) eventsThenDelete(ctx context.Context) string {
	t := s.t
	// Only the failure: the other events of the claim come in an order that varies. Of the
	// failures, the deadline's: whether the provisioner's retry has met the driver still busy
	// with the first call ("Aborted ... already being processed") when this reads depends on the
	// moment, so that row is left out.
	selector := "involvedObject.name=" + s.name + ",reason=ProvisioningFailed"
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := s.kc.CoreV1().Events(s.namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
		return err == nil && slices.ContainsFunc(list.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, "DeadlineExceeded") }), nil
	}); err != nil {
		t.Fatalf("the stuck claim never failed: %v", err)
	}
	table := strings.Split(serverTable(t, ctx, s.kc, s.namespace, "events", "", map[string]string{"fieldSelector": selector}), "\n")
	kept := table[:1]
	for _, row := range table[1:] {
		if strings.Contains(row, "DeadlineExceeded") {
			kept = append(kept, row)
		}
	}
	out := fmt.Sprintf("$ kubectl get events -n %s --field-selector %s\n", s.namespace, selector) + strings.Join(kept, "\n") + "\n"
	s.delete(ctx)
	return out
}

func (s *stuckClaim) delete(ctx context.Context) {
	_ = s.kc.CoreV1().PersistentVolumeClaims(s.namespace).Delete(ctx, s.name, metav1.DeleteOptions{})
	_ = s.kc.StorageV1().StorageClasses().Delete(ctx, s.class, metav1.DeleteOptions{})
	_ = s.kc.CoreV1().Secrets(operator.DefaultNamespace).Delete(ctx, s.class, metav1.DeleteOptions{})
}

// serverTable is the apiserver's table of a resource (what kubectl get shows: it asks for the
// same table), printed the way kubectl prints it.
func serverTable(t *testing.T, ctx context.Context, kc kubernetes.Interface, namespace, resource, name string, params map[string]string) string {
	t.Helper()
	req := kc.CoreV1().RESTClient().Get().Namespace(namespace).Resource(resource).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	if name != "" {
		req = req.Name(name)
	}
	for k, v := range params {
		req = req.Param(k, v)
	}
	raw, err := req.DoRaw(ctx)
	if err != nil {
		t.Fatalf("table of %s %s/%s: %v", resource, namespace, name, err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	w := tabwriter.NewWriter(&b, 10, 4, 3, ' ', 0) // kubectl's
	var cols []int
	var header []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			cols = append(cols, i)
			header = append(header, strings.ToUpper(c.Name))
		}
	}
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, row := range table.Rows {
		var cells []string
		for _, i := range cols {
			cells = append(cells, fmt.Sprint(row.Cells[i]))
		}
		fmt.Fprintln(w, strings.Join(cells, "\t"))
	}
	_ = w.Flush()
	return b.String()
}

// compare checks each sample against the guide, or with -update writes them into it.
func compare(t *testing.T, lines []string, samples []sample, got map[string]string) {
	t.Helper()
	for name, text := range got {
		got[name] = trimLines(text) // tables pad their last column
	}
	produced := map[string]bool{}
	for name := range got {
		produced[name] = true
	}
	marked := map[string]bool{}
	for _, s := range samples {
		if marked[s.name] {
			t.Errorf("%s line %d: a second block is marked %q", guidePath, s.start, s.name)
			continue
		}
		marked[s.name] = true
		text, ok := got[s.name]
		if !ok {
			t.Errorf("%s line %d: sample %q is produced by no step of this test", guidePath, s.start, s.name)
			continue
		}
		want := s.text(lines)
		if normalized(text) == normalized(want) {
			delete(got, s.name) // -update leaves it as it is: no churn of IDs and times
			continue
		}
		if !*update {
			t.Errorf("%s line %d: sample %q differs from what the product prints now (go test -tags integration ./test/userguide -update rewrites it).\n--- the guide:\n%s\n--- now:\n%s",
				guidePath, s.start, s.name, want, text)
		}
	}
	for name := range produced {
		if !marked[name] {
			t.Errorf("%s: no block is marked <!-- sample: %s -->", guidePath, name)
		}
	}
	if *update {
		if err := os.WriteFile(guidePath, []byte(strings.Join(replaced(lines, samples, got), "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d samples rewritten", guidePath, len(got))
	}
}

func ensureNamespace(t *testing.T, ctx context.Context, kc kubernetes.Interface, name string) {
	t.Helper()
	_, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// yamlBlock is the guide's YAML block that contains what.
func yamlBlock(lines []string, what string) string {
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```yaml" {
			continue
		}
		var b []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			b = append(b, lines[i])
		}
		if text := strings.Join(b, "\n"); strings.Contains(text, what) {
			return text
		}
	}
	return ""
}

// lineAfter is the line after the one containing marker, trimmed.
func lineAfter(text, marker string) string {
	ls := strings.Split(text, "\n")
	for i, l := range ls {
		if strings.Contains(l, marker) && i+1 < len(ls) {
			return strings.TrimSpace(ls[i+1])
		}
	}
	return ""
}

// trimLines drops the spaces at the ends of a screen's lines.
func trimLines(s string) string {
	ls := strings.Split(s, "\n")
	for i := range ls {
		ls[i] = strings.TrimRight(ls[i], " ")
	}
	return strings.Join(ls, "\n")
}

// dropForeignClasses deletes the operator's StorageClasses for share types the cloud was not
// seeded with (another test's, made and removed while this one ran).
func dropForeignClasses(t *testing.T, ctx context.Context, kc kubernetes.Interface, seeded map[string]string) {
	list, err := kc.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{LabelSelector: operator.LabelManagedBy + "=" + operator.ManagedByValue})
	if err != nil {
		t.Logf("listing StorageClasses: %v", err)
		return
	}
	for _, sc := range list.Items {
		if _, ok := seeded[sc.Annotations[operator.AnnotationShareType]]; !ok {
			t.Logf("removing StorageClass %s of share type %q, another test's", sc.Name, sc.Annotations[operator.AnnotationShareType])
			_ = kc.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{})
		}
	}
}
