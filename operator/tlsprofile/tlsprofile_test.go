package tlsprofile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var intermediateSuites = []string{
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
}

// Old's TLS 1.0-1.2 suites, in its order, without the three Go does not implement.
var oldSuites = append(slices.Clone(intermediateSuites),
	"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
	"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
	"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
	"TLS_RSA_WITH_AES_128_GCM_SHA256", "TLS_RSA_WITH_AES_256_GCM_SHA384", "TLS_RSA_WITH_AES_128_CBC_SHA256",
	"TLS_RSA_WITH_AES_128_CBC_SHA", "TLS_RSA_WITH_AES_256_CBC_SHA", "TLS_RSA_WITH_3DES_EDE_CBC_SHA")

func custom(min configv1.TLSProtocolVersion, ciphers ...string) *configv1.TLSSecurityProfile {
	return &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType,
		Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{MinTLSVersion: min, Ciphers: ciphers}}}
}

func TestResolve(t *testing.T) {
	intermediateArgs := []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=" + strings.Join(intermediateSuites, ",")}
	for _, tc := range []struct {
		name    string
		in      *configv1.TLSSecurityProfile
		typ     configv1.TLSProfileType
		min     uint16
		suites  []string
		ignored []string
		args    []string
		// err: the profile falls back to Intermediate, with an error holding these.
		err []string
	}{
		{name: "none is Intermediate", in: nil, typ: "Intermediate", min: tls.VersionTLS12, suites: intermediateSuites, args: intermediateArgs},
		{name: "no type is Intermediate", in: &configv1.TLSSecurityProfile{}, typ: "Intermediate", min: tls.VersionTLS12, suites: intermediateSuites, args: intermediateArgs},
		{name: "Intermediate", in: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileIntermediateType, Intermediate: &configv1.IntermediateTLSProfile{}},
			typ: "Intermediate", min: tls.VersionTLS12, suites: intermediateSuites, args: intermediateArgs},
		{name: "Old", in: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType, Old: &configv1.OldTLSProfile{}},
			typ: "Old", min: tls.VersionTLS10, suites: oldSuites,
			ignored: []string{"ECDHE-ECDSA-AES256-SHA384", "ECDHE-RSA-AES256-SHA384", "AES256-SHA256"},
			args:    []string{"--tls-min-version=VersionTLS10", "--tls-cipher-suites=" + strings.Join(oldSuites, ",")}},
		{name: "Modern: TLS 1.3, no cipher flag", in: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType},
			typ: "Modern", min: tls.VersionTLS13, args: []string{"--tls-min-version=VersionTLS13"}},
		{name: "Custom TLS 1.2: OpenSSL names to IANA, DHE and duplicates left out",
			in:  custom(configv1.VersionTLS12, "TLS_AES_128_GCM_SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "DHE-RSA-AES128-GCM-SHA256", "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"),
			typ: "Custom", min: tls.VersionTLS12, suites: []string{"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"},
			ignored: []string{"DHE-RSA-AES128-GCM-SHA256"},
			args:    []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"}},
		{name: "Custom TLS 1.1", in: custom(configv1.VersionTLS11, "ECDHE-RSA-AES128-SHA"),
			typ: "Custom", min: tls.VersionTLS11, suites: []string{"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA"},
			args: []string{"--tls-min-version=VersionTLS11", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "--http2-disable"}},
		{name: "Custom TLS 1.3: ciphers not configurable", in: custom(configv1.VersionTLS13, "TLS_AES_256_GCM_SHA384", "ECDHE-RSA-AES128-GCM-SHA256"),
			typ: "Custom", min: tls.VersionTLS13, args: []string{"--tls-min-version=VersionTLS13"}},

		{name: "unknown type", in: &configv1.TLSSecurityProfile{Type: "Paranoid"},
			err: []string{`spec.tlsSecurityProfile.type: Unsupported value: "Paranoid"`, "Intermediate (VersionTLS12) applies instead"}},
		{name: "Custom without settings", in: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType},
			err: []string{"spec.tlsSecurityProfile.custom: Required value"}},
		{name: "Custom without minTLSVersion", in: custom("", "ECDHE-RSA-AES128-GCM-SHA256"),
			err: []string{"spec.tlsSecurityProfile.custom.minTLSVersion: Required value"}},
		{name: "Custom with an unknown minTLSVersion", in: custom("VersionTLS14", "ECDHE-RSA-AES128-GCM-SHA256"),
			err: []string{`spec.tlsSecurityProfile.custom.minTLSVersion: Unsupported value: "VersionTLS14"`}},
		{name: "Custom TLS 1.2 with no cipher Go implements", in: custom(configv1.VersionTLS12, "DHE-RSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256"),
			err: []string{"spec.tlsSecurityProfile.custom.ciphers: Invalid value", "no cipher suite that Go implements"}},
		{name: "Custom TLS 1.2 naming IANA suites is not what the API takes", in: custom(configv1.VersionTLS12, "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"),
			err: []string{"spec.tlsSecurityProfile.custom.ciphers: Invalid value"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Resolve(tc.in)
			if len(tc.err) > 0 {
				if err == nil {
					t.Fatalf("no error, profile %s", p)
				}
				for _, want := range tc.err {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
				tc.typ, tc.min, tc.suites, tc.args = "Intermediate", tls.VersionTLS12, intermediateSuites, intermediateArgs
			} else if err != nil {
				t.Fatal(err)
			}
			if p.Type != tc.typ || p.TLSMinVersion() != tc.min {
				t.Errorf("profile %s: want %s at %x", p, tc.typ, tc.min)
			}
			if !slices.Equal(p.CipherSuites, tc.suites) {
				t.Errorf("cipher suites\n%v\nwant\n%v", p.CipherSuites, tc.suites)
			}
			if !slices.Equal(p.Ignored, tc.ignored) {
				t.Errorf("ignored %v, want %v", p.Ignored, tc.ignored)
			}
			if got := p.KubeRBACProxyArgs(); !slices.Equal(got, tc.args) {
				t.Errorf("kube-rbac-proxy args\n%v\nwant\n%v", got, tc.args)
			}
			var c tls.Config
			p.Apply(&c)
			if c.MinVersion != tc.min || len(c.CipherSuites) != len(tc.suites) {
				t.Errorf("tls.Config min %x suites %v", c.MinVersion, c.CipherSuites)
			}
			for i, id := range c.CipherSuites {
				if name := tls.CipherSuiteName(id); name != tc.suites[i] {
					t.Errorf("tls.Config suite %d is %s, want %s", i, name, tc.suites[i])
				}
			}
		})
	}
}

