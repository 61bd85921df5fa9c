package integration

// A throw-away public key infrastructure for tests of secured listeners: a
// certificate authority, certificates it signs for servers and clients,
// written as the PEM files that Kafka 4.3 reads (ssl.keystore.type=PEM with
// ssl.keystore.location naming one file holding the private key and the
// certificate chain; ssl.truststore.type=PEM with the CA's certificate),
// and the same material inline for ssl.keystore.key,
// ssl.keystore.certificate.chain and ssl.truststore.certificates.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// PKI is a certificate authority whose files live in Dir.
type PKI struct {
	Dir string
	// CA is the authority's self-signed certificate; CAFile holds it as
	// PEM, which is a PEM truststore, and CAPEM is the same text (for
	// ssl.truststore.certificates).
	CA     *x509.Certificate
	CAFile string
	CAPEM  string
	caKey  crypto.Signer
}

// KeyPair is a certificate the PKI issued, its private key, and the files
// they were written to.
type KeyPair struct {
	Name string
	Cert *x509.Certificate
	Key  crypto.Signer
	// ChainPEM is the certificate followed by the CA's (the chain a peer
	// is sent); KeyPEM is the private key, unencrypted PKCS#8.
	ChainPEM string
	KeyPEM   string
	// ChainFile and KeyFile hold ChainPEM and KeyPEM; KeystoreFile holds
	// both, key first: a PEM keystore for ssl.keystore.location.
	ChainFile    string
	KeyFile      string
	KeystoreFile string
}

// CertSpec is what a certificate says.
type CertSpec struct {
	// Subject is the distinguished name in RFC 2253 form, most specific
	// attribute first ("CN=alice,OU=eng,O=Gregor"), as Java's
	// X500Principal.getName() prints it; it is encoded in that order (the
	// last attribute is the first in the certificate). Values may escape
	// ',', '+', '=', '\\' and '"' with a backslash, and RDNs with several
	// attributes join them with '+'.
	Subject  string
	DNSNames []string
	IPs      []net.IP
	// Server and Client choose the extended key usages; neither means both.
	Server, Client bool
	// NotBefore and NotAfter default to an hour ago and a day from now.
	NotBefore, NotAfter time.Time
	// RSA picks an RSA 2048 key instead of the default ECDSA P-256.
	RSA bool
}

// NewPKI creates a certificate authority (CN=Gregor Test CA) in dir.
func NewPKI(dir string) (*PKI, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating the CA key: %w", err)
	}
	subject, err := rawSubject("CN=Gregor Test CA,O=Gregor")
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		RawSubject:            subject,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("creating the CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	p := &PKI{Dir: dir, CA: ca, caKey: key, CAFile: filepath.Join(dir, "ca.pem"), CAPEM: certPEM(der)}
	if err := os.WriteFile(p.CAFile, []byte(p.CAPEM), 0o644); err != nil {
		return nil, err
	}
	return p, nil
}

// NewPKIWithServer is NewPKI and its Server("broker") certificate.
func NewPKIWithServer(dir string) (*PKI, *KeyPair, error) {
	p, err := NewPKI(dir)
	if err != nil {
		return nil, nil, err
	}
	server, err := p.Server("broker")
	if err != nil {
		return nil, nil, err
	}
	return p, server, nil
}

// Server issues a server certificate named CN=<name> for 127.0.0.1,
// localhost, ::1 and every address of the harness's loopback pool (see
// ClaimLoopback), so that clients verifying the host name
// (ssl.endpoint.identification.algorithm=https) accept it from any node.
func (p *PKI) Server(name string) (*KeyPair, error) {
	return p.Issue(name, CertSpec{
		Subject:  "CN=" + name + ",O=Gregor",
		DNSNames: []string{"localhost"},
		IPs:      append([]net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback}, LoopbackPool()...),
		Server:   true, Client: true, // brokers are clients of each other too
	})
}

// Client issues a client certificate with the given subject DN.
func (p *PKI) Client(name, subject string) (*KeyPair, error) {
	return p.Issue(name, CertSpec{Subject: subject, Client: true})
}

