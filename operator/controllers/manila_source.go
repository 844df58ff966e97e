package controllers

// This file is the operator's only contact with OpenStack, through the shared
// internal/openstack client behind the narrow ManilaSource interface.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/manila-setup/manila-setup/operator"

	"github.com/manila-setup/manila-setup/internal/openstack"
)

// Reasons of ManilaControllerDisabled, and of ManilaError.
const (
	ReasonNoCredentials = "NoCredentials"
	ReasonAuthFailed    = "AuthFailed"
	ReasonUnreachable   = "Unreachable"
	ReasonNoManila      = "NoManila"
	ReasonNoShareTypes  = "NoShareTypes"
)

// ShareNetwork is a Manila share network and the Neutron networks of its subnets.
type ShareNetwork struct {
	ID            string
	Name          string
	NeutronNetIDs []string
}

// ManilaSource is what the operator needs from OpenStack.
type ManilaSource interface {
	// Detect checks that the Keystone catalog has a sharev2 endpoint. Errors are *ManilaError.
	Detect(ctx context.Context) error
	// ShareTypes lists the share types the project can use. Errors are *ManilaError.
	ShareTypes(ctx context.Context) ([]operator.ShareType, error)
	// ShareNetworks lists the project's share networks. Errors are *ManilaError.
	ShareNetworks(ctx context.Context) ([]ShareNetwork, error)
	// Discover runs discovery: the Neutron networks Manila may export on, ranked best first.
	// Which one is the storage network is decided by (*openstack.Ranking).StorageNetwork, the
	// rule the CLI uses too. Errors are *ManilaError.
	Discover(ctx context.Context) (*openstack.Ranking, error)
	// SharesWithRulesNotActive lists the project's shares whose access rules are not all
	// applied: share ID to access_rules_status ("error", "syncing"). One request per page of
	// shares. Errors are *ManilaError.
	SharesWithRulesNotActive(ctx context.Context) (map[string]string, error)
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
	Tokens, Catalogs, ShareTypeLists, ShareNetworkLists, ShareLists, Discoveries atomic.Int64
	// CapacityCounts counts the counts of a network's free addresses (a list of its subnets,
	// then one of the ports per subnet).
	CapacityCounts atomic.Int64
}

// OpenStackCalls counts every OpenStack call of this process.
var OpenStackCalls APICounters

// trustedCAFile is where the rendered operator Deployment mounts the cluster's trusted CA
// bundle (proxy CA included).
const trustedCAFile = "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem"

// NewManilaSource returns a ManilaSource on an internal/openstack client. It authenticates on
// first use and keeps the token until Keystone rejects it (the client then re-authenticates
// once): one token per token lifetime, not one per check. A failed authentication is retried
// at the next check.
func NewManilaSource(creds *operator.Credentials, timeout time.Duration) (ManilaSource, error) {
	y, err := creds.AuthYAML()
	if err != nil {
		return nil, &ManilaError{Reason: ReasonAuthFailed, Message: "clouds.yaml of the credentials cannot be re-encoded"}
	}
	cfg := openstack.Config{
		Cloud:      creds.CloudName,
		CloudsYAML: y,
		Timeout:    timeout,
		UserAgent:  "manila-setup-operator",
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
			// The cluster proxy, read at each request, instead of the process environment.
			if t, ok := rt.(*http.Transport); ok && creds.Proxy != nil {
				t.Proxy = creds.Proxy
			}
			return countingTransport{rt}
		},
	}
	cfg.ClientCertPEM, cfg.ClientKeyPEM = creds.ClientCertPEM, creds.ClientKeyPEM
	if len(creds.CAPEM) > 0 {
		// The cloud's CA from the Secret, plus the cluster's trusted bundle when mounted (an
		// intercepting proxy's CA): the client trusts exactly the bundle it is given.
		pem := append([]byte(nil), creds.CAPEM...)
		if b, err := os.ReadFile(trustedCAFile); err == nil {
			pem = append(append(pem, '\n'), b...)
		}
		cfg.CABundlePEM = pem
	}
	return &clientSource{cfg: cfg}, nil
}

type clientSource struct {
	cfg openstack.Config

	mu     sync.Mutex
	client *openstack.Client
}

