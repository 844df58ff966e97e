//go:build integration

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/installconfig"
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
		if code != exitOK || out != file+": valid\n" || errOut != "" {
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
			`compute[1].platform.openstack.additionalNetworkIDs[0]: Invalid value: "` + storage + `": subnet "storage-subnet" 10.0.0.0/24 of network "storage" (` + storage + `) overlaps the machine network 10.0.0.0/16 (the installer's default, as networking.machineNetwork is not set)`,
			file + ": invalid, 4 errors, 1 warning",
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
		if len(ps) != 5 {
			t.Errorf("%d problems, want 5: %v", len(ps), rules)
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
		// The head ends inside platform.openstack, so the default pool lands there.
		code, out, errOut := runCLI(t, "installconfig", "validate", "--strict", file)
		if code != exitOK {
			t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
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
	if code != exitOK || !strings.Contains(out, "compute[0].platform.openstack.additionalNetworkIDs: added "+storage) || errOut != "" {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "installconfig", "validate", "--strict", file)
	if code != exitOK {
		t.Errorf("the patched file does not pass validate --strict with the cloud (exit %d):\n%s", code, out)
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
	if code, out, _ = runCLI(t, "installconfig", "validate", "--strict", file); code != exitOK {
		t.Errorf("exit %d after --discover:\n%s", code, out)
	}

	code, _, errOut = runCLI(t, "installconfig", "patch", file, "--discover", "--offline")
	if code != exitUsage || !strings.Contains(errOut, "--discover asks the cloud") {
		t.Errorf("--discover --offline: exit %d, %s", code, errOut)
	}
}
