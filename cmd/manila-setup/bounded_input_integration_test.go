//go:build integration

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// maxRSS is what a reading command may use at most, whatever it is given.
const maxRSS = 300 << 20

// readingCommand is a command of the CLI that reads a file, with FILE where the file goes.
type readingCommand struct {
	name string
	args []string
	kind inputfile.Kind
	// atLimit is a file of exactly kind.Max bytes, as dense as such a file gets; its run must
	// not be refused for its size.
	atLimit func(t *testing.T) []byte
}

const boundedNet = "2f2d0c9e-6a3b-4bb6-9a36-2a8d3c7f1e55"

func readingCommands() []readingCommand {
	machineSets := func(t *testing.T) []byte {
		return repeatToLimit(t, "../../machinesets/testdata/corpus/installer-default.yaml", "ostest-8x2kq-worker-0", "---\n", inputfile.MachineSets.Max)
	}
	padded := func(path string, max int64) func(t *testing.T) []byte {
		return func(t *testing.T) []byte {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return padToLimit(t, data, max)
		}
	}
	nodePool := "apiVersion: hypershift.openshift.io/v1beta1\nkind: NodePool\nmetadata:\n  name: hc1-workers\n  namespace: clusters\nspec:\n  clusterName: hc1\n  replicas: 2\n  platform:\n    type: OpenStack\n    openstack:\n      flavor: m1.large\n"
	return []readingCommand{
		{"machinesets patch -f", []string{"machinesets", "patch", "-f", "FILE", "--network", boundedNet, "--dry-run"}, inputfile.MachineSets, machineSets},
		{"machinesets patch --remove -f", []string{"machinesets", "patch", "--remove", "-f", "FILE", "--network", boundedNet, "--dry-run"}, inputfile.MachineSets, machineSets},
		{"clusterapi patch -f", []string{"clusterapi", "patch", "-f", "FILE", "--network", boundedNet, "--dry-run"}, inputfile.ClusterAPI,
			padded("../../clusterapi/testdata/file/openshift-cluster-api.yaml", inputfile.ClusterAPI.Max)},
		{"nodepools patch -f", []string{"nodepools", "patch", "-f", "FILE", "--network", boundedNet, "--dry-run"}, inputfile.NodePools,
			func(t *testing.T) []byte { return padToLimit(t, []byte(nodePool), inputfile.NodePools.Max) }},
		{"installconfig validate", []string{"installconfig", "validate", "FILE"}, inputfile.InstallConfig, denseInstallConfig},
		{"installconfig patch", []string{"installconfig", "patch", "FILE", "--network", boundedNet, "--dry-run"}, inputfile.InstallConfig, denseInstallConfig},
		{"--kubeconfig", []string{"machinesets", "list", "--kubeconfig", "FILE"}, inputfile.Kubeconfig, nil},
		{"--os-client-config-file", []string{"networks", "list", "--os-cloud", "mine", "--os-client-config-file", "FILE"}, inputfile.CloudsYAML, nil},
	}
}

// TestEveryReadIsBounded runs each command that reads a file, as users run it, on /dev/zero, on
// a file one byte over its limit and on one of exactly its limit: the first two are refused
// with the limit named, and none uses more than maxRSS, measured as the child's peak resident
// memory.
func TestEveryReadIsBounded(t *testing.T) {
	bin := buildCLI(t)
	dir := t.TempDir()
	for _, c := range readingCommands() {
		t.Run(c.name, func(t *testing.T) {
			tooLarge := fmt.Sprintf("is larger than %s; %s is not", inputfile.Size(c.kind.Max), c.kind.Name)
			over := filepath.Join(dir, "over")
			if err := os.WriteFile(over, bytes.Repeat([]byte("#"), int(c.kind.Max)+1), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, file := range []string{"/dev/zero", over} {
				code, stderr, rss := runBounded(t, bin, c.args, file)
				if code == 0 || !strings.Contains(stderr, file+" "+tooLarge) {
					t.Errorf("%s: exit %d, stderr %q; want it refused: %q", file, code, stderr, tooLarge)
				}
				if rss > maxRSS {
					t.Errorf("%s: peak memory %d MiB, more than %d MiB", file, rss>>20, maxRSS>>20)
				}
				t.Logf("%s: exit %d, peak %d MiB", file, code, rss>>20)
			}
			if c.atLimit == nil {
				return
			}
			at := filepath.Join(dir, "at-limit")
			data := c.atLimit(t)
			if int64(len(data)) != c.kind.Max {
				t.Fatalf("the file at the limit has %d bytes, want %d", len(data), c.kind.Max)
			}
			if err := os.WriteFile(at, data, 0o600); err != nil {
				t.Fatal(err)
			}
			code, stderr, rss := runBounded(t, bin, c.args, at)
			if strings.Contains(stderr, "is larger than") {
				t.Errorf("a file of exactly the limit was refused: exit %d, %s", code, stderr)
			}
			if rss > maxRSS {
				t.Errorf("at the limit: peak memory %d MiB, more than %d MiB", rss>>20, maxRSS>>20)
			}
			t.Logf("exactly %s: exit %d, peak %d MiB", inputfile.Size(c.kind.Max), code, rss>>20)
		})
	}
}

// TestEveryReadStopsOnCtrlC runs each reading command on a FIFO whose writer sends a little
// and never closes, and on one nobody opens for writing: Ctrl-C ends each within the bound, with
// exit 130 and what had been read.
func TestEveryReadStopsOnCtrlC(t *testing.T) {
	bin := buildCLI(t)
	for _, c := range readingCommands() {
		t.Run(c.name, func(t *testing.T) {
			for _, writer := range []bool{true, false} {
				fifo := filepath.Join(t.TempDir(), "fifo")
				if err := syscall.Mkfifo(fifo, 0o600); err != nil {
					t.Fatal(err)
				}
				if writer {
					// Read-write: the open does not wait for a reader, and the FIFO never
					// reaches end of file while the test holds it.
					w, err := os.OpenFile(fifo, os.O_RDWR, 0)
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
					if _, err := w.Write([]byte("# the start of a file\n")); err != nil {
						t.Fatal(err)
					}
				}
				cmd := exec.Command(bin, withFile(c.args, fifo)...)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent", "OS_CLIENT_CONFIG_FILE=/nonexistent")
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				waitBlockedOn(t, cmd.Process.Pid, fifo, writer)
				sent := time.Now()
				if err := cmd.Process.Signal(os.Interrupt); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- cmd.Wait() }()
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					_ = cmd.Process.Kill()
					<-done
					t.Fatalf("writer %v: Ctrl-C did not stop it within 5 s; stderr: %s", writer, stderr.String())
				}
				code := cmd.ProcessState.ExitCode()
				if code != 130 || !strings.Contains(stderr.String(), "stopped while reading "+fifo) {
					t.Errorf("writer %v: exit %d, stderr %q; want 130 and the read named", writer, code, stderr.String())
				}
				t.Logf("writer %v: stopped %v after Ctrl-C: %s", writer, time.Since(sent).Round(time.Millisecond), strings.TrimSpace(stderr.String()))
			}
		})
	}
}

