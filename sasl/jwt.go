package sasl

// Signed JWT validation with a JWKS, as Kafka's
// OAuthBearerValidatorCallbackHandler (jose4j's JwtConsumer under
// ValidatorAccessTokenValidator) validates access tokens:
//
//   - three non-empty sections; a JWS header whose alg is not "none" and
//     which has no "crit" header Gregor does not understand (none);
//   - a signature that verifies with a key of the JWKS: the key named by
//     the header's kid, else every key of a fitting type is tried; RS256,
//     RS384, RS512 (RSA keys of at least 2048 bits), PS256, PS384, PS512,
//     ES256, ES384, ES512 and EdDSA (Ed25519);
//   - exp and iat required; exp after now minus the clock skew; nbf, if
//     present, at most now plus the skew;
//   - aud: with sasl.oauthbearer.expected.audience set, one of them must be
//     in the token's aud; without it a token that has an aud is refused
//     (jose4j's default, which Kafka keeps);
//   - iss equal to sasl.oauthbearer.expected.issuer when that is set;
//   - the sub claim (sasl.oauthbearer.sub.claim.name) a non-blank string,
//     the scope claim (sasl.oauthbearer.scope.claim.name) a string or a
//     list of distinct non-blank strings, exp and iat not negative.
//
// Every refusal is invalid_token to the client, the reason in the log.
// Keys come from a file:// URL (read at start, as Kafka reads it) or an
// http(s):// URL, fetched at start and again every
// sasl.oauthbearer.jwks.endpoint.refresh.ms, and at once (at most every
// ten seconds) when a token names a key id the set lacks. A failed fetch
// is retried, from sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
// doubling, for as long as its .max.ms allows (Kafka's Retry); the keys
// already loaded stay in use meanwhile, and a node whose first load fails
// does not start.
//
// Only crypto/* is used: the JWS algorithms Kafka's validator accepts are
// a page of code over crypto/rsa, crypto/ecdsa and crypto/ed25519, and a
// JOSE library would bring encryption, nesting and algorithm negotiation
// that a validator must not accept anyway.

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// JWK is one key of a JSON Web Key Set, parsed.
type JWK struct {
	KeyID string
	Use   string
	Alg   string
	// Key is an *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey.
	Key crypto.PublicKey
}

// ParseJWKS reads a JSON Web Key Set. Keys of a type Gregor cannot verify
// with (oct, encryption-only, unknown curves) are skipped, as jose4j skips
// keys it cannot use; a malformed key of a known type is an error.
func ParseJWKS(data []byte) ([]JWK, error) {
	var set struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, fmt.Errorf("parsing the JWKS: %w", err)
	}
	var out []JWK
	for i, raw := range set.Keys {
		str := func(k string) string { s, _ := raw[k].(string); return s }
		k := JWK{KeyID: str("kid"), Use: str("use"), Alg: str("alg")}
		if k.Use == "enc" {
			continue
		}
		b64 := func(name string) ([]byte, error) {
			b, err := decodeJWTSection(str(name))
			if err != nil || len(b) == 0 {
				return nil, fmt.Errorf("JWKS key %d (%s): bad %q", i, k.KeyID, name)
			}
			return b, nil
		}
		switch str("kty") {
		case "RSA":
			n, err := b64("n")
			if err != nil {
				return nil, err
			}
			e, err := b64("e")
			if err != nil {
				return nil, err
			}
			exp := new(big.Int).SetBytes(e)
			if !exp.IsInt64() || exp.Int64() < 2 || exp.Int64() > 1<<31-1 {
				return nil, fmt.Errorf("JWKS key %d (%s): bad RSA exponent", i, k.KeyID)
			}
			k.Key = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(exp.Int64())}
		case "EC":
			var curve elliptic.Curve
			switch str("crv") {
			case "P-256":
				curve = elliptic.P256()
			case "P-384":
				curve = elliptic.P384()
			case "P-521":
				curve = elliptic.P521()
			default:
				continue
			}
			x, err := b64("x")
			if err != nil {
				return nil, err
			}
			y, err := b64("y")
			if err != nil {
				return nil, err
			}
			size := (curve.Params().BitSize + 7) / 8
			if len(x) > size || len(y) > size {
				return nil, fmt.Errorf("JWKS key %d (%s): EC coordinates too long", i, k.KeyID)
			}
			point := make([]byte, 1+2*size)
			point[0] = 4
			copy(point[1+size-len(x):1+size], x)
			copy(point[1+2*size-len(y):], y)
			pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
			if err != nil {
				return nil, fmt.Errorf("JWKS key %d (%s): %w", i, k.KeyID, err)
			}
			k.Key = pub
		case "OKP":
			if str("crv") != "Ed25519" {
				continue
			}
			x, err := b64("x")
			if err != nil || len(x) != ed25519.PublicKeySize {
				return nil, fmt.Errorf("JWKS key %d (%s): bad Ed25519 key", i, k.KeyID)
			}
			k.Key = ed25519.PublicKey(x)
		default:
			continue
		}
		out = append(out, k)
	}
	return out, nil
}

