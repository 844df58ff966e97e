package deploy

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/internal/testcert"
	"github.com/manila-setup/manila-setup/operator"
)

func TestPlanCredentials(t *testing.T) {
	asked := false
	cco := func(has bool, err error) func() (bool, error) {
		return func() (bool, error) { asked = true; return has, err }
	}
	refused := errors.New("connection refused")
	for _, tt := range []struct {
		name    string
		noCreds bool
		cloud   string
		hasCCO  func() (bool, error)
		want    CredentialsPlan
		err     error
		asked   bool
	}{
		{"no credentials asked for", true, "mycloud", cco(true, nil), CredentialsNone, nil, false},
		{"a cloud of clouds.yaml wins over the cloud-credential operator", false, "mycloud", cco(true, nil), CredentialsCloudsYAML, nil, false},
		{"OpenShift's way without a cloud", false, "", cco(true, nil), CredentialsCCO, nil, true},
		{"no source at all", false, "", cco(false, nil), CredentialsNone, ErrNoCredentialsSource, true},
		{"the API server cannot be asked", false, "", cco(false, refused), CredentialsNone, refused, true},
	} {
		asked = false
		got, err := PlanCredentials(tt.noCreds, tt.cloud, tt.hasCCO)
		if got != tt.want || !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) || asked != tt.asked {
			t.Errorf("%s: plan %v, err %v, cloud-credential operator asked %v; want %v, %v, %v", tt.name, got, err, asked, tt.want, tt.err, tt.asked)
		}
		if errors.Is(err, refused) && errors.Is(err, ErrNoCredentialsSource) {
			t.Errorf("%s: a cluster that cannot be asked is not a cluster without a source", tt.name)
		}
	}
}

func TestCredentialsFromCloudsYAML(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ca.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
	write("clouds.yaml", `clouds:
  mine:
    auth: {auth_url: "https://k/v3", username: u, password: pw, project_name: p, user_domain_name: Default}
    cacert: ca.pem
  other:
    auth: {auth_url: "https://o/v3"}
`)
	data, err := CredentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "mine")
	if err != nil {
		t.Fatal(err)
	}
	y := string(data[operator.CredentialsKey])
	if !strings.Contains(y, "openstack:") || strings.Contains(y, "other") || strings.Contains(y, "cacert") || !strings.Contains(string(data[operator.CredentialsCAKey]), "BEGIN CERTIFICATE") {
		t.Errorf("credentials: %q / %q", y, data[operator.CredentialsCAKey])
	}
	var invalid *InvalidCloudError
	if _, err := CredentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "nope"); !errors.As(err, &invalid) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("unknown cloud: %v", err)
	}
	if _, err := CredentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "other"); !errors.As(err, &invalid) || !strings.Contains(err.Error(), `cloud "other" in `) {
		t.Errorf("a cloud without credentials must be rejected: %v", err)
	}
	if _, err := CredentialsFromCloudsYAML(context.Background(), dir+"/missing.yaml", "mine"); !errors.Is(err, fs.ErrNotExist) || errors.As(err, &invalid) {
		t.Errorf("a clouds.yaml that is not there: %v", err)
	}
}

// clouds.yaml is found where every command finds it (here $XDG_CONFIG_HOME/openstack) and the
// secure.yaml beside it is merged: the password lives only there, and the Secret must carry it.
func TestCredentialsFromCloudsYAMLFoundAndMerged(t *testing.T) {
	xdg := t.TempDir()
	dir := filepath.Join(xdg, "openstack")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"clouds.yaml": "clouds:\n  mine:\n    auth: {auth_url: 'https://keystone.example:5000/v3', username: admin, project_name: p, user_domain_name: Default, project_domain_name: Default}\n    region_name: R1\n",
		"secure.yaml": "clouds:\n  mine:\n    auth: {password: s3cret-from-secure}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("XDG_CONFIG_HOME", xdg)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("OS_CLIENT_CONFIG_FILE", "")
	t.Chdir(t.TempDir())
	data, err := CredentialsFromCloudsYAML(context.Background(), "", "mine")
	if err != nil {
		t.Fatal(err)
	}
	creds, err := operator.ParseCredentials(data[operator.CredentialsKey], operator.DefaultCloudName, data[operator.CredentialsCAKey])
	if err != nil {
		t.Fatalf("the Secret's clouds.yaml: %v", err)
	}
	if a := creds.Cloud.AuthInfo; a.Password != "s3cret-from-secure" || a.Username != "admin" || creds.Cloud.RegionName != "R1" {
		t.Errorf("secure.yaml not merged: %+v, region %q", a, creds.Cloud.RegionName)
	}
}

// The cert and key clouds.yaml names (beside it) go into the credentials Secret as content, out
// of its clouds.yaml; a cloud naming one of them only is refused.
func TestCredentialsFromCloudsYAMLClientCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, key := testcert.Pair(t, "client")
	for name, content := range map[string][]byte{"client.crt": cert, "client.key": key, "clouds.yaml": []byte(`clouds:
  mine:
    auth: {auth_url: "https://k/v3", username: u, password: pw, project_name: p, user_domain_name: Default}
    cert: client.crt
    key: client.key
  half:
    auth: {auth_url: "https://k/v3", username: u, password: pw, project_name: p, user_domain_name: Default}
    cert: client.crt
`)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data, err := CredentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "mine")
	if err != nil {
		t.Fatal(err)
	}
	y := string(data[operator.CredentialsKey])
	if strings.Contains(y, "client.crt") || strings.Contains(y, "client.key") ||
		string(data[operator.CredentialsClientCertKey]) != string(cert) || string(data[operator.CredentialsClientKeyKey]) != string(key) {
		t.Errorf("credentials with a client certificate: clouds.yaml %q, keys %v", y, len(data))
	}
	var invalid *InvalidCloudError
	if _, err := CredentialsFromCloudsYAML(context.Background(), dir+"/clouds.yaml", "half"); err == nil || !strings.Contains(err.Error(), "cert and key go together") || errors.As(err, &invalid) && strings.Contains(err.Error(), "PRIVATE") {
		t.Errorf("a cloud with a certificate and no key: %v", err)
	}
}
