package ssl

import (
	"bytes"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

func TestResolvePrefixFirst(t *testing.T) {
	props := map[string]string{
		"ssl.keystore.location":                    "/plain",
		"listener.name.mtls.ssl.keystore.location": "/prefixed",
		"ssl.client.auth":                          "requested",
		"listener.name.other.ssl.client.auth":      "required",
	}
	lookup := func(k string) (string, bool) { v, ok := props[k]; return v, ok }
	s := Resolve("MTLS", lookup)
	if v, _ := s.Value("ssl.keystore.location"); v != "/prefixed" {
		t.Errorf("ssl.keystore.location = %q, want the listener's own", v)
	}
	if n := s.Name("ssl.keystore.location"); n != "listener.name.mtls.ssl.keystore.location" {
		t.Errorf("name %q", n)
	}
	if v, _ := s.Value("ssl.client.auth"); v != "requested" {
		t.Errorf("ssl.client.auth = %q, want the unprefixed one (another listener's does not count)", v)
	}
	if _, ok := s.Value("ssl.truststore.location"); ok {
		t.Error("an unset key has a value")
	}
	if n := s.Name("ssl.truststore.location"); n != "listener.name.mtls.ssl.truststore.location" {
		t.Errorf("an unset key is named %q", n)
	}
}

func TestPEMKeystoreForms(t *testing.T) {
	ca := newTestCA(t, "ca")
	p := ca.server(t, "broker")
	dir := t.TempDir()
	file := writeFile(t, dir, "ks.pem", p.keyPEM+p.chainPEM)
	// A properties file's continuation lines join a PEM value into one
	// line; Kafka reads it still.
	leafPEM := strings.TrimSuffix(p.chainPEM, ca.pem)
	oneLine := strings.Join(strings.Fields(leafPEM), " ")
	keyOneLine := strings.Join(strings.Fields(p.keyPEM), " ")
	salt, iv := make([]byte, 16), make([]byte, 16)
	rand.Read(salt)
	rand.Read(iv)
	enc, err := encryptPKCS8(p.keyDER, []byte("kp"), salt, iv, 2048)
	if err != nil {
		t.Fatal(err)
	}
	encPEM := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: enc}))
	encFile := writeFile(t, dir, "enc.pem", encPEM+p.chainPEM)
	for name, props := range map[string]map[string]string{
		"location":           {"ssl.keystore.type": "PEM", "ssl.keystore.location": file},
		"inline":             {"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM},
		"inline one line":    {"ssl.keystore.type": "PEM", "ssl.keystore.key": keyOneLine, "ssl.keystore.certificate.chain": oneLine},
		"encrypted location": {"ssl.keystore.type": "PEM", "ssl.keystore.location": encFile, "ssl.key.password": "kp"},
		"encrypted inline":   {"ssl.keystore.type": "PEM", "ssl.keystore.key": encPEM, "ssl.keystore.certificate.chain": p.chainPEM, "ssl.key.password": "kp"},
		"chain in any order": {"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": ca.pem + leafPEM},
	} {
		ks, err := loadKeystore(settings(props))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !ks.Leaf.Equal(p.cert) {
			t.Errorf("%s: the leaf is %s", name, ks.Leaf.Subject)
		}
		if want := 2; len(ks.Certificate.Certificate) != want && name != "inline one line" {
			t.Errorf("%s: chain of %d", name, len(ks.Certificate.Certificate))
		}
	}
}

