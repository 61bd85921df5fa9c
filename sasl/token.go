package sasl

// Delegation tokens (KIP-48) as the SCRAM mechanisms authenticate with them.
//
// A token is an id (a Kafka UUID string) and an HMAC: HmacSHA512 of the
// id's UTF-8 bytes keyed with the UTF-8 bytes of delegation.token.secret.key,
// as Kafka's DelegationTokenManager computes it. The HMAC is never stored:
// every node that knows the secret computes it again from the id. A client
// logs in with SCRAM, the token id as its user name and the base64 of the
// HMAC as its password, and the extension tokenauth=true; the server then
// derives a SCRAM credential from that password with the mechanism's
// minimum iterations (4096) and a random salt, as Kafka's
// DelegationTokenManager.prepareScramCredentials does, and the session's
// principal is the token's owner.

import (
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"time"
)

// TokenHMAC is a delegation token's HMAC: HmacSHA512 of the token id with
// the secret as its key.
func TokenHMAC(secret, tokenID string) []byte {
	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write([]byte(tokenID))
	return mac.Sum(nil)
}

// TokenPassword is the SCRAM password a delegation token's holder logs in
// with: the base64 of its HMAC (DelegationToken.hmacAsBase64String).
func TokenPassword(hmac []byte) string { return base64.StdEncoding.EncodeToString(hmac) }

// TokenCredential is what a delegation token lends a SCRAM exchange.
type TokenCredential struct {
	// Owner is the name of the token's owner: the authorization id of a
	// session authenticated with it.
	Owner string
	// Credential is the SCRAM credential derived from the token's
	// password for the exchange's mechanism.
	Credential ScramCredential
	// Expiry is the token's expiry timestamp: the session ends then
	// (KIP-368).
	Expiry time.Time
}

// TokenLookup finds a delegation token by id for a SCRAM mechanism; ok is
// false when there is no such token (or tokens are disabled).
type TokenLookup func(mechanism, tokenID string) (TokenCredential, bool)

// TokenScramCredential derives the SCRAM credential of a token's password
// for mechanism m, with a fresh salt and m's minimum iterations.
func (m ScramMechanism) TokenScramCredential(hmac []byte) ScramCredential {
	salt := RandomSalt()
	return m.Credential(salt, m.SaltedPassword(TokenPassword(hmac), salt, int(m.MinIterations)), m.MinIterations)
}
