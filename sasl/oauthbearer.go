package sasl

// OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer serves it.
//
// The client's initial response is "n,[a=authzid],^Aauth=Bearer <token>^A
// [key=value^A...]^A" (^A is 0x01), parsed with Kafka's grammar. The token
// goes to the listener's TokenValidator. A token it refuses is answered
// with a challenge, the error JSON {"status":"invalid_token"} (or
// insufficient_scope with the scope required), which the client
// acknowledges with a lone ^A; the exchange then fails with that JSON as
// the message the client is told, as Kafka does. An authorization id must
// equal the token's principal. Extensions are accepted (both of Kafka's
// validators accept every extension); they must only be well formed.
//
// Validators: the unsecured one (Kafka's default,
// OAuthBearerUnsecuredValidatorCallbackHandler: alg none, no signature, its
// unsecuredValidator* JAAS options) here, and the JWKS one
// (OAuthBearerValidatorCallbackHandler) in jwt.go.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Token is a validated bearer token.
type Token struct {
	Principal string
	// Expiry is when the token stops being valid (its exp claim).
	Expiry time.Time
	Scope  []string
}

// TokenError is a refused token, as the error JSON of RFC 7628 section
// 3.2.2 tells the client: status, and the scope required when the token
// lacked some.
type TokenError struct {
	Status string
	Scope  string
	// Detail is why, for the server's log only.
	Detail string
}

func (e *TokenError) Error() string { return e.Status + ": " + e.Detail }

// JSON is the error JSON Kafka sends (OAuthBearerSaslServer.jsonErrorResponse).
func (e *TokenError) JSON() string {
	s := `{"status":"` + e.Status + `"`
	if e.Scope != "" {
		s += `, "scope":"` + e.Scope + `"`
	}
	return s + "}"
}

// TokenValidator validates bearer tokens.
type TokenValidator interface {
	Validate(token string) (Token, *TokenError)
}

func invalidToken(format string, args ...any) *TokenError {
	return &TokenError{Status: "invalid_token", Detail: fmt.Sprintf(format, args...)}
}

// NewOAuthBearerServer starts an OAUTHBEARER exchange validating tokens
// with v.
func NewOAuthBearerServer(v TokenValidator) Server {
	return &oauthServer{validator: v}
}

type oauthServer struct {
	validator TokenValidator
	// errorJSON is the error sent as the last challenge, if any.
	errorJSON string
	token     Token
	done      bool
}

func (s *oauthServer) Step(msg []byte) ([]byte, bool, error) {
	if s.done {
		return nil, false, authErrorf("Authentication failed: OAUTHBEARER exchange already complete")
	}
	if len(msg) == 1 && msg[0] == 0x01 && s.errorJSON != "" {
		return nil, false, &AuthError{Msg: s.errorJSON}
	}
	s.errorJSON = ""
	ir, err := parseOAuthInitialResponse(msg)
	if err != nil {
		return nil, false, err
	}
	if s.validator == nil {
		return nil, false, errors.New("no OAUTHBEARER token validator is configured")
	}
	tok, terr := s.validator.Validate(ir.token)
	if terr != nil {
		s.errorJSON = terr.JSON()
		return []byte(s.errorJSON), false, nil
	}
	if ir.authzid != "" && ir.authzid != tok.Principal {
		return nil, false, authErrorf("Authentication failed: Client requested an authorization id (%s) that is different from the token's principal name (%s)", ir.authzid, tok.Principal)
	}
	s.token = tok
	s.done = true
	return []byte{}, true, nil
}

func (s *oauthServer) AuthorizationID() string     { return s.token.Principal }
func (s *oauthServer) CredentialExpiry() time.Time { return s.token.Expiry }

// oauthInitialResponse is a parsed client initial response.
type oauthInitialResponse struct {
	authzid    string
	token      string
	extensions map[string]string
}

// Kafka's OAuthBearerClientInitialResponse grammar.
var (
	oauthResponseRE = regexp.MustCompile(`^n,(?:a=(` + scramSaslNameRE + `))?,\x01((?:[A-Za-z]+=[\x21-\x7E \t\r\n]+\x01)*)\x01$`)
	oauthAuthRE     = regexp.MustCompile(`^(\w+) +([-_~+/.a-zA-Z0-9]+=*)$`)
	oauthExtValueRE = regexp.MustCompile(`^[\x21-\x7E \t\r\n]+$`)
	oauthExtKeyRE   = regexp.MustCompile(`^[A-Za-z]+$`)
)

