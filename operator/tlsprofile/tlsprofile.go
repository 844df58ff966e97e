// Package tlsprofile turns the cluster's TLS security profile (config.openshift.io APIServer
// "cluster", spec.tlsSecurityProfile) into what the operator's TLS servers take: the flags of
// the kube-rbac-proxy sidecars (--tls-min-version, --tls-cipher-suites) and the minimal version
// and cipher suites of a Go tls.Config. It is pure: it reads no cluster.
//
// OpenShift's profiles name ciphers as OpenSSL does (ECDHE-ECDSA-AES128-GCM-SHA256); Go and
// kube-rbac-proxy take IANA names (TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256). The mapping is
// derived here from the suites crypto/tls implements, by OpenSSL's naming rule (openSSLName),
// rather than taken from library-go, which is not a dependency of this module and would bring
// itself and k8s.io/apiserver into it. Where library-go panics (CipherSuitesOrDie,
// TLSVersionOrDie), Resolve returns an error and Intermediate.
//
// What Go does not implement is left out (ECDHE-RSA-AES256-SHA384 of the Old profile, DHE
// suites of a Custom one). TLS 1.3 suites are not configurable in
// Go (crypto/tls always enables all of them), so they are never listed: under a minimal
// version of TLS 1.3 (Modern) there is no cipher list at all, only --tls-min-version. A Custom
// list without the suite HTTP/2 requires turns HTTP/2 off (HTTP2) instead of failing.
package tlsprofile

