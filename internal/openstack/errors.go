package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"

	"github.com/gophercloud/gophercloud/v2"
)

// Kind says what went wrong, so callers branch on it instead of parsing messages.
type Kind int

const (
	KindUnknown      Kind = iota
	KindConfig            // clouds.yaml missing or incomplete, cloud not found, unreadable CA file
	KindUnauthorized      // 401: the credentials were rejected
	KindForbidden         // 403: the cloud's policy does not allow the call
	KindNotFound          // 404: no such ID (or not visible to the project)
	KindNoEndpoint        // the service is not in the Keystone catalog for the region
	KindTLS               // the server's certificate is not trusted or not valid
	KindTimeout           // no answer in time
	KindUnreachable       // connection refused, unknown host, network unreachable
	KindCanceled          // the caller's context was canceled
	KindServer            // 5xx or an answer that makes no sense
)

var kindNames = map[Kind]string{
	KindUnknown: "unknown", KindConfig: "config", KindUnauthorized: "unauthorized",
	KindForbidden: "forbidden", KindNotFound: "not-found", KindNoEndpoint: "no-endpoint",
	KindTLS: "tls", KindTimeout: "timeout", KindUnreachable: "unreachable",
	KindCanceled: "canceled", KindServer: "server",
}

func (k Kind) String() string { return kindNames[k] }

// Error is every error this package returns: one plain sentence that says what failed and how
// to fix it. It never contains a password, token or application-credential secret, and never
// the body of an HTTP answer.
type Error struct {
	Kind    Kind
	Service string // "Keystone", "Neutron", "Nova" or "Manila"; empty for configuration errors
	Message string
	err     error // the cause, for errors.Is/As; its text is not part of Message
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.err }

// KindOf returns the Kind of err, KindUnknown if it does not come from this package.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return KindUnknown
}

// IsNotFound reports whether err says that an ID does not exist.
func IsNotFound(err error) bool { return KindOf(err) == KindNotFound }

func configError(cause error, format string, a ...any) *Error {
	return &Error{Kind: KindConfig, Message: fmt.Sprintf(format, a...), err: cause}
}

// call describes the call that failed, for the sentence.
type call struct {
	service string // Keystone, Neutron, Manila
	what    string // "listing networks", "authenticating"
	id      string // the ID asked for, for 404s
	idKind  string // "network", "share", ...
}

// explain turns any error of a call into an *Error with a plain sentence. It is the only
// place that decides what users read when the cloud fails us.
func (c *Client) explain(cl call, err error) error {
	if err == nil {
		return nil
	}
	var done *Error
	if errors.As(err, &done) {
		return err
	}
	e := &Error{Service: cl.service, err: err}
	endpoint := endpointOf(err)
	switch {
	case errors.Is(err, context.Canceled):
		e.Kind = KindCanceled
		e.Message = fmt.Sprintf("%s: canceled", cl.what)
	case isTimeout(err):
		e.Kind = KindTimeout
		within := "within " + c.timeout.String()
		if !clientTimeout(err) {
			within = "before the operation's deadline"
		}
		e.Message = fmt.Sprintf("%s: %s%s did not answer %s. Check that the address is right and reachable from here%s, or raise the timeout.",
			cl.what, cl.service, at(endpoint), within, c.proxyHint(endpoint))
	default:
		if code, ok := statusOf(err); ok {
			c.explainStatus(e, cl, code, endpoint)
			break
		}
		if m, ok := c.explainTLS(cl, err, endpoint); ok {
			e.Kind, e.Message = KindTLS, m
			break
		}
		if m, ok := explainNet(cl, err, endpoint); ok {
			e.Kind, e.Message = KindUnreachable, m
			break
		}
		var typeErr *json.UnmarshalTypeError
		var syntaxErr *json.SyntaxError
		if errors.As(err, &typeErr) || errors.As(err, &syntaxErr) {
			e.Kind = KindServer
			e.Message = fmt.Sprintf("%s: %s%s answered something this client does not understand (%s). Please report it with the output of -v.",
				cl.what, cl.service, at(endpoint), c.redact(plainCause(err)))
			break
		}
		var nf gophercloud.ErrEndpointNotFound
		if errors.As(err, &nf) {
			e.Kind = KindNoEndpoint
			e.Message = c.noEndpointMessage(cl.service)
			break
		}
		e.Kind = KindUnknown
		e.Message = fmt.Sprintf("%s: %s", cl.what, c.redact(plainCause(err)))
	}
	e.Message = c.redact(e.Message)
	return e
}