func TestFromAPIServer(t *testing.T) {
	if p, err := FromAPIServer(nil); err != nil || !p.Equal(Intermediate()) {
		t.Errorf("no APIServer: %s, %v; want Intermediate", p, err)
	}
	a := &configv1.APIServer{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec: configv1.APIServerSpec{TLSSecurityProfile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}}}
	if p, err := FromAPIServer(a); err != nil || p.Type != configv1.TLSProfileModernType || p.String() != "Modern (VersionTLS13)" {
		t.Errorf("Modern APIServer: %s, %v", p, err)
	}
	if s := Intermediate().String(); s != "Intermediate (VersionTLS12, 6 cipher suites)" {
		t.Errorf("String() = %q", s)
	}
}

// HTTP/2 needs an ECDHE AES-128-GCM suite below TLS 1.3: without one, kube-rbac-proxy gets
// --http2-disable and a tls.Config loses "h2".
func TestHTTP2(t *testing.T) {
	for _, tc := range []struct {
		name    string
		profile *configv1.TLSSecurityProfile
		http2   bool
	}{
		{"Intermediate", nil, true},
		{"Old", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType}, true},
		{"Modern", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, true},
		{"Custom with ECDSA AES-128-GCM", custom(configv1.VersionTLS12, "ECDHE-ECDSA-AES128-GCM-SHA256"), true},
		{"Custom with AES-256-GCM only", custom(configv1.VersionTLS12, "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384"), false},
		{"Custom TLS 1.3", custom(configv1.VersionTLS13, "ECDHE-ECDSA-AES256-GCM-SHA384"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Resolve(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			c := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
			p.Apply(c)
			disabled := slices.Contains(p.KubeRBACProxyArgs(), "--http2-disable")
			if p.HTTP2() != tc.http2 || disabled == tc.http2 || slices.Contains(c.NextProtos, "h2") != tc.http2 || !slices.Contains(c.NextProtos, "http/1.1") {
				t.Errorf("HTTP2() %v, args %v, NextProtos %v; want HTTP/2 %v", p.HTTP2(), p.KubeRBACProxyArgs(), c.NextProtos, tc.http2)
			}
		})
	}
}