func (s *clientSource) connect(ctx context.Context) (*openstack.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	c, err := openstack.Connect(ctx, s.cfg)
	if err != nil {
		return nil, classify(err)
	}
	s.client = c
	return c, nil
}

// Detect reads the catalog with the current token (no new token), so that a sharev2 endpoint
// removed from the catalog is noticed at the next check.
func (s *clientSource) Detect(ctx context.Context) error {
	c, err := s.connect(ctx)
	if err != nil {
		return err
	}
	OpenStackCalls.Catalogs.Add(1)
	ok, err := c.CatalogHas(ctx, openstack.ManilaServiceTypes...)
	if err != nil {
		return classify(err)
	}
	if !ok {
		where := ""
		if c.Region() != "" {
			where = " in region " + c.Region()
		}
		return &ManilaError{Reason: ReasonNoManila, Message: "the Keystone catalog has no sharev2 (Manila) endpoint" + where}
	}
	if !c.ManilaAvailable() {
		// Manila joined the catalog after this token was issued, and the client finds its
		// endpoints in the token's catalog: take a new token, once.
		s.mu.Lock()
		if s.client == c {
			s.client = nil
		}
		s.mu.Unlock()
		if _, err := s.connect(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (s *clientSource) ShareTypes(ctx context.Context) ([]operator.ShareType, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.ShareTypeLists.Add(1)
	all, err := c.ShareTypeSummaries(ctx)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]operator.ShareType, 0, len(all))
	for _, st := range all {
		out = append(out, operator.ShareType{ID: st.ID, Name: st.Name, DHSS: st.DHSS,
			SnapshotSupport: st.SnapshotSupport, CreateShareFromSnapshotSupport: st.CreateShareFromSnapshotSupport})
	}
	return out, nil
}

func (s *clientSource) ShareNetworks(ctx context.Context) ([]ShareNetwork, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.ShareNetworkLists.Add(1)
	all, err := c.ShareNetworks(ctx)
	if err != nil {
		return nil, classify(err)
	}
	out := make([]ShareNetwork, 0, len(all))
	for _, n := range all {
		sn := ShareNetwork{ID: n.ID, Name: n.Name}
		for _, sub := range n.Subnets {
			if sub.NeutronNetID != "" {
				sn.NeutronNetIDs = append(sn.NeutronNetIDs, sub.NeutronNetID)
			}
		}
		out = append(out, sn)
	}
	return out, nil
}

func (s *clientSource) SharesWithRulesNotActive(ctx context.Context) (map[string]string, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.ShareLists.Add(1)
	states, err := c.SharesWithRulesNotActive(ctx)
	if err != nil {
		return nil, classify(err)
	}
	return states, nil
}

func (s *clientSource) Discover(ctx context.Context) (*openstack.Ranking, error) {
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	OpenStackCalls.Discoveries.Add(1)
	d, err := c.Discover(ctx, openstack.DiscoverOptions{Concurrency: 2})
	if err != nil {
		return nil, classify(err)
	}
	return &d.Ranking, nil
}

// classify turns an internal/openstack error into a ManilaError. Its messages say what failed
// and how, and never hold a secret or a response body.
func classify(err error) error {
	var me *ManilaError
	if errors.As(err, &me) {
		return me
	}
	msg := err.Error()
	var oe *openstack.Error
	if !errors.As(err, &oe) {
		return &ManilaError{Reason: ReasonUnreachable, Message: msg}
	}
	switch oe.Kind {
	case openstack.KindConfig, openstack.KindUnauthorized, openstack.KindForbidden:
		if oe.Kind == openstack.KindUnauthorized {
			msg = fmt.Sprintf("%s (Secret %s)", strings.TrimSuffix(msg, "."), operator.CredentialsSecretName)
		}
		return &ManilaError{Reason: ReasonAuthFailed, Message: msg}
	case openstack.KindNoEndpoint, openstack.KindNotFound:
		return &ManilaError{Reason: ReasonNoManila, Message: msg}
	}
	return &ManilaError{Reason: ReasonUnreachable, Message: msg}
}

// countingTransport counts token requests (one per authentication).
type countingTransport struct{ next http.RoundTripper }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/auth/tokens") {
		OpenStackCalls.Tokens.Add(1)
	}
	return t.next.RoundTrip(r)
}
