package ssl

// Keystores and truststores, as Kafka's DefaultSslEngineFactory reads them:
//
//   - PEM: ssl.keystore.location naming a file with the private key and
//     the certificate chain, or the two inline in ssl.keystore.key and
//     ssl.keystore.certificate.chain; ssl.truststore.location naming a file
//     of certificates, or them inline in ssl.truststore.certificates. The
//     key is PKCS#8, encrypted (with ssl.key.password: PBES2, PBKDF2 and
//     AES or 3DES, what `openssl pkcs8 -topk8` writes) or not; Gregor also
//     takes the PKCS#1 and SEC 1 forms. PEM text is found as Kafka's
//     PemParser finds it, so that a value written on one line (a
//     properties file's line continuations join the lines) still reads.
//   - JKS and PKCS12 files, with ssl.keystore.password (and
//     ssl.key.password for the key, the keystore password when unset) or
//     ssl.truststore.password. As in Java, either type reads a file of
//     either format, and a truststore without a password is read without
//     checking its integrity. JKS is read with
//     github.com/pavlo-v-chernykh/keystore-go, PKCS12 with
//     software.sslmate.com/src/go-pkcs12.
//
// A keystore must hold exactly one private key (Java's key manager would
// pick among several by the peer's wishes; Gregor refuses the ambiguity).

import (
	"bytes"
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"os"
	"regexp"
	"strings"
	"time"

	keystore "github.com/pavlo-v-chernykh/keystore-go/v4"
	pkcs12 "software.sslmate.com/src/go-pkcs12"
)

// Keystore is a loaded keystore: the certificate to present (with its
// chain and key) and where it came from.
type Keystore struct {
	Certificate tls.Certificate
	// Leaf is the certificate presented.
	Leaf *x509.Certificate
	// file and modTime are the keystore file and its modification time
	// when it was read ("" for inline PEM): a reconfiguration reloads a
	// file that changed under the same name, as Kafka does.
	file    string
	modTime time.Time
}

// Truststore is a loaded truststore.
type Truststore struct {
	Pool    *x509.CertPool
	Certs   []*x509.Certificate
	file    string
	modTime time.Time
}

// modified reports whether the store's file changed since it was read.
func modified(file string, at time.Time) bool {
	if file == "" {
		return false
	}
	fi, err := os.Stat(file)
	return err != nil || !fi.ModTime().Equal(at)
}

// loadKeystore reads the keystore s describes, or returns nil when it
// describes none (Kafka's createKeystore).
func loadKeystore(s Settings) (*Keystore, error) {
	typ, _ := s.Value("ssl.keystore.type")
	path, hasPath := s.Value("ssl.keystore.location")
	password, hasPassword := s.Value("ssl.keystore.password")
	keyPassword, hasKeyPassword := s.Value("ssl.key.password")
	key, hasKey := s.Value("ssl.keystore.key")
	chain, hasChain := s.Value("ssl.keystore.certificate.chain")
	isPEM := strings.EqualFold(typ, "PEM")
	var kp *string
	if hasKeyPassword {
		kp = &keyPassword
	}
	switch {
	case hasKey:
		switch {
		case !isPEM:
			return nil, fmt.Errorf("SSL private key can be specified only for PEM, but key store type is %s.", typ)
		case !hasChain:
			return nil, errors.New("SSL private key is specified, but certificate chain is not specified.")
		case hasPath:
			return nil, errors.New("Both SSL key store location and separate private key are specified.")
		case hasPassword:
			return nil, errors.New("SSL key store password cannot be specified with PEM format, only key password may be specified.")
		}
		ks, err := pemKeystore(chain, key, kp)
		if err != nil {
			return nil, fmt.Errorf("Invalid PEM keystore configs: %w", err)
		}
		return ks, nil
	case hasChain:
		return nil, errors.New("SSL certificate chain is specified, but private key is not specified")
	case isPEM && hasPath:
		if hasPassword {
			return nil, errors.New("SSL key store password cannot be specified with PEM format, only key password may be specified")
		}
		raw, modTime, err := readStore(path)
		if err != nil {
			return nil, fmt.Errorf("Failed to load PEM SSL keystore %s: %w", path, err)
		}
		ks, err := pemKeystore(string(raw), string(raw), kp)
		if err != nil {
			return nil, fmt.Errorf("Failed to load PEM SSL keystore %s: %w", path, err)
		}
		ks.file, ks.modTime = path, modTime
		return ks, nil
	case !hasPath && hasPassword:
		return nil, errors.New("SSL key store is not specified, but key store password is specified.")
	case hasPath && !hasPassword:
		return nil, errors.New("SSL key store is specified, but key store password is not specified.")
	case hasPath:
		raw, modTime, err := readStore(path)
		if err != nil {
			return nil, fmt.Errorf("Failed to load SSL keystore %s of type %s: %w", path, typ, err)
		}
		if kp == nil {
			kp = &password
		}
		ks, err := binaryKeystore(typ, raw, password, *kp)
		if err != nil {
			return nil, fmt.Errorf("Failed to load SSL keystore %s of type %s: %w", path, typ, err)
		}
		ks.file, ks.modTime = path, modTime
		return ks, nil
	}
	return nil, nil
}

