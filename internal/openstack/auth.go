package openstack

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	gcopenstack "github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"sigs.k8s.io/yaml"

	"github.com/manila-setup/manila-setup/internal/inputfile"
)

// DefaultTimeout bounds one HTTP request (connect, TLS, answer) when Config.Timeout is zero.
const DefaultTimeout = 60 * time.Second

// Config says which cloud to use and how to reach it. Only one of CloudsYAML and CloudsFile is
// needed; with neither, clouds.yaml is searched where the openstack CLI looks for it.
type Config struct {
	// Cloud is the entry of clouds.yaml to use. Empty: $OS_CLOUD; if that is empty too, the
	// entry named "openstack" or the only entry of the file.
	Cloud string
	// CloudsFile is the path of clouds.yaml. Empty: $OS_CLIENT_CONFIG_FILE, ./clouds.yaml,
	// ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml. A secure.yaml beside it is merged.
	CloudsFile string
	// CloudsYAML is the content of clouds.yaml (e.g. from a Secret); it wins over CloudsFile.
	CloudsYAML []byte
	// SecureYAML is an optional secure.yaml content merged into CloudsYAML.
	SecureYAML []byte
	// CABundle is a PEM file of CAs to trust instead of cacert in clouds.yaml (--ca-bundle).
	CABundle string
	// CABundlePEM is PEM content to trust (e.g. from a ConfigMap); it wins over CABundle.
	CABundlePEM []byte
	// ClientCertPEM and ClientKeyPEM are the client certificate and its key to present to the
	// cloud's endpoints (the content of cert and key of clouds.yaml, e.g. from a Secret); they
	// win over the files clouds.yaml names.
	ClientCertPEM, ClientKeyPEM []byte
	// Region and Interface override region_name and interface of clouds.yaml.
	Region    string
	Interface string
	// Timeout bounds each HTTP request; zero means DefaultTimeout.
	Timeout time.Duration
	// PageSize asks for pages of that many items; zero lets each server return everything it
	// allows in one answer (fewest requests).
	PageSize int
	// UserAgent is prepended to gophercloud's User-Agent.
	UserAgent string
	// Warnf receives warnings, such as TLS verification being off. Nil: discarded.
	Warnf func(format string, args ...any)
	// Logf receives one line per HTTP request: method, URL, status, duration. Nil: silent.
	Logf func(format string, args ...any)
	// LogHeaders adds request and answer headers to Logf, with secrets replaced.
	LogHeaders bool
	// WrapTransport, when set, wraps the HTTP transport (tests count requests with it).
	WrapTransport func(http.RoundTripper) http.RoundTripper
}

// Client is an authenticated connection to one cloud. It holds one Keystone token, reused by
// every call and renewed only when a service answers 401. Safe for concurrent use.
type Client struct {
	provider *gophercloud.ProviderClient
	catalog  *tokens.ServiceCatalog

	cloud       string
	region      string
	iface       gophercloud.Availability
	authURL     string
	identity    string // who we are, for messages: user "demo", project "demo"
	appCred     bool
	projectID   string
	projectName string
	caSource    string
	timeout     time.Duration
	pageSize    int
	secrets     []string

	mu      sync.Mutex
	neutron *gophercloud.ServiceClient
	nova    *gophercloud.ServiceClient
	manila  *manilaConn
}

