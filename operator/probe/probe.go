// Package probe checks what a node can reach, from the node itself: a short-lived pod on that
// node's host network opens a TCP connection to each target (the NFS servers of Manila's export
// locations, port 2049) and reports through its termination message. A node whose IP or routes
// are wrong can be Ready and still unable to mount a share; only a connection from the node
// shows it, and the kubelet's NFS mount goes through the node's own network, which is why the
// pod shares it.
//
// This package is the end that runs in the pod: Dial and the Result it writes (run by
// `manila-setup-operator probe nfs`). It links no Kubernetes client, so that the operator's
// binary stays small; the pod and its life (Pod, Run) are package probepod's, run by whoever
// checks the node.
package probe

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

const (
	// NFSPort is the port the NFS servers of Manila's export locations listen on.
	NFSPort = 2049
	// DefaultDialTimeout bounds each target's connection.
	DefaultDialTimeout = 5 * time.Second
	// DefaultTimeout bounds how long Run waits for the pod's result: scheduling is immediate
	// (the pod names its node), but a new node may first have to pull the image.
	DefaultTimeout = 2 * time.Minute
	// MaxTargets keeps the result within the kubelet's termination message limit
	// (MaxMessageBytes): Encode shortens the errors until it fits.
	MaxTargets = 16
	// MaxMessageBytes is the most of a termination message the kubelet keeps.
	MaxMessageBytes = 4096
	// maxTargetLen bounds an ADDR:PORT, so that MaxTargets of them fit in a message.
	maxTargetLen = 100
	// maxErrorLen cuts a target's error: what a dial error says fits well within it.
	maxErrorLen = 160
)

// Target is what the probe saw of one ADDR:PORT.
type Target struct {
	Address   string `json:"address"`
	Reachable bool   `json:"reachable"`
	// Error says why the connection failed ("connect: connection refused", "no answer
	// within 5s"); empty when Reachable.
	Error string `json:"error,omitempty"`
	// Milliseconds is how long the connection took to open or to fail.
	Milliseconds int64 `json:"milliseconds"`
}

// Result is what the probe reports: its termination message, as JSON.
type Result struct {
	// Node is where the probe ran. Run sets it; the probe itself does not know it.
	Node    string   `json:"node,omitempty"`
	Targets []Target `json:"targets"`
	// Leftover names the probe pod when Run could not delete it, with the command that does;
	// empty when it was deleted.
	Leftover string `json:"-"`
}

// Reachable says whether every target was reached.
func (r Result) Reachable() bool {
	for _, t := range r.Targets {
		if !t.Reachable {
			return false
		}
	}
	return true
}

// Problems are sentences about the targets that were not reached, in the targets' order:
// "node worker-0 cannot reach 10.0.0.5:2049 (NFS): connect: connection refused".
func (r Result) Problems() []string {
	node := "node " + r.Node
	if r.Node == "" {
		node = "this node"
	}
	var out []string
	for _, t := range r.Targets {
		if t.Reachable {
			continue
		}
		out = append(out, fmt.Sprintf("%s cannot reach %s%s: %s", node, t.Address, service(t.Address), t.Error))
	}
	return out
}

// service names what listens on an address's port, where it is known.
func service(address string) string {
	if _, port, err := net.SplitHostPort(address); err == nil && port == strconv.Itoa(NFSPort) {
		return " (NFS)"
	}
	return ""
}

// Encode is r as one line of JSON of at most MaxMessageBytes, for stdout and the termination
// message: when r is too long (many targets with long errors), the errors are cut shorter
// until it fits.
func (r Result) Encode() ([]byte, error) {
	for _, n := range []int{maxErrorLen, 80, 40, 0} {
		short := r
		short.Targets = make([]Target, len(r.Targets))
		for i, t := range r.Targets {
			t.Error = Cut(t.Error, n)
			short.Targets[i] = t
		}
		b, err := json.Marshal(short)
		if err != nil {
			return nil, err
		}
		if b = append(b, '\n'); len(b) <= MaxMessageBytes {
			return b, nil
		}
	}
	return nil, fmt.Errorf("the result of %d targets is longer than a termination message (%d bytes) even without errors", len(r.Targets), MaxMessageBytes)
}

// ParseTarget checks that s is ADDR:PORT: an IP address or a host name, and a port from 1 to
// 65535 ("[fd00::5]:2049" for IPv6).
func ParseTarget(s string) error {
	if len(s) > maxTargetLen {
		return fmt.Errorf("must be at most %d characters", maxTargetLen)
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return fmt.Errorf("must be ADDR:PORT, an IP address or host name and a port (%s:%d, [fd00::5]:%d)", "10.0.0.5", NFSPort, NFSPort)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q must be a number from 1 to 65535", port)
	}
	return nil
}

// Dial opens a TCP connection to each target at once, each within timeout, closes it, and says
// what it saw, in the targets' order. Targets are checked with ParseTarget first; one that is
// not ADDR:PORT is reported unreachable with the reason.
func Dial(ctx context.Context, targets []string, timeout time.Duration) Result {
	r := Result{Targets: make([]Target, len(targets))}
	var wg sync.WaitGroup
	for i, address := range targets {
		wg.Go(func() { r.Targets[i] = dial(ctx, address, timeout) })
	}
	wg.Wait()
	return r
}

func dial(ctx context.Context, address string, timeout time.Duration) Target {
	t := Target{Address: address}
	if err := ParseTarget(address); err != nil {
		t.Error = err.Error()
		return t
	}
	start := time.Now()
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", address)
	t.Milliseconds = time.Since(start).Milliseconds()
	if err != nil {
		t.Error = dialError(err, timeout)
		return t
	}
	_ = conn.Close()
	t.Reachable = true
	return t
}

// dialError is why a connection failed, without the "dial tcp ADDR:" the sentence around it
// already says, and short enough for the termination message.
func dialError(err error, timeout time.Duration) string {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Sprintf("no answer within %s (packets dropped: a security group, a firewall or no route)", timeout)
	}
	msg := err.Error()
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		msg = op.Err.Error()
	}
	return Cut(msg, maxErrorLen)
}

// Cut shortens s to n bytes and an ellipsis, on a character boundary.
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "..."
}