// loadTruststore reads the truststore s describes, or returns nil when it
// describes none (Kafka's createTruststore): the system's roots are then
// trusted, as Java trusts its cacerts.
func loadTruststore(s Settings) (*Truststore, error) {
	typ, _ := s.Value("ssl.truststore.type")
	path, hasPath := s.Value("ssl.truststore.location")
	password, hasPassword := s.Value("ssl.truststore.password")
	certs, hasCerts := s.Value("ssl.truststore.certificates")
	isPEM := strings.EqualFold(typ, "PEM")
	switch {
	case hasCerts:
		switch {
		case !isPEM:
			return nil, fmt.Errorf("SSL trust store certs can be specified only for PEM, but trust store type is %s.", typ)
		case hasPath:
			return nil, errors.New("Both SSL trust store location and separate trust certificates are specified.")
		case hasPassword:
			return nil, errors.New("SSL trust store password cannot be specified for PEM format.")
		}
		ts, err := pemTruststore(certs)
		if err != nil {
			return nil, fmt.Errorf("Invalid PEM truststore configs: %w", err)
		}
		return ts, nil
	case isPEM && hasPath:
		if hasPassword {
			return nil, errors.New("SSL trust store password cannot be specified for PEM format.")
		}
		raw, modTime, err := readStore(path)
		if err != nil {
			return nil, fmt.Errorf("Failed to load PEM SSL truststore %s: %w", path, err)
		}
		ts, err := pemTruststore(string(raw))
		if err != nil {
			return nil, fmt.Errorf("Failed to load PEM SSL truststore %s: %w", path, err)
		}
		ts.file, ts.modTime = path, modTime
		return ts, nil
	case !hasPath && hasPassword:
		return nil, errors.New("SSL trust store is not specified, but trust store password is specified.")
	case hasPath:
		raw, modTime, err := readStore(path)
		if err != nil {
			return nil, fmt.Errorf("Failed to load SSL truststore %s of type %s: %w", path, typ, err)
		}
		var pw *string
		if hasPassword {
			pw = &password
		}
		ts, err := binaryTruststore(typ, raw, pw)
		if err != nil {
			return nil, fmt.Errorf("Failed to load SSL truststore %s of type %s: %w", path, typ, err)
		}
		ts.file, ts.modTime = path, modTime
		return ts, nil
	}
	return nil, nil
}

func readStore(path string) ([]byte, time.Time, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, time.Time{}, err
	}
	return raw, fi.ModTime(), nil
}

