// Command cni-loopback-to-host is a chained CNI plugin of the test cluster's real node. The
// servers of the test environment (the loopback OpenStack) listen on the machine's 127.0.0.1
// only, and their catalog names 127.0.0.1 addresses; a pod in a network namespace of its own
// would reach itself there. On a real cluster the cloud is routed to pods; here this plugin makes
// the pod's connections to the configured 127.0.0.1 ports leave through its interface to its
// gateway, the node, whose own rules (test/testenv/realnode.go) hand them to the machine's
// loopback. Nothing else of the pod's loopback changes: its containers still talk to each other
// there.
//
// It runs after the bridge plugin (it needs its result: the interface and the gateway) and
// passes that result on. Configuration: {"type": "cni-loopback-to-host", "ports": [5000, ...]}.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

type config struct {
	CNIVersion string          `json:"cniVersion"`
	Ports      []int           `json:"ports"`
	PrevResult json.RawMessage `json:"prevResult"`
}

type prevResult struct {
	IPs []struct {
		Gateway string `json:"gateway"`
	} `json:"ips"`
}

func main() {
	if err := run(os.Getenv("CNI_COMMAND"), os.Stdin, os.Stdout); err != nil {
		// The CNI error result, which the runtime shows in the pod's events.
		_ = json.NewEncoder(os.Stdout).Encode(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": err.Error()})
		os.Exit(1)
	}
}

func run(command string, in io.Reader, out io.Writer) error {
	switch command {
	case "VERSION":
		_, err := fmt.Fprintln(out, `{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}`)
		return err
	case "DEL", "CHECK", "GC", "STATUS":
		// The rules live in the pod's network namespace and go with it.
		return nil
	case "ADD":
	default:
		return fmt.Errorf("cni-loopback-to-host: CNI_COMMAND %q: expected ADD, DEL, CHECK or VERSION", command)
	}
	var conf config
	if err := json.NewDecoder(in).Decode(&conf); err != nil {
		return fmt.Errorf("cni-loopback-to-host: reading the configuration: %w", err)
	}
	var prev prevResult
	if err := json.Unmarshal(conf.PrevResult, &prev); err != nil || len(prev.IPs) == 0 || prev.IPs[0].Gateway == "" {
		return fmt.Errorf("cni-loopback-to-host: the previous plugin's result has no gateway (chain it after bridge with isGateway): %s", conf.PrevResult)
	}
	netns, ifname := os.Getenv("CNI_NETNS"), os.Getenv("CNI_IFNAME")
	if netns == "" || ifname == "" {
		return fmt.Errorf("cni-loopback-to-host: CNI_NETNS and CNI_IFNAME must be set")
	}
	if len(conf.Ports) > 0 {
		ports := make([]string, len(conf.Ports))
		for i, p := range conf.Ports {
			ports[i] = strconv.Itoa(p)
		}
		steps := [][]string{
			// A packet from 127.0.0.1 may leave through the pod's interface (the kernel drops it
			// otherwise) and goes with the pod's address.
			{"sh", "-c", "echo 1 > /proc/sys/net/ipv4/conf/all/route_localnet && echo 1 > /proc/sys/net/ipv4/conf/" + ifname + "/route_localnet"},
			{"iptables", "-t", "nat", "-A", "OUTPUT", "-d", "127.0.0.1/32", "-p", "tcp", "-m", "multiport", "--dports", strings.Join(ports, ","),
				"-j", "DNAT", "--to-destination", prev.IPs[0].Gateway},
			{"iptables", "-t", "nat", "-A", "POSTROUTING", "-s", "127.0.0.1/32", "-o", ifname, "-j", "MASQUERADE"},
		}
		for _, s := range steps {
			cmd := exec.Command("nsenter", append([]string{"--net=" + netns, "--"}, s...)...)
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("cni-loopback-to-host: %s in %s: %w: %s", strings.Join(s, " "), netns, err, b)
			}
		}
	}
	// The result is the previous plugin's, in the version the runtime asked for.
	_, err := out.Write(conf.PrevResult)
	return err
}