// Every cipher of OpenShift's predefined profiles is mapped, or known to be missing from Go: a
// new openshift/api with a new cipher fails here rather than dropping it unnoticed.
func TestPredefinedProfilesMapped(t *testing.T) {
	notInGo := []string{"ECDHE-ECDSA-AES256-SHA384", "ECDHE-RSA-AES256-SHA384", "AES256-SHA256"}
	for typ, spec := range configv1.TLSProfiles {
		for _, c := range spec.Ciphers {
			if _, mapped := openSSLToIANA[c]; !mapped && !tls13Suites[c] && !slices.Contains(notInGo, c) {
				t.Errorf("%s profile: cipher %s is neither mapped nor known to be missing from Go", typ, c)
			}
		}
	}
}

// What a server under each profile accepts, handshake by handshake over crypto/tls.
func TestHandshakes(t *testing.T) {
	cert := selfSigned(t)
	for _, tc := range []struct {
		name    string
		profile *configv1.TLSSecurityProfile
		client  *tls.Config
		ok      bool
	}{
		{"Modern refuses TLS 1.2", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, &tls.Config{MaxVersion: tls.VersionTLS12}, false},
		{"Modern accepts TLS 1.3", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, &tls.Config{MinVersion: tls.VersionTLS13}, true},
		{"Intermediate accepts TLS 1.2 GCM", nil, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, true},
		{"Intermediate refuses a CBC suite", nil, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, false},
		{"Old accepts that CBC suite", &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType}, &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}, true},
		{"Custom refuses a suite it does not list", custom(configv1.VersionTLS12, "ECDHE-ECDSA-AES256-GCM-SHA384"),
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}, false},
		{"Custom accepts the suite it lists", custom(configv1.VersionTLS12, "ECDHE-ECDSA-AES256-GCM-SHA384"),
			&tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Resolve(tc.profile)
			if err != nil {
				t.Fatal(err)
			}
			srvConf := &tls.Config{Certificates: []tls.Certificate{cert}}
			p.Apply(srvConf)
			cc, sc := net.Pipe()
			defer cc.Close()
			defer sc.Close()
			srvErr := make(chan error, 1)
			go func() { srvErr <- tls.Server(sc, srvConf).Handshake() }()
			client := tc.client.Clone()
			client.InsecureSkipVerify = true
			err = tls.Client(cc, client).Handshake()
			if tc.ok != (err == nil) {
				t.Errorf("client handshake: %v, want ok=%v", err, tc.ok)
			}
			cc.Close()
			if sErr := <-srvErr; tc.ok != (sErr == nil) {
				t.Errorf("server handshake: %v, want ok=%v", sErr, tc.ok)
			}
		})
	}
}

func selfSigned(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tlsprofile.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"tlsprofile.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// OpenSSL's names of the IANA suites, as its ciphers(1) manual lists them.
func TestOpenSSLName(t *testing.T) {
	for iana, want := range map[string]string{
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256":     "ECDHE-ECDSA-AES128-GCM-SHA256",
		"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384":       "ECDHE-RSA-AES256-GCM-SHA384",
		"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
		"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256":       "ECDHE-RSA-AES128-SHA256",
		"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA":        "ECDHE-ECDSA-AES256-SHA",
		"TLS_RSA_WITH_AES_256_GCM_SHA384":             "AES256-GCM-SHA384",
		"TLS_RSA_WITH_AES_128_CBC_SHA":                "AES128-SHA",
		"TLS_RSA_WITH_3DES_EDE_CBC_SHA":               "DES-CBC3-SHA",
		"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA":         "ECDHE-RSA-DES-CBC3-SHA",
		"TLS_RSA_WITH_RC4_128_SHA":                    "RC4-SHA",
		"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA":            "ECDHE-ECDSA-RC4-SHA",
	} {
		if got := openSSLName(iana); got != want {
			t.Errorf("openSSLName(%s) = %s, want %s", iana, got, want)
		}
	}
}
