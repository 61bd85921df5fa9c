package sasl

// SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's
// ScramSaslServer serves them.
//
// The exchange: client-first (gs2 header "n," with an optional a=authzid,
// n=saslname, r=client nonce, optional extensions), server-first (the
// client nonce extended with ours, the salt, the iterations),
// client-final (channel binding, the combined nonce, exactly as the
// server sent it, extensions, the proof), server-final (v=server
// signature). Messages are parsed with
// Kafka's grammar (ScramMessages), so that what Kafka refuses is refused.
//
// Kafka's messages: every failure is a SaslException, which the client sees
// only as "Authentication failed during authentication due to invalid
// credentials with SASL mechanism ...", except an authorization id that
// differs from the user name, whose message the client is told. As in
// Kafka, the channel binding is not compared with the gs2 header (the proof
// covers it), and the tokenauth extension (delegation tokens, which Gregor
// does not implement) fails the exchange. Deviation: a proof of the wrong
// length fails the exchange with the generic message; Kafka closes the
// connection without an answer.

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// ScramMechanism describes one SCRAM mechanism.
type ScramMechanism struct {
	Name string
	// Type is Kafka's mechanism id in AlterUserScramCredentials and the
	// metadata records (1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
	Type          int8
	newHash       func() hash.Hash
	MinIterations int32
	MaxIterations int32
}

var scramMechanisms = []ScramMechanism{
	{Name: ScramSHA256, Type: 1, newHash: sha256.New, MinIterations: 4096, MaxIterations: 16384},
	{Name: ScramSHA512, Type: 2, newHash: sha512.New, MinIterations: 4096, MaxIterations: 16384},
}

// ScramByName returns the SCRAM mechanism called name.
func ScramByName(name string) (ScramMechanism, bool) {
	for _, m := range scramMechanisms {
		if m.Name == name {
			return m, true
		}
	}
	return ScramMechanism{}, false
}

// ScramByType returns the SCRAM mechanism of Kafka's type id.
func ScramByType(t int8) (ScramMechanism, bool) {
	for _, m := range scramMechanisms {
		if m.Type == t {
			return m, true
		}
	}
	return ScramMechanism{}, false
}

// ScramCredential is what the server keeps of a SCRAM password (Kafka's
// UserScramCredentialRecord without the name and mechanism).
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// ScramLookup finds a user's credential for a SCRAM mechanism.
type ScramLookup func(mechanism, user string) (ScramCredential, bool)

func (m ScramMechanism) hmac(key []byte, parts ...string) []byte {
	mac := hmac.New(m.newHash, key)
	for _, p := range parts {
		mac.Write([]byte(p))
	}
	return mac.Sum(nil)
}

func (m ScramMechanism) hash(b []byte) []byte {
	h := m.newHash()
	h.Write(b)
	return h.Sum(nil)
}

// SaltedPassword is Hi(password, salt, iterations) of RFC 5802: PBKDF2 with
// the mechanism's HMAC. Kafka does not SASLprep the password: it uses its
// UTF-8 bytes, and so does this.
func (m ScramMechanism) SaltedPassword(password string, salt []byte, iterations int) []byte {
	size := m.newHash().Size()
	key, err := pbkdf2.Key(m.newHash, password, salt, iterations, size)
	if err != nil {
		// pbkdf2 refuses only key lengths and iteration counts out
		// of range, which callers have checked.
		panic(fmt.Sprintf("pbkdf2: %v", err))
	}
	return key
}

// Credential derives the stored credential from a salted password.
func (m ScramMechanism) Credential(salt, saltedPassword []byte, iterations int32) ScramCredential {
	clientKey := m.hmac(saltedPassword, "Client Key")
	return ScramCredential{
		Salt:       salt,
		StoredKey:  m.hash(clientKey),
		ServerKey:  m.hmac(saltedPassword, "Server Key"),
		Iterations: iterations,
	}
}

// RandomSalt is a salt as Kafka's tools make one: the UTF-8 bytes of a
// random base-36 string.
func RandomSalt() []byte { return []byte(randomNonce()) }