func TestKeystoreErrorsAsKafka(t *testing.T) {
	ca := newTestCA(t, "ca")
	p := ca.server(t, "broker")
	other := ca.server(t, "other")
	dir := t.TempDir()
	file := writeFile(t, dir, "ks.pem", p.keyPEM+p.chainPEM)
	salt, iv := make([]byte, 8), make([]byte, 16)
	enc, _ := encryptPKCS8(p.keyDER, []byte("right"), salt, iv, 1000)
	encPEM := string(pem.EncodeToMemory(&pem.Block{Type: "ENCRYPTED PRIVATE KEY", Bytes: enc}))
	for props, want := range map[*map[string]string]string{
		{"ssl.keystore.type": "JKS", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM}:                                "SSL private key can be specified only for PEM, but key store type is JKS.",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM}:                                                                              "SSL private key is specified, but certificate chain is not specified.",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM, "ssl.keystore.location": file}: "Both SSL key store location and separate private key are specified.",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM, "ssl.keystore.password": "x"}:  "SSL key store password cannot be specified with PEM format",
		{"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": p.chainPEM}:                                                              "SSL certificate chain is specified, but private key is not specified",
		{"ssl.keystore.type": "PEM", "ssl.keystore.location": file, "ssl.keystore.password": "x"}:                                               "SSL key store password cannot be specified with PEM format",
		{"ssl.keystore.password": "x"}:  "SSL key store is not specified, but key store password is specified.",
		{"ssl.keystore.location": file}: "SSL key store is specified, but key store password is not specified.",
		{"ssl.keystore.type": "PEM", "ssl.keystore.location": filepath.Join(dir, "nope")}:                                                   "no such file",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": other.chainPEM}:                        "no certificate of the chain is the private key's",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": encPEM, "ssl.keystore.certificate.chain": p.chainPEM}:                              "ssl.key.password is not set",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": encPEM, "ssl.keystore.certificate.chain": p.chainPEM, "ssl.key.password": "wrong"}: "wrong ssl.key.password",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": p.keyPEM, "ssl.keystore.certificate.chain": p.chainPEM, "ssl.key.password": "x"}:   "not an encrypted PKCS#8 key",
		{"ssl.keystore.type": "PEM", "ssl.keystore.key": "junk", "ssl.keystore.certificate.chain": p.chainPEM}:                              "Private key not provided",
		{"ssl.keystore.type": "PKCS11", "ssl.keystore.location": file, "ssl.keystore.password": "x"}:                                        "not one Gregor reads",
	} {
		_, err := loadKeystore(settings(*props))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want %q", keysOf(*props), err, want)
		}
	}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTruststoreForms(t *testing.T) {
	ca := newTestCA(t, "ca")
	ca2 := newTestCA(t, "ca2")
	dir := t.TempDir()
	file := writeFile(t, dir, "ts.pem", ca.pem+ca2.pem)
	for name, props := range map[string]map[string]string{
		"location": {"ssl.truststore.type": "PEM", "ssl.truststore.location": file},
		"inline":   {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.pem + ca2.pem},
		// Kafka's PemParser, whose greedy ".*" after BEGIN runs on to the
		// last certificate of a line: of several joined on one line,
		// only the last is read (in Kafka as in Gregor).
		"one line": {"ssl.truststore.type": "PEM", "ssl.truststore.certificates": strings.Join(strings.Fields(ca.pem+ca2.pem), " ")},
	} {
		ts, err := loadTruststore(settings(props))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := 2
		if name == "one line" {
			want = 1
		}
		if len(ts.Certs) != want || !ts.Certs[want-1].Equal(ca2.cert) {
			t.Errorf("%s: %d certificates, want %d", name, len(ts.Certs), want)
		}
	}
	for props, want := range map[*map[string]string]string{
		{"ssl.truststore.type": "JKS", "ssl.truststore.certificates": ca.pem}:                                  "SSL trust store certs can be specified only for PEM, but trust store type is JKS.",
		{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.pem, "ssl.truststore.location": file}: "Both SSL trust store location and separate trust certificates are specified.",
		{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca.pem, "ssl.truststore.password": "x"}:  "SSL trust store password cannot be specified for PEM format.",
		{"ssl.truststore.type": "PEM", "ssl.truststore.location": file, "ssl.truststore.password": "x"}:        "SSL trust store password cannot be specified for PEM format.",
		{"ssl.truststore.password": "x"}:                                           "SSL trust store is not specified, but trust store password is specified.",
		{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": "none here"}: "At least one certificate expected, but none found",
	} {
		_, err := loadTruststore(settings(*props))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want %q", keysOf(*props), err, want)
		}
	}
	if ts, err := loadTruststore(settings(nil)); ts != nil || err != nil {
		t.Errorf("no truststore configured: %v %v", ts, err)
	}
}

