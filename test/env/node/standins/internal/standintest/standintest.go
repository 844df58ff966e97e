// Package standintest holds the test helpers that the tests of the stand-ins (see package
// standins) share: running the test binary as the program under test, a short folder for unix
// sockets, a fake CSI driver, connecting to a gRPC socket and reading an HTTP answer.
package standintest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/manila-setup/manila-setup/test/env/node/standins/internal/standin"
)

// runMainEnv makes the test binary run the program's main() instead of the tests, so that tests
// can check exit codes and output of the real command line.
const runMainEnv = "STANDIN_RUN_MAIN"

// Main is a stand-in's TestMain: it runs the tests, or main when Command started the test binary.
func Main(m *testing.M, main func()) {
	if os.Getenv(runMainEnv) == "1" {
		// Drop the testing package's flags: main sees the command line upstream's sees.
		flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Command is the test binary, set up to run as the program with args (see Main).
func Command(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	return cmd
}

// RunMain runs the program with args in a child process and returns its exit code and its
// output, stdout and stderr together.
func RunMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := Command(args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	default:
		t.Fatalf("running %v: %v", args, err)
		return -1, ""
	}
}

// WantExit runs the program with args and fails the test unless it exits with code and its
// output contains want.
func WantExit(t *testing.T, code int, want string, args ...string) {
	t.Helper()
	got, out := RunMain(t, args...)
	if got != code || !strings.Contains(out, want) {
		t.Fatalf("%v: exit %d, output:\n%s\nwant exit %d and output containing %q", args, got, out, code, want)
	}
}

// SocketDir is a short temporary folder, removed after the test: unix socket paths are limited
// to 107 bytes and t.TempDir() paths can be longer.
func SocketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "standin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// Dial connects to the gRPC server on the unix socket, waiting up to a minute until it accepts;
// the connection is closed after the test.
func Dial(t *testing.T, socket string) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := standin.DialCSI(ctx, socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Get fetches url and returns the status code and body of the answer.
func Get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}