// jwsAlg describes a signature algorithm.
type jwsAlg struct {
	kty    string // the key type it verifies with
	hash   func() hash.Hash
	chash  crypto.Hash
	pss    bool
	ecSize int // bytes of r and of s
}

var jwsAlgs = map[string]jwsAlg{
	"RS256": {kty: "RSA", hash: sha256.New, chash: crypto.SHA256},
	"RS384": {kty: "RSA", hash: sha512.New384, chash: crypto.SHA384},
	"RS512": {kty: "RSA", hash: sha512.New, chash: crypto.SHA512},
	"PS256": {kty: "RSA", hash: sha256.New, chash: crypto.SHA256, pss: true},
	"PS384": {kty: "RSA", hash: sha512.New384, chash: crypto.SHA384, pss: true},
	"PS512": {kty: "RSA", hash: sha512.New, chash: crypto.SHA512, pss: true},
	"ES256": {kty: "EC", hash: sha256.New, ecSize: 32},
	"ES384": {kty: "EC", hash: sha512.New384, ecSize: 48},
	"ES512": {kty: "EC", hash: sha512.New, ecSize: 66},
	"EdDSA": {kty: "OKP"},
}

func keyType(k crypto.PublicKey) string {
	switch k.(type) {
	case *rsa.PublicKey:
		return "RSA"
	case *ecdsa.PublicKey:
		return "EC"
	case ed25519.PublicKey:
		return "OKP"
	}
	return ""
}

// verify checks sig over signed with key under alg.
func (a jwsAlg) verify(key crypto.PublicKey, signed, sig []byte) bool {
	var digest []byte
	if a.hash != nil {
		h := a.hash()
		h.Write(signed)
		digest = h.Sum(nil)
	}
	switch k := key.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return false
		}
		if a.pss {
			return rsa.VerifyPSS(k, a.chash, digest, sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		}
		return rsa.VerifyPKCS1v15(k, a.chash, digest, sig) == nil
	case *ecdsa.PublicKey:
		if len(sig) != 2*a.ecSize || (k.Curve.Params().BitSize+7)/8 != a.ecSize {
			return false
		}
		r := new(big.Int).SetBytes(sig[:a.ecSize])
		s := new(big.Int).SetBytes(sig[a.ecSize:])
		return ecdsa.Verify(k, digest, r, s)
	case ed25519.PublicKey:
		return ed25519.Verify(k, signed, sig)
	}
	return false
}

// JWKSValidatorConfig is the validator's configuration, from the
// sasl.oauthbearer.* keys.
type JWKSValidatorConfig struct {
	// URL is sasl.oauthbearer.jwks.endpoint.url: file://, http:// or
	// https://.
	URL              string
	ExpectedAudience []string
	ExpectedIssuer   string
	ClockSkew        time.Duration
	SubClaim         string
	ScopeClaim       string
	Refresh          time.Duration
	RetryBackoff     time.Duration
	RetryBackoffMax  time.Duration
	// RootCAs verifies an https endpoint (nil: the system's roots).
	RootCAs *x509.CertPool
	Logger  *slog.Logger
	Now     func() time.Time
}

// JWKSValidator validates signed JWTs against a JWKS.
type JWKSValidator struct {
	cfg    JWKSValidatorConfig
	keys   atomic.Pointer[[]JWK]
	client *http.Client
	// kick asks the refresher for an early fetch (a token named an
	// unknown key id); lastKick rate-limits it.
	kick     chan struct{}
	kickMu   sync.Mutex
	lastKick time.Time
}

// NewJWKSValidator checks cfg; Start loads the keys.
func NewJWKSValidator(cfg JWKSValidatorConfig) (*JWKSValidator, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %s is not a valid URL", cfg.URL)
	}
	switch strings.ToLower(u.Scheme) {
	case "file", "http", "https":
	default:
		return nil, fmt.Errorf("sasl.oauthbearer.jwks.endpoint.url: %s: only file, http and https URLs are supported", cfg.URL)
	}
	if cfg.SubClaim == "" {
		cfg.SubClaim = "sub"
	}
	if cfg.ScopeClaim == "" {
		cfg.ScopeClaim = "scope"
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.RetryBackoffMax < cfg.RetryBackoff {
		cfg.RetryBackoffMax = cfg.RetryBackoff
	}
	v := &JWKSValidator{cfg: cfg, kick: make(chan struct{}, 1)}
	v.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		Proxy:           http.ProxyFromEnvironment,
	}}
	return v, nil
}

