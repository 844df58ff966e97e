package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/manila-setup/manila-setup/internal/testcert"
)

// A Keystone behind TLS that requires a client certificate (a real TLS server on loopback):
// Connect presents the one given as content (ClientCertPEM, ClientKeyPEM: what the operator has
// from its credentials Secret), and without it the handshake is refused before any request.
func TestConnectPresentsTheClientCertificate(t *testing.T) {
	cert, key := testcert.Pair(t, "manila-setup client")
	block, _ := pem.Decode(cert)
	clientCert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	clients := x509.NewCertPool()
	clients.AddCert(clientCert)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for _, c := range r.TLS.PeerCertificates {
			seen = append(seen, c.Subject.CommonName)
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error": {"code": 401, "message": "The request you have made requires authentication.", "title": "Unauthorized"}}`))
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake below is expected
	srv.StartTLS()
	defer srv.Close()
	serverCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cloudsYAML := []byte("clouds:\n  c:\n    auth: {auth_url: '" + srv.URL + "/v3', username: u, password: pw, project_name: p, user_domain_name: Default, project_domain_name: Default}\n")
	connect := func(cfg Config) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cfg.Cloud, cfg.CloudsYAML, cfg.CABundlePEM, cfg.Timeout = "c", cloudsYAML, serverCA, 10*time.Second
		_, err := Connect(ctx, cfg)
		return err
	}

	err = connect(Config{ClientCertPEM: cert, ClientKeyPEM: key})
	mu.Lock()
	got := strings.Join(seen, ",")
	mu.Unlock()
	if got == "" || !strings.Contains(got, "manila-setup client") {
		t.Fatalf("Keystone saw client certificates %q (Connect: %v), want the one given", got, err)
	}
	if err == nil {
		t.Errorf("Connect succeeded against a Keystone that answers 401")
	}

	seen = nil
	if err := connect(Config{}); err == nil || len(seen) != 0 {
		t.Errorf("without the client certificate: Connect %v, requests served %v; want a refused handshake", err, seen)
	}
	_, otherKey := testcert.Pair(t, "other")
	if err := connect(Config{ClientCertPEM: cert, ClientKeyPEM: otherKey}); err == nil || !strings.Contains(err.Error(), "client certificate and key") || strings.Contains(err.Error(), "PRIVATE KEY") {
		t.Errorf("a key of another certificate: %v", err)
	}
}
