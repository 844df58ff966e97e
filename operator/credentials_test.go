package operator

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/manila-setup/manila-setup/internal/testcert"
)

// Every clouds.yaml shape the driver secret must handle: password or application credential,
// project and domains by name or by ID, region, CA, verify false.
func TestDriverSecretTranslation(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		cloud   string
		ca      string
		want    map[string]string
		wantErr string
	}{
		{
			name: "password, everything by name",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://keystone:5000/v3", username: alice, password: "s3cr3t", project_name: demo, user_domain_name: Default, project_domain_name: Default}
    region_name: RegionOne`,
			want: map[string]string{"os-authURL": "https://keystone:5000/v3", "os-region": "RegionOne", "os-userName": "alice", "os-password": "s3cr3t",
				"os-projectName": "demo", "os-domainName": "Default", "os-userDomainName": "Default", "os-projectDomainName": "Default"},
		},
		{
			name: "password, everything by ID",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", user_id: u1, password: p, project_id: p1, user_domain_id: d1, project_domain_id: d2}`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-userID": "u1", "os-password": "p", "os-projectID": "p1",
				"os-domainID": "d1", "os-userDomainID": "d1", "os-projectDomainID": "d2"},
		},
		{
			name: "password with an explicit domain",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", username: a, password: p, project_name: x, domain_name: Corp, user_domain_name: Users}`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-userName": "a", "os-password": "p", "os-projectName": "x",
				"os-domainName": "Corp", "os-userDomainName": "Users"},
		},
		{
			name: "password with only default_domain",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", username: a, password: p, project_name: x, default_domain: default}`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-userName": "a", "os-password": "p", "os-projectName": "x", "os-domainID": "default"},
		},
		{
			name: "application credential by ID",
			yaml: `clouds:
  openstack:
    auth_type: v3applicationcredential
    auth: {auth_url: "https://k/v3", application_credential_id: ac1, application_credential_secret: "acsecret"}
    region_name: R2`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-region": "R2", "os-applicationCredentialID": "ac1", "os-applicationCredentialSecret": "acsecret"},
		},
		{
			name: "application credential by name needs the user",
			yaml: `clouds:
  openstack:
    auth_type: v3applicationcredential
    auth: {auth_url: "https://k/v3", application_credential_name: ocp, application_credential_secret: s, username: bob, user_domain_name: Default}`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-applicationCredentialName": "ocp", "os-applicationCredentialSecret": "s",
				"os-userName": "bob", "os-userDomainName": "Default"},
		},
		{
			name: "CA from the Secret and verify false",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", username: a, password: p, project_id: x, user_domain_id: default}
    cacert: /home/me/ca.pem
    verify: false`,
			ca: "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
			want: map[string]string{"os-authURL": "https://k/v3", "os-userName": "a", "os-password": "p", "os-projectID": "x", "os-domainID": "default",
				"os-userDomainID": "default", "os-certAuthority": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----", "os-TLSInsecure": "true"},
		},
		{
			name: "the internal endpoints",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", application_credential_id: i, application_credential_secret: s}
    interface: internal`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-applicationCredentialID": "i", "os-applicationCredentialSecret": "s", "os-endpointType": "internal"},
		},
		{
			name: "endpoint_type wins over interface; the URL suffix of the old catalog names",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", application_credential_id: i, application_credential_secret: s}
    interface: internal
    endpoint_type: adminURL`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-applicationCredentialID": "i", "os-applicationCredentialSecret": "s", "os-endpointType": "admin"},
		},
		{
			name: "public is the driver's default: not written",
			yaml: `clouds:
  openstack:
    auth: {auth_url: "https://k/v3", application_credential_id: i, application_credential_secret: s}
    interface: public`,
			want: map[string]string{"os-authURL": "https://k/v3", "os-applicationCredentialID": "i", "os-applicationCredentialSecret": "s"},
		},
		{
			name: "the only cloud is used when there is no openstack cloud",
			yaml: "clouds:\n  mycloud:\n    auth: {auth_url: \"https://k/v3\", application_credential_id: i, application_credential_secret: s}\n",
			want: map[string]string{"os-authURL": "https://k/v3", "os-applicationCredentialID": "i", "os-applicationCredentialSecret": "s"},
		},
		{
			name:  "a named cloud",
			cloud: "b",
			yaml:  "clouds:\n  a: {auth: {auth_url: \"https://a/v3\", application_credential_id: i, application_credential_secret: s}}\n  b: {auth: {auth_url: \"https://b/v3\", application_credential_id: j, application_credential_secret: t}}\n",
			want:  map[string]string{"os-authURL": "https://b/v3", "os-applicationCredentialID": "j", "os-applicationCredentialSecret": "t"},
		},
		{name: "two clouds and none named openstack", yaml: "clouds:\n  a: {auth: {auth_url: x}}\n  b: {auth: {auth_url: y}}\n", wantErr: `cloud "openstack" not found in clouds.yaml (clouds: a, b)`},
		{name: "no auth_url", yaml: "clouds:\n  openstack: {auth: {username: a, password: p}}\n", wantErr: "has no auth.auth_url"},
		{name: "no secret at all", yaml: "clouds:\n  openstack: {auth: {auth_url: x, username: a}}\n", wantErr: "neither a user and password nor an application credential"},
		{name: "not YAML", yaml: "clouds: [password: hunter2", wantErr: "not valid YAML"},
		{name: "empty", yaml: "", wantErr: "has no clouds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseCredentials([]byte(tt.yaml), tt.cloud, []byte(tt.ca))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				for _, secret := range []string{"hunter2", "s3cr3t"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q contains a secret value", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := c.DriverSecretData()
			if len(got) != len(tt.want) {
				t.Errorf("keys: got %v, want %v", keyList(got), keyList(toBytes(tt.want)))
			}
			for k, v := range tt.want {
				if string(got[k]) != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func toBytes(m map[string]string) map[string][]byte {
	out := map[string][]byte{}
	for k, v := range m {
		out[k] = []byte(v)
	}
	return out
}

func TestMachineNetworksFromInstallConfig(t *testing.T) {
	got, err := MachineNetworksFromInstallConfig([]byte("networking:\n  machineNetwork:\n  - cidr: 10.196.0.0/16\n  - cidr: 192.168.1.7/24\n"))
	if err != nil || strings.Join(got, ",") != "10.196.0.0/16,192.168.1.0/24" {
		t.Errorf("got %v, %v", got, err)
	}
	for _, bad := range []string{"networking: {}", "networking: {machineNetwork: [{cidr: nope}]}", "{{"} {
		if _, err := MachineNetworksFromInstallConfig([]byte(bad)); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func keyList(d map[string][]byte) string {
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return fmt.Sprint(keys)
}

// A client certificate of the credentials reaches the driver Secret as the two files the driver
// reads (os-clientCertPath, os-clientKeyPath) and their content under the keys the driver's
// containers mount; a lone half or a pair that does not belong together is refused, and no
// error holds key material.
func TestClientCertificateInTheDriverSecret(t *testing.T) {
	creds, err := ParseCredentials([]byte("clouds:\n  openstack:\n    auth: {auth_url: https://k:5000/v3, username: u, password: pw, project_name: p, user_domain_name: Default}\n"), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := creds.DriverSecretData(); d["os-clientCertPath"] != nil || d[DriverClientCertKey] != nil {
		t.Errorf("without a client certificate the Secret has %s", keyList(d))
	}
	cert, key := testcert.Pair(t, "manila-setup client")
	_, otherKey := testcert.Pair(t, "another")
	for _, tt := range []struct {
		name      string
		cert, key []byte
		want      string
	}{
		{"only the certificate", cert, nil, "go together"},
		{"only the key", nil, key, "go together"},
		{"a key of another certificate", cert, otherKey, "not a usable client certificate"},
	} {
		err := (&Credentials{}).SetClientCertificate(tt.cert, tt.key)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !IsCredentialsError(err) {
			t.Errorf("%s: %v, want a credentials error saying %q", tt.name, err, tt.want)
		} else if strings.Contains(err.Error(), "PRIVATE KEY") || strings.Contains(err.Error(), string(key[30:60])) {
			t.Errorf("%s: the error holds key material: %v", tt.name, err)
		}
	}
	if err := creds.SetClientCertificate(cert, key); err != nil {
		t.Fatal(err)
	}
	d := creds.DriverSecretData()
	if string(d["os-clientCertPath"]) != DriverClientTLSDir+"/tls.crt" || string(d["os-clientKeyPath"]) != DriverClientTLSDir+"/tls.key" ||
		!bytes.Equal(d[DriverClientCertKey], bytes.TrimSpace(cert)) || !bytes.Equal(d[DriverClientKeyKey], bytes.TrimSpace(key)) {
		t.Errorf("driver Secret with a client certificate: keys %s", keyList(d))
	}
}