// Connect reads clouds.yaml, authenticates once and returns the client. Errors are *Error.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	sel, err := selectCloud(ctx, cfg)
	if err != nil {
		return nil, err
	}
	data, secure, source, name, entry := sel.data, sel.secure, sel.source, sel.name, sel.entries[sel.name]

	opts := []clouds.ParseOption{clouds.WithCloudName(name), clouds.WithCloudsYAML(bytes.NewReader(data))}
	if len(secure) > 0 {
		opts = append(opts, clouds.WithSecureYAML(bytes.NewReader(secure)))
	}
	if cfg.Region != "" {
		opts = append(opts, clouds.WithRegion(cfg.Region))
	}
	if cfg.Interface != "" {
		opts = append(opts, clouds.WithEndpointType(cfg.Interface))
	}
	if cfg.CABundle != "" && len(cfg.CABundlePEM) == 0 {
		// Read here, bounded and stopped by ctx, rather than by gophercloud, which would read
		// a device or a pipe given by mistake without end.
		if cfg.CABundlePEM, err = inputfile.ReadFile(ctx, cfg.CABundle, inputfile.CABundle); err != nil {
			return nil, configError(err, "the CA bundle %s cannot be used: %v", cfg.CABundle, unwrapPath(err))
		}
	}
	// gophercloud reads OS_CACERT and cacert of clouds.yaml itself: each is checked first.
	for _, ca := range []struct{ path, from string }{{os.Getenv("OS_CACERT"), "OS_CACERT"}, {entry.CACert, "cacert in " + source}} {
		if err := checkCAFile(ca.path); err != nil {
			return nil, configError(err, "the CA bundle %s (%s) cannot be used: %v", ca.path, ca.from, err)
		}
	}
	ao, eo, tlsConfig, err := clouds.Parse(opts...)
	if err != nil {
		return nil, configError(err, "cloud %q in %s cannot be used: %s", name, source, parseProblem(err))
	}

	c := &Client{
		cloud:    name,
		region:   eo.Region,
		iface:    eo.Availability,
		authURL:  baseOf(ao.IdentityEndpoint),
		timeout:  cfg.Timeout,
		pageSize: cfg.PageSize,
		caSource: "this machine's trust store",
	}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.iface == "" {
		c.iface = gophercloud.AvailabilityPublic
	}
	c.secrets = nonEmpty(ao.Password, ao.ApplicationCredentialSecret, ao.TokenID)
	c.appCred = ao.ApplicationCredentialID != "" || ao.ApplicationCredentialName != ""
	c.identity = describeIdentity(ao)

	switch {
	case len(cfg.CABundlePEM) > 0:
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(cfg.CABundlePEM) {
			return nil, configError(nil, "the CA bundle given for cloud %q holds no PEM certificate", name)
		}
		tlsConfig.RootCAs = pool
		c.caSource = "the CA bundle given"
	case cfg.CABundle != "":
		c.caSource = "the CA bundle " + cfg.CABundle
	case os.Getenv("OS_CACERT") != "":
		c.caSource = "the CA bundle " + os.Getenv("OS_CACERT") + " (OS_CACERT)"
	case entry.CACert != "":
		c.caSource = "the CA bundle " + entry.CACert + " (cacert in clouds.yaml)"
	}
	if len(cfg.ClientCertPEM) > 0 || len(cfg.ClientKeyPEM) > 0 {
		pair, err := tls.X509KeyPair(cfg.ClientCertPEM, cfg.ClientKeyPEM)
		if err != nil {
			// The parser's words name no key material.
			return nil, configError(err, "the client certificate and key given for cloud %q cannot be used: %v", name, err)
		}
		tlsConfig.Certificates = []tls.Certificate{pair}
	}
	if tlsConfig.InsecureSkipVerify && cfg.Warnf != nil {
		cfg.Warnf("TLS certificate verification is off for cloud %q (verify: false in clouds.yaml): anyone on the network path could read its credentials. Set cacert to the cloud's CA bundle instead.", name)
	}

	if ao.IdentityEndpoint == "" {
		return nil, configError(nil, "cloud %q in %s has no auth.auth_url: add the Keystone URL (e.g. https://keystone.example.com:5000/v3)", name, source)
	}
	// Re-authenticate when a token expires (401), never before; tokens passed in cannot renew.
	ao.AllowReauth = ao.TokenID == ""

	pc, err := gcopenstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return nil, configError(err, "cloud %q in %s: auth_url %q is not a valid URL", name, source, ao.IdentityEndpoint)
	}
	pc.HTTPClient = *newHTTPClient(cfg, tlsConfig, c.timeout, c.redact)
	pc.UserAgent.Prepend(strings.TrimSpace(cfg.UserAgent))
	c.provider = pc

	if err := gcopenstack.Authenticate(ctx, pc, ao); err != nil {
		return nil, c.explain(call{service: "Keystone", what: "authenticating to cloud " + fmt.Sprintf("%q", name)}, err)
	}
	created, ok := pc.GetAuthResult().(tokens.CreateResult)
	if !ok {
		return nil, configError(nil, "cloud %q: auth_url %s is not a Keystone v3 endpoint; manila-setup needs Keystone v3", name, ao.IdentityEndpoint)
	}
	if c.catalog, err = created.ExtractServiceCatalog(); err != nil {
		return nil, c.explain(call{service: "Keystone", what: "reading the service catalog"}, err)
	}
	if p, err := created.ExtractProject(); err == nil && p != nil {
		c.projectID, c.projectName = p.ID, p.Name
	}
	return c, nil
}

// Cloud is the name of the clouds.yaml entry in use.
func (c *Client) Cloud() string { return c.cloud }

// Region is the region the client's endpoints come from ("" means the first one found).
func (c *Client) Region() string { return c.region }