import (
	"crypto/tls"
	"fmt"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Profile is the TLS profile applied.
type Profile struct {
	// Type is the profile's type: the cluster's, or Intermediate when the cluster's could not be
	// applied (Resolve's error says why).
	Type configv1.TLSProfileType
	// MinVersion is the minimal TLS version, as OpenShift and kube-rbac-proxy name it
	// (VersionTLS12).
	MinVersion configv1.TLSProtocolVersion
	// CipherSuites are the IANA names of the TLS 1.0-1.2 cipher suites, in the profile's
	// order: those Go implements. Empty when MinVersion is TLS 1.3.
	CipherSuites []string
	// Ignored are the profile's ciphers left out because Go does not implement them (not the
	// TLS 1.3 suites, which are always on).
	Ignored []string
}

// Intermediate is OpenShift's default profile (a cluster that names none, and plain
// Kubernetes): TLS 1.2 and up with ECDHE and AEAD suites.
func Intermediate() Profile {
	p, _ := fromSpec(configv1.TLSProfileIntermediateType, configv1.TLSProfiles[configv1.TLSProfileIntermediateType], nil)
	return p
}

// profilePath is where the profile lives on the cluster, for the errors' field paths.
var profilePath = field.NewPath("spec", "tlsSecurityProfile")

// FromAPIServer resolves the profile of the APIServer object "cluster"; nil (no such object, or
// no config.openshift.io API) is Intermediate.
func FromAPIServer(a *configv1.APIServer) (Profile, error) {
	if a == nil {
		return Intermediate(), nil
	}
	return Resolve(a.Spec.TLSSecurityProfile)
}

// Resolve resolves p: nil or no type is Intermediate, as OpenShift defaults it. A profile that
// cannot be applied (an unknown type; Custom without its settings, without a minimal version or
// with an unknown one, or, below TLS 1.3, without one cipher Go implements) gives Intermediate
// and an error that says why, with the field's path under the APIServer's spec.
func Resolve(p *configv1.TLSSecurityProfile) (Profile, error) {
	if p == nil || p.Type == "" {
		return Intermediate(), nil
	}
	var (
		out Profile
		err *field.Error
	)
	switch p.Type {
	case configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType:
		out, err = fromSpec(p.Type, configv1.TLSProfiles[p.Type], nil)
	case configv1.TLSProfileCustomType:
		if p.Custom == nil {
			err = field.Required(profilePath.Child("custom"), "a Custom profile needs its settings (minTLSVersion, ciphers)")
			break
		}
		out, err = fromSpec(p.Type, &p.Custom.TLSProfileSpec, profilePath.Child("custom"))
	default:
		err = field.NotSupported(profilePath.Child("type"), p.Type,
			[]configv1.TLSProfileType{configv1.TLSProfileOldType, configv1.TLSProfileIntermediateType, configv1.TLSProfileModernType, configv1.TLSProfileCustomType})
	}
	if err != nil {
		return Intermediate(), fmt.Errorf("%w; Intermediate (VersionTLS12) applies instead", err)
	}
	return out, nil
}

// versions are the minimal versions a profile may name.
var versions = map[configv1.TLSProtocolVersion]uint16{
	configv1.VersionTLS10: tls.VersionTLS10,
	configv1.VersionTLS11: tls.VersionTLS11,
	configv1.VersionTLS12: tls.VersionTLS12,
	configv1.VersionTLS13: tls.VersionTLS13,
}

// fromSpec resolves a profile's settings, found at path (nil for the predefined profiles,
// which never fail).
func fromSpec(typ configv1.TLSProfileType, s *configv1.TLSProfileSpec, path *field.Path) (Profile, *field.Error) {
	if s.MinTLSVersion == "" {
		return Profile{}, field.Required(path.Child("minTLSVersion"), "a Custom profile must name its minimal TLS version")
	}
	min, ok := versions[s.MinTLSVersion]
	if !ok {
		return Profile{}, field.NotSupported(path.Child("minTLSVersion"), s.MinTLSVersion,
			[]configv1.TLSProtocolVersion{configv1.VersionTLS10, configv1.VersionTLS11, configv1.VersionTLS12, configv1.VersionTLS13})
	}
	p := Profile{Type: typ, MinVersion: s.MinTLSVersion}
	for _, c := range s.Ciphers {
		if tls13Suites[c] {
			// Always on with TLS 1.3, never configurable.
			continue
		}
		iana, ok := openSSLToIANA[c]
		if _, implemented := goSuites[iana]; !ok || !implemented {
			p.Ignored = append(p.Ignored, c)
			continue
		}
		if min < tls.VersionTLS13 && !slices.Contains(p.CipherSuites, iana) {
			p.CipherSuites = append(p.CipherSuites, iana)
		}
	}
	if min < tls.VersionTLS13 && len(p.CipherSuites) == 0 {
		return Profile{}, field.Invalid(path.Child("ciphers"), s.Ciphers,
			fmt.Sprintf("no cipher suite that Go implements for TLS 1.2 and below: clients that do not speak TLS 1.3 could not connect at %s", s.MinTLSVersion))
	}
	return p, nil
}

// KubeRBACProxyArgs are kube-rbac-proxy's flags for the profile: --tls-min-version;
// --tls-cipher-suites unless the minimal version is TLS 1.3; --http2-disable where the suites
// do not allow HTTP/2 (see HTTP2): kube-rbac-proxy would otherwise refuse to start.
func (p Profile) KubeRBACProxyArgs() []string {
	args := []string{"--tls-min-version=" + string(p.MinVersion)}
	if len(p.CipherSuites) > 0 {
		args = append(args, "--tls-cipher-suites="+strings.Join(p.CipherSuites, ","))
	}
	if !p.HTTP2() {
		args = append(args, "--http2-disable")
	}
	return args
}

// IsKubeRBACProxyFlag tells the flags KubeRBACProxyArgs sets from those it leaves alone.
func IsKubeRBACProxyFlag(arg string) bool {
	return strings.HasPrefix(arg, "--tls-min-version=") || strings.HasPrefix(arg, "--tls-cipher-suites=") || arg == "--http2-disable"
}

// HTTP2 tells whether HTTP/2 can be served under the profile. Below TLS 1.3, HTTP/2 requires
// TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 (RFC 9113, 9.2.2); Go's HTTP/2 server accepts its
// ECDSA twin instead, and refuses to start with a cipher list that has neither, as a Custom
// profile may.
func (p Profile) HTTP2() bool {
	return p.TLSMinVersion() >= tls.VersionTLS13 || slices.ContainsFunc(p.CipherSuites, func(s string) bool {
		return s == "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" || s == "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256"
	})
}

// TLSMinVersion is the minimal version as crypto/tls numbers it.
func (p Profile) TLSMinVersion() uint16 {
	if v, ok := versions[p.MinVersion]; ok {
		return v
	}
	return tls.VersionTLS12
}

// CipherSuiteIDs are the cipher suites as crypto/tls numbers them; nil under TLS 1.3.
func (p Profile) CipherSuiteIDs() []uint16 {
	var ids []uint16
	for _, name := range p.CipherSuites {
		ids = append(ids, goSuites[name])
	}
	return ids
}

// Apply sets c's minimal version and cipher suites to the profile's, and takes "h2" out of its
// protocols where the profile does not allow HTTP/2.
func (p Profile) Apply(c *tls.Config) {
	c.MinVersion = p.TLSMinVersion()
	c.CipherSuites = p.CipherSuiteIDs()
	if !p.HTTP2() && slices.Contains(c.NextProtos, "h2") {
		c.NextProtos = slices.DeleteFunc(slices.Clone(c.NextProtos), func(s string) bool { return s == "h2" })
	}
}

// Equal tells whether two profiles apply the same settings.
func (p Profile) Equal(o Profile) bool {
	return p.Type == o.Type && p.MinVersion == o.MinVersion && slices.Equal(p.CipherSuites, o.CipherSuites)
}

// String is the profile in a few words, for logs: "Modern (VersionTLS13)",
// "Intermediate (VersionTLS12, 6 cipher suites)".
func (p Profile) String() string {
	s := fmt.Sprintf("%s (%s", p.Type, p.MinVersion)
	if n := len(p.CipherSuites); n > 0 {
		s += fmt.Sprintf(", %d cipher suites", n)
	}
	if len(p.Ignored) > 0 {
		s += fmt.Sprintf("; left out, not implemented by Go: %s", strings.Join(p.Ignored, ", "))
	}
	return s + ")"
}

// openSSLToIANA maps the OpenSSL name of every TLS 1.2-and-below suite crypto/tls implements
// to its IANA name. TLS 1.3 suites have one name in both (tls13Suites).
var openSSLToIANA = func() map[string]string {
	m := map[string]string{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		if !slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}) {
			m[openSSLName(s.Name)] = s.Name
		}
	}
	return m
}()