func parseOAuthInitialResponse(msg []byte) (*oauthInitialResponse, error) {
	m := oauthResponseRE.FindStringSubmatch(string(msg))
	if m == nil {
		return nil, errors.New("Invalid OAUTHBEARER client first message")
	}
	props := map[string]string{}
	if m[2] != "" {
		for _, kv := range strings.Split(strings.TrimSuffix(m[2], "\x01"), "\x01") {
			k, v, _ := strings.Cut(kv, "=")
			props[k] = v
		}
	}
	auth, ok := props["auth"]
	if !ok {
		return nil, errors.New("Invalid OAUTHBEARER client first message: 'auth' not specified")
	}
	delete(props, "auth")
	for k, v := range props {
		if !oauthExtKeyRE.MatchString(k) {
			return nil, fmt.Errorf("Extension name %s is invalid", k)
		}
		if !oauthExtValueRE.MatchString(v) {
			return nil, fmt.Errorf("Extension value (%s) for extension %s is invalid", v, k)
		}
	}
	am := oauthAuthRE.FindStringSubmatch(auth)
	if am == nil {
		return nil, errors.New("Invalid OAUTHBEARER client first message: invalid 'auth' format")
	}
	if !strings.EqualFold(am[1], "bearer") {
		return nil, fmt.Errorf("Invalid scheme in OAUTHBEARER client first message: %s", am[1])
	}
	return &oauthInitialResponse{authzid: m[1], token: am[2], extensions: props}, nil
}

// UnsecuredValidator is Kafka's OAuthBearerUnsecuredValidatorCallbackHandler:
// a JWS with alg "none" and no signature, with a string principal claim,
// a numeric exp, optional numeric iat, a scope claim, and the clock skew and
// required scope of its unsecuredValidator* options. It is meant for tests,
// as in Kafka.
type UnsecuredValidator struct {
	PrincipalClaim string // default "sub"
	ScopeClaim     string // default "scope"
	RequiredScope  []string
	ClockSkew      time.Duration
	Now            func() time.Time
}

// NewUnsecuredValidator reads the unsecuredValidator* options of the
// listener's OAUTHBEARER JAAS entry. Kafka reads them for each token and
// fails that token's exchange on a bad one; Gregor refuses them at start.
func NewUnsecuredValidator(e *JAASEntry) (*UnsecuredValidator, error) {
	v := &UnsecuredValidator{PrincipalClaim: "sub", ScopeClaim: "scope", Now: time.Now}
	if s, _ := e.Option("unsecuredValidatorPrincipalClaimName"); strings.TrimSpace(s) != "" {
		v.PrincipalClaim = strings.TrimSpace(s)
	}
	if s, _ := e.Option("unsecuredValidatorScopeClaimName"); strings.TrimSpace(s) != "" {
		v.ScopeClaim = strings.TrimSpace(s)
	}
	if s, _ := e.Option("unsecuredValidatorRequiredScope"); strings.TrimSpace(s) != "" {
		scope, err := parseScope(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		v.RequiredScope = scope
	}
	if s, _ := e.Option("unsecuredValidatorAllowableClockSkewMs"); strings.TrimSpace(s) != "" {
		ms, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return nil, fmt.Errorf("unsecuredValidatorAllowableClockSkewMs: For input string: \"%s\"", strings.TrimSpace(s))
		}
		if ms < 0 {
			return nil, fmt.Errorf("Allowable clock skew millis must not be negative: %s", s)
		}
		v.ClockSkew = time.Duration(ms) * time.Millisecond
	}
	return v, nil
}

var scopeItemRE = regexp.MustCompile(`^[\x23-\x5B\x5D-\x7E\x21]+$`)

// parseScope is OAuthBearerScopeUtils.parseScope.
func parseScope(spaceDelimited string) ([]string, error) {
	var out []string
	for _, item := range strings.Split(spaceDelimited, " ") {
		if item == "" {
			continue
		}
		if !scopeItemRE.MatchString(item) {
			return nil, fmt.Errorf("Invalid scope value: %s", item)
		}
		out = append(out, item)
	}
	return out, nil
}

