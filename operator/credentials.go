package operator

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"sigs.k8s.io/yaml"
)

const (
	// CredentialsSecretName is the Secret (in the operator namespace) holding clouds.yaml.
	CredentialsSecretName = "manila-cloud-credentials"
	// CredentialsKey is the key of clouds.yaml in CredentialsSecretName.
	CredentialsKey = "clouds.yaml"
	// CredentialsCAKey optionally holds the PEM CA bundle of the cloud's endpoints (what a
	// clouds.yaml "cacert" path points to on the machine it was written on).
	CredentialsCAKey = "cacert"
	// CredentialsClientCertKey and CredentialsClientKeyKey optionally hold the PEM client
	// certificate and key the cloud's endpoints ask for (what clouds.yaml's "cert" and "key"
	// point to on the machine it was written on).
	CredentialsClientCertKey = "clientcert"
	CredentialsClientKeyKey  = "clientkey"
	// DefaultCloudName is the cloud the cloud-credential-operator writes into clouds.yaml.
	DefaultCloudName = "openstack"

	// DriverSecretName is the Secret the driver reads its OpenStack credentials from.
	DriverSecretName = "csi-manila-secrets"

	// DriverClientCertKey and DriverClientKeyKey hold the client certificate and key in the
	// driver Secret. The driver takes them only as files (os-clientCertPath, os-clientKeyPath):
	// its controller and node plugin containers mount these two keys of the Secret, optionally,
	// at DriverClientTLSDir (assets/controller.yaml, assets/node.yaml). The driver ignores keys
	// it does not know.
	DriverClientCertKey = "client-tls.crt"
	DriverClientKeyKey  = "client-tls.key"
	DriverClientTLSDir  = "/etc/manila-csi-client-tls"
)

// Credentials is one cloud of a clouds.yaml, ready for gophercloud and for the driver.
type Credentials struct {
	CloudName string
	Cloud     clouds.Cloud
	// CAPEM is the CA bundle from the credentials Secret, if any.
	CAPEM []byte
	// ClientCertPEM and ClientKeyPEM are the client certificate and key from the credentials
	// Secret, if any (SetClientCertificate).
	ClientCertPEM, ClientKeyPEM []byte
	// Proxy chooses the HTTP proxy for OpenStack requests (the cluster proxy); nil means the
	// process environment.
	Proxy func(*http.Request) (*url.URL, error)
}

// errCredentials is returned for unusable credentials; its message never holds a secret value.
type errCredentials struct{ msg string }

func (e *errCredentials) Error() string { return e.msg }

// IsCredentialsError reports whether err says the credentials themselves are unusable.
func IsCredentialsError(err error) bool {
	var e *errCredentials
	return errors.As(err, &e)
}