// Issue creates a key and a certificate the CA signs, and writes
// <name>.chain.pem, <name>.key.pem and <name>.keystore.pem in Dir.
func (p *PKI) Issue(name string, spec CertSpec) (*KeyPair, error) {
	var key crypto.Signer
	var err error
	if spec.RSA {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		return nil, fmt.Errorf("generating %s's key: %w", name, err)
	}
	subject, err := rawSubject(spec.Subject)
	if err != nil {
		return nil, fmt.Errorf("certificate %s: %w", name, err)
	}
	notBefore, notAfter := spec.NotBefore, spec.NotAfter
	if notBefore.IsZero() {
		notBefore = time.Now().Add(-time.Hour)
	}
	if notAfter.IsZero() {
		notAfter = time.Now().Add(24 * time.Hour)
	}
	usage := []x509.ExtKeyUsage{}
	if spec.Server || !spec.Client {
		usage = append(usage, x509.ExtKeyUsageServerAuth)
	}
	if spec.Client || !spec.Server {
		usage = append(usage, x509.ExtKeyUsageClientAuth)
	}
	keyUsage := x509.KeyUsageDigitalSignature
	if spec.RSA {
		keyUsage |= x509.KeyUsageKeyEncipherment
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		RawSubject:   subject,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     keyUsage,
		ExtKeyUsage:  usage,
		DNSNames:     spec.DNSNames,
		IPAddresses:  spec.IPs,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.CA, key.Public(), p.caKey)
	if err != nil {
		return nil, fmt.Errorf("signing %s's certificate: %w", name, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	kp := &KeyPair{
		Name:         name,
		Cert:         cert,
		Key:          key,
		ChainPEM:     certPEM(der) + p.CAPEM,
		KeyPEM:       string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})),
		ChainFile:    filepath.Join(p.Dir, name+".chain.pem"),
		KeyFile:      filepath.Join(p.Dir, name+".key.pem"),
		KeystoreFile: filepath.Join(p.Dir, name+".keystore.pem"),
	}
	for file, body := range map[string]string{kp.ChainFile: kp.ChainPEM, kp.KeyFile: kp.KeyPEM, kp.KeystoreFile: kp.KeyPEM + kp.ChainPEM} {
		if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
			return nil, err
		}
	}
	return kp, nil
}

// ClientSSL is the client configuration (for a Java tool's
// --command-config) of a connection to an SSL listener: the CA as a PEM
// truststore and, when kp is not nil, kp as a PEM keystore (mTLS).
func (p *PKI) ClientSSL(kp *KeyPair) map[string]string {
	props := map[string]string{
		"security.protocol":                     "SSL",
		"ssl.truststore.type":                   "PEM",
		"ssl.truststore.location":               p.CAFile,
		"ssl.endpoint.identification.algorithm": "https",
	}
	if kp != nil {
		props["ssl.keystore.type"] = "PEM"
		props["ssl.keystore.location"] = kp.KeystoreFile
	}
	return props
}

// ListenerSSL is the server configuration of listener (its name, any
// case) serving kp's certificate from a PEM keystore file and trusting the
// CA (which client certificates are checked against), each key under
// Kafka's listener.name.<lower-case name>. prefix.
func (p *PKI) ListenerSSL(listener string, kp *KeyPair) map[string]string {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	return map[string]string{
		prefix + "ssl.keystore.type":       "PEM",
		prefix + "ssl.keystore.location":   kp.KeystoreFile,
		prefix + "ssl.truststore.type":     "PEM",
		prefix + "ssl.truststore.location": p.CAFile,
	}
}

// WritePKCS12 writes kp (key and chain) as a PKCS12 keystore protected
// by password (PBES2 with AES-256, as Java 17's keytool writes them).
func (kp *KeyPair) WritePKCS12(path, password string) error {
	var chain []*x509.Certificate
	for _, der := range pemCertificates(kp.ChainPEM)[1:] {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return err
		}
		chain = append(chain, c)
	}
	pfx, err := pkcs12.Modern2023.Encode(kp.Key, kp.Cert, chain, password)
	if err != nil {
		return fmt.Errorf("encoding %s as PKCS12: %w", kp.Name, err)
	}
	return os.WriteFile(path, pfx, 0o600)
}

// WriteJKS writes kp (key and chain) as a JKS keystore with a store and a
// key password.
func (kp *KeyPair) WriteJKS(path, storePassword, keyPassword string) error {
	pkcs8, err := x509.MarshalPKCS8PrivateKey(kp.Key)
	if err != nil {
		return err
	}
	entry := keystore.PrivateKeyEntry{CreationTime: time.Now(), PrivateKey: pkcs8}
	for _, der := range pemCertificates(kp.ChainPEM) {
		entry.CertificateChain = append(entry.CertificateChain, keystore.Certificate{Type: "X509", Content: der})
	}
	ks := keystore.New()
	if err := ks.SetPrivateKeyEntry(kp.Name, entry, []byte(keyPassword)); err != nil {
		return err
	}
	return writeJKS(path, ks, storePassword)
}