// Start loads the keys (failing, as Kafka fails start-up, when they cannot
// be had within the retry window) and, for http(s) URLs, refreshes them in
// the background until ctx ends.
func (v *JWKSValidator) Start(ctx context.Context) error {
	if err := v.loadWithRetry(ctx); err != nil {
		return err
	}
	if strings.HasPrefix(strings.ToLower(v.cfg.URL), "file:") {
		return nil
	}
	go v.refreshLoop(ctx)
	return nil
}

// loadWithRetry is Kafka's Retry.execute around a fetch: attempts with
// doubling backoff for as long as retry.backoff.max.ms allows.
func (v *JWKSValidator) loadWithRetry(ctx context.Context) error {
	end := time.Now().Add(v.cfg.RetryBackoffMax)
	backoff := v.cfg.RetryBackoff
	for {
		err := v.load(ctx)
		if err == nil || strings.HasPrefix(strings.ToLower(v.cfg.URL), "file:") {
			return err
		}
		wait := min(backoff, time.Until(end))
		if wait <= 0 {
			return fmt.Errorf("loading the JWKS from %s: %w", v.cfg.URL, err)
		}
		v.cfg.Logger.Warn("fetching the JWKS failed; retrying", "url", v.cfg.URL, "err", err, "backoff", wait)
		select {
		case <-ctx.Done():
			return fmt.Errorf("loading the JWKS from %s: %w (last: %w)", v.cfg.URL, ctx.Err(), err)
		case <-time.After(wait):
		}
		backoff *= 2
	}
}

// maxJWKSSize bounds what is read of a JWKS document.
const maxJWKSSize = 1 << 20

func (v *JWKSValidator) load(ctx context.Context) error {
	var data []byte
	u, _ := url.Parse(v.cfg.URL)
	if strings.EqualFold(u.Scheme, "file") {
		f, err := os.Open(u.Path)
		if err != nil {
			return fmt.Errorf("reading the JWKS file: %w", err)
		}
		defer f.Close()
		if data, err = io.ReadAll(io.LimitReader(f, maxJWKSSize)); err != nil {
			return fmt.Errorf("reading the JWKS file: %w", err)
		}
	} else {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.URL, nil)
		if err != nil {
			return err
		}
		resp, err := v.client.Do(req)
		if err != nil {
			return fmt.Errorf("fetching the JWKS: %w", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("fetching the JWKS: HTTP %s", resp.Status)
		}
		if data, err = io.ReadAll(io.LimitReader(resp.Body, maxJWKSSize)); err != nil {
			return fmt.Errorf("fetching the JWKS: %w", err)
		}
	}
	keys, err := ParseJWKS(data)
	if err != nil {
		return err
	}
	v.keys.Store(&keys)
	v.cfg.Logger.Debug("JWKS loaded", "url", v.cfg.URL, "keys", len(keys))
	return nil
}

func (v *JWKSValidator) refreshLoop(ctx context.Context) {
	refresh := v.cfg.Refresh
	if refresh <= 0 {
		refresh = time.Hour
	}
	t := time.NewTimer(refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-v.kick:
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		if err := v.loadWithRetry(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			// The keys it had stay in use until a later fetch works.
			v.cfg.Logger.Error("refreshing the JWKS failed", "url", v.cfg.URL, "err", err)
		}
		t.Reset(refresh)
	}
}

// unknownKeyRefreshInterval bounds the fetches a stream of tokens with
// unknown key ids can cause.
const unknownKeyRefreshInterval = 10 * time.Second

func (v *JWKSValidator) kickRefresh() {
	v.kickMu.Lock()
	defer v.kickMu.Unlock()
	if now := time.Now(); now.Sub(v.lastKick) >= unknownKeyRefreshInterval {
		v.lastKick = now
		select {
		case v.kick <- struct{}{}:
		default:
		}
	}
}