func (c *Client) explainStatus(e *Error, cl call, code int, endpoint string) {
	switch {
	case code == http.StatusUnauthorized:
		e.Kind = KindUnauthorized
		e.Message = fmt.Sprintf("%s: Keystone%s rejected the credentials of cloud %q (%s). Check the %s in clouds.yaml.",
			cl.what, at(c.authURL), c.cloud, c.identity, c.credentialKind())
	case code == http.StatusForbidden:
		e.Kind = KindForbidden
		e.Message = fmt.Sprintf("%s: %s refused it (403 Forbidden): the policy of this cloud does not allow %s to do this. Ask your cloud administrator for the right, or use credentials that have it.",
			cl.what, cl.service, c.identity)
	case code == http.StatusNotFound && cl.service == "Keystone" && c.appCred:
		e.Kind = KindUnauthorized
		e.Message = fmt.Sprintf("%s: Keystone%s does not know %s of cloud %q (404): it was deleted or the ID is wrong. Check the %s in clouds.yaml.",
			cl.what, at(c.authURL), c.identity, c.cloud, c.credentialKind())
	case code == http.StatusNotFound && cl.id != "":
		e.Kind = KindNotFound
		e.Message = fmt.Sprintf("%s: there is no %s with ID %s (or project %s cannot see it). Check the ID with \"openstack %s show %s\".",
			cl.what, cl.idKind, cl.id, c.projectLabel(), strings.ReplaceAll(cl.idKind, " ", "-"), cl.id)
	case code == http.StatusNotFound:
		e.Kind = KindNotFound
		e.Message = fmt.Sprintf("%s: %s%s answered 404 Not Found: the endpoint in the catalog may be wrong or the API too old.", cl.what, cl.service, at(endpoint))
	case code >= 500:
		e.Kind = KindServer
		e.Message = fmt.Sprintf("%s: %s%s failed with HTTP %d %s. Try again later; if it persists, the cloud's operators need to look at %s's logs.",
			cl.what, cl.service, at(endpoint), code, http.StatusText(code), cl.service)
	default:
		e.Kind = KindServer
		e.Message = fmt.Sprintf("%s: %s%s answered HTTP %d %s.", cl.what, cl.service, at(endpoint), code, http.StatusText(code))
	}
}

func (c *Client) explainTLS(cl call, err error, endpoint string) (string, bool) {
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var recordHeader tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		issuer := ""
		if unknownCA.Cert != nil {
			issuer = fmt.Sprintf(" (issuer %q)", unknownCA.Cert.Issuer.String())
		}
		return fmt.Sprintf("%s: the TLS certificate of %s%s is signed by an authority that %s does not contain%s. Pass the cloud's CA bundle with --ca-bundle FILE or set cacert in clouds.yaml.",
			cl.what, cl.service, at(endpoint), c.caSource, issuer), true
	case errors.As(err, &hostname):
		return fmt.Sprintf("%s: the TLS certificate of %s%s is not valid for that host name (%v). Use the host name the certificate was issued for in clouds.yaml.",
			cl.what, cl.service, at(endpoint), hostname.Error()), true
	case errors.As(err, &invalid):
		return fmt.Sprintf("%s: the TLS certificate of %s%s is not valid: %v.", cl.what, cl.service, at(endpoint), invalid.Error()), true
	case errors.As(err, &verify):
		return fmt.Sprintf("%s: the TLS certificate of %s%s could not be verified against %s: %v. Pass the cloud's CA bundle with --ca-bundle FILE or set cacert in clouds.yaml.",
			cl.what, cl.service, at(endpoint), c.caSource, verify.Err), true
	case errors.As(err, &recordHeader):
		return fmt.Sprintf("%s: %s%s does not speak TLS: use http:// instead of https:// in clouds.yaml, or the right port.", cl.what, cl.service, at(endpoint)), true
	}
	if strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		return fmt.Sprintf("%s: %s%s does not speak TLS: use http:// instead of https:// in clouds.yaml, or the right port.", cl.what, cl.service, at(endpoint)), true
	}
	return "", false
}