// ProjectID is the project the token is scoped to.
func (c *Client) ProjectID() string { return c.projectID }

// Identity describes who the client acts as, without secrets: `user "demo", project "demo"`.
func (c *Client) Identity() string { return c.identity }

// HasService reports whether the Keystone catalog lists one of the service types (e.g.
// "sharev2", "network") for the client's region and interface. It makes no request.
func (c *Client) HasService(types ...string) bool {
	_, err := c.endpoint(types...)
	return err == nil
}

// endpoint finds a service's URL in the catalog of the token, for the region and interface of
// clouds.yaml. Unlike gophercloud's locator it makes no version-discovery request.
func (c *Client) endpoint(types ...string) (string, error) {
	for _, entry := range c.catalog.Entries {
		if !slices.Contains(types, entry.Type) {
			continue
		}
		for _, ep := range entry.Endpoints {
			if ep.Interface != string(c.iface) {
				continue
			}
			if c.region != "" && ep.Region != c.region && ep.RegionID != c.region {
				continue
			}
			return gophercloud.NormalizeURL(ep.URL), nil
		}
	}
	return "", &gophercloud.ErrEndpointNotFound{}
}

// redact replaces every secret the client knows (password, application-credential secret,
// current token) in s. Messages are built without them; this is the second line of defence.
func (c *Client) redact(s string) string {
	secrets := c.secrets
	if c.provider != nil {
		if t := c.provider.Token(); t != "" {
			secrets = append(slices.Clip(secrets), t)
		}
	}
	for _, secret := range secrets {
		if len(secret) >= 4 {
			s = strings.ReplaceAll(s, secret, "<redacted>")
		}
	}
	return s
}

func (c *Client) credentialKind() string {
	if c.appCred {
		return "application_credential_id and application_credential_secret"
	}
	return "user name, password, project and domains"
}

func (c *Client) projectLabel() string {
	switch {
	case c.projectName != "":
		return fmt.Sprintf("%q", c.projectName)
	case c.projectID != "":
		return c.projectID
	}
	return "of these credentials"
}

func describeIdentity(ao gophercloud.AuthOptions) string {
	switch {
	case ao.ApplicationCredentialID != "":
		return "application credential " + ao.ApplicationCredentialID
	case ao.ApplicationCredentialName != "":
		return fmt.Sprintf("application credential %q of user %q", ao.ApplicationCredentialName, coalesce(ao.Username, ao.UserID))
	case ao.TokenID != "" && ao.Username == "" && ao.UserID == "":
		return "a token"
	}
	project := coalesce(ao.TenantName, ao.TenantID)
	if ao.Scope != nil {
		project = coalesce(ao.Scope.ProjectName, ao.Scope.ProjectID, project)
	}
	if project == "" {
		return fmt.Sprintf("user %q", coalesce(ao.Username, ao.UserID))
	}
	return fmt.Sprintf("user %q, project %q", coalesce(ao.Username, ao.UserID), project)
}

// cloudEntry is what the package itself reads from a clouds.yaml entry (the rest is
// gophercloud's business): enough to choose the cloud and word messages.
type cloudEntry struct {
	CACert string `json:"cacert"`
}

// selectedCloud is clouds.yaml as read for cfg, and the cloud chosen in it.
type selectedCloud struct {
	data, secure []byte
	source, name string
	entries      map[string]cloudEntry
}

// selectCloud finds clouds.yaml and chooses the cloud, as Connect and ReadCloud both do.
func selectCloud(ctx context.Context, cfg Config) (*selectedCloud, error) {
	data, secure, source, err := readCloudsYAML(ctx, cfg)
	if err != nil {
		return nil, err
	}
	entries, err := cloudEntries(data, source)
	if err != nil {
		return nil, err
	}
	name, err := chooseCloud(cfg.Cloud, entries, source)
	if err != nil {
		return nil, err
	}
	return &selectedCloud{data: data, secure: secure, source: source, name: name, entries: entries}, nil
}

// unwrapPath is the reason of a *fs.PathError without the path, which the message already
// names; other errors as they are.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// checkCAFile refuses a CA bundle that gophercloud would read without a limit: larger than a CA
// bundle may be, a directory, or a stream (a pipe, a device). "" passes.
func checkCAFile(path string) error {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil // gophercloud says it cannot be read, as before
	}
	if err := inputfile.Check(path, st, inputfile.CABundle); err != nil {
		return err
	}
	if inputfile.IsStream(st) {
		return fmt.Errorf("%s is not a regular file (a pipe or a device); a CA bundle is a PEM file, or give it with --ca-bundle", path)
	}
	return nil
}

