//go:build integration

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/installconfig"
	"github.com/manila-setup/manila-setup/installconfig/cloudcheck"
	"github.com/manila-setup/manila-setup/test/ostest"
	"github.com/manila-setup/manila-setup/test/testenv"
)

// installConfig writes an install-config for the loopback cloud with the given tail (compute
// pools, networking) after a fixed head.
func installConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "install-config.yaml")
	head := "apiVersion: v1\nbaseDomain: example.com\nmetadata:\n  name: ocp\nplatform:\n  openstack:\n    cloud: manila-setup\n"
	if err := os.WriteFile(path, []byte(head+body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInstallConfigValidateWithTheCloud: the seeded storage network and nfs group pass; each
// kind of mistake only the cloud can reveal gets its own line with the field path.
func TestInstallConfigValidateWithTheCloud(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	seed := cloud.Seed
	storage, decoy := seed.Networks["storage"], seed.Networks["decoy"]
	nfs := seed.SecurityGroups["nfs"]

	t.Run("attached", func(t *testing.T) {
		rec := record(t)
		file := installConfig(t, `networking:
  machineNetwork:
  - cidr: 10.196.0.0/16
compute:
- name: worker
  platform:
    openstack:
      additionalNetworkIDs: [`+storage+`]
      additionalSecurityGroupIDs: [`+nfs+`]
`)
		code, out, errOut := runCLI(t, "installconfig", "validate", "--os-cloud", testenv.CloudDemo, file)
		// The seeded storage subnet is as Neutron makes one: a gateway, no DNS servers.
		if code != exitOK || !strings.HasSuffix(out, file+": valid, 2 warnings\n") || errOut != "" ||
			!strings.Contains(out, "warning: compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: \""+storage+"\": network storage ("+storage+"), subnet storage-subnet (") ||
			!strings.Contains(out, "its gateway 10.0.0.1 is handed out by DHCP") || !strings.Contains(out, "fix: openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 storage-subnet") {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		if rec.auths != 1 {
			t.Errorf("%d token requests, want 1", rec.auths)
		}
		t.Logf("%d requests", rec.total)
	})

	t.Run("mistakes", func(t *testing.T) {
		const ghost = "3f1b2c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d" // a UUID v4 nothing has
		// No machineNetwork: the installer's default 10.0.0.0/16 contains storage's 10.0.0.0/24.
		file := installConfig(t, `compute:
- name: worker
  platform:
    openstack:
      additionalNetworkIDs: [`+nfs+`, `+ghost+`, `+decoy+`]
      additionalSecurityGroupIDs: [`+storage+`]
- name: storage
  platform:
    openstack:
      additionalNetworkIDs: [`+storage+`]
`)
		code, out, errOut := runCLI(t, "installconfig", "validate", file)
		if code != exitInvalid {
			t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		t.Logf("\n%s", out)
		want := []string{
			`warning: compute[0].platform.openstack.additionalNetworkIDs: Invalid value: "` + nfs + `, ` + ghost + `, ` + decoy + `": none of these networks holds a Manila export location: shares are exported at 10.0.0.10 on network "storage" (` + storage + `), so pods on these machines cannot mount them; add it with ` + "`manila-setup installconfig patch " + file + " --network " + storage + " --pool worker`",
			`compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "` + nfs + `": is a security group, not a network: move it to additionalSecurityGroupIDs`,
			`compute[0].platform.openstack.additionalNetworkIDs[1]: Not found: "` + ghost + `": no network with this ID is visible to`,
			`compute[0].platform.openstack.additionalSecurityGroupIDs[0]: Invalid value: "` + storage + `": is a network, not a security group: move it to additionalNetworkIDs`,
			`compute[1].platform.openstack.additionalNetworkIDs[0]: Invalid value: "` + storage + `": network storage (` + storage + `), subnet storage-subnet (` + seed.Subnets["storage-subnet"].ID + `): its range 10.0.0.0/24 overlaps the cluster's network 10.0.0.0/16 (the installer's default, as networking.machineNetwork is not set)`,
			// The decoy and storage subnets hand out a gateway and DNS: two warnings each.
			file + ": invalid, 4 errors, 5 warnings",
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("output lacks\n%s", w)
			}
		}
		if strings.Contains(out, "compute[1].platform.openstack.additionalNetworkIDs: Invalid value") {
			t.Errorf("the storage pool holds the Manila network, yet it is warned about")
		}

		// The same as data, for hooks: the rule of every problem.
		code, out, _ = runCLI(t, "installconfig", "validate", "-o", "json", file)
		var ps installconfig.Problems
		if err := json.Unmarshal([]byte(out), &ps); code != exitInvalid || err != nil {
			t.Fatalf("exit %d, %v\n%s", code, err, out)
		}
		var rules []string
		for _, p := range ps {
			rules = append(rules, string(p.Severity)+" "+p.Field)
		}
		if len(ps) != 9 {
			t.Errorf("%d problems, want 9: %v", len(ps), rules)
		}
	})

	t.Run("the default pool's list counts", func(t *testing.T) {
		file := installConfig(t, `    defaultMachinePlatform:
      additionalNetworkIDs: [`+storage+`]
networking:
  machineNetwork:
  - cidr: 10.196.0.0/16
compute:
- name: worker
`)
		// The head ends inside platform.openstack, so the default pool lands there. Only the
		// storage subnet's own warnings (gateway, DNS) remain.
		code, out, errOut := runCLI(t, "installconfig", "validate", "-o", "json", file)
		var ps installconfig.Problems
		if err := json.Unmarshal([]byte(out), &ps); code != exitOK || err != nil {
			t.Fatalf("exit %d, %v\nstdout: %s\nstderr: %s", code, err, out, errOut)
		}
		for _, p := range ps {
			if p.Rule() != "default-route" && p.Rule() != "dns-announced" {
				t.Errorf("problem %s", p.Text(file))
			}
		}
	})

	t.Run("cloud unreachable", func(t *testing.T) {
		clouds := filepath.Join(t.TempDir(), "clouds.yaml")
		// Port 9 (discard) on loopback: nothing listens, so the connection is refused at once.
		data := "clouds:\n  gone:\n    auth:\n      auth_url: http://127.0.0.1:9/v3\n      username: u\n      password: hunter2-secret\n      project_name: p\n      user_domain_name: Default\n      project_domain_name: Default\n"
		if err := os.WriteFile(clouds, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		file := installConfig(t, "compute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs: [not-a-uuid]\n")
		code, out, errOut := runCLI(t, "installconfig", "validate", "--os-cloud", "gone", "--os-client-config-file", clouds, "--timeout", "5s", file)
		if code != exitUsage {
			t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, errOut)
		}
		if !strings.Contains(out, `compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "not-a-uuid"`) {
			t.Errorf("the offline result is missing:\n%s", out)
		}
		if !strings.Contains(errOut, "the cloud checks did not run, only the offline ones: ") || strings.Contains(out+errOut, "hunter2-secret") {
			t.Errorf("stderr: %s", errOut)
		}
	})
}

// TestInstallConfigPatchWithTheCloud: with a cloud, patch checks its result before writing.
// A security group given as --network is refused and the file is left as it was; the storage
// network is added, and a second run changes nothing.
func TestInstallConfigPatchWithTheCloud(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	storage, nfs := cloud.Seed.Networks["storage"], cloud.Seed.SecurityGroups["nfs"]
	file := installConfig(t, "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\ncompute:\n- name: worker\n  replicas: 3\n")
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "installconfig", "patch", file, "--network", nfs)
	if code != exitInvalid || !strings.Contains(errOut, "not patched: the cloud rejects the result") ||
		!strings.Contains(errOut, `compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: "`+nfs+`": is a security group, not a network`) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if after, _ := os.ReadFile(file); string(after) != string(before) {
		t.Fatalf("the refused patch changed the file:\n%s", after)
	}
	if _, err := os.Stat(file + ".bak"); err == nil {
		t.Errorf("a refused patch left a backup")
	}

	code, out, errOut = runCLI(t, "installconfig", "patch", file, "--network", storage, "--security-group", nfs)
	if code != exitOK || !strings.Contains(out, "compute[0].platform.openstack.additionalNetworkIDs: added "+storage) ||
		!strings.Contains(errOut, "warning: compute[0].platform.openstack.additionalNetworkIDs[0]: ") || !strings.Contains(errOut, "its gateway 10.0.0.1 is handed out by DHCP") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "installconfig", "validate", file)
	if code != exitOK || !strings.HasSuffix(out, ": valid, 2 warnings\n") {
		t.Errorf("the patched file does not pass validate with the cloud, with the storage subnet's two warnings (exit %d):\n%s", code, out)
	}
	code, out, _ = runCLI(t, "installconfig", "patch", file, "--network", storage, "--security-group", nfs)
	if code != exitOK || !strings.Contains(out, "nothing to change") {
		t.Errorf("second run: exit %d\n%s", code, out)
	}
}

// TestInstallConfigPatchDiscover: --discover adds the network Manila exports on, says why, and
// the result validates with the cloud; without a cloud it is a usage error.
func TestInstallConfigPatchDiscover(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	storage := cloud.Seed.Networks["storage"]
	file := installConfig(t, "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\ncompute:\n- name: worker\n  replicas: 3\n")

	code, out, errOut := runCLI(t, "installconfig", "patch", file, "--discover", "--dry-run")
	if code != exitOK || !strings.Contains(errOut, `discovered: network "storage" (`+storage+`): `) ||
		!strings.Contains(errOut, "10.0.0.10") || !strings.Contains(out, "+      additionalNetworkIDs:\n+      - "+storage+"\n") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "installconfig", "patch", file, "--discover")
	if code != exitOK || !strings.Contains(out, "compute[0].platform.openstack.additionalNetworkIDs: added "+storage) {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if code, out, _ = runCLI(t, "installconfig", "validate", file); code != exitOK {
		t.Errorf("exit %d after --discover:\n%s", code, out)
	}

	code, _, errOut = runCLI(t, "installconfig", "patch", file, "--discover", "--offline")
	if code != exitUsage || !strings.Contains(errOut, "--discover asks the cloud") {
		t.Errorf("--discover --offline: exit %d, %s", code, errOut)
	}
}

// storageShapes are networks of a project of their own, one per shape a storage network can
// take, beside a fit one (no gateway, DNS 0.0.0.0, DHCP on), each with one subnet.
type storageShapes struct {
	p                                                        *ostest.Project
	fit, dhcpOff, gateway, dns, noPortSecurity, overlap, vip ostest.Network
	sg                                                       string
}

func newStorageShapes(t *testing.T, cloud *testenv.Cloud) storageShapes {
	t.Helper()
	p := ostest.NewProject(t, cloud, "ic-fitness")
	fit := func(cidr string, extra map[string]any) map[string]any {
		s := map[string]any{"cidr": cidr, "gateway_ip": nil, "dns_nameservers": []string{"0.0.0.0"}}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	return storageShapes{
		p:       p,
		fit:     p.CreateNetworkWith("ic-fit", nil, fit("10.61.0.0/24", nil)),
		dhcpOff: p.CreateNetworkWith("ic-dhcp-off", nil, fit("10.62.0.0/24", map[string]any{"enable_dhcp": false})),
		// As Neutron makes a subnet, but for DNS: the gateway is the first address.
		gateway:        p.CreateNetworkWith("ic-gateway", nil, map[string]any{"cidr": "10.63.0.0/24", "dns_nameservers": []string{"0.0.0.0"}}),
		dns:            p.CreateNetworkWith("ic-dns", nil, map[string]any{"cidr": "10.64.0.0/24", "gateway_ip": nil}),
		noPortSecurity: p.CreateNetworkWith("ic-no-port-security", map[string]any{"port_security_enabled": false}, fit("10.65.0.0/24", nil)),
		overlap:        p.CreateNetworkWith("ic-overlap", nil, fit("10.196.8.0/24", nil)),
		vip:            p.CreateNetworkWith("ic-vip", nil, fit("10.66.0.0/24", nil)),
		sg:             p.CreateSecurityGroup("ic-nfs", true),
	}
}

// cli runs the CLI against the shapes' project.
func (s storageShapes) cli(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLI(t, append([]string{"--os-cloud", ostest.CloudName, "--os-client-config-file", s.p.CloudsFile}, args...)...)
}

// problemLine is a problem as validate prints it.
func problemLine(warning bool, field, value, detail string) string {
	s := field + `: Invalid value: "` + value + `": ` + detail
	if warning {
		s = "warning: " + s
	}
	return s
}

// TestInstallConfigStorageNetworkFitness: validate --os-cloud judges every additionalNetworkIDs
// entry by the storage-network rules, with the field path, the network and subnet by name and
// ID, and the fix; errors fail, warnings do not (unless --strict), a fit network says nothing,
// and -o json carries the findings' IDs as rules. patch refuses a network with an error and
// patches one with a warning, saying it.
func TestInstallConfigStorageNetworkFitness(t *testing.T) {
	cloud := testenv.NewCloud(t)
	noCluster(t)
	s := newStorageShapes(t, cloud)
	subnet := func(n ostest.Network, name string) string {
		return fmt.Sprintf("network %s (%s), subnet %s-subnet-0 (%s)", name, n.ID, name, n.SubnetIDs[0])
	}
	const route = "every machine gets a second default route through it; when the API and ingress VIPs are not on-link, OpenShift's node-IP selection takes the interface with the lowest-metric default route and the node may take its InternalIP from the storage network (logs, exec and the node's br-ex move)"
	// The VIP lies in ic-vip's subnet. The network without port security is refused in the
	// control plane too, which asks for no additional security groups: the installer gives every
	// machine its role's group.
	file := installConfig(t, `    apiVIPs: [10.66.0.5]
    ingressVIPs: [10.196.0.7]
networking:
  machineNetwork:
  - cidr: 10.196.0.0/16
controlPlane:
  name: master
  platform:
    openstack:
      additionalNetworkIDs: [`+s.noPortSecurity.ID+`]
compute:
- name: worker
  platform:
    openstack:
      additionalNetworkIDs: [`+strings.Join([]string{s.fit.ID, s.dhcpOff.ID, s.gateway.ID, s.dns.ID, s.overlap.ID, s.vip.ID}, ", ")+`]
- name: secure
  platform:
    openstack:
      additionalNetworkIDs: [`+s.noPortSecurity.ID+`, `+s.fit.ID+`]
      additionalSecurityGroupIDs: [`+s.sg+`]
`)
	worker := func(i int) string { return fmt.Sprintf("compute[0].platform.openstack.additionalNetworkIDs[%d]", i) }
	noPortSecurity := fmt.Sprintf("network ic-no-port-security (%s): port security is disabled on the network, and security groups are asked for: Neutron refuses the machines' port (PortSecurityAndIPRequiredForSecurityGroups) and the new machines never start; fix: the installer puts each machine's own security group (<infraID>-<role>) on this port too, whatever additionalSecurityGroupIDs says: openstack network set --enable-port-security %s, or attach the network after the install with `manila-setup machinesets patch`, which writes the port without port security", s.noPortSecurity.ID, s.noPortSecurity.ID)
	code, out, errOut := s.cli(t, "installconfig", "validate", file)
	if code != exitInvalid {
		t.Fatalf("exit %d, want 1\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	t.Logf("\n%s", out)
	want := []string{
		problemLine(false, worker(1), s.dhcpOff.ID, fmt.Sprintf("network ic-dhcp-off (%s): no subnet has DHCP enabled: the machines' port on it gets no address, and the shares stay unreachable; fix: openstack subnet set --dhcp ic-dhcp-off-subnet-0", s.dhcpOff.ID)),
		problemLine(true, worker(2), s.gateway.ID, subnet(s.gateway, "ic-gateway")+": its gateway 10.63.0.1 is handed out by DHCP: "+route+"; fix: openstack subnet set --gateway none ic-gateway-subnet-0"),
		problemLine(true, worker(3), s.dns.ID, subnet(s.dns, "ic-dns")+": no dns_nameservers: its DHCP server announces itself as a DNS server: the nodes may resolve through the storage network before the cluster's own DNS; fix: openstack subnet set --no-dns-nameservers --dns-nameserver 0.0.0.0 ic-dns-subnet-0"),
		problemLine(false, worker(4), s.overlap.ID, subnet(s.overlap, "ic-overlap")+": its range 10.196.8.0/24 overlaps the cluster's network 10.196.0.0/16 (networking.machineNetwork[0].cidr): the nodes would route part of the cluster's traffic to the storage network; fix: choose networking CIDRs apart from the storage subnet, or a storage network apart from them"),
		problemLine(false, worker(5), s.vip.ID, subnet(s.vip, "ic-vip")+": its range 10.66.0.0/24 holds the VIP 10.66.0.5 (platform.openstack.apiVIPs[0]): OpenShift's node-IP selection takes the interface whose subnet holds a VIP, so the nodes would take their InternalIP from the storage network (logs, exec and the node's br-ex move); fix: give platform.openstack.apiVIPs and ingressVIPs addresses of the machine network, outside the storage subnet"),
		problemLine(false, "compute[1].platform.openstack.additionalNetworkIDs[0]", s.noPortSecurity.ID, noPortSecurity),
		problemLine(false, "controlPlane.platform.openstack.additionalNetworkIDs[0]", s.noPortSecurity.ID, noPortSecurity),
		// The project has no share: Manila cannot tell where it exports.
		file + ": invalid, 5 errors, 3 warnings",
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	for _, w := range want {
		if !slices.Contains(lines, w) {
			t.Errorf("output lacks the line\n%s", w)
		}
	}
	if strings.Contains(out, `"`+s.fit.ID+`"`) {
		t.Errorf("the fit network is reported:\n%s", out)
	}

	// The same as data: one problem per finding, its ID as the rule.
	code, out, _ = s.cli(t, "installconfig", "validate", "-o", "json", file)
	var ps installconfig.Problems
	if err := json.Unmarshal([]byte(out), &ps); code != exitInvalid || err != nil {
		t.Fatalf("exit %d, %v\n%s", code, err, out)
	}
	var got []string
	for _, p := range ps {
		got = append(got, string(p.Severity)+" "+p.Rule()+" "+p.Field)
	}
	wantJSON := []string{
		"warning cloud-manila-unknown ",
		"error port-security-off compute[1].platform.openstack.additionalNetworkIDs[0]",
		"error port-security-off controlPlane.platform.openstack.additionalNetworkIDs[0]",
		"error dhcp-off " + worker(1),
		"warning default-route " + worker(2),
		"warning dns-announced " + worker(3),
		"error overlap " + worker(4),
		"error vip-in-subnet " + worker(5),
	}
	slices.Sort(got)
	slices.Sort(wantJSON)
	if !slices.Equal(got, wantJSON) {
		t.Errorf("JSON problems\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantJSON, "\n"))
	}

	// Warnings only: valid, unless --strict.
	warned := installConfig(t, "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs: ["+
		s.fit.ID+", "+s.gateway.ID+", "+s.dns.ID+"]\n")
	if code, out, _ = s.cli(t, "installconfig", "validate", warned); code != exitOK || !strings.HasSuffix(out, warned+": valid, 3 warnings\n") {
		t.Errorf("warnings only: exit %d\n%s", code, out)
	}
	if code, out, _ = s.cli(t, "installconfig", "validate", "--strict", warned); code != exitInvalid {
		t.Errorf("warnings only, --strict: exit %d\n%s", code, out)
	}

	// The fit network, with security groups: nothing but Manila's own word.
	good := installConfig(t, "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\ncompute:\n- name: worker\n  platform:\n    openstack:\n      additionalNetworkIDs: ["+
		s.fit.ID+"]\n      additionalSecurityGroupIDs: ["+s.sg+"]\n")
	code, out, _ = s.cli(t, "installconfig", "validate", "-o", "json", good)
	ps = nil
	if err := json.Unmarshal([]byte(out), &ps); code != exitOK || err != nil || len(ps) != 1 || ps[0].Rule() != cloudcheck.RuleManilaUnknown {
		t.Errorf("the fit network: exit %d, %v\n%s", code, err, out)
	}

	// patch checks its result the same way: an error stops it, a warning is said.
	target := installConfig(t, "networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\ncompute:\n- name: worker\n")
	before, err := os.ReadFile(target)
	if err != nil {
		t.Fatal(err)
	}
	code, out, errOut = s.cli(t, "installconfig", "patch", target, "--network", s.dhcpOff.ID)
	if code != exitInvalid || !strings.Contains(errOut, "not patched: the cloud rejects the result") ||
		!strings.Contains(errOut, problemLine(false, "compute[0].platform.openstack.additionalNetworkIDs[0]", s.dhcpOff.ID, "network ic-dhcp-off ("+s.dhcpOff.ID+"): no subnet has DHCP enabled")) {
		t.Fatalf("patch with a DHCP-less network: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if after, _ := os.ReadFile(target); string(after) != string(before) {
		t.Fatalf("the refused patch changed the file:\n%s", after)
	}
	code, out, errOut = s.cli(t, "installconfig", "patch", target, "--network", s.gateway.ID, "--dry-run", "-o", "json")
	var report struct {
		Changed  bool                   `json:"changed"`
		Problems installconfig.Problems `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &report); code != exitOK || err != nil || !report.Changed {
		t.Fatalf("patch --dry-run -o json: exit %d, %v\n%s%s", code, err, out, errOut)
	}
	got = nil
	for _, p := range report.Problems {
		got = append(got, string(p.Severity)+" "+p.Rule()+" "+p.Field)
	}
	if want := []string{"warning cloud-manila-unknown ", "warning default-route compute[0].platform.openstack.additionalNetworkIDs[0]"}; !slices.Equal(got, want) {
		t.Errorf("patch -o json problems %v, want %v", got, want)
	}
	code, out, errOut = s.cli(t, "installconfig", "patch", target, "--network", s.gateway.ID)
	if code != exitOK || !strings.Contains(out, "compute[0].platform.openstack.additionalNetworkIDs: added "+s.gateway.ID) ||
		!strings.Contains(errOut, "warning: compute[0].platform.openstack.additionalNetworkIDs[0]: Invalid value: \""+s.gateway.ID+"\": "+subnet(s.gateway, "ic-gateway")+": its gateway 10.63.0.1") {
		t.Errorf("patch with a network that hands out a gateway: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