// WriteTruststoreJKS writes the CA certificate as a JKS truststore.
func (p *PKI) WriteTruststoreJKS(path, password string) error {
	ks := keystore.New()
	if err := ks.SetTrustedCertificateEntry("ca", keystore.TrustedCertificateEntry{CreationTime: time.Now(), Certificate: keystore.Certificate{Type: "X509", Content: p.CA.Raw}}); err != nil {
		return err
	}
	return writeJKS(path, ks, password)
}

// WriteTruststorePKCS12 writes the CA certificate as a PKCS12 truststore
// (marked trusted as Java marks them).
func (p *PKI) WriteTruststorePKCS12(path, password string) error {
	pfx, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{p.CA}, password)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pfx, 0o600)
}

func writeJKS(path string, ks keystore.KeyStore, password string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if err := ks.Store(f, []byte(password)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pemCertificates are the DER certificates of a PEM text, in order.
func pemCertificates(text string) [][]byte {
	var out [][]byte
	rest := []byte(text)
	for {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return out
		}
		if b.Type == "CERTIFICATE" {
			out = append(out, b.Bytes)
		}
	}
}

func certPEM(der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n.Add(n, big.NewInt(1))
}

// dnAttributeTypes are the attribute keywords a subject may use, with
// their object identifiers: RFC 2253's and the few more that certificates
// commonly carry.
var dnAttributeTypes = map[string]asn1.ObjectIdentifier{
	"CN":           {2, 5, 4, 3},
	"SERIALNUMBER": {2, 5, 4, 5},
	"C":            {2, 5, 4, 6},
	"L":            {2, 5, 4, 7},
	"ST":           {2, 5, 4, 8},
	"STREET":       {2, 5, 4, 9},
	"O":            {2, 5, 4, 10},
	"OU":           {2, 5, 4, 11},
	"T":            {2, 5, 4, 12},
	"DC":           {0, 9, 2342, 19200300, 100, 1, 25},
	"UID":          {0, 9, 2342, 19200300, 100, 1, 1},
	"EMAILADDRESS": {1, 2, 840, 113549, 1, 9, 1},
}

// rawSubject encodes an RFC 2253 distinguished name as a certificate's
// subject: the RDNs in reverse order of the text.
func rawSubject(dn string) ([]byte, error) {
	rdns, err := splitUnescaped(dn, ',')
	if err != nil {
		return nil, err
	}
	var seq pkix.RDNSequence
	for i := len(rdns) - 1; i >= 0; i-- {
		atvs, err := splitUnescaped(rdns[i], '+')
		if err != nil {
			return nil, err
		}
		var set pkix.RelativeDistinguishedNameSET
		for _, atv := range atvs {
			k, v, ok := strings.Cut(atv, "=")
			if !ok {
				return nil, fmt.Errorf("subject %q: %q is not type=value", dn, atv)
			}
			k = strings.ToUpper(strings.TrimSpace(k))
			oid, ok := dnAttributeTypes[k]
			if !ok {
				return nil, fmt.Errorf("subject %q: unknown attribute type %s", dn, k)
			}
			val, err := unescapeDN(strings.TrimSpace(v))
			if err != nil {
				return nil, fmt.Errorf("subject %q: %w", dn, err)
			}
			var enc any = val
			switch k {
			case "EMAILADDRESS", "DC":
				// IA5String, as RFC 5280 wants for these.
				raw, err := asn1.MarshalWithParams(val, "ia5")
				if err != nil {
					return nil, err
				}
				enc = asn1.RawValue{FullBytes: raw}
			case "C", "SERIALNUMBER":
				// PrintableString (Go's choice for printable text anyway).
			default:
				// UTF8String, what Java's keytool writes.
				raw, err := asn1.MarshalWithParams(val, "utf8")
				if err != nil {
					return nil, err
				}
				enc = asn1.RawValue{FullBytes: raw}
			}
			set = append(set, pkix.AttributeTypeAndValue{Type: oid, Value: enc})
		}
		seq = append(seq, set)
	}
	return asn1.Marshal(seq)
}

// splitUnescaped splits s at every sep not preceded by a backslash,
// keeping the escapes.
func splitUnescaped(s string, sep byte) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("empty distinguished name")
	}
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case sep:
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:]), nil
}

func unescapeDN(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("value %q ends in a lone backslash", s)
		}
		b.WriteByte(s[i])
	}
	return b.String(), nil
}
