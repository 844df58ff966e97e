package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Tmux is a terminal of its own (a private tmux server) running one command, for tests that
// type into the wizard as a person does and read what the screen shows.
type Tmux struct {
	t      testing.TB
	socket string
	target string
}

var tmuxServers atomic.Int32

// NewTmux starts command in a width x height terminal; the server stops with the test.
func NewTmux(t testing.TB, width, height int, command string) *Tmux {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed: run test/env/tmux.sh (make test does) to install it")
	}
	tm := &Tmux{t: t, socket: fmt.Sprintf("manila-setup-test-%d-%d", os.Getpid(), tmuxServers.Add(1)), target: "wizard"}
	tm.run("new-session", "-d", "-s", tm.target, "-x", fmt.Sprint(width), "-y", fmt.Sprint(height), command)
	t.Cleanup(func() { _ = exec.Command("tmux", "-L", tm.socket, "kill-server").Run() })
	return tm
}

func (tm *Tmux) run(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Keys types keys, in tmux's send-keys names (Enter, Space, Up, or literal text).
func (tm *Tmux) Keys(keys ...string) {
	tm.run(append([]string{"send-keys", "-t", tm.target}, keys...)...)
}

// Screen is what the terminal shows now.
func (tm *Tmux) Screen() string { return tm.run("capture-pane", "-p", "-t", tm.target) }

// WaitFor waits until the screen shows every text at once, and returns it.
func (tm *Tmux) WaitFor(timeout time.Duration, texts ...string) string {
	tm.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := tm.Screen()
		if !slices.ContainsFunc(texts, func(x string) bool { return !strings.Contains(s, x) }) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the screen did not show %q within %s:\n%s", texts, timeout, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