// pemParser is Kafka's PemParser for one entry type: the base64 between a
// BEGIN and an END line naming it, after any header lines; whitespace and
// text around the entries are allowed.
func pemParser(name string) *regexp.Regexp {
	const space = `[ \t\n\x0B\f\r]`
	nameRe := strings.ReplaceAll(name, " ", space+`+`)
	delim := func(word string) string { return `-+` + word + space + `*.*` + nameRe + `[^-]*-+` + space + `+` }
	return regexp.MustCompile(delim("BEGIN") + `(?:` + space + `*[^\r\n]*:[^\r\n]*[\r\n]+)*([a-zA-Z0-9/+=` + `\t\n\x0B\f\r ]*)` + delim("END"))
}

var (
	certificateEntries = pemParser("CERTIFICATE")
	privateKeyEntries  = pemParser("PRIVATE KEY")
)

// pemEntries returns the decoded entries the parser finds.
func pemEntries(re *regexp.Regexp, text, what string) ([][]byte, error) {
	var out [][]byte
	for _, m := range re.FindAllStringSubmatch(text+"\n", -1) {
		b64 := strings.Map(func(r rune) rune {
			if strings.ContainsRune(" \t\n\x0B\f\r", r) {
				return -1
			}
			return r
		}, m[1])
		der, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			der, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(b64, "="))
		}
		if err != nil {
			return nil, fmt.Errorf("a %s entry is not base64: %w", what, err)
		}
		out = append(out, der)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("No matching %s entries in PEM file", what)
	}
	return out, nil
}

// pemKeystore builds a keystore from a PEM certificate chain and key.
func pemKeystore(chainPEM, keyPEM string, keyPassword *string) (*Keystore, error) {
	certDERs, err := pemEntries(certificateEntries, chainPEM, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	keys, err := pemEntries(privateKeyEntries, keyPEM, "PRIVATE KEY")
	if err != nil {
		return nil, errors.New("Private key not provided")
	}
	if len(keys) != 1 {
		return nil, fmt.Errorf("Expected one private key, but found %d", len(keys))
	}
	keyDER := keys[0]
	if keyPassword != nil {
		if keyDER, err = decryptPKCS8(keyDER, []byte(*keyPassword)); err != nil {
			return nil, err
		}
	}
	key, err := parsePrivateKey(keyDER)
	if err != nil {
		if keyPassword == nil && isEncryptedPKCS8(keys[0]) {
			return nil, errors.New("the private key is encrypted, and ssl.key.password is not set")
		}
		return nil, err
	}
	return keystoreOf(key, certDERs)
}

func pemTruststore(text string) (*Truststore, error) {
	ders, err := pemEntries(certificateEntries, text, "CERTIFICATE")
	if err != nil {
		return nil, errors.New("At least one certificate expected, but none found")
	}
	var certs []*x509.Certificate
	for _, der := range ders {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("reading a certificate: %w", err)
		}
		certs = append(certs, c)
	}
	return truststoreOf(certs), nil
}

func truststoreOf(certs []*x509.Certificate) *Truststore {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return &Truststore{Pool: pool, Certs: certs}
}

// keystoreOf pairs a key with its certificate chain, leaf first: the
// leaf is the certificate of the key (whatever its place in the store).
func keystoreOf(key crypto.PrivateKey, certDERs [][]byte) (*Keystore, error) {
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a private key of type %T cannot sign", key)
	}
	var certs []*x509.Certificate
	leaf := -1
	for i, der := range certDERs {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return nil, fmt.Errorf("reading a certificate of the chain: %w", err)
		}
		if leaf < 0 && samePublicKey(c.PublicKey, signer.Public()) {
			leaf = i
		}
		certs = append(certs, c)
	}
	if leaf < 0 {
		return nil, errors.New("no certificate of the chain is the private key's")
	}
	ordered := [][]byte{certDERs[leaf]}
	for i, der := range certDERs {
		if i != leaf {
			ordered = append(ordered, der)
		}
	}
	return &Keystore{Certificate: tls.Certificate{Certificate: ordered, PrivateKey: key, Leaf: certs[leaf]}, Leaf: certs[leaf]}, nil
}

func samePublicKey(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// parsePrivateKey reads PKCS#8, or PKCS#1 (RSA) or SEC 1 (EC).
func parsePrivateKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("Private key could not be loaded: it is not a PKCS#8, PKCS#1 or SEC 1 key")
}

