package probe

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestProblems(t *testing.T) {
	r := Result{Node: "worker-0", Targets: []Target{
		{Address: "10.0.0.4:2049", Reachable: true},
		{Address: "10.0.0.5:2049", Error: "connect: connection refused"},
		{Address: "[fd00::5]:111", Error: "no answer within 5s"},
	}}
	want := []string{
		"node worker-0 cannot reach 10.0.0.5:2049 (NFS): connect: connection refused",
		"node worker-0 cannot reach [fd00::5]:111: no answer within 5s",
	}
	if got := r.Problems(); !slices.Equal(got, want) {
		t.Errorf("Problems() = %q, want %q", got, want)
	}
	if r.Reachable() {
		t.Error("Reachable() with two unreachable targets")
	}
	r.Targets = r.Targets[:1]
	if !r.Reachable() || r.Problems() != nil {
		t.Errorf("all reached: Reachable %v, Problems %q", r.Reachable(), r.Problems())
	}
}

// Dial against real sockets: one that accepts, one that refuses.
func TestDial(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	_ = closed.Close()

	r := Dial(context.Background(), []string{refused, l.Addr().String()}, 3*time.Second)
	if len(r.Targets) != 2 {
		t.Fatalf("targets %+v", r.Targets)
	}
	if got := r.Targets[0]; got.Address != refused || got.Reachable || got.Error != "connect: connection refused" {
		t.Errorf("closed port: %+v", got)
	}
	if got := r.Targets[1]; got.Address != l.Addr().String() || !got.Reachable || got.Error != "" {
		t.Errorf("open port: %+v", got)
	}
}

// The result of MaxTargets targets fits in the kubelet's termination message (a longer one would
// be cut and could not be parsed): usual errors are kept whole, and the longest addresses with
// the longest errors are shortened until it fits.
func TestEncodeFitsTerminationMessage(t *testing.T) {
	timeout := dialError(&net.OpError{Op: "dial", Err: timeoutError{}}, 5*time.Second)
	usual := Result{}
	for i := range MaxTargets {
		usual.Targets = append(usual.Targets, Target{Address: fmt.Sprintf("[fd00:1234:5678:9abc:def0:1234:5678:%04x]:2049", i), Error: timeout, Milliseconds: 5001})
	}
	b, err := usual.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil || len(b) > MaxMessageBytes || !slices.Equal(back.Targets, usual.Targets) {
		t.Errorf("%d IPv6 targets that timed out: %d bytes, parsed back %v (%v); want them whole within %d", MaxTargets, len(b), back.Targets, err, MaxMessageBytes)
	}

	worst := Result{}
	long := dialError(fmt.Errorf("%s", strings.Repeat("x", 1000)), time.Second)
	for i := range MaxTargets {
		addr := fmt.Sprintf("%s-%02d.example.test:65535", strings.Repeat("n", maxTargetLen-25), i)
		if err := ParseTarget(addr); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		worst.Targets = append(worst.Targets, Target{Address: addr, Error: long, Milliseconds: 99999})
	}
	if b, err = worst.Encode(); err != nil || len(b) > MaxMessageBytes {
		t.Fatalf("longest addresses and errors: %d bytes, %v", len(b), err)
	}
	if err := json.Unmarshal(b, &back); err != nil || len(back.Targets) != MaxTargets || back.Targets[0].Error == "" {
		t.Errorf("longest addresses and errors: parsed back %+v, %v; want every target, with its error cut", back.Targets, err)
	}
}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
