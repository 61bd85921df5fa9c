package ssl

// The two sides of a TLS connection built from Settings.
//
// Server is an SSL or SASL_SSL listener's side: its keystore's
// certificate, ssl.client.auth (none, requested, required: whether and
// how a client certificate is asked for and checked against the
// truststore), the protocol versions and cipher suites, and the principal
// mapping. Its configuration is one immutable value swapped whole, so a
// dynamic keystore update applies to the handshakes that start after it
// while established connections carry on.
//
// Client is the side of a broker or controller dialling another node's
// listener (inter.broker.listener.name, controller.listener.names) with
// that listener's settings: the truststore the peer's certificate must
// chain to, the keystore when the peer asks for a certificate, and
// ssl.endpoint.identification.algorithm (https: the certificate must name
// the host dialled; empty: it need not).

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/internal/peerdial"
)

// AnonymousName is the principal name of a connection without a client
// certificate (Kafka's KafkaPrincipal.ANONYMOUS).
const AnonymousName = "ANONYMOUS"

// Server is the TLS server side of a listener.
type Server struct {
	listener string
	// verifyKeystore: the listener is one this node also dials (the
	// inter-broker or controller listener), so its keystore's
	// certificate must be one its truststore accepts (Kafka checks a
	// handshake between the two; Gregor checks the chain).
	verifyKeystore bool
	state          atomic.Pointer[serverState]
	config         *tls.Config
}

type serverState struct {
	settings   Settings
	config     *tls.Config
	keystore   *Keystore
	truststore *Truststore
	mapper     *PrincipalMapper
}

// NewServer builds the server side of listener from s; verifyKeystore
// says this node dials the listener too. It returns warnings for settings
// that have no effect.
func NewServer(s Settings, verifyKeystore bool) (*Server, []string, error) {
	st, warnings, err := newServerState(s, verifyKeystore)
	if err != nil {
		return nil, nil, err
	}
	srv := &Server{listener: s.Listener, verifyKeystore: verifyKeystore}
	srv.state.Store(st)
	srv.config = &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return srv.state.Load().config, nil },
	}
	return srv, warnings, nil
}

// Config is the tls.Config to serve connections with; it follows
// reconfigurations.
func (srv *Server) Config() *tls.Config { return srv.config }

// Settings are the settings in effect.
func (srv *Server) Settings() Settings { return srv.state.Load().settings }

// Leaf is the certificate the listener presents now.
func (srv *Server) Leaf() *x509.Certificate { return srv.state.Load().keystore.Leaf }

func newServerState(s Settings, verifyKeystore bool) (*serverState, []string, error) {
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	warnings := s.Ignored()
	ks, err := loadKeystore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %w", s.Listener, err)
	}
	if ks == nil {
		return nil, nil, fmt.Errorf("listener %s: an SSL listener needs a keystore (%s, or %s and %s)", s.Listener,
			s.Name("ssl.keystore.location"), s.Name("ssl.keystore.key"), s.Name("ssl.keystore.certificate.chain"))
	}
	ts, err := loadTruststore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %w", s.Listener, err)
	}
	cfg, more, err := baseConfig(s)
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %w", s.Listener, err)
	}
	warnings = append(warnings, more...)
	cfg.Certificates = []tls.Certificate{ks.Certificate}
	if ts != nil {
		cfg.ClientCAs = ts.Pool
	}
	switch auth, _ := s.Value("ssl.client.auth"); strings.ToLower(strings.TrimSpace(auth)) {
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "none", "":
		cfg.ClientAuth = tls.NoClientCert
	default:
		// Kafka's DefaultSslEngineFactory warns and falls back too.
		warnings = append(warnings, fmt.Sprintf("Unrecognized client authentication configuration %s. Falling back to NONE. Recognized client authentication configurations are REQUIRED, REQUESTED, NONE.", auth))
	}
	rules, ok := s.Value("ssl.principal.mapping.rules")
	if !ok {
		rules = "DEFAULT"
	}
	mapper, err := NewPrincipalMapper(rules)
	if err != nil {
		return nil, nil, fmt.Errorf("listener %s: %s: %w", s.Listener, s.Name("ssl.principal.mapping.rules"), err)
	}
	if verifyKeystore && ts != nil {
		if err := verifyChain(ks, ts); err != nil {
			return nil, nil, fmt.Errorf("listener %s: this node dials the listener too, and its truststore does not accept its keystore's certificate: %w", s.Listener, err)
		}
	}
	return &serverState{settings: s, config: cfg, keystore: ks, truststore: ts, mapper: mapper}, warnings, nil
}

