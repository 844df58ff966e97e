package openstack

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ReadCloud finds clouds.yaml where Connect does (here: $XDG_CONFIG_HOME/openstack), merges the
// secure.yaml beside it, and reads the CA file the cloud names.
func TestReadCloud(t *testing.T) {
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "openstack")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("clouds.yaml", "clouds:\n  mine:\n    auth: {auth_url: 'https://k/v3', username: u, project_name: p}\n    region_name: R1\n    cacert: ca.pem\n  other:\n    auth: {auth_url: 'https://o/v3'}\n")
	write("secure.yaml", "clouds:\n  mine:\n    auth: {password: from-secure}\n")
	write("ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("OS_CLIENT_CONFIG_FILE", "")
	t.Chdir(t.TempDir()) // no ./clouds.yaml

	c, err := ReadCloud(context.Background(), Config{Cloud: "mine"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Source != filepath.Join(dir, "clouds.yaml") || c.Name != "mine" {
		t.Errorf("read %q from %s", c.Name, c.Source)
	}
	auth := c.Entry["auth"].(map[string]any)
	if auth["password"] != "from-secure" || auth["username"] != "u" || c.Entry["region_name"] != "R1" {
		t.Errorf("secure.yaml not merged: %v", c.Entry)
	}
	if _, ok := c.Entry["cacert"]; ok || !strings.Contains(string(c.CACert), "BEGIN CERTIFICATE") {
		t.Errorf("cacert: entry %v, PEM %q", c.Entry["cacert"], c.CACert)
	}
	y, err := c.Marshal("openstack")
	if err != nil || !strings.Contains(string(y), "openstack:") || strings.Contains(string(y), "other") {
		t.Errorf("marshalled: %s %v", y, err)
	}
	if _, err := ReadCloud(context.Background(), Config{Cloud: "nope"}); KindOf(err) != KindConfig || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown cloud: %v", err)
	}
}
