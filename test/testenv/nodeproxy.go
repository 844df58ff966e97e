package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// egressSelectorConfig sends the apiserver's traffic to nodes (logs, exec, port-forward: its
// egress selector's "cluster" traffic) through an HTTP CONNECT proxy on a unix socket, as a
// hosted control plane sends it through konnectivity.
const egressSelectorConfig = `apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`

// nodeProxy is that proxy. A kubelet in a guest listens behind a forwarded port of the host's
// loopback, not at its node's addresses (on the cloud's networks, in namespaces the host does not
// route to): the proxy dials that port for each of the node's addresses. Anything else it dials
// as asked, so that a kubelet on the host is reached as before.
type nodeProxy struct {
	l      net.Listener
	mu     sync.Mutex
	routes map[string]string // host:port the apiserver asks for → 127.0.0.1:port
}

// startNodeProxy serves the proxy on dir/nodes.sock and writes the apiserver's egress selector
// configuration; it returns the configuration's path.
func startNodeProxy(dir string) (*nodeProxy, string, error) {
	sock := filepath.Join(dir, "nodes.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		return nil, "", fmt.Errorf("node proxy: %w", err)
	}
	conf := filepath.Join(dir, "egress-selector.yaml")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(egressSelectorConfig, sock)), 0o600); err != nil {
		l.Close()
		return nil, "", err
	}
	p := &nodeProxy{l: l, routes: map[string]string{}}
	go p.serve()
	return p, conf, nil
}

// route sends the apiserver's connections to each of addrs (host:port) to the host's loopback
// port to; unroute ends that.
func (p *nodeProxy) route(to string, addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		p.routes[a] = to
	}
}

func (p *nodeProxy) unroute(addrs ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range addrs {
		delete(p.routes, a)
	}
}

func (p *nodeProxy) close() { p.l.Close() }

func (p *nodeProxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *nodeProxy) handle(c net.Conn) {
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	if req.Method != http.MethodConnect {
		fmt.Fprintf(c, "HTTP/1.1 405 Method Not Allowed\r\n\r\n")
		return
	}
	target := req.Host
	p.mu.Lock()
	if to, ok := p.routes[target]; ok {
		target = to
	}
	p.mu.Unlock()
	up, err := net.DialTimeout("tcp", target, 10*time.Second)
	if err != nil {
		fmt.Fprintf(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n%s: %v", req.Host, err)
		return
	}
	defer up.Close()
	_ = c.SetReadDeadline(time.Time{})
	if _, err := fmt.Fprintf(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, br); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}
