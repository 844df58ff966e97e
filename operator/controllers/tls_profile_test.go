package controllers

import (
	"crypto/tls"
	"errors"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/manila-setup/manila-setup/operator"
	"github.com/manila-setup/manila-setup/operator/tlsprofile"
)

// The controller Deployment's kube-rbac-proxy sidecars get the cluster's profile as flags, the
// other containers nothing; under TLS 1.3 no --tls-cipher-suites; a profile that cannot be
// applied gives Intermediate and one Warning Event.
func TestKubeRBACProxyTLSFlags(t *testing.T) {
	intermediate := []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=" + strings.Join(tlsprofile.Intermediate().CipherSuites, ",")}
	for _, tc := range []struct {
		name    string
		profile *configv1.TLSSecurityProfile
		want    []string
		warning string
	}{
		{name: "no APIServer: Intermediate", want: intermediate},
		{name: "Modern", profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}, want: []string{"--tls-min-version=VersionTLS13"}},
		{name: "Old", profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType},
			want: []string{"--tls-min-version=VersionTLS10", "--tls-cipher-suites=" + strings.Join(mustResolve(t, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileOldType}).CipherSuites, ",")}},
		{name: "Custom", profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType, Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{
			MinTLSVersion: configv1.VersionTLS12, Ciphers: []string{"ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-ECDSA-AES256-GCM-SHA384"}}}},
			want: []string{"--tls-min-version=VersionTLS12", "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "--http2-disable"}},
		{name: "Custom without minTLSVersion: Intermediate, and a Warning", profile: &configv1.TLSSecurityProfile{Type: configv1.TLSProfileCustomType,
			Custom: &configv1.CustomTLSProfile{TLSProfileSpec: configv1.TLSProfileSpec{Ciphers: []string{"ECDHE-RSA-AES256-GCM-SHA384"}}}},
			want: intermediate, warning: "spec.tlsSecurityProfile.custom.minTLSVersion: Required value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func() (tlsprofile.Profile, error) { return tlsprofile.Resolve(tc.profile) }
			events := &eventLog{}
			c := &workloadController{k: workloadControllerService, workloadInputs: workloadInputs{tlsProfile: read,
				tlsReport: &tlsProfileReport{what: "kube-rbac-proxy sidecars", recorder: events}}}
			vars := assetVars{namespace: "ns", images: testImagesForUnit, infrastructure: func() *configv1.Infrastructure { return nil }, tls: read}.of(nil)
			for range 2 { // a second sync says nothing new
				obj, err := operator.ReadAsset("controller.yaml", vars)
				if err != nil {
					t.Fatal(err)
				}
				d := obj.(*appsv1.Deployment)
				c.withTLSProfile(&d.Spec.Template)
				proxies := 0
				for _, ct := range d.Spec.Template.Spec.Containers {
					var got []string
					for _, a := range ct.Args {
						if tlsprofile.IsKubeRBACProxyFlag(a) {
							got = append(got, a)
						}
					}
					if !strings.HasSuffix(ct.Name, "-kube-rbac-proxy") {
						if len(got) > 0 {
							t.Errorf("container %s: %v", ct.Name, got)
						}
						continue
					}
					proxies++
					if !slices.Equal(got, tc.want) {
						t.Errorf("container %s:\n%v\nwant\n%v", ct.Name, got, tc.want)
					}
				}
				if proxies != 3 {
					t.Errorf("%d kube-rbac-proxy containers, want 3", proxies)
				}
			}
			var warnings []string
			for _, e := range events.events {
				if strings.HasPrefix(e, "Warning ") {
					warnings = append(warnings, e)
				}
			}
			switch {
			case tc.warning == "" && len(warnings) > 0:
				t.Errorf("Warnings %v", warnings)
			case tc.warning != "" && (len(warnings) != 1 || !strings.Contains(warnings[0], TLSProfileInvalidReason) || !strings.Contains(warnings[0], tc.warning)):
				t.Errorf("Warnings %v, want one %s about %q", warnings, TLSProfileInvalidReason, tc.warning)
			}
		})
	}
}

func mustResolve(t *testing.T, p *configv1.TLSSecurityProfile) tlsprofile.Profile {
	t.Helper()
	r, err := tlsprofile.Resolve(p)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// The metrics endpoint refuses handshakes until the profile is known, then each handshake takes
// the profile of its moment, over the server's certificate and protocols.
func TestTLSPolicyPerConnection(t *testing.T) {
	p := newTLSPolicy()
	base := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	get := p.configForClient(base)
	if _, err := get(&tls.ClientHelloInfo{}); err == nil {
		t.Fatal("a handshake before the profile is known was not refused")
	}
	p.set(mustResolve(t, &configv1.TLSSecurityProfile{Type: configv1.TLSProfileModernType}), nil)
	c, err := get(&tls.ClientHelloInfo{})
	if err != nil || c.MinVersion != tls.VersionTLS13 || len(c.CipherSuites) != 0 || !slices.Equal(c.NextProtos, base.NextProtos) {
		t.Fatalf("Modern: %+v, %v", c, err)
	}
	p.set(tlsprofile.Intermediate(), errors.New("spec.tlsSecurityProfile.custom: Required value"))
	c, err = get(&tls.ClientHelloInfo{})
	if err != nil || c.MinVersion != tls.VersionTLS12 || len(c.CipherSuites) != 6 {
		t.Fatalf("Intermediate: %+v, %v", c, err)
	}
	if base.MinVersion != 0 || base.CipherSuites != nil {
		t.Errorf("the base config was changed: %+v", base)
	}
}
