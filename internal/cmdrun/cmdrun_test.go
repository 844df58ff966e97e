package cmdrun

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

type recorder struct {
	calls         []string
	completeErr   error
	validateErr   error
	runCtxStopped func(context.Context)
}

func (r *recorder) Complete(*cobra.Command, []string) error {
	r.calls = append(r.calls, "complete")
	return r.completeErr
}

func (r *recorder) Validate() error {
	r.calls = append(r.calls, "validate")
	return r.validateErr
}

func (r *recorder) Run(ctx context.Context) error {
	r.calls = append(r.calls, "run")
	if r.runCtxStopped != nil {
		r.runCtxStopped(ctx)
	}
	return nil
}

func TestRunEOrder(t *testing.T) {
	bad := errors.New("bad")
	for _, tt := range []struct {
		name     string
		complete error
		validate error
		want     string
	}{
		{"all steps", nil, nil, "complete validate run"},
		{"Complete fails: nothing validated or run", bad, nil, "complete"},
		{"Validate fails: nothing run", nil, bad, "complete validate"},
	} {
		r := &recorder{completeErr: tt.complete, validateErr: tt.validate}
		err := RunE(r)(&cobra.Command{}, nil)
		if got := strings.Join(r.calls, " "); got != tt.want {
			t.Errorf("%s: calls %q, want %q", tt.name, got, tt.want)
		}
		if (tt.complete != nil || tt.validate != nil) != (err != nil) {
			t.Errorf("%s: error %v", tt.name, err)
		}
	}
}

// SIGTERM (what Kubernetes and systemd send) ends the context as Ctrl-C does.
func TestContextEndsOnSIGTERM(t *testing.T) {
	r := &recorder{runCtxStopped: func(ctx context.Context) {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
			t.Error("the context did not end on SIGTERM")
		}
	}}
	if err := RunE(r)(&cobra.Command{}, nil); err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 a command run outside cobra's Execute has a nil Context: Context must take it
	ctx, cancel := Context(nil)
	defer cancel()
	if ctx.Err() != nil {
		t.Errorf("a new context has ended: %v", ctx.Err())
	}
}

// The first Ctrl-C ends the context and says how to exit at once; the second exits with 130
// without waiting for the command.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	var out strings.Builder
	exited := make(chan int, 1)
	ctx, cancel := notify(context.Background(), &out, func(code int) { exited <- code })
	defer cancel()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the context did not end on the first Ctrl-C")
	}
	select {
	case code := <-exited:
		t.Fatalf("exited (%d) on the first Ctrl-C", code)
	default:
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exited:
		if code != 130 {
			t.Errorf("exit code %d, want 130", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second Ctrl-C did not exit")
	}
	if want := "Ctrl-C: stopping; Ctrl-C again to exit at once\nexiting at once\n"; out.String() != want {
		t.Errorf("said %q, want %q", out.String(), want)
	}
}