// Validate checks an unsecured JWS as Kafka does, in Kafka's order.
func (v *UnsecuredValidator) Validate(token string) (Token, *TokenError) {
	claims, err := parseUnsecuredJWS(token)
	if err != nil {
		return Token{}, err
	}
	exp, ok, terr := claims.number("exp")
	if terr != nil {
		return Token{}, terr
	}
	if !ok {
		return Token{}, invalidToken("No expiration time in JWT")
	}
	principal, ok := claims[v.PrincipalClaim].(string)
	if _, present := claims[v.PrincipalClaim]; present && !ok {
		return Token{}, invalidToken("The '%s' claim was not of type String", v.PrincipalClaim)
	}
	if strings.TrimSpace(principal) == "" {
		return Token{}, invalidToken("No principal name in JWT claim: %s", v.PrincipalClaim)
	}
	scope, terr := claims.scope(v.ScopeClaim)
	if terr != nil {
		return Token{}, terr
	}
	iat, hasIat, terr := claims.number("iat")
	if terr != nil {
		return Token{}, terr
	}
	now := float64(v.Now().UnixMilli())
	skew := float64(v.ClockSkew.Milliseconds())
	if hasIat && 1000*iat > now+skew {
		return Token{}, invalidToken("The Issued At value (%f seconds) was after the indicated time (%d ms) plus allowable clock skew (%d ms)", iat, int64(now), int64(skew))
	}
	if now-skew >= 1000*exp {
		return Token{}, invalidToken("The indicated time (%d ms) minus allowable clock skew (%d ms) was on or after the Expiration Time value (%f seconds)", int64(now), int64(skew), exp)
	}
	if hasIat && exp <= iat {
		return Token{}, invalidToken("The Expiration Time time (%f seconds) was not after the Issued At time (%f seconds)", exp, iat)
	}
	for _, want := range v.RequiredScope {
		if !slices.Contains(scope, want) {
			return Token{}, &TokenError{Status: "insufficient_scope", Scope: "[" + strings.Join(v.RequiredScope, ", ") + "]",
				Detail: fmt.Sprintf("The provided scope (%v) was missing a required scope (%s).  All required scope elements: %v", scope, want, v.RequiredScope)}
		}
	}
	return Token{Principal: principal, Expiry: time.UnixMilli(int64(math.Round(exp * 1000))), Scope: scope}, nil
}

// jwtClaims are a JWT's claims as Kafka's unsecured JWS reads them:
// numbers stay numbers, arrays become lists of their elements' text, and
// anything else becomes its text.
type jwtClaims map[string]any

func (c jwtClaims) number(name string) (float64, bool, *TokenError) {
	raw, ok := c[name]
	if !ok {
		return 0, false, nil
	}
	n, ok := raw.(json.Number)
	if !ok {
		return 0, false, invalidToken("The '%s' claim was not of type Number", name)
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false, invalidToken("The '%s' claim is not a number: %v", name, err)
	}
	return f, true, nil
}