// openSSLName is the OpenSSL name of a TLS 1.2-and-below suite's IANA name, by OpenSSL's rule
// (its ciphers(1) manual lists both): the key exchange and authentication as they are, without
// them for plain RSA; "AES_128" as "AES128"; CBC unsaid for AES; 3DES as DES-CBC3; RC4 without
// its key size; ChaCha20-Poly1305 without its hash; dashes for underscores.
// TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256 is ECDHE-RSA-AES128-SHA256, TLS_RSA_WITH_3DES_EDE_CBC_SHA
// is DES-CBC3-SHA.
func openSSLName(iana string) string {
	kx, cipher, _ := strings.Cut(strings.TrimPrefix(iana, "TLS_"), "_WITH_")
	cipher = strings.NewReplacer("AES_128_CBC", "AES128", "AES_256_CBC", "AES256", "AES_128", "AES128", "AES_256", "AES256",
		"3DES_EDE_CBC", "DES-CBC3", "RC4_128", "RC4", "CHACHA20_POLY1305_SHA256", "CHACHA20-POLY1305").Replace(cipher)
	name := cipher
	if kx != "RSA" {
		name = kx + "_" + cipher
	}
	return strings.ReplaceAll(name, "_", "-")
}

// goSuites are the cipher suites crypto/tls implements (secure or not: the profile decides),
// by IANA name; tls13Suites those of TLS 1.3.
var goSuites, tls13Suites = func() (map[string]uint16, map[string]bool) {
	all, v13 := map[string]uint16{}, map[string]bool{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		all[s.Name] = s.ID
		if slices.Equal(s.SupportedVersions, []uint16{tls.VersionTLS13}) {
			v13[s.Name] = true
		}
	}
	return all, v13
}()