func explainNet(cl call, err error, endpoint string) (string, bool) {
	var dns *net.DNSError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("%s: nothing is listening at %s (connection refused). Is %s running, and is the address in clouds.yaml (or the Keystone catalog) right?",
			cl.what, hostOf(endpoint), cl.service), true
	case errors.As(err, &dns):
		return fmt.Sprintf("%s: the host name %q of %s cannot be resolved. Check the address in clouds.yaml and this machine's DNS.", cl.what, dns.Name, cl.service), true
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Sprintf("%s: %s is not reachable from this machine (no route). Check the network path, or set HTTPS_PROXY.", cl.what, hostOf(endpoint)), true
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return fmt.Sprintf("%s: %s%s closed the connection. Try again; if it persists, check proxies or load balancers on the way.", cl.what, cl.service, at(endpoint)), true
	}
	return "", false
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// clientTimeout tells the HTTP client's own timeouts (Config.Timeout) from the caller's deadline.
func clientTimeout(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Client.Timeout") || strings.Contains(msg, "timeout awaiting response headers") ||
		strings.Contains(msg, "TLS handshake timeout") || strings.Contains(msg, "i/o timeout")
}

// statusOf finds the HTTP status of a failed call, also inside gophercloud's re-authentication
// errors (which do not unwrap).
func statusOf(err error) (int, bool) {
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return code.Actual, true
	}
	var reauth gophercloud.ErrUnableToReauthenticate
	if errors.As(err, &reauth) {
		if c, ok := statusOf(reauth.ErrReauth); ok {
			return c, true
		}
		return statusOf(reauth.ErrOriginal)
	}
	var codeP *gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &codeP) {
		return codeP.Actual, true
	}
	return 0, false
}

// endpointOf returns scheme://host[:port] of the URL a failed call went to.
func endpointOf(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return baseOf(ue.URL)
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return baseOf(code.URL)
	}
	return ""
}

func baseOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

func hostOf(endpoint string) string {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		return u.Host
	}
	if endpoint == "" {
		return "the endpoint"
	}
	return endpoint
}

func at(endpoint string) string {
	if endpoint == "" {
		return ""
	}
	return " at " + endpoint
}

// plainCause is the innermost message of err without the URL wrapper of net/http.
func plainCause(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var code gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &code) {
		return fmt.Sprintf("HTTP %d %s", code.Actual, http.StatusText(code.Actual))
	}
	return err.Error()
}

func (c *Client) proxyHint(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return ""
	}
	if p, err := proxyFunc()(&http.Request{URL: u}); err == nil && p != nil {
		return fmt.Sprintf(" (through the proxy %s)", p.Host)
	}
	return ""
}

func (c *Client) noEndpointMessage(service string) string {
	typ := map[string]string{"Manila": `"sharev2"`, "Neutron": `"network"`, "Keystone": `"identity"`, "Nova": `"compute"`}[service]
	region := c.region
	if region == "" {
		region = "(any)"
	}
	return fmt.Sprintf("%s is not available in region %s: the Keystone catalog of cloud %q has no %s endpoint with interface %s there. Ask your cloud administrator, or choose another region (region_name in clouds.yaml, OS_REGION_NAME).",
		service, region, c.cloud, typ, c.iface)
}