// Validate checks a signed access token.
func (v *JWKSValidator) Validate(token string) (Token, *TokenError) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Token{}, invalidToken("Malformed JWT provided; expected three sections (header, payload, and signature), but %d sections provided", len(parts))
	}
	for i, name := range []string{"header", "payload", "signature"} {
		if strings.TrimSpace(parts[i]) == "" {
			return Token{}, invalidToken("Malformed JWT provided; expected at least three sections (header, payload, and signature), but %s section missing", name)
		}
	}
	header, terr := parseJWTJSON(parts[0])
	if terr != nil {
		return Token{}, terr
	}
	algName, _ := header["alg"].(string)
	if algName == "" || algName == "none" {
		return Token{}, invalidToken("the JWS algorithm %q is not allowed", algName)
	}
	alg, ok := jwsAlgs[algName]
	if !ok {
		return Token{}, invalidToken("the JWS algorithm %s is not supported", algName)
	}
	if _, ok := header["crit"]; ok {
		return Token{}, invalidToken("the JWS header has critical extensions Gregor does not understand")
	}
	sig, err := decodeJWTSection(parts[2])
	if err != nil {
		return Token{}, invalidToken("malformed Base64 URL encoded signature")
	}
	signed := []byte(parts[0] + "." + parts[1])
	kid, hasKid := header["kid"].(string)
	var keys []JWK
	if p := v.keys.Load(); p != nil {
		keys = *p
	}
	verified, candidates := false, 0
	for _, k := range keys {
		if hasKid && k.KeyID != kid || keyType(k.Key) != alg.kty || k.Alg != "" && k.Alg != algName {
			continue
		}
		candidates++
		if alg.verify(k.Key, signed, sig) {
			verified = true
			break
		}
	}
	if !verified {
		if candidates == 0 {
			if hasKid {
				v.kickRefresh()
			}
			return Token{}, invalidToken("no key in the JWKS fits the token (kid %q, alg %s)", kid, algName)
		}
		return Token{}, invalidToken("the JWS signature does not verify")
	}
	claims, terr := parseJWTJSON(parts[1])
	if terr != nil {
		return Token{}, terr
	}
	return v.checkClaims(claims)
}

func (v *JWKSValidator) checkClaims(claims jwtClaims) (Token, *TokenError) {
	now := v.cfg.Now()
	skew := v.cfg.ClockSkew
	exp, hasExp, terr := claims.number("exp")
	if terr != nil {
		return Token{}, terr
	}
	if !hasExp {
		return Token{}, invalidToken("No Expiration Time (exp) claim present.")
	}
	iat, hasIat, terr := claims.number("iat")
	if terr != nil {
		return Token{}, terr
	}
	if !hasIat {
		return Token{}, invalidToken("No Issued At (iat) claim present.")
	}
	expAt := time.UnixMilli(int64(exp * 1000))
	if !now.Add(-skew).Before(expAt) {
		return Token{}, invalidToken("The JWT is no longer valid - the evaluation time %v is on or after the Expiration Time (exp=%v) claim value (even when providing %v of leeway to account for clock skew).", now, expAt, skew)
	}
	if nbf, ok, terr := claims.number("nbf"); terr != nil {
		return Token{}, terr
	} else if ok && now.Add(skew).Before(time.UnixMilli(int64(nbf*1000))) {
		return Token{}, invalidToken("The JWT is not yet valid as the evaluation time %v is before the Not Before (nbf=%v) claim time (even when providing %v of leeway to account for clock skew).", now, nbf, skew)
	}
	var aud []string
	switch a := claims["aud"].(type) {
	case string:
		aud = []string{a}
	case []string:
		aud = a
	}
	_, hasAud := claims["aud"]
	switch {
	case len(v.cfg.ExpectedAudience) > 0:
		if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(v.cfg.ExpectedAudience, a) }) {
			return Token{}, invalidToken("Audience (aud) claim %v doesn't contain an acceptable identifier. Expected one of %v as an aud value.", aud, v.cfg.ExpectedAudience)
		}
	case hasAud:
		return Token{}, invalidToken("Audience (aud) claim %v present in the JWT but no expected audience value(s) were provided to the JWT Consumer.", aud)
	}
	if v.cfg.ExpectedIssuer != "" {
		if iss, _ := claims["iss"].(string); iss != v.cfg.ExpectedIssuer {
			return Token{}, invalidToken("Issuer (iss) claim value (%s) doesn't match expected value of %s", iss, v.cfg.ExpectedIssuer)
		}
	}
	var scope []string
	switch s := claims[v.cfg.ScopeClaim].(type) {
	case string:
		scope = []string{s}
	case []string:
		scope = s
	}
	var cleaned []string
	for _, s := range scope {
		t := strings.TrimSpace(s)
		if t == "" {
			return Token{}, invalidToken("%s value must not be empty or contain only whitespace", v.cfg.ScopeClaim)
		}
		if slices.Contains(cleaned, t) {
			return Token{}, invalidToken("%s value must not contain duplicates - %s already present", v.cfg.ScopeClaim, t)
		}
		cleaned = append(cleaned, t)
	}
	if exp < 0 {
		return Token{}, invalidToken("exp value must be non-negative; value given was \"%v\"", exp)
	}
	if iat < 0 {
		return Token{}, invalidToken("iat value must be null or non-negative; value given was \"%v\"", iat)
	}
	subRaw, present := claims[v.cfg.SubClaim]
	sub, isString := subRaw.(string)
	if present && !isString {
		return Token{}, invalidToken("Could not extract the '%s' claim from the access token", v.cfg.SubClaim)
	}
	if sub = strings.TrimSpace(sub); sub == "" {
		return Token{}, invalidToken("%s value must be non-null, non-empty and not only whitespace", v.cfg.SubClaim)
	}
	return Token{Principal: sub, Expiry: expAt, Scope: cleaned}, nil
}
