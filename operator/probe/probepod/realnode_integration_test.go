//go:build integration

package probepod

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/test/testenv"
)

// TestRunOnRealNode runs the probe pod for real: the operator's image built here, on a kubelet
// beside the kwok nodes, on the host network. A server the test listens on at the node's
// address is reachable from the pod; a port nobody listens on is not.
func TestRunOnRealNode(t *testing.T) {
	c := testenv.NewSimCluster(t, testenv.SimOptions{WorkerNodes: 1})
	node := testenv.NewRealNode(t, c, testenv.RealNodeOptions{})
	kube := c.Client
	ns := namespace(t, kube, "manila-setup-probe", "privileged")

	open, err := net.Listen("tcp", net.JoinHostPort(node.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()
	go func() {
		for {
			conn, err := open.Accept()
			if err != nil {
				return
			}
			conn.Close()
		}
	}()
	// A port that was free a moment ago and is closed now: nothing listens on it.
	l, err := net.Listen("tcp", net.JoinHostPort(node.IP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	openAddr := net.JoinHostPort(node.IP, strconv.Itoa(open.Addr().(*net.TCPAddr).Port))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	r, err := Run(ctx, kube, Spec{Namespace: ns, Node: node.Name, Image: node.OperatorImage,
		Targets: []string{openAddr, closed}, Timeout: 2 * time.Minute})
	t.Logf("probe pod on %s: %s, result %+v, problems %q", node.Name, time.Since(start), r, r.Problems())
	if err != nil {
		t.Fatal(err)
	}
	noProbePods(t, kube, ns)
	if len(r.Targets) != 2 {
		t.Fatalf("result has %d targets, want 2: %+v", len(r.Targets), r)
	}
	for _, tr := range r.Targets {
		switch tr.Address {
		case openAddr:
			if !tr.Reachable {
				t.Errorf("%s (a server of the test on the node's address) not reachable from the pod: %s", openAddr, tr.Error)
			}
		case closed:
			if tr.Reachable || tr.Error == "" {
				t.Errorf("%s (nothing listens) reported reachable or without an error: %+v", closed, tr)
			}
		default:
			t.Errorf("result names %s, which was not probed", tr.Address)
		}
	}
	if r.Reachable() {
		t.Errorf("result says every target is reachable, but %s is closed", closed)
	}
}