// JKS and PKCS12 written by Go libraries, each read under either type
// (Java's keystore.type.compat).
func TestBinaryStores(t *testing.T) {
	ca := newTestCA(t, "ca")
	p := ca.server(t, "broker")
	dir := t.TempDir()

	jks := keystore.New()
	if err := jks.SetPrivateKeyEntry("broker", keystore.PrivateKeyEntry{
		CreationTime: time.Now(), PrivateKey: p.keyDER,
		CertificateChain: []keystore.Certificate{{Type: "X509", Content: p.cert.Raw}, {Type: "X509", Content: ca.cert.Raw}},
	}, []byte("keypass")); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jks.Store(&buf, []byte("storepass")); err != nil {
		t.Fatal(err)
	}
	jksFile := writeFile(t, dir, "ks.jks", buf.String())

	p12, err := pkcs12.Modern2023.Encode(p.key, p.cert, []*x509.Certificate{ca.cert}, "storepass")
	if err != nil {
		t.Fatal(err)
	}
	p12File := writeFile(t, dir, "ks.p12", string(p12))

	tsJKS := keystore.New()
	if err := tsJKS.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: ca.cert.Raw}}); err != nil {
		t.Fatal(err)
	}
	buf.Reset()
	if err := tsJKS.Store(&buf, []byte("trustpass")); err != nil {
		t.Fatal(err)
	}
	tsJKSFile := writeFile(t, dir, "ts.jks", buf.String())
	tsP12, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{ca.cert}, "trustpass")
	if err != nil {
		t.Fatal(err)
	}
	tsP12File := writeFile(t, dir, "ts.p12", string(tsP12))

	for name, props := range map[string]map[string]string{
		"jks":           {"ssl.keystore.location": jksFile, "ssl.keystore.password": "storepass", "ssl.key.password": "keypass"},
		"jks as pkcs12": {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": jksFile, "ssl.keystore.password": "storepass", "ssl.key.password": "keypass"},
		"pkcs12":        {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": p12File, "ssl.keystore.password": "storepass"},
		"pkcs12 as jks": {"ssl.keystore.type": "jks", "ssl.keystore.location": p12File, "ssl.keystore.password": "storepass"},
	} {
		ks, err := loadKeystore(settings(props))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !ks.Leaf.Equal(p.cert) || len(ks.Certificate.Certificate) != 2 {
			t.Errorf("%s: leaf %s, chain of %d", name, ks.Leaf.Subject, len(ks.Certificate.Certificate))
		}
	}
	for name, props := range map[string]map[string]string{
		"jks wrong store password": {"ssl.keystore.location": jksFile, "ssl.keystore.password": "nope", "ssl.key.password": "keypass"},
		"jks wrong key password":   {"ssl.keystore.location": jksFile, "ssl.keystore.password": "storepass", "ssl.key.password": "nope"},
		"jks no key password":      {"ssl.keystore.location": jksFile, "ssl.keystore.password": "storepass"},
		"pkcs12 wrong password":    {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": p12File, "ssl.keystore.password": "nope"},
	} {
		if _, err := loadKeystore(settings(props)); err == nil {
			t.Errorf("%s: loaded", name)
		}
	}
	for name, props := range map[string]map[string]string{
		"jks":                        {"ssl.truststore.location": tsJKSFile, "ssl.truststore.password": "trustpass"},
		"jks without password":       {"ssl.truststore.location": tsJKSFile},
		"pkcs12":                     {"ssl.truststore.type": "PKCS12", "ssl.truststore.location": tsP12File, "ssl.truststore.password": "trustpass"},
		"jks keystore as truststore": {"ssl.truststore.location": jksFile, "ssl.truststore.password": "storepass"},
	} {
		ts, err := loadTruststore(settings(props))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if len(ts.Certs) != 1 || !ts.Certs[0].Equal(ca.cert) && !ts.Certs[0].Equal(p.cert) {
			t.Errorf("%s: %d certificates", name, len(ts.Certs))
		}
	}
	if _, err := loadTruststore(settings(map[string]string{"ssl.truststore.location": tsJKSFile, "ssl.truststore.password": "wrong"})); err == nil {
		t.Error("a JKS truststore read with the wrong password")
	}
}

// Stores written by Java's keytool and keys encrypted by openssl: what
// users actually hand a broker.
func TestStoresFromJavaAndOpenSSL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs keytool and openssl")
	}
	keytool, kerr := exec.LookPath("keytool")
	openssl, oerr := exec.LookPath("openssl")
	if kerr != nil && oerr != nil {
		t.Skip("neither keytool nor openssl")
	}
	dir := t.TempDir()
	run := func(name string, args ...string) {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	if kerr == nil {
		for _, typ := range []string{"PKCS12", "JKS"} {
			ks := filepath.Join(dir, "ks."+typ)
			run(keytool, "-genkeypair", "-keystore", ks, "-storetype", typ, "-storepass", "storepass", "-keypass", "storepass",
				"-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=broker,O=Gregor", "-validity", "2")
			got, err := loadKeystore(settings(map[string]string{"ssl.keystore.type": typ, "ssl.keystore.location": ks, "ssl.keystore.password": "storepass"}))
			if err != nil {
				t.Errorf("keytool %s keystore: %v", typ, err)
			} else if dn, _ := DistinguishedName(got.Leaf.RawSubject); dn != "CN=broker,O=Gregor" {
				t.Errorf("keytool %s keystore: subject %s", typ, dn)
			}
			cert := filepath.Join(dir, "cert-"+typ+".pem")
			run(keytool, "-exportcert", "-rfc", "-keystore", ks, "-storetype", typ, "-storepass", "storepass", "-alias", "broker", "-file", cert)
			ts := filepath.Join(dir, "ts."+typ)
			run(keytool, "-importcert", "-noprompt", "-keystore", ts, "-storetype", typ, "-storepass", "trustpass", "-alias", "ca", "-file", cert)
			for _, pw := range []string{"trustpass", ""} {
				props := map[string]string{"ssl.truststore.type": typ, "ssl.truststore.location": ts}
				if pw != "" {
					props["ssl.truststore.password"] = pw
				} else if typ == "PKCS12" {
					continue // Java's PKCS12 certificates are encrypted with the password
				}
				if got, err := loadTruststore(settings(props)); err != nil || len(got.Certs) != 1 {
					t.Errorf("keytool %s truststore (password %q): %v", typ, pw, err)
				}
			}
		}
	}
	if oerr == nil {
		key := filepath.Join(dir, "key.pem")
		run(openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
		crt := filepath.Join(dir, "crt.pem")
		run(openssl, "req", "-new", "-x509", "-key", key, "-subj", "/CN=ossl", "-days", "2", "-out", crt)
		for _, cipher := range []string{"aes-256-cbc", "aes-128-cbc", "des3"} {
			enc := filepath.Join(dir, "enc-"+cipher+".pem")
			run(openssl, "pkcs8", "-topk8", "-v2", cipher, "-in", key, "-passout", "pass:secret", "-out", enc)
			encPEM, _ := os.ReadFile(enc)
			crtPEM, _ := os.ReadFile(crt)
			if _, err := loadKeystore(settings(map[string]string{"ssl.keystore.type": "PEM", "ssl.keystore.key": string(encPEM),
				"ssl.keystore.certificate.chain": string(crtPEM), "ssl.key.password": "secret"})); err != nil {
				t.Errorf("openssl pkcs8 -v2 %s: %v", cipher, err)
			}
		}
	}
}

func FuzzPEMEntries(f *testing.F) {
	ca := newTestCA(f, "ca")
	f.Add(ca.pem)
	f.Add(strings.Join(strings.Fields(ca.pem), " "))
	f.Add("-----BEGIN PRIVATE KEY----- AAAA -----END PRIVATE KEY-----")
	f.Fuzz(func(t *testing.T, text string) {
		_, _ = pemEntries(certificateEntries, text, "CERTIFICATE")
		_, _ = pemTruststore(text)
		_, _ = pemKeystore(text, text, nil)
		pw := "x"
		_, _ = pemKeystore(text, text, &pw)
	})
}

func FuzzDecryptPKCS8(f *testing.F) {
	ca := newTestCA(f, "ca")
	p := ca.server(f, "broker")
	enc, _ := encryptPKCS8(p.keyDER, []byte("pw"), make([]byte, 8), make([]byte, 16), 10)
	f.Add(enc)
	f.Fuzz(func(t *testing.T, der []byte) {
		_, _ = decryptPKCS8(der, []byte("pw"))
	})
}