// waitBlockedOn waits until the command has the FIFO open (writer) or sleeps in open(2) on it
// (no writer), so that the signal comes while it reads, not while it starts.
func waitBlockedOn(t *testing.T, pid int, fifo string, writer bool) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if writer && hasOpen(pid, fifo) || !writer && inFIFOOpen(pid, time.Since(start)) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the command never reached %s", fifo)
}

func hasOpen(pid int, path string) bool {
	fds, _ := filepath.Glob(fmt.Sprintf("/proc/%d/fd/*", pid))
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && target == path {
			return true
		}
	}
	return false
}

// inFIFOOpen: a thread of pid waits for a FIFO's writer (its wchan is wait_for_partner, in
// fifo_open). A kernel that hides wchan ("0") is given 3 s for the command to get there.
func inFIFOOpen(pid int, waited time.Duration) bool {
	chans, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/wchan", pid))
	hidden := len(chans) > 0
	for _, c := range chans {
		b, err := os.ReadFile(c)
		w := string(b)
		if err == nil && (strings.Contains(w, "wait_for_partner") || strings.Contains(w, "fifo")) {
			return true
		}
		hidden = hidden && err == nil && strings.TrimSpace(w) == "0"
	}
	return hidden && waited > 3*time.Second
}

// runBounded runs the CLI with FILE replaced by file and returns its exit code, its standard
// error and its peak resident memory in bytes.
func runBounded(t *testing.T, bin string, args []string, file string) (int, string, int64) {
	t.Helper()
	cmd := exec.Command(bin, withFile(args, file)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG=/nonexistent", "OS_CLIENT_CONFIG_FILE=/nonexistent")
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%v did not end within 3 minutes", cmd.Args)
	}
	usage, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	return cmd.ProcessState.ExitCode(), stderr.String(), usage.Maxrss << 10 // KiB on Linux
}

func withFile(args []string, file string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if a == "FILE" {
			a = file
		}
		out[i] = a
	}
	return out
}

// repeatToLimit repeats the document of path, its name made unique each time, and pads the
// rest with a comment, to exactly max bytes.
func repeatToLimit(t *testing.T, path, name, sep string, max int64) []byte {
	t.Helper()
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for i := 0; ; i++ {
		next := strings.ReplaceAll(string(doc), name, fmt.Sprintf("%s-%d", name, i))
		if i > 0 {
			next = sep + next
		}
		if int64(out.Len()+len(next))+2 > max {
			break
		}
		out.WriteString(next)
	}
	return padToLimit(t, out.Bytes(), max)
}

// padToLimit ends data with a comment line that brings it to exactly max bytes.
func padToLimit(t *testing.T, data []byte, max int64) []byte {
	t.Helper()
	if !bytes.HasSuffix(data, []byte("\n")) {
		data = append(data, '\n')
	}
	pad := int(max) - len(data)
	if pad < 2 {
		t.Fatalf("%d bytes leave no room for padding to %d", len(data), max)
	}
	return append(append(data, '#'), append(bytes.Repeat([]byte(" "), pad-2), '\n')...)
}

// denseInstallConfig is an install-config of exactly the limit made of compute pools, each
// with its lists: the densest one the checks and the patch walk.
func denseInstallConfig(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile("../../installconfig/testdata/corpus/valid-full-machinepool.yaml")
	if err != nil {
		t.Fatal(err)
	}
	head, rest, _ := strings.Cut(string(src), "compute:\n")
	pool, tail, _ := strings.Cut(rest, "controlPlane:")
	tail = "controlPlane:" + tail
	var out bytes.Buffer
	out.WriteString(head + "compute:\n")
	for i := 0; ; i++ {
		p := strings.Replace(pool, "name: worker", fmt.Sprintf("name: worker-%d", i), 1)
		if int64(out.Len()+len(p)+len(tail))+2 > inputfile.InstallConfig.Max {
			break
		}
		out.WriteString(p)
	}
	out.WriteString(tail)
	return padToLimit(t, out.Bytes(), inputfile.InstallConfig.Max)
}