// randomNonce is a nonce of 130 random bits in base 36, as Kafka's
// ScramFormatter.secureRandomString makes them.
func randomNonce() string {
	var b [17]byte
	rand.Read(b[:])
	b[0] &= 0x03 // 130 bits
	var n [17]byte
	copy(n[:], b[:])
	// Base-36 digits of the big-endian number, most significant first.
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var out []byte
	for {
		rem, zero := 0, true
		for i := range n {
			cur := rem<<8 | int(n[i])
			n[i] = byte(cur / 36)
			rem = cur % 36
			zero = zero && n[i] == 0
		}
		out = append(out, digits[rem])
		if zero {
			break
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return string(out)
}

// Kafka's SCRAM grammar (ScramMessages), as Go regular expressions over
// ASCII: VALUE is any of 0x01-0x7F but ','; VALUE_SAFE excludes '=' too;
// PRINTABLE is 0x21-0x7E but ','.
const (
	scramValue      = `[\x01-\x2B\x2D-\x7F]+`
	scramPrintable  = `[\x21-\x2B\x2D-\x7E]+`
	scramSaslNameRE = `(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+`
	scramBase64     = `(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?`
	scramReserved   = `(?:m=` + scramValue + `,)?`
	scramExts       = `(?:,[A-Za-z]+=` + scramValue + `)*`
)

var (
	clientFirstRE = regexp.MustCompile(`^n,(?:a=(` + scramSaslNameRE + `))?,` + scramReserved +
		`(n=(` + scramSaslNameRE + `),r=(` + scramPrintable + `)(` + scramExts + `))$`)
	clientFinalRE = regexp.MustCompile(`^(c=(` + scramBase64 + `),r=(` + scramPrintable + `)` + scramExts + `),p=(` + scramBase64 + `)$`)
	serverFirstRE = regexp.MustCompile(`^` + scramReserved + `r=(` + scramPrintable + `),s=(` + scramBase64 + `),i=([0-9]+)` + scramExts + `$`)
	serverFinalRE = regexp.MustCompile(`^(?:e=([\x01-\x2B\x2D-\x3C\x3E-\x7F]+)|v=(` + scramBase64 + `)` + scramExts + `)$`)
)

// clientFirst is a parsed client-first message.
type clientFirst struct {
	authzid  string
	saslName string
	nonce    string
	// bare is client-first-message-bare, as it goes into the AuthMessage.
	bare       string
	extensions map[string]string
}

func parseClientFirst(msg []byte) (*clientFirst, error) {
	m := clientFirstRE.FindStringSubmatch(string(msg))
	if m == nil {
		return nil, fmt.Errorf("Invalid SCRAM client first message format: %s", msg)
	}
	cf := &clientFirst{authzid: m[1], bare: m[2], saslName: m[3], nonce: m[4], extensions: map[string]string{}}
	for _, kv := range strings.Split(m[5], ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			cf.extensions[k] = v
		}
	}
	return cf, nil
}

// clientFinal is a parsed client-final message.
type clientFinal struct {
	withoutProof string
	nonce        string
	proof        []byte
}

func parseClientFinal(msg []byte) (*clientFinal, error) {
	m := clientFinalRE.FindStringSubmatch(string(msg))
	if m == nil {
		return nil, fmt.Errorf("Invalid SCRAM client final message format: %s", msg)
	}
	proof, err := base64.StdEncoding.DecodeString(m[4])
	if err != nil {
		return nil, fmt.Errorf("Invalid SCRAM client final message format: %s", msg)
	}
	return &clientFinal{withoutProof: m[1], nonce: m[3], proof: proof}, nil
}

// scramUsername decodes a saslname (=2C is ',', =3D is '='); any other '='
// makes it invalid (Kafka's ScramFormatter.username).
func scramUsername(saslName string) (string, error) {
	user := strings.ReplaceAll(saslName, "=2C", ",")
	if strings.Contains(strings.ReplaceAll(user, "=3D", ""), "=") {
		return "", fmt.Errorf("Invalid username: %s", saslName)
	}
	return strings.ReplaceAll(user, "=3D", "="), nil
}

// scramSaslName encodes a user name as a saslname.
func scramSaslName(user string) string {
	return strings.ReplaceAll(strings.ReplaceAll(user, "=", "=3D"), ",", "=2C")
}

// NewScramServer starts a SCRAM exchange of mechanism, looking credentials
// up with lookup.
func NewScramServer(mechanism string, lookup ScramLookup) Server {
	m, ok := ScramByName(mechanism)
	if !ok {
		return NewRefusingServer(mechanism)
	}
	return &scramServer{mech: m, lookup: lookup, nonce: randomNonce}
}

type scramServerState int8

const (
	scramWantClientFirst scramServerState = iota
	scramWantClientFinal
	scramComplete
	scramFailed
)

type scramServer struct {
	mech   ScramMechanism
	lookup ScramLookup
	// nonce makes the server's part of the nonce (tests fix it).
	nonce       func() string
	state       scramServerState
	first       *clientFirst
	serverFirst string
	fullNonce   string
	cred        ScramCredential
	authz       string
}

func (s *scramServer) Step(msg []byte) ([]byte, bool, error) {
	var reply []byte
	var err error
	switch s.state {
	case scramWantClientFirst:
		reply, err = s.clientFirst(msg)
	case scramWantClientFinal:
		reply, err = s.clientFinal(msg)
	default:
		err = authErrorf("Unexpected challenge in Sasl server state %s", map[scramServerState]string{scramComplete: "COMPLETE", scramFailed: "FAILED"}[s.state])
	}
	if err != nil {
		s.state = scramFailed
		s.cred = ScramCredential{}
		return nil, false, err
	}
	return reply, s.state == scramComplete, nil
}

func (s *scramServer) clientFirst(msg []byte) ([]byte, error) {
	first, err := parseClientFirst(msg)
	if err != nil {
		return nil, err
	}
	if first.extensions["tokenauth"] == "true" {
		return nil, errors.New("Token Authentication failed: delegation tokens are not supported")
	}
	user, err := scramUsername(first.saslName)
	if err != nil {
		return nil, fmt.Errorf("Authentication failed: Credentials could not be obtained: %w", err)
	}
	cred, ok := ScramCredential{}, false
	if s.lookup != nil {
		cred, ok = s.lookup(s.mech.Name, user)
	}
	if !ok {
		return nil, errors.New("Authentication failed: Invalid user credentials")
	}
	if first.authzid != "" && first.authzid != user {
		return nil, authErrorf("Authentication failed: Client requested an authorization id that is different from username")
	}
	if cred.Iterations < s.mech.MinIterations {
		return nil, fmt.Errorf("Iterations %d is less than the minimum %d for %s", cred.Iterations, s.mech.MinIterations, s.mech.Name)
	}
	s.first = first
	s.cred = cred
	s.authz = user
	s.fullNonce = first.nonce + s.nonce()
	s.serverFirst = "r=" + s.fullNonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
	s.state = scramWantClientFinal
	return []byte(s.serverFirst), nil
}

func (s *scramServer) clientFinal(msg []byte) ([]byte, error) {
	final, err := parseClientFinal(msg)
	if err != nil {
		return nil, err
	}
	// Kafka 4 compares the whole nonce (RFC 5802); 3.x only required it
	// to end with the server's, which librdkafka before 2.6.1 relied on
	// (it repeats its own nonce in the final message) and which let a
	// client prefix anything.
	if final.nonce != s.fullNonce {
		return nil, errors.New("Invalid client nonce in the final client message.")
	}
	authMessage := s.first.bare + "," + s.serverFirst + "," + final.withoutProof
	clientSignature := s.mech.hmac(s.cred.StoredKey, authMessage)
	if len(final.proof) != len(clientSignature) {
		return nil, fmt.Errorf("Invalid client credentials: a proof of %d bytes", len(final.proof))
	}
	clientKey := make([]byte, len(clientSignature))
	subtle.XORBytes(clientKey, clientSignature, final.proof)
	if !hmac.Equal(s.mech.hash(clientKey), s.cred.StoredKey) {
		return nil, errors.New("Invalid client credentials")
	}
	serverSignature := s.mech.hmac(s.cred.ServerKey, authMessage)
	s.state = scramComplete
	s.cred = ScramCredential{}
	return []byte("v=" + base64.StdEncoding.EncodeToString(serverSignature)), nil
}

func (s *scramServer) AuthorizationID() string     { return s.authz }
func (s *scramServer) CredentialExpiry() time.Time { return time.Time{} }
