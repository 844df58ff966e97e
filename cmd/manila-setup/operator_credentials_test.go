package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/deploy"
)

// The plan itself is tested in operator/deploy (TestPlanCredentials); here, the exit codes and
// the flags the message names.
func TestPlanCredentials(t *testing.T) {
	cco := func(has bool, err error) func() (bool, error) { return func() (bool, error) { return has, err } }
	for _, tt := range []struct {
		name    string
		noCreds bool
		cloud   string
		hasCCO  func() (bool, error)
		want    deploy.CredentialsPlan
		code    int
		errText string
	}{
		{"--no-credentials", true, "mycloud", cco(true, nil), deploy.CredentialsNone, exitOK, ""},
		{"--os-cloud wins over the cloud-credential operator", false, "mycloud", cco(true, nil), deploy.CredentialsCloudsYAML, exitOK, ""},
		{"OpenShift's way without --os-cloud", false, "", cco(true, nil), deploy.CredentialsCCO, exitOK, ""},
		{"no source at all", false, "", cco(false, nil), deploy.CredentialsNone, exitUsage, "--os-cloud (or OS_CLOUD) is required"},
		{"the API server cannot be asked", false, "", cco(false, errors.New("connection refused")), deploy.CredentialsNone, exitUsage, "connection refused"},
	} {
		got, err := planCredentials(tt.noCreds, tt.cloud, tt.hasCCO)
		if got != tt.want || exitCodeOf(err) != tt.code || (tt.errText != "" && (err == nil || !strings.Contains(err.Error(), tt.errText))) {
			t.Errorf("%s: plan %v, err %v (exit %d)", tt.name, got, err, exitCodeOf(err))
		}
	}
}

// operator install --os-cloud finds clouds.yaml where every other command does (here
// $XDG_CONFIG_HOME/openstack, not only ~/.config) and merges the secure.yaml beside it: the
// password lives only there, and the Secret must carry it.
func TestOperatorInstallCredentialsFromXDGAndSecureYAML(t *testing.T) {
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "openstack")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	const caPEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
	for name, content := range map[string]string{
		"clouds.yaml": "clouds:\n  mine:\n    auth: {auth_url: 'https://keystone.example:5000/v3', username: admin, project_name: p, user_domain_name: Default, project_domain_name: Default}\n    region_name: R1\n    cacert: ca.pem\n  other:\n    auth: {auth_url: 'https://other.example/v3', username: o, password: o}\n",
		"secure.yaml": "clouds:\n  mine:\n    auth: {password: s3cret-from-secure}\n",
		"ca.pem":      caPEM,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\ncurrent-context: c\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("HOME", t.TempDir()) // no ~/.config/openstack
	t.Setenv("OS_CLIENT_CONFIG_FILE", "")
	t.Chdir(t.TempDir()) // no ./clouds.yaml

	g := &GlobalOptions{Kubeconfig: kubeconfigPath, OSCloud: "mine", Output: outputText}
	g.Complete()
	o := &OperatorInstallOptions{g: g, streams: IOStreams{Out: io.Discard, ErrOut: io.Discard}}
	if err := o.Complete(nil, nil); err != nil {
		t.Fatalf("operator install --os-cloud mine: %v (exit %d)", err, exitCodeOf(err))
	}
	creds, err := operator.ParseCredentials(o.credentials[operator.CredentialsKey], operator.DefaultCloudName, o.credentials[operator.CredentialsCAKey])
	if err != nil {
		t.Fatalf("the Secret's clouds.yaml: %v", err)
	}
	if a := creds.Cloud.AuthInfo; a.Password != "s3cret-from-secure" || a.Username != "admin" || creds.Cloud.RegionName != "R1" {
		t.Errorf("secure.yaml not merged into the Secret: %+v, region %q", a, creds.Cloud.RegionName)
	}
	if string(o.credentials[operator.CredentialsCAKey]) != caPEM {
		t.Errorf("cacert: %q", o.credentials[operator.CredentialsCAKey])
	}
	if strings.Contains(string(o.credentials[operator.CredentialsKey]), "other") {
		t.Errorf("another cloud in the Secret:\n%s", o.credentials[operator.CredentialsKey])
	}

	// A cloud that is not there: the error names it and the file found under $XDG_CONFIG_HOME.
	g.OSCloud = "nope"
	err = (&OperatorInstallOptions{g: g}).Complete(nil, nil)
	if err == nil || !strings.Contains(err.Error(), `"nope"`) || !strings.Contains(err.Error(), filepath.Join(dir, "clouds.yaml")) {
		t.Errorf("unknown cloud: %v", err)
	}
}