// scope is the scope claim: a string (one scope, trimmed) or a list.
func (c jwtClaims) scope(name string) ([]string, *TokenError) {
	switch v := c[name].(type) {
	case nil:
		return nil, nil
	case string:
		if s := strings.TrimSpace(v); s != "" {
			return []string{s}, nil
		}
		return nil, nil
	case []string:
		var out []string
		for _, s := range v {
			if s = strings.TrimSpace(s); s != "" && !slices.Contains(out, s) {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return nil, invalidToken("The '%s' claim was not of type List", name)
}

// decodeJWTSection decodes a base64url section (padding tolerated).
func decodeJWTSection(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

// parseJWTJSON reads a JSON object section into claims.
func parseJWTJSON(section string) (jwtClaims, *TokenError) {
	raw, err := decodeJWTSection(section)
	if err != nil {
		return nil, invalidToken("malformed Base64 URL encoded value")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, invalidToken("malformed JSON")
	}
	if dec.More() {
		return nil, invalidToken("malformed JSON")
	}
	out := jwtClaims{}
	for k, v := range m {
		switch x := v.(type) {
		case json.Number, string:
			out[k] = x
		case []any:
			list := make([]string, 0, len(x))
			for _, e := range x {
				list = append(list, jsonText(e))
			}
			out[k] = list
		default:
			out[k] = jsonText(x)
		}
	}
	return out, nil
}

// jsonText is Jackson's JsonNode.asText of a value.
func jsonText(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case json.Number:
		return x.String()
	case bool:
		return strconv.FormatBool(x)
	case nil:
		return "null"
	}
	return ""
}

// parseUnsecuredJWS is OAuthBearerUnsecuredJws's parse: three sections, a
// header with alg "none", no signature.
func parseUnsecuredJWS(token string) (jwtClaims, *TokenError) {
	if strings.Contains(token, "..") {
		return nil, invalidToken("Malformed compact serialization contains '..'")
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, invalidToken("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
	}
	header, terr := parseJWTJSON(parts[0])
	if terr != nil {
		return nil, terr
	}
	claims, terr := parseJWTJSON(parts[1])
	if terr != nil {
		return nil, terr
	}
	alg, ok := header["alg"]
	if !ok {
		return nil, invalidToken("JWS header must have an Algorithm value")
	}
	if jsonText(alg) != "none" {
		return nil, invalidToken("Unsecured JWS must have 'none' for an algorithm")
	}
	if parts[2] != "" {
		return nil, invalidToken("Unsecured JWS must not contain a digital signature")
	}
	return claims, nil
}

// UnsecuredTokenClient authenticates with an unsecured token as Kafka's
// OAuthBearerUnsecuredLoginCallbackHandler makes one from its
// unsecuredLogin* JAAS options.
type UnsecuredTokenClient struct {
	Options map[string]string
	Now     func() time.Time
}

func (c UnsecuredTokenClient) Mechanism() string { return OAuthBearer }

// Token is the compact serialization of a fresh unsecured token.
func (c UnsecuredTokenClient) Token() (string, error) {
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	lifetime := int64(3600)
	if s, ok := c.Options["unsecuredLoginLifetimeSeconds"]; ok {
		n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return "", fmt.Errorf("unsecuredLoginLifetimeSeconds: %w", err)
		}
		lifetime = n
	}
	principalClaim := "sub"
	if s := strings.TrimSpace(c.Options["unsecuredLoginPrincipalClaimName"]); s != "" {
		principalClaim = s
	}
	iat := float64(now().UnixMilli()) / 1000
	claims := map[string]any{"iat": iat, "exp": iat + float64(lifetime)}
	for k, v := range c.Options {
		switch {
		case strings.HasPrefix(k, "unsecuredLoginStringClaim_"):
			claims[strings.TrimPrefix(k, "unsecuredLoginStringClaim_")] = v
		case strings.HasPrefix(k, "unsecuredLoginNumberClaim_"):
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return "", fmt.Errorf("%s: %w", k, err)
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginNumberClaim_")] = n
		case strings.HasPrefix(k, "unsecuredLoginListClaim_"):
			// The first character is the list's delimiter.
			if v == "" {
				continue
			}
			var items []string
			for _, it := range strings.Split(v[1:], v[:1]) {
				if it != "" {
					items = append(items, it)
				}
			}
			claims[strings.TrimPrefix(k, "unsecuredLoginListClaim_")] = items
		}
	}
	if p, _ := claims[principalClaim].(string); strings.TrimSpace(p) == "" {
		return "", fmt.Errorf("the unsecured login options set no %s claim (unsecuredLoginStringClaim_%s)", principalClaim, principalClaim)
	}
	header, _ := json.Marshal(map[string]string{"alg": "none"})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(header) + "." + base64.RawURLEncoding.EncodeToString(body) + ".", nil
}

func (c UnsecuredTokenClient) Start() (ClientExchange, error) {
	tok, err := c.Token()
	if err != nil {
		return nil, err
	}
	var ext strings.Builder
	for k, v := range c.Options {
		if name, ok := strings.CutPrefix(k, "unsecuredLoginExtension_"); ok {
			ext.WriteString(name + "=" + v + "\x01")
		}
	}
	return &oauthExchange{first: "n,,\x01auth=Bearer " + tok + "\x01" + ext.String() + "\x01"}, nil
}

// OAuthInitialResponse is the client's first message for a token.
func OAuthInitialResponse(token string) []byte {
	return []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
}

type oauthExchange struct {
	first string
	step  int
}

func (e *oauthExchange) Step(challenge []byte) ([]byte, bool, error) {
	e.step++
	switch {
	case e.step == 1:
		return []byte(e.first), false, nil
	case e.step == 2 && len(challenge) == 0:
		return nil, true, nil
	case e.step == 2:
		// The server's error JSON: acknowledge it, and the server
		// fails the exchange with it.
		return []byte{0x01}, false, nil
	}
	return nil, false, errors.New("OAUTHBEARER: unexpected challenge")
}
