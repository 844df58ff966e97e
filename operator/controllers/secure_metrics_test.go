package controllers

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Without service-ca's files the handshake gets a self-signed certificate for the Service's
// names; once the files are there (the kubelet fills an optional Secret volume when the Secret
// appears), theirs, and a renewal's after it.
func TestServingCertFollowsTheMountedSecret(t *testing.T) {
	dir := t.TempDir()
	names := servingCertNames(OperatorMetricsService, "ns")
	s := &servingCert{dir: dir, names: names}
	leaf := func() *x509.Certificate {
		t.Helper()
		c, err := s.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		x, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	fallback := leaf()
	if !slices.Equal(fallback.DNSNames, names) {
		t.Fatalf("self-signed for %v, want %v", fallback.DNSNames, names)
	}
	if again := leaf(); again.SerialNumber.Cmp(fallback.SerialNumber) != 0 {
		t.Fatalf("a new self-signed certificate at each handshake")
	}
	write := func(at time.Time) *x509.Certificate {
		t.Helper()
		crt, key, err := newServingCert(names, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(p, at, at); err != nil {
				t.Fatal(err)
			}
		}
		got := leaf()
		if got.SerialNumber.Cmp(fallback.SerialNumber) == 0 {
			t.Fatal("still the self-signed certificate")
		}
		return got
	}
	first := write(time.Now().Add(-time.Hour))
	if renewed := write(time.Now()); renewed.SerialNumber.Cmp(first.SerialNumber) == 0 {
		t.Fatal("the renewed certificate is not served")
	}
	// A half-written renewal: the last good certificate stays.
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leaf(); got.SerialNumber.Cmp(fallback.SerialNumber) == 0 {
		t.Fatal("fell back to the self-signed certificate during a renewal")
	}
}
