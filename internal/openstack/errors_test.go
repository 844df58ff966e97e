package openstack

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
)

func testClient() *Client {
	return &Client{cloud: "mycloud", region: "RegionOne", iface: gophercloud.AvailabilityPublic, authURL: "https://keystone.example.com:5000",
		identity: `user "alice", project "ocp"`, projectName: "ocp", timeout: 30 * time.Second,
		caSource: "this machine's trust store", secrets: []string{"s3cret-Passw0rd"}}
}

func httpErr(code int, u string) error {
	return gophercloud.ErrUnexpectedResponseCode{URL: u, Method: "GET", Expected: []int{200}, Actual: code,
		Body: []byte(`{"error": "token gAAAAABsecret in body"}`)}
}

func TestExplain(t *testing.T) {
	c := testClient()
	neutron := "https://neutron.example.com:9696/v2.0/networks"
	tests := []struct {
		name  string
		cl    call
		err   error
		kind  Kind
		parts []string
	}{
		{"401", call{service: "Neutron", what: "listing networks"}, httpErr(401, neutron), KindUnauthorized,
			[]string{"listing networks: Keystone at https://keystone.example.com:5000 rejected the credentials of cloud \"mycloud\" (user \"alice\", project \"ocp\")", "Check the user name, password"}},
		{"401 after re-authentication", call{service: "Neutron", what: "listing networks"},
			gophercloud.ErrUnableToReauthenticate{ErrOriginal: httpErr(401, neutron), ErrReauth: httpErr(401, "https://keystone.example.com:5000/v3/auth/tokens")}, KindUnauthorized,
			[]string{"rejected the credentials"}},
		{"403", call{service: "Manila", what: "listing share networks"}, httpErr(403, "https://manila.example.com/v2/share-networks/detail"), KindForbidden,
			[]string{"listing share networks: Manila refused it (403 Forbidden): the policy of this cloud does not allow user \"alice\", project \"ocp\" to do this"}},
		{"404 of an ID", call{service: "Manila", what: "listing the export locations of share x", id: "x", idKind: "share"}, httpErr(404, "https://manila.example.com/v2/shares/x"), KindNotFound,
			[]string{"there is no share with ID x (or project \"ocp\" cannot see it)", `openstack share show x`}},
		{"404 of an endpoint", call{service: "Neutron", what: "listing networks"}, httpErr(404, neutron), KindNotFound,
			[]string{"Neutron at https://neutron.example.com:9696 answered 404 Not Found"}},
		{"500", call{service: "Manila", what: "listing shares"}, httpErr(503, "https://manila.example.com/v2/shares"), KindServer,
			[]string{"failed with HTTP 503 Service Unavailable", "Try again later"}},
		{"no endpoint", call{service: "Manila", what: "x"}, gophercloud.ErrEndpointNotFound{}, KindNoEndpoint,
			[]string{`Manila is not available in region RegionOne: the Keystone catalog of cloud "mycloud" has no "sharev2" endpoint with interface public there`}},
		{"refused", call{service: "Keystone", what: "authenticating"}, &url.Error{Op: "Post", URL: "https://keystone.example.com:5000/v3/auth/tokens",
			Err: &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}}, KindUnreachable,
			[]string{"nothing is listening at keystone.example.com:5000 (connection refused)"}},
		{"dns", call{service: "Keystone", what: "authenticating"}, &url.Error{Op: "Post", URL: "https://nowhere.example:5000/v3",
			Err: &net.OpError{Op: "dial", Err: &net.DNSError{Name: "nowhere.example", Err: "no such host"}}}, KindUnreachable,
			[]string{`the host name "nowhere.example" of Keystone cannot be resolved`}},
		{"reset", call{service: "Neutron", what: "listing networks"}, &url.Error{Op: "Get", URL: neutron, Err: syscall.ECONNRESET}, KindUnreachable,
			[]string{"closed the connection"}},
		{"canceled", call{service: "Neutron", what: "listing networks"}, &url.Error{Op: "Get", URL: neutron, Err: context.Canceled}, KindCanceled,
			[]string{"listing networks: canceled"}},
		{"deadline", call{service: "Neutron", what: "listing networks"}, &url.Error{Op: "Get", URL: neutron, Err: context.DeadlineExceeded}, KindTimeout,
			[]string{"Neutron at https://neutron.example.com:9696 did not answer before the operation's deadline"}},
		{"secret in an unknown error", call{service: "Neutron", what: "listing networks"}, fmt.Errorf("odd failure mentioning s3cret-Passw0rd"), KindUnknown,
			[]string{"listing networks: odd failure mentioning <redacted>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := c.explain(tt.cl, tt.err)
			if KindOf(err) != tt.kind {
				t.Errorf("kind %v, want %v (%v)", KindOf(err), tt.kind, err)
			}
			for _, p := range tt.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("%q lacks %q", err, p)
				}
			}
			for _, leak := range []string{"gAAAAABsecret", "s3cret-Passw0rd", "in body"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("%q contains %q", err, leak)
				}
			}
			var e *Error
			if !errors.As(err, &e) || e.err == nil {
				t.Errorf("the cause is not kept")
			}
		})
	}
}

