package operator

// This file is the operator's only contact with OpenStack. It is written against gophercloud
// directly behind the narrow ManilaSource interface so that it can be swapped for the shared
// internal/openstack package once that offers catalog-based detection and share types.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/catalog"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/sharenetworks"
	"github.com/gophercloud/gophercloud/v2/openstack/sharedfilesystems/v2/sharetypes"
	"k8s.io/klog/v2"
)

// Reasons of ManilaControllerDisabled, and of ManilaError.
const (
	ReasonNoCredentials = "NoCredentials"
	ReasonAuthFailed    = "AuthFailed"
	ReasonUnreachable   = "Unreachable"
	ReasonNoManila      = "NoManila"
	ReasonNoShareTypes  = "NoShareTypes"
)

// ShareType is a Manila share type, as far as StorageClasses care.
type ShareType struct {
	ID   string
	Name string
	// DHSS is driver_handles_share_servers: shares of this type need a share network.
	DHSS bool
}

// ShareNetwork is a Manila share network and the Neutron network it is on.
type ShareNetwork struct {
	ID           string
	Name         string
	NeutronNetID string
}

// ManilaSource is what the operator needs from OpenStack.
type ManilaSource interface {
	// Detect checks that the Keystone catalog has a sharev2 endpoint. Errors are *ManilaError.
	Detect(ctx context.Context) error
	// ShareTypes lists the share types the project can use. Errors are *ManilaError.
	ShareTypes(ctx context.Context) ([]ShareType, error)
	// ShareNetworks lists the project's share networks. Errors are *ManilaError.
	ShareNetworks(ctx context.Context) ([]ShareNetwork, error)
}

// ManilaError says why Manila cannot be used, in words safe for conditions and events: never
// a credential, never a raw response body.
type ManilaError struct {
	Reason  string
	Message string
}

func (e *ManilaError) Error() string { return e.Message }

// APICounters counts the OpenStack calls the operator makes (exported as metrics; used by the
// performance measurements).
type APICounters struct {
	Tokens, Catalogs, ShareTypeLists, ShareNetworkLists atomic.Int64
}

// OpenStackCalls counts every OpenStack call of this process.
var OpenStackCalls APICounters

// NewManilaSource returns a ManilaSource that authenticates once with the credentials and
// keeps the token until Keystone rejects it (gophercloud then re-authenticates once): one
// token per token lifetime, not one per check.
func NewManilaSource(creds *Credentials, timeout time.Duration) (ManilaSource, error) {
	y, err := creds.authYAML()
	if err != nil {
		return nil, &errCredentials{msg: "cannot re-encode clouds.yaml"}
	}
	ao, eo, _, err := clouds.Parse(clouds.WithCloudsYAML(bytes.NewReader(y)), clouds.WithCloudName(creds.CloudName),
		clouds.WithRegion(creds.Cloud.RegionName))
	if err != nil {
		return nil, &errCredentials{msg: fmt.Sprintf("cloud %q: unusable auth settings", creds.CloudName)}
	}
	ao.AllowReauth = true
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(creds.CAPEM) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(creds.CAPEM) {
			return nil, &errCredentials{msg: "the cacert in the credentials Secret holds no PEM certificate"}
		}
		tlsConfig.RootCAs = pool
	}
	if v := creds.Cloud.Verify; v != nil && !*v {
		tlsConfig.InsecureSkipVerify = true
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	transport.Proxy = http.ProxyFromEnvironment
	if creds.Proxy != nil {
		transport.Proxy = creds.Proxy
	}
	return &gophercloudManila{
		ao:     ao,
		eo:     eo,
		http:   http.Client{Timeout: timeout, Transport: countingTransport{transport}},
		region: creds.Cloud.RegionName,
	}, nil
}

type gophercloudManila struct {
	ao     gophercloud.AuthOptions
	eo     gophercloud.EndpointOpts
	http   http.Client
	region string

	mu       sync.Mutex
	provider *gophercloud.ProviderClient
	manila   *gophercloud.ServiceClient
}

func (g *gophercloudManila) providerClient(ctx context.Context) (*gophercloud.ProviderClient, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.provider != nil {
		return g.provider, nil
	}
	pc, err := openstack.NewClient(g.ao.IdentityEndpoint)
	if err != nil {
		return nil, &ManilaError{Reason: ReasonAuthFailed, Message: "the auth_url in clouds.yaml is not a valid URL"}
	}
	pc.HTTPClient = g.http
	pc.UserAgent.Prepend("manila-setup-operator")
	if err := openstack.Authenticate(ctx, pc, g.ao); err != nil {
		return nil, classify(err, "authenticating to Keystone at "+hostOf(g.ao.IdentityEndpoint))
	}
	g.provider = pc
	return pc, nil
}