// ParseCredentials picks the cloud out of clouds.yaml: cloudName if given, else "openstack",
// else the only cloud in the file.
func ParseCredentials(cloudsYAML []byte, cloudName string, caPEM []byte) (*Credentials, error) {
	var all clouds.Clouds
	if err := yaml.Unmarshal(cloudsYAML, &all); err != nil {
		// The YAML error may quote the offending line, which may hold a password.
		return nil, &errCredentials{msg: "clouds.yaml is not valid YAML"}
	}
	if len(all.Clouds) == 0 {
		return nil, &errCredentials{msg: "clouds.yaml has no clouds"}
	}
	name := cloudName
	if name == "" {
		if _, ok := all.Clouds[DefaultCloudName]; ok || len(all.Clouds) != 1 {
			name = DefaultCloudName
		} else {
			for n := range all.Clouds {
				name = n
			}
		}
	}
	c, ok := all.Clouds[name]
	if !ok {
		names := make([]string, 0, len(all.Clouds))
		for n := range all.Clouds {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, &errCredentials{msg: fmt.Sprintf("cloud %q not found in clouds.yaml (clouds: %s)", name, strings.Join(names, ", "))}
	}
	if c.AuthInfo == nil || c.AuthInfo.AuthURL == "" {
		return nil, &errCredentials{msg: fmt.Sprintf("cloud %q in clouds.yaml has no auth.auth_url", name)}
	}
	a := c.AuthInfo
	hasPassword := a.Password != "" && (a.Username != "" || a.UserID != "")
	hasAppCred := a.ApplicationCredentialSecret != "" && (a.ApplicationCredentialID != "" || a.ApplicationCredentialName != "")
	if !hasPassword && !hasAppCred {
		return nil, &errCredentials{msg: fmt.Sprintf("cloud %q in clouds.yaml has neither a user and password nor an application credential", name)}
	}
	return &Credentials{CloudName: name, Cloud: c, CAPEM: bytes.TrimSpace(caPEM)}, nil
}

// SetClientCertificate gives the credentials the client certificate and key of the
// credentials Secret: both or neither, and a pair that belongs together. Its errors name no key
// material.
func (c *Credentials) SetClientCertificate(cert, key []byte) error {
	cert, key = bytes.TrimSpace(cert), bytes.TrimSpace(key)
	if len(cert) == 0 && len(key) == 0 {
		return nil
	}
	if len(cert) == 0 || len(key) == 0 {
		return &errCredentials{msg: fmt.Sprintf("keys %s and %s go together (a client certificate and its key); only one is set", CredentialsClientCertKey, CredentialsClientKeyKey)}
	}
	if _, err := tls.X509KeyPair(cert, key); err != nil {
		return &errCredentials{msg: fmt.Sprintf("keys %s and %s are not a usable client certificate and key: %v", CredentialsClientCertKey, CredentialsClientKeyKey, err)}
	}
	c.ClientCertPEM, c.ClientKeyPEM = append([]byte(nil), cert...), append([]byte(nil), key...)
	return nil
}

// DriverSecretData translates the cloud into the keys the Manila CSI driver reads from
// csi-manila-secrets (cloud-provider-openstack's AuthOpts names).
func (c *Credentials) DriverSecretData() map[string][]byte {
	a := c.Cloud.AuthInfo
	d := map[string][]byte{}
	set := func(k, v string) {
		if v != "" {
			d[k] = []byte(v)
		}
	}
	set("os-authURL", a.AuthURL)
	set("os-region", c.Cloud.RegionName)
	if a.ApplicationCredentialSecret != "" {
		set("os-applicationCredentialID", a.ApplicationCredentialID)
		if a.ApplicationCredentialID == "" {
			set("os-applicationCredentialName", a.ApplicationCredentialName)
			// A credential named (not by ID) belongs to a user, who must be identified.
			set("os-userID", a.UserID)
			if a.UserID == "" {
				set("os-userName", a.Username)
				set("os-userDomainID", a.UserDomainID)
				if a.UserDomainID == "" {
					set("os-userDomainName", a.UserDomainName)
				}
			}
		}
		set("os-applicationCredentialSecret", a.ApplicationCredentialSecret)
	} else {
		if a.UserID != "" {
			set("os-userID", a.UserID)
		} else {
			set("os-userName", a.Username)
		}
		set("os-password", a.Password)
		if a.ProjectID != "" {
			set("os-projectID", a.ProjectID)
		} else {
			set("os-projectName", a.ProjectName)
		}
		// The driver wants a domain for password auth: domain_*, else the user's domain.
		switch {
		case a.DomainID != "":
			set("os-domainID", a.DomainID)
		case a.DomainName != "":
			set("os-domainName", a.DomainName)
		case a.UserDomainID != "":
			set("os-domainID", a.UserDomainID)
		case a.UserDomainName != "":
			set("os-domainName", a.UserDomainName)
		case a.DefaultDomain != "":
			set("os-domainID", a.DefaultDomain)
		}
		if a.UserDomainID != "" {
			set("os-userDomainID", a.UserDomainID)
		} else {
			set("os-userDomainName", a.UserDomainName)
		}
		if a.ProjectDomainID != "" {
			set("os-projectDomainID", a.ProjectDomainID)
		} else {
			set("os-projectDomainName", a.ProjectDomainName)
		}
	}
	if len(c.CAPEM) > 0 {
		d["os-certAuthority"] = append([]byte(nil), c.CAPEM...)
	}
	if len(c.ClientCertPEM) > 0 {
		d[DriverClientCertKey] = append([]byte(nil), c.ClientCertPEM...)
		d[DriverClientKeyKey] = append([]byte(nil), c.ClientKeyPEM...)
		set("os-clientCertPath", DriverClientTLSDir+"/tls.crt")
		set("os-clientKeyPath", DriverClientTLSDir+"/tls.key")
	}
	if c.Cloud.Verify != nil && !*c.Cloud.Verify {
		set("os-TLSInsecure", "true")
	}
	// The endpoint interface clouds.yaml asks for (endpoint_type, else interface), as the
	// operator and the CLI use it: without it the driver takes the catalog's public endpoints,
	// which a cluster on a cloud that gives it internal ones may not reach.
	if e := EndpointInterface(c.Cloud); e != "public" {
		set("os-endpointType", e)
	}
	return d
}

// EndpointInterface is the catalog interface a cloud of clouds.yaml asks for: public, internal
// or admin, read as gophercloud and the OpenStack client read endpoint_type and interface
// ("internalURL" is internal; anything unknown is public).
func EndpointInterface(c clouds.Cloud) string {
	v := c.EndpointType
	if v == "" {
		v = c.Interface
	}
	switch strings.TrimSuffix(v, "URL") {
	case "internal":
		return "internal"
	case "admin":
		return "admin"
	}
	return "public"
}

// AuthYAML is clouds.yaml with only this cloud, without the cacert path (the CA comes from the
// Secret, not from a file on this machine), for gophercloud's parser.
func (c *Credentials) AuthYAML() ([]byte, error) {
	cl := c.Cloud
	cl.CACertFile = ""
	cl.ClientCertFile = ""
	cl.ClientKeyFile = ""
	return yaml.Marshal(clouds.Clouds{Clouds: map[string]clouds.Cloud{c.CloudName: cl}})
}