// Encrypted PKCS#8 (RFC 5958's EncryptedPrivateKeyInfo) with PBES2
// (RFC 8018).
var (
	oidPBES2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}
	oidHMACSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}
	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

type encryptedPrivateKeyInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Data      []byte
}

type pbes2Params struct {
	KeyDerivation pkix.AlgorithmIdentifier
	Encryption    pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       []byte
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

func isEncryptedPKCS8(der []byte) bool {
	var info encryptedPrivateKeyInfo
	rest, err := asn1.Unmarshal(der, &info)
	return err == nil && len(rest) == 0 && info.Algorithm.Algorithm.Equal(oidPBES2)
}

// decryptPKCS8 decrypts an EncryptedPrivateKeyInfo.
func decryptPKCS8(der, password []byte) ([]byte, error) {
	var info encryptedPrivateKeyInfo
	if rest, err := asn1.Unmarshal(der, &info); err != nil || len(rest) > 0 {
		return nil, errors.New("ssl.key.password is set, but the private key is not an encrypted PKCS#8 key")
	}
	if !info.Algorithm.Algorithm.Equal(oidPBES2) {
		return nil, fmt.Errorf("the private key is encrypted with %s; Gregor reads PBES2 (openssl pkcs8 -topk8 -v2 aes-256-cbc)", info.Algorithm.Algorithm)
	}
	var params pbes2Params
	if _, err := asn1.Unmarshal(info.Algorithm.Parameters.FullBytes, &params); err != nil {
		return nil, fmt.Errorf("reading the key's PBES2 parameters: %w", err)
	}
	if !params.KeyDerivation.Algorithm.Equal(oidPBKDF2) {
		return nil, fmt.Errorf("the private key's key derivation %s is not PBKDF2", params.KeyDerivation.Algorithm)
	}
	var kdf pbkdf2Params
	if _, err := asn1.Unmarshal(params.KeyDerivation.Parameters.FullBytes, &kdf); err != nil {
		return nil, fmt.Errorf("reading the key's PBKDF2 parameters: %w", err)
	}
	if kdf.Iterations < 1 || kdf.Iterations > 10_000_000 {
		return nil, fmt.Errorf("the private key's PBKDF2 iteration count %d is out of range", kdf.Iterations)
	}
	var prf func() hash.Hash
	switch alg := kdf.PRF.Algorithm; {
	case len(alg) == 0, alg.Equal(oidHMACSHA1):
		prf = sha1.New
	case alg.Equal(oidHMACSHA224):
		prf = sha256.New224
	case alg.Equal(oidHMACSHA256):
		prf = sha256.New
	case alg.Equal(oidHMACSHA384):
		prf = sha512.New384
	case alg.Equal(oidHMACSHA512):
		prf = sha512.New
	default:
		return nil, fmt.Errorf("the private key's PBKDF2 function %s is not one Gregor knows", alg)
	}
	var keyLen int
	var newCipher func([]byte) (cipher.Block, error)
	switch alg := params.Encryption.Algorithm; {
	case alg.Equal(oidAES128CBC):
		keyLen, newCipher = 16, aes.NewCipher
	case alg.Equal(oidAES192CBC):
		keyLen, newCipher = 24, aes.NewCipher
	case alg.Equal(oidAES256CBC):
		keyLen, newCipher = 32, aes.NewCipher
	case alg.Equal(oidDESEDE3CBC):
		keyLen, newCipher = 24, des.NewTripleDESCipher
	default:
		return nil, fmt.Errorf("the private key's cipher %s is not one Gregor knows (AES-CBC or DES-EDE3-CBC)", alg)
	}
	if kdf.KeyLength != 0 && kdf.KeyLength != keyLen {
		return nil, fmt.Errorf("the private key's PBKDF2 key length %d does not fit its cipher", kdf.KeyLength)
	}
	var iv []byte
	if _, err := asn1.Unmarshal(params.Encryption.Parameters.FullBytes, &iv); err != nil {
		return nil, fmt.Errorf("reading the private key's cipher parameters: %w", err)
	}
	key, err := pbkdf2.Key(prf, string(password), kdf.Salt, kdf.Iterations, keyLen)
	if err != nil {
		return nil, err
	}
	block, err := newCipher(key)
	if err != nil {
		return nil, err
	}
	if len(iv) != block.BlockSize() || len(info.Data) == 0 || len(info.Data)%block.BlockSize() != 0 {
		return nil, errors.New("the encrypted private key is malformed")
	}
	plain := make([]byte, len(info.Data))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(plain, info.Data)
	pad := int(plain[len(plain)-1])
	if pad == 0 || pad > block.BlockSize() || !bytes.Equal(plain[len(plain)-pad:], bytes.Repeat([]byte{byte(pad)}, pad)) {
		return nil, errors.New("the private key could not be decrypted: wrong ssl.key.password?")
	}
	return plain[:len(plain)-pad], nil
}

// encryptPKCS8 encrypts a PKCS#8 key with PBES2 (PBKDF2-HMAC-SHA256,
// AES-256-CBC), as openssl pkcs8 -topk8 -v2 aes-256-cbc does; tests use it.
func encryptPKCS8(der, password, salt, iv []byte, iterations int) ([]byte, error) {
	key, err := pbkdf2.Key(sha256.New, string(password), salt, iterations, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	pad := block.BlockSize() - len(der)%block.BlockSize()
	plain := append(append([]byte(nil), der...), bytes.Repeat([]byte{byte(pad)}, pad)...)
	enc := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, iv).CryptBlocks(enc, plain)
	kdfParams, err := asn1.Marshal(pbkdf2Params{Salt: salt, Iterations: iterations, PRF: pkix.AlgorithmIdentifier{Algorithm: oidHMACSHA256, Parameters: asn1.NullRawValue}})
	if err != nil {
		return nil, err
	}
	ivParams, err := asn1.Marshal(iv)
	if err != nil {
		return nil, err
	}
	pbes2, err := asn1.Marshal(pbes2Params{
		KeyDerivation: pkix.AlgorithmIdentifier{Algorithm: oidPBKDF2, Parameters: asn1.RawValue{FullBytes: kdfParams}},
		Encryption:    pkix.AlgorithmIdentifier{Algorithm: oidAES256CBC, Parameters: asn1.RawValue{FullBytes: ivParams}},
	})
	if err != nil {
		return nil, err
	}
	return asn1.Marshal(encryptedPrivateKeyInfo{Algorithm: pkix.AlgorithmIdentifier{Algorithm: oidPBES2, Parameters: asn1.RawValue{FullBytes: pbes2}}, Data: enc})
}

// Magic numbers at the start of Java keystore files.
const (
	jksMagic   = 0xfeedfeed
	jceksMagic = 0xcececece
)

// binaryKeystore reads a JKS or PKCS12 keystore: whichever the file is,
// as Java's keystore.type.compat lets either type read both.
func binaryKeystore(typ string, raw []byte, password, keyPassword string) (*Keystore, error) {
	if err := knownBinaryType(typ); err != nil {
		return nil, err
	}
	switch fileMagic(raw) {
	case jksMagic:
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(raw), []byte(password)); err != nil {
			return nil, fmt.Errorf("reading the JKS keystore (wrong ssl.keystore.password?): %w", err)
		}
		var found *Keystore
		for _, alias := range ks.Aliases() {
			if !ks.IsPrivateKeyEntry(alias) {
				continue
			}
			if found != nil {
				return nil, errors.New("the keystore holds more than one private key: Gregor needs exactly one")
			}
			entry, err := ks.GetPrivateKeyEntry(alias, []byte(keyPassword))
			if err != nil {
				return nil, fmt.Errorf("reading the key %q (wrong ssl.key.password?): %w", alias, err)
			}
			key, err := parsePrivateKey(entry.PrivateKey)
			if err != nil {
				return nil, err
			}
			var ders [][]byte
			for _, c := range entry.CertificateChain {
				ders = append(ders, c.Content)
			}
			if found, err = keystoreOf(key, ders); err != nil {
				return nil, err
			}
		}
		if found == nil {
			return nil, errors.New("the keystore holds no private key")
		}
		return found, nil
	case jceksMagic:
		return nil, errors.New("the file is a JCEKS keystore, which Gregor does not read: convert it to PKCS12 (keytool -importkeystore -deststoretype PKCS12) or PEM")
	}
	if password != keyPassword {
		return nil, errors.New("a PKCS12 keystore has one password: set ssl.key.password to ssl.keystore.password, or leave it unset")
	}
	key, leaf, chain, err := pkcs12.DecodeChain(raw, password)
	if err != nil {
		return nil, fmt.Errorf("reading the PKCS12 keystore (wrong ssl.keystore.password?): %w", err)
	}
	ders := [][]byte{leaf.Raw}
	for _, c := range chain {
		ders = append(ders, c.Raw)
	}
	return keystoreOf(key, ders)
}

