package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// process is one control-plane program started by a sim cluster, logging to a file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// startProcess runs bin with args, output to logDir/name.log. The child is killed if the test
// binary dies without cleaning up (Pdeathsig), so an interrupted run leaves nothing behind.
func startProcess(logDir, name, bin string, args ...string) (*process, error) {
	return startProcessEnv(logDir, name, bin, nil, args...)
}

// startProcessEnv is startProcess with the environment env (nil: this process's).
func startProcessEnv(logDir, name, bin string, env []string, args ...string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended (it should not while the cluster runs).
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop asks the process to end and kills it if it has not within 10 seconds.
func (p *process) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail returns the last lines of the process's log, for error messages.
func (p *process) tail(lines int) string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// Process is a program a test runs beside a cluster (the Machine API controllers, say), logging
// to a file, killed with the test binary if that dies first.
type Process struct{ p *process }

// StartProcess runs bin with args and the environment env (nil: the test's), its output to
// logDir/name.log.
func StartProcess(logDir, name, bin string, env []string, args ...string) (*Process, error) {
	p, err := startProcessEnv(logDir, name, bin, env, args...)
	if err != nil {
		return nil, err
	}
	return &Process{p}, nil
}

// Stop asks the process to end (SIGTERM) and kills it after 10 seconds.
func (p *Process) Stop() { p.p.stop() }

// Exited reports whether the process has ended.
func (p *Process) Exited() bool { return p.p.exited() }

// Tail returns the last lines of its log.
func (p *Process) Tail(lines int) string { return p.p.tail(lines) }

// Log is the path of its log file.
func (p *Process) Log() string { return p.p.log }
