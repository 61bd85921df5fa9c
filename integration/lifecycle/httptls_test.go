package lifecycle

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
)

// TestHTTPListenerOverTLS: with gregor.http.ssl.* the HTTP listener
// serves HTTPS with the node's keystore and, with ssl.client.auth=required,
// only to clients whose certificate its truststore trusts.
func TestHTTPListenerOverTLS(t *testing.T) {
	pki, err := integration.NewPKI(filepath.Join(t.TempDir(), "pki"))
	if err != nil {
		t.Fatal(err)
	}
	server, err := pki.Server("http")
	if err != nil {
		t.Fatal(err)
	}
	client, err := pki.Client("scraper", "CN=scraper,O=Gregor")
	if err != nil {
		t.Fatal(err)
	}
	n := node.Start(t, "gregor.http.listener=127.0.0.1:0",
		"gregor.http.ssl.keystore.type=PEM", "gregor.http.ssl.keystore.location="+server.KeystoreFile,
		"gregor.http.ssl.truststore.type=PEM", "gregor.http.ssl.truststore.location="+pki.CAFile,
		"gregor.http.ssl.client.auth=required")
	m := httpListening.FindStringSubmatch(n.Output())
	if m == nil {
		t.Fatalf("the node does not say where its HTTP listener is:\n%s", n.Output())
	}
	addr := m[1]
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	get := func(certs []tls.Certificate) (string, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: certs}}}
		resp, err := c.Get("https://" + addr + "/healthz")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), err
	}
	cert, err := tls.X509KeyPair([]byte(client.ChainPEM), []byte(client.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if body, err := get([]tls.Certificate{cert}); err != nil || body != "ok\n" {
		t.Fatalf("HTTPS with a client certificate: %q, %v", body, err)
	}
	if _, err := get(nil); err == nil {
		t.Fatal("HTTPS without a client certificate was served")
	}
	if resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/healthz"); err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatal("plain HTTP was served")
		}
	}
}