// binaryTruststore reads a JKS or PKCS12 truststore; without a password
// a JKS file is read without checking its integrity, as Java does.
func binaryTruststore(typ string, raw []byte, password *string) (*Truststore, error) {
	if err := knownBinaryType(typ); err != nil {
		return nil, err
	}
	pw := ""
	if password != nil {
		pw = *password
	}
	switch fileMagic(raw) {
	case jksMagic:
		if password == nil {
			raw = withUncheckedDigest(raw)
		}
		ks := keystore.New()
		if err := ks.Load(bytes.NewReader(raw), []byte(pw)); err != nil {
			return nil, fmt.Errorf("reading the JKS truststore (wrong ssl.truststore.password?): %w", err)
		}
		var certs []*x509.Certificate
		for _, alias := range ks.Aliases() {
			var der []byte
			if ks.IsTrustedCertificateEntry(alias) {
				e, err := ks.GetTrustedCertificateEntry(alias)
				if err != nil {
					return nil, err
				}
				der = e.Certificate.Content
			} else {
				// Java's trust manager trusts a key entry's
				// certificate too.
				chain, err := ks.GetPrivateKeyEntryCertificateChain(alias)
				if err != nil || len(chain) == 0 {
					continue
				}
				der = chain[0].Content
			}
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return nil, fmt.Errorf("reading the certificate %q: %w", alias, err)
			}
			certs = append(certs, c)
		}
		if len(certs) == 0 {
			return nil, errors.New("the truststore holds no certificate")
		}
		return truststoreOf(certs), nil
	case jceksMagic:
		return nil, errors.New("the file is a JCEKS truststore, which Gregor does not read: convert it to PKCS12 or PEM")
	}
	certs, err := pkcs12.DecodeTrustStore(raw, pw)
	if err != nil {
		return nil, fmt.Errorf("reading the PKCS12 truststore: %w", err)
	}
	if len(certs) == 0 {
		return nil, errors.New("the truststore holds no certificate")
	}
	return truststoreOf(certs), nil
}

func knownBinaryType(typ string) error {
	switch strings.ToUpper(typ) {
	case "JKS", "PKCS12":
		return nil
	}
	return fmt.Errorf("keystore type %s is not one Gregor reads (PEM, JKS or PKCS12)", typ)
}

func fileMagic(raw []byte) uint32 {
	if len(raw) < 4 {
		return 0
	}
	return binary.BigEndian.Uint32(raw)
}

// withUncheckedDigest replaces a JKS file's integrity digest with the one
// its contents have under an empty password, so that keystore-go reads a
// truststore given without a password (Java skips the check then).
func withUncheckedDigest(raw []byte) []byte {
	if len(raw) < sha1.Size+12 {
		return raw
	}
	body := raw[:len(raw)-sha1.Size]
	h := sha1.New()
	h.Write([]byte("Mighty Aphrodite")) // the JKS whitener, after the (empty) password
	h.Write(body)
	return append(append([]byte(nil), body...), h.Sum(nil)...)
}
