package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// startPodNetwork gives the node's pods a network: the reference CNI plugins (bridge with the
// pods' gateway, host-local addresses, loopback) built by test/env/node/operands.sh, chained with
// cni-loopback-to-host, and rules in the machine's nat table for packets from the bridge:
//   - to the kubernetes Service's ClusterIP on 443, to the apiserver on 127.0.0.1 (what
//     kube-proxy would do for that Service; the test apiserver listens on loopback only);
//   - to the gateway on one of ports, to the same port of 127.0.0.1 (the loopback cloud);
//   - to 169.254.169.254:80, from the bridge and from the machine itself (the host-network
//     pods), to the node's metadata service (startMetadataService), as Nova serves a server's.
//
// route_localnet on the bridge lets those packets be routed to loopback. The bridge and the
// rules are the node's own and go when it stops (stopPodNetwork).
func (n *RealNode) startPodNetwork(ctx context.Context, ports []int) error {
	bins, err := operandBinaries(ctx)
	if err != nil {
		return err
	}
	cniBin, cniConf := filepath.Join(n.dir, "cni", "bin"), filepath.Join(n.dir, "cni", "net.d")
	for _, d := range []string{cniBin, cniConf} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if err := copyFile(filepath.Join(bins, "cni", p), filepath.Join(cniBin, p)); err != nil {
			return fmt.Errorf("real node: CNI plugin %s: %w (test/env/node/operands.sh builds it)", p, err)
		}
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(cniBin, "cni-loopback-to-host"), "./cni-loopback-to-host")
	build.Dir = nodeScripts()
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("real node: building cni-loopback-to-host: %w: %s", err, out)
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "manila-setup-node",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": podBridge, "isGateway": true, "ipMasq": false,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": podSubnet, "gateway": podGateway}}},
					"routes":  []map[string]string{{"dst": "0.0.0.0/0"}},
					"dataDir": filepath.Join(n.dir, "cni", "ipam"),
				},
			},
			map[string]any{"type": "cni-loopback-to-host", "ports": ports},
		},
	}
	b, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(cniConf, "10-manila-setup-node.conflist"), b, 0o644); err != nil {
		return err
	}

	apiPort, err := n.apiserverPort()
	if err != nil {
		return err
	}
	metadataPort, err := n.startMetadataService()
	if err != nil {
		return err
	}
	// Remains of a node that was killed before it could clean up would make the steps fail.
	_ = stopPodNetwork()
	n.network = true
	steps := [][]string{
		{"ip", "link", "add", podBridge, "type", "bridge"},
		{"ip", "link", "set", podBridge, "up"},
		{"sysctl", "-q", "-w", "net.ipv4.conf." + podBridge + ".route_localnet=1"},
		{"iptables", "-w", "-t", "nat", "-N", natChain},
		{"iptables", "-w", "-t", "nat", "-A", natChain, "-d", kubernetesServiceIP.String() + "/32", "-p", "tcp", "--dport", "443",
			"-j", "DNAT", "--to-destination", "127.0.0.1:" + strconv.Itoa(apiPort)},
	}
	if len(ports) > 0 {
		steps = append(steps, []string{"iptables", "-w", "-t", "nat", "-A", natChain, "-d", podGateway + "/32", "-p", "tcp",
			"-m", "multiport", "--dports", joinInts(ports), "-j", "DNAT", "--to-destination", "127.0.0.1"})
	}
	steps = append(steps, metadataRules(metadataPort)...)
	steps = append(steps, []string{"iptables", "-w", "-t", "nat", "-A", "PREROUTING", "-i", podBridge, "-j", natChain})
	for _, s := range steps {
		if out, err := exec.CommandContext(ctx, s[0], s[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("real node: pod network: %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	return nil
}

// stopPodNetwork removes the node's rules and bridge (its route_localnet goes with it). Each step
// is tried: after a node killed midway only some are there.
func stopPodNetwork() error {
	errs := []error{metadataRulesGone()}
	for _, s := range [][]string{
		{"iptables", "-w", "-t", "nat", "-D", "PREROUTING", "-i", podBridge, "-j", natChain},
		{"iptables", "-w", "-t", "nat", "-F", natChain},
		{"iptables", "-w", "-t", "nat", "-X", natChain},
		{"ip", "link", "del", podBridge},
	} {
		out, err := exec.Command(s[0], s[1:]...).CombinedOutput()
		if err != nil && !absent(string(out)) {
			errs = append(errs, fmt.Errorf("real node: %s: %w: %s", strings.Join(s, " "), err, out))
		}
	}
	return errors.Join(errs...)
}

// absent says whether a command's output says that what it was to remove is not there.
func absent(out string) bool {
	for _, s := range []string{"No chain", "does not exist", "Cannot find device", "Bad rule", "No such file"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

// apiserverPort is the port the sim cluster's apiserver listens on (127.0.0.1).
func (n *RealNode) apiserverPort() (int, error) {
	u, err := url.Parse(n.sim.Config.Host)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(u.Port())
	if err != nil {
		return 0, fmt.Errorf("real node: the apiserver's address %s has no port", n.sim.Config.Host)
	}
	return p, nil
}

// operandBinaries is the folder test/env/node/operands.sh fills (it builds what is missing, and
// is instant once cached): $MANILA_SETUP_OPERAND_BIN when set.
func operandBinaries(ctx context.Context) (string, error) {
	if dir := os.Getenv("MANILA_SETUP_OPERAND_BIN"); dir != "" {
		return dir, nil
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(nodeScripts(), "operands.sh"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("real node: test/env/node/operands.sh: %w\n%s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// CloudPorts are the loopback OpenStack's ports (Keystone, Neutron, Manila, Nova, Placement,
// Glance), from the variables test/env/openstack/up.sh reads, with its defaults.
func CloudPorts() []int {
	var ports []int
	for _, v := range []struct {
		name string
		def  int
	}{{"KEYSTONE_PORT", 15000}, {"NEUTRON_PORT", 19696}, {"MANILA_PORT", 18786},
		{"NOVA_PORT", 18774}, {"PLACEMENT_PORT", 18778}, {"GLANCE_PORT", 19292}} {
		p, err := strconv.Atoi(os.Getenv(v.name))
		if err != nil {
			p = v.def
		}
		ports = append(ports, p)
	}
	return ports
}