// Detect reads the catalog with the current token (no new token) so that a sharev2 endpoint
// removed from the catalog is noticed at the next check.
func (g *gophercloudManila) Detect(ctx context.Context) error {
	pc, err := g.providerClient(ctx)
	if err != nil {
		return err
	}
	// The catalog is read from the auth_url of clouds.yaml, which the cluster is known to
	// reach, rather than from the catalog's own identity endpoint.
	identity := &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: pc.IdentityBase + "v3/", Type: "identity"}
	OpenStackCalls.Catalogs.Add(1)
	pages, err := catalog.List(identity).AllPages(ctx)
	if err != nil {
		return classify(err, "reading the Keystone catalog")
	}
	entries, err := catalog.ExtractServiceCatalog(pages)
	if err != nil {
		return &ManilaError{Reason: ReasonUnreachable, Message: "the Keystone catalog could not be read"}
	}
	if klog.V(4).Enabled() {
		var services []string
		for _, e := range entries {
			services = append(services, e.Type)
		}
		klog.Infof("Keystone catalog services: %v", services)
	}
	iface := string(g.eo.Availability)
	if iface == "" {
		iface = string(gophercloud.AvailabilityPublic)
	}
	for _, e := range entries {
		if e.Type != "sharev2" {
			continue
		}
		for _, ep := range e.Endpoints {
			if ep.Interface != iface || (g.region != "" && ep.Region != g.region && ep.RegionID != g.region) {
				continue
			}
			g.mu.Lock()
			g.manila = &gophercloud.ServiceClient{ProviderClient: pc, Endpoint: gophercloud.NormalizeURL(ep.URL), Type: "sharev2"}
			g.mu.Unlock()
			return nil
		}
	}
	where := ""
	if g.region != "" {
		where = " in region " + g.region
	}
	return &ManilaError{Reason: ReasonNoManila, Message: fmt.Sprintf("the Keystone catalog has no %s sharev2 (Manila) endpoint%s", iface, where)}
}

func (g *gophercloudManila) manilaClient(ctx context.Context) (*gophercloud.ServiceClient, error) {
	g.mu.Lock()
	c := g.manila
	g.mu.Unlock()
	if c != nil {
		return c, nil
	}
	if err := g.Detect(ctx); err != nil {
		return nil, err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.manila, nil
}

func (g *gophercloudManila) ShareTypes(ctx context.Context) ([]ShareType, error) {
	c, err := g.manilaClient(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.ShareTypeLists.Add(1)
	pages, err := sharetypes.List(c, sharetypes.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, classify(err, "listing Manila share types")
	}
	all, err := sharetypes.ExtractShareTypes(pages)
	if err != nil {
		return nil, &ManilaError{Reason: ReasonUnreachable, Message: "Manila returned share types that could not be read"}
	}
	out := make([]ShareType, 0, len(all))
	for _, st := range all {
		out = append(out, ShareType{ID: st.ID, Name: st.Name, DHSS: dhss(st)})
	}
	return out, nil
}

func dhss(st sharetypes.ShareType) bool {
	for _, specs := range []map[string]any{st.RequiredExtraSpecs, st.ExtraSpecs} {
		switch v := specs["driver_handles_share_servers"].(type) {
		case bool:
			return v
		case string:
			return strings.EqualFold(strings.TrimSpace(v), "true") || strings.EqualFold(strings.TrimSpace(v), "<is> true")
		}
	}
	return false
}

func (g *gophercloudManila) ShareNetworks(ctx context.Context) ([]ShareNetwork, error) {
	c, err := g.manilaClient(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.ShareNetworkLists.Add(1)
	pages, err := sharenetworks.ListDetail(c, sharenetworks.ListOpts{}).AllPages(ctx)
	if err != nil {
		return nil, classify(err, "listing Manila share networks")
	}
	all, err := sharenetworks.ExtractShareNetworks(pages)
	if err != nil {
		return nil, &ManilaError{Reason: ReasonUnreachable, Message: "Manila returned share networks that could not be read"}
	}
	out := make([]ShareNetwork, 0, len(all))
	for _, n := range all {
		out = append(out, ShareNetwork{ID: n.ID, Name: n.Name, NeutronNetID: n.NeutronNetID})
	}
	return out, nil
}

// classify turns a gophercloud or network error into a ManilaError whose message names what
// failed and how, without response bodies.
func classify(err error, doing string) error {
	var me *ManilaError
	if errors.As(err, &me) {
		return me
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		switch {
		case code.Actual == http.StatusUnauthorized || code.Actual == http.StatusForbidden:
			return &ManilaError{Reason: ReasonAuthFailed, Message: fmt.Sprintf("%s: HTTP %d: the credentials in Secret %s were rejected", doing, code.Actual, CredentialsSecretName)}
		case code.Actual == http.StatusNotFound:
			return &ManilaError{Reason: ReasonNoManila, Message: fmt.Sprintf("%s: HTTP 404 from %s", doing, hostOf(code.URL))}
		default:
			return &ManilaError{Reason: ReasonUnreachable, Message: fmt.Sprintf("%s: HTTP %d from %s", doing, code.Actual, hostOf(code.URL))}
		}
	}
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()):
		return &ManilaError{Reason: ReasonUnreachable, Message: doing + ": timed out"}
	case errors.As(err, &urlErr):
		return &ManilaError{Reason: ReasonUnreachable, Message: fmt.Sprintf("%s: %s unreachable: %v", doing, hostOf(urlErr.URL), rootCause(urlErr.Err))}
	}
	return &ManilaError{Reason: ReasonUnreachable, Message: doing + ": " + rootCause(err).Error()}
}

func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the endpoint"
	}
	return u.Host
}

// countingTransport counts token requests (one per authentication).
type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/auth/tokens") {
		OpenStackCalls.Tokens.Add(1)
	}
	return t.next.RoundTrip(r)
}