func TestExplainKeepsOwnErrors(t *testing.T) {
	c := testClient()
	own := &Error{Kind: KindNotFound, Message: "x"}
	if got := c.explain(call{what: "y"}, own); got != own {
		t.Errorf("explain rewrapped its own error: %v", got)
	}
	if c.explain(call{}, nil) != nil {
		t.Error("nil error explained")
	}
}

func TestChooseCloud(t *testing.T) {
	t.Setenv("OS_CLOUD", "")
	entries := map[string]cloudEntry{"a": {}, "b": {}}
	if _, err := chooseCloud("", entries, "f"); err == nil || !strings.Contains(err.Error(), "no cloud chosen: pass --os-cloud or set OS_CLOUD to one of the clouds in f: a, b") {
		t.Errorf("two clouds, none chosen: %v", err)
	}
	if n, err := chooseCloud("", map[string]cloudEntry{"only": {}}, "f"); n != "only" || err != nil {
		t.Errorf("single cloud: %q %v", n, err)
	}
	if n, _ := chooseCloud("", map[string]cloudEntry{"openstack": {}, "x": {}}, "f"); n != "openstack" {
		t.Errorf("installer default: %q", n)
	}
	t.Setenv("OS_CLOUD", "b")
	if n, _ := chooseCloud("", entries, "f"); n != "b" {
		t.Errorf("OS_CLOUD: %q", n)
	}
	if _, err := chooseCloud("zzz", entries, "f"); KindOf(err) != KindConfig || !strings.Contains(err.Error(), `cloud "zzz" is not in f; it has: a, b`) {
		t.Errorf("unknown cloud: %v", err)
	}
}

func TestConnectConfigErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := dir + "/" + name
		if err := writeFileForTest(p, content); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("OS_CLOUD", "")
	t.Setenv("OS_CLIENT_CONFIG_FILE", "")
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"missing file", Config{CloudsFile: dir + "/none.yaml"}, "clouds.yaml " + dir + "/none.yaml does not exist"},
		{"not YAML", Config{CloudsFile: write("bad.yaml", "clouds: [unclosed")}, "is not valid YAML"},
		{"no clouds", Config{CloudsFile: write("empty.yaml", "other: 1\n")}, `defines no clouds (it needs a top-level "clouds:" map)`},
		{"no auth_url", Config{CloudsYAML: []byte("clouds:\n  x:\n    auth:\n      username: u\n      password: secretpw1\n")}, `cloud "x" in the clouds.yaml given has no auth.auth_url`},
		{"missing CA", Config{CloudsYAML: []byte("clouds:\n  x:\n    cacert: /nonexistent/ca.pem\n    auth:\n      auth_url: https://k:5000/v3\n")}, "its CA bundle /nonexistent/ca.pem cannot be read"},
		{"CA bytes not PEM", Config{CABundlePEM: []byte("nope"), CloudsYAML: []byte("clouds:\n  x:\n    auth:\n      auth_url: https://k:5000/v3\n")}, "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Connect(context.Background(), tt.cfg)
			if KindOf(err) != KindConfig || !strings.Contains(fmt.Sprint(err), tt.want) {
				t.Errorf("%v (kind %v), want %q", err, KindOf(err), tt.want)
			}
			if strings.Contains(fmt.Sprint(err), "secretpw1") {
				t.Errorf("password in error")
			}
		})
	}
}