// readCloudsYAML returns clouds.yaml (and secure.yaml) content and where it came from, each read
// bounded and stopped by ctx (internal/inputfile).
func readCloudsYAML(ctx context.Context, cfg Config) (data, secure []byte, source string, err error) {
	if len(cfg.CloudsYAML) > 0 {
		return cfg.CloudsYAML, cfg.SecureYAML, "the clouds.yaml given", nil
	}
	var locations []string
	switch {
	case cfg.CloudsFile != "":
		locations = []string{cfg.CloudsFile}
	case os.Getenv("OS_CLIENT_CONFIG_FILE") != "":
		locations = []string{os.Getenv("OS_CLIENT_CONFIG_FILE")}
	default:
		if wd, err := os.Getwd(); err == nil {
			locations = append(locations, filepath.Join(wd, "clouds.yaml"))
		}
		userConfig := os.Getenv("XDG_CONFIG_HOME")
		if userConfig == "" {
			if home, err := os.UserHomeDir(); err == nil {
				userConfig = filepath.Join(home, ".config")
			}
		}
		if userConfig != "" {
			locations = append(locations, filepath.Join(userConfig, "openstack", "clouds.yaml"))
		}
		locations = append(locations, "/etc/openstack/clouds.yaml")
	}
	for _, path := range locations {
		data, err := inputfile.ReadFile(ctx, path, inputfile.CloudsYAML)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, "", configError(err, "clouds.yaml %s cannot be read: %v", path, unwrapPath(err))
		}
		// secure.yaml is optional: one that is missing or cannot be read is left out, as
		// before; one too large or interrupted is an error, not a silent skip.
		securePath := filepath.Join(filepath.Dir(path), "secure.yaml")
		secure, err := inputfile.ReadFile(ctx, securePath, inputfile.SecureYAML)
		var tooLarge *inputfile.TooLargeError
		var stop *inputfile.InterruptedError
		if errors.As(err, &tooLarge) || errors.As(err, &stop) {
			return nil, nil, "", configError(err, "%v", err)
		}
		return data, secure, path, nil
	}
	if len(locations) == 1 {
		return nil, nil, "", configError(os.ErrNotExist, "clouds.yaml %s does not exist: pass the right file with --os-client-config-file or OS_CLIENT_CONFIG_FILE", locations[0])
	}
	return nil, nil, "", configError(os.ErrNotExist, "no clouds.yaml found (looked for %s): pass one with --os-client-config-file or OS_CLIENT_CONFIG_FILE", strings.Join(locations, ", "))
}

func cloudEntries(data []byte, source string) (map[string]cloudEntry, error) {
	var doc struct {
		Clouds map[string]cloudEntry `json:"clouds"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, configError(err, "%s is not valid YAML: %s", source, firstLine(err.Error()))
	}
	if len(doc.Clouds) == 0 {
		return nil, configError(nil, "%s defines no clouds (it needs a top-level \"clouds:\" map)", source)
	}
	return doc.Clouds, nil
}

// chooseCloud applies --os-cloud, then OS_CLOUD, then the installer's default name
// "openstack", then the only entry of the file.
func chooseCloud(name string, entries map[string]cloudEntry, source string) (string, error) {
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	if name == "" {
		name = os.Getenv("OS_CLOUD")
	}
	if name == "" {
		if _, ok := entries["openstack"]; ok {
			return "openstack", nil
		}
		if len(names) == 1 {
			return names[0], nil
		}
		return "", configError(nil, "no cloud chosen: pass --os-cloud or set OS_CLOUD to one of the clouds in %s: %s", source, strings.Join(names, ", "))
	}
	if _, ok := entries[name]; !ok {
		return "", configError(nil, "cloud %q is not in %s; it has: %s", name, source, strings.Join(names, ", "))
	}
	return name, nil
}

// parseProblem words gophercloud's clouds.yaml errors, which never contain secrets.
func parseProblem(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "failed to open the CA cert file"):
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return fmt.Sprintf("its CA bundle %s cannot be read (%v); fix cacert in clouds.yaml or --ca-bundle", pe.Path, pe.Err)
		}
		return "its CA bundle cannot be read; fix cacert in clouds.yaml or --ca-bundle"
	case strings.Contains(msg, "failed to parse the CA Cert"):
		return "its CA bundle holds no PEM certificate; fix cacert in clouds.yaml or --ca-bundle"
	}
	return firstLine(msg)
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

func coalesce(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func nonEmpty(s ...string) []string {
	var out []string
	for _, v := range s {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}
