package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// metadataAddress is where Nova's metadata service answers an OpenStack server, on port 80.
const metadataAddress = "169.254.169.254"

// instanceMetadata is what the node's metadata service says about it, in the fields of Nova's
// openstack/latest/meta_data.json that the Manila CSI plugin's node service reads (its NodeGetInfo
// asks for the instance's ID before anything else).
type instanceMetadata struct {
	UUID             string `json:"uuid"`
	Name             string `json:"name"`
	Hostname         string `json:"hostname"`
	AvailabilityZone string `json:"availability_zone"`
}

// startMetadataService serves the node's instance metadata as Nova does, on a port of 127.0.0.1,
// and returns that port. startPodNetwork sends the machine's and the pods' connections to
// 169.254.169.254:80 there.
func (n *RealNode) startMetadataService() (int, error) {
	srv, port, err := serveMetadata(n.InstanceID, n.Name)
	n.metadata = srv
	return port, err
}

// serveMetadata serves a server's instance metadata as Nova's metadata service does, on a port of
// 127.0.0.1 that it returns.
func serveMetadata(instanceID, name string) (*http.Server, int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	md, err := json.Marshal(instanceMetadata{UUID: instanceID, Name: name, Hostname: name, AvailabilityZone: "nova"})
	if err != nil {
		l.Close()
		return nil, 0, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /openstack/{version}/meta_data.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(md)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return srv, l.Addr().(*net.TCPAddr).Port, nil
}

func (n *RealNode) stopMetadataService() {
	if n.metadata != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = n.metadata.Shutdown(ctx)
		n.metadata = nil
	}
}

// metadataRules are the nat rules that send 169.254.169.254:80 to the metadata service on port:
// from the machine (the host-network pods; OUTPUT) and from the pods' bridge (PREROUTING).
func metadataRules(port int) [][]string {
	return [][]string{
		{"iptables", "-w", "-t", "nat", "-A", natChain, "-d", metadataAddress + "/32", "-p", "tcp", "--dport", "80",
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(port)},
		{"iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-d", metadataAddress + "/32", "-p", "tcp", "--dport", "80", "-j", natChain},
	}
}

// metadataRulesGone removes the OUTPUT jump of metadataRules (the chain goes with the others).
func metadataRulesGone() error {
	s := []string{"iptables", "-w", "-t", "nat", "-D", "OUTPUT", "-d", metadataAddress + "/32", "-p", "tcp", "--dport", "80", "-j", natChain}
	out, err := exec.Command(s[0], s[1:]...).CombinedOutput()
	if err != nil && !absent(string(out)) {
		return fmt.Errorf("real node: %s: %w: %s", strings.Join(s, " "), err, out)
	}
	return nil
}