// verifyChain checks that the truststore accepts the keystore's
// certificate (any host, any use).
func verifyChain(ks *Keystore, ts *Truststore) error {
	inter := x509.NewCertPool()
	for _, der := range ks.Certificate.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	_, err := ks.Leaf.Verify(x509.VerifyOptions{Roots: ts.Pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}})
	return err
}

// baseConfig is what both sides read: versions and cipher suites.
func baseConfig(s Settings) (*tls.Config, []string, error) {
	protocol, _ := s.Value("ssl.protocol")
	lo, hi, err := versions(s.Name("ssl.enabled.protocols"), s.list("ssl.enabled.protocols"), s.Name("ssl.protocol"), protocol)
	if err != nil {
		return nil, nil, err
	}
	suites, allow13, allowBelow13, warnings, err := cipherSuites(s.Name("ssl.cipher.suites"), s.list("ssl.cipher.suites"))
	if err != nil {
		return nil, nil, err
	}
	if !allow13 && hi == tls.VersionTLS13 {
		hi = tls.VersionTLS12
	}
	if !allowBelow13 && lo < tls.VersionTLS13 {
		lo = tls.VersionTLS13
	}
	if lo > hi {
		return nil, nil, fmt.Errorf("%s and %s leave no TLS version with a cipher suite", s.Name("ssl.enabled.protocols"), s.Name("ssl.cipher.suites"))
	}
	return &tls.Config{
		MinVersion:   lo,
		MaxVersion:   hi,
		CipherSuites: suites,
		// Full-size records from the start: Kafka's answers are read
		// whole, never rendered progressively.
		DynamicRecordSizingDisabled: true,
	}, warnings, nil
}

// Principal is the principal name of a connection that completed its
// handshake with state: the client certificate's subject through the
// mapping rules, or ANONYMOUS without a certificate (Kafka's
// DefaultKafkaPrincipalBuilder).
func (srv *Server) Principal(state tls.ConnectionState) (string, error) {
	if len(state.PeerCertificates) == 0 {
		return AnonymousName, nil
	}
	dn, err := DistinguishedName(state.PeerCertificates[0].RawSubject)
	if err != nil {
		return "", err
	}
	name, err := srv.state.Load().mapper.Name(dn)
	if err != nil {
		return "", fmt.Errorf("Failed to map name for '%s' based on SSL principal mapping rules: %w", dn, err)
	}
	return name, nil
}

// Validate checks that next could replace the settings in effect, as
// Kafka's SslFactory.validateReconfiguration does: the new stores load,
// a keystore is neither added nor removed, its certificate keeps the old
// one's subject (unless ssl.allow.dn.changes) and subject alternative
// names (unless ssl.allow.san.changes), and a truststore is not added.
func (srv *Server) Validate(next Settings) error {
	_, err := srv.prepare(next)
	return err
}

// Reconfigure puts next in effect for the handshakes that start from now
// on, after Validate's checks; it reports whether anything changed (the
// settings, or a store file rewritten in place).
func (srv *Server) Reconfigure(next Settings) (bool, error) {
	st, err := srv.prepare(next)
	if err != nil || st == nil {
		return false, err
	}
	srv.state.Store(st)
	return true, nil
}

// prepare builds the state next describes, or nil when nothing changed.
func (srv *Server) prepare(next Settings) (*serverState, error) {
	cur := srv.state.Load()
	if next.Equal(cur.settings) && !cur.keystore.modified() && !cur.truststore.modified() {
		return nil, nil
	}
	st, _, err := newServerState(next, srv.verifyKeystore)
	if err != nil {
		return nil, fmt.Errorf("Validation of dynamic config update of SSLFactory failed: %w", err)
	}
	if cur.truststore == nil && st.truststore != nil {
		return nil, errors.New("Validation of dynamic config update of SSLFactory failed: Cannot add SSL truststore to an existing listener for which no truststore was configured.")
	}
	if err := compatibleCertificates(cur.keystore.Leaf, st.keystore.Leaf, next.bool("ssl.allow.dn.changes"), next.bool("ssl.allow.san.changes")); err != nil {
		return nil, fmt.Errorf("Validation of dynamic config update of SSLFactory failed: %w", err)
	}
	return st, nil
}

func (ks *Keystore) modified() bool   { return ks != nil && modified(ks.file, ks.modTime) }
func (ts *Truststore) modified() bool { return ts != nil && modified(ts.file, ts.modTime) }

