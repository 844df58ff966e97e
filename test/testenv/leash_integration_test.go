//go:build integration

package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAPIServerDiesWithTheTestBinary: a test binary killed outright (go test's -timeout, an
// interrupted make test) takes its etcd and kube-apiserver with it.
func TestAPIServerDiesWithTheTestBinary(t *testing.T) {
	if os.Getenv("MANILA_SETUP_LEASH_CHILD") == "1" {
		// The child: start a server, say so, and wait to be killed.
		if _, err := StartAPIServerWith(APIServerOptions{PlainKubernetes: true}); err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Println("started")
		time.Sleep(10 * time.Minute)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAPIServerDiesWithTheTestBinary$", "-test.v")
	// As make test runs it: with KUBEBUILDER_ASSETS, which envtest prefers to the directory it
	// is given.
	assets, err := KubeAssets()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "MANILA_SETUP_LEASH_CHILD=1", "KUBEBUILDER_ASSETS="+assets)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	started := false
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "error:") {
			t.Fatalf("the child test binary: %s", lines.Text())
		}
		if lines.Text() == "started" {
			started = true
			break
		}
	}
	if !started {
		t.Fatal("the child test binary ended before its apiserver started")
	}
	servers := childrenOf(t, cmd.Process.Pid)
	if len(servers) != 2 {
		t.Fatalf("the child runs %v, want etcd and kube-apiserver", servers)
	}
	// Whatever happens below, nothing is left running.
	t.Cleanup(func() {
		for pid := range servers {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for pid, name := range servers {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("%s (pid %d) still runs 30 s after its test binary was killed", name, pid)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// childrenOf returns the etcd and kube-apiserver processes whose parent is pid, by pid.
func childrenOf(t *testing.T, parent int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	found := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read from its closing parenthesis.
		s := string(stat)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm, rest := s[open+1:end], strings.Fields(s[end+1:])
		if len(rest) < 2 {
			continue
		}
		if ppid, _ := strconv.Atoi(rest[1]); ppid == parent && (comm == "etcd" || comm == "kube-apiserver") {
			found[pid] = comm
		}
	}
	return found
}

// alive reports whether pid runs (a zombie does not: its parent just has not reaped it).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(stat)
	end := strings.LastIndexByte(s, ')')
	return end < 0 || !strings.HasPrefix(strings.TrimSpace(s[end+1:]), "Z")
}