// compatibleCertificates is Kafka's CertificateEntries.ensureCompatible
// for a keystore of one entry.
func compatibleCertificates(old, cur *x509.Certificate, allowDN, allowSAN bool) error {
	if !allowDN && !bytes.Equal(old.RawSubject, cur.RawSubject) {
		oldDN, _ := DistinguishedName(old.RawSubject)
		newDN, _ := DistinguishedName(cur.RawSubject)
		if !strings.EqualFold(oldDN, newDN) {
			return fmt.Errorf("Keystore DistinguishedName does not match:  existing={DN=%s}, new={DN=%s}", oldDN, newDN)
		}
	}
	if !allowSAN {
		oldSANs, newSANs := subjectAltNames(old), subjectAltNames(cur)
		for _, san := range oldSANs {
			if !slices.Contains(newSANs, san) {
				return fmt.Errorf("Keystore SubjectAltNames do not match:  existing={SAN=%v}, new={SAN=%v}", oldSANs, newSANs)
			}
		}
	}
	return nil
}

// subjectAltNames lists a certificate's alternative names as
// "type:value", Java's numbering of the types.
func subjectAltNames(c *x509.Certificate) []string {
	var out []string
	for _, n := range c.EmailAddresses {
		out = append(out, "1:"+n)
	}
	for _, n := range c.DNSNames {
		out = append(out, "2:"+n)
	}
	for _, n := range c.URIs {
		out = append(out, "6:"+n.String())
	}
	for _, ip := range c.IPAddresses {
		out = append(out, "7:"+ip.String())
	}
	return out
}

// Client is the TLS client side of connections to a listener.
type Client struct {
	state atomic.Pointer[clientState]
}

type clientState struct {
	settings   Settings
	config     *tls.Config
	verifyHost bool
}

// NewClient builds the client side from s (a listener's settings, with
// its prefix, as Kafka's inter-broker and controller clients read them).
func NewClient(s Settings) (*Client, []string, error) {
	st, warnings, err := newClientState(s)
	if err != nil {
		return nil, nil, err
	}
	c := &Client{}
	c.state.Store(st)
	return c, warnings, nil
}

func newClientState(s Settings) (*clientState, []string, error) {
	if err := s.Check(); err != nil {
		return nil, nil, err
	}
	warnings := s.Ignored()
	what := "the client side"
	if s.Listener != "" {
		what = "connections to listener " + s.Listener
	}
	ks, err := loadKeystore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	ts, err := loadTruststore(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	cfg, more, err := baseConfig(s)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	warnings = append(warnings, more...)
	if ks != nil {
		cfg.Certificates = []tls.Certificate{ks.Certificate}
	}
	if ts != nil {
		cfg.RootCAs = ts.Pool
	}
	st := &clientState{settings: s, config: cfg}
	switch alg, _ := s.Value("ssl.endpoint.identification.algorithm"); strings.ToLower(strings.TrimSpace(alg)) {
	case "https", "ldaps":
		st.verifyHost = true
	case "":
		// The chain is still verified, without the host name.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
			return err
		}
	default:
		return nil, nil, fmt.Errorf("%s: %s %s: Gregor verifies host names (https) or not (empty)", what, s.Name("ssl.endpoint.identification.algorithm"), alg)
	}
	return st, warnings, nil
}

// Reconfigure puts new client settings in effect for the connections
// dialled from now on.
func (c *Client) Reconfigure(s Settings) error {
	if c.state.Load().settings.Equal(s) {
		return nil
	}
	st, _, err := newClientState(s)
	if err != nil {
		return err
	}
	c.state.Store(st)
	return nil
}

// Handshake runs the client handshake on nc, a connection to host; ctx
// bounds it.
func (c *Client) Handshake(ctx context.Context, nc net.Conn, host string) (*tls.Conn, error) {
	st := c.state.Load()
	cfg := st.config
	if st.verifyHost {
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tc := tls.Client(nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS handshake with %s: %w", host, err)
	}
	return tc, nil
}

// Dialer dials other nodes' listeners: TCP, then TLS when the listener
// is SSL or SASL_SSL, then Authenticate.
type Dialer struct {
	// TLS is the client side of an SSL or SASL_SSL listener; nil on
	// PLAINTEXT and SASL_PLAINTEXT.
	TLS *Client
	// Authenticate, when set, runs on each new connection once it is
	// secured: the SASL client exchange (SaslHandshake, SaslAuthenticate)
	// of a SASL_PLAINTEXT or SASL_SSL listener. A failure closes the
	// connection and fails the dial.
	Authenticate func(ctx context.Context, nc net.Conn) error
	// Timeout bounds the dial, handshake and authentication together.
	Timeout time.Duration
}

// Dial connects to addr (host:port).
func (d *Dialer) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if d.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.Timeout)
		defer cancel()
	}
	nc, err := peerdial.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if d.TLS != nil {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			nc.Close()
			return nil, err
		}
		tc, err := d.TLS.Handshake(ctx, nc, host)
		if err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	if d.Authenticate != nil {
		if err := d.Authenticate(ctx, nc); err != nil {
			nc.Close()
			return nil, fmt.Errorf("authenticating to %s: %w", addr, err)
		}
	}
	return nc, nil
}
