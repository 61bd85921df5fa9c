package ssl

// ssl.cipher.suites, ssl.enabled.protocols and ssl.protocol: Java's names
// read into what Go's crypto/tls takes.
//
// Cipher suites are named as Java names them (the IANA names, and Java's
// SSL_ aliases of a few old ones). A name Java does not accept is refused
// naming the key, as Java refuses it ("Unsupported CipherSuite"). A suite
// Java accepts but Go does not implement (DHE, static ECDH, anonymous,
// export, NULL, RC4 and DES suites) is left out with a warning, and a list
// left with no suite Go implements is refused. TLS 1.3's suites cannot be
// chosen in Go, which always offers its three: a list naming TLS 1.3
// suites keeps TLS 1.3 on, one naming none turns it off (as in Java, where
// TLS 1.3 then has no suite to use), and one naming only TLS 1.3 suites
// turns TLS 1.2 and below off.

import (
	"crypto/tls"
	"fmt"
	"strings"
)

// javaCipherSuites are the names Java 17's SunJSSE accepts in
// setEnabledCipherSuites, with their IANA code points.
var javaCipherSuites = map[string]uint16{
	"TLS_AES_256_GCM_SHA384":                        0x1302,
	"TLS_AES_128_GCM_SHA256":                        0x1301,
	"TLS_CHACHA20_POLY1305_SHA256":                  0x1303,
	"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384":       0xc02c,
	"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256":       0xc02b,
	"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": 0xcca9,
	"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384":         0xc030,
	"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256":   0xcca8,
	"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256":         0xc02f,
	"TLS_DHE_RSA_WITH_AES_256_GCM_SHA384":           0x009f,
	"TLS_DHE_RSA_WITH_CHACHA20_POLY1305_SHA256":     0xccaa,
	"TLS_DHE_DSS_WITH_AES_256_GCM_SHA384":           0x00a3,
	"TLS_DHE_RSA_WITH_AES_128_GCM_SHA256":           0x009e,
	"TLS_DHE_DSS_WITH_AES_128_GCM_SHA256":           0x00a2,
	"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA384":       0xc024,
	"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA384":         0xc028,
	"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256":       0xc023,
	"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256":         0xc027,
	"TLS_DHE_RSA_WITH_AES_256_CBC_SHA256":           0x006b,
	"TLS_DHE_DSS_WITH_AES_256_CBC_SHA256":           0x006a,
	"TLS_DHE_RSA_WITH_AES_128_CBC_SHA256":           0x0067,
	"TLS_DHE_DSS_WITH_AES_128_CBC_SHA256":           0x0040,
	"TLS_ECDH_ECDSA_WITH_AES_256_GCM_SHA384":        0xc02e,
	"TLS_ECDH_RSA_WITH_AES_256_GCM_SHA384":          0xc032,
	"TLS_ECDH_ECDSA_WITH_AES_128_GCM_SHA256":        0xc02d,
	"TLS_ECDH_RSA_WITH_AES_128_GCM_SHA256":          0xc031,
	"TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA384":        0xc026,
	"TLS_ECDH_RSA_WITH_AES_256_CBC_SHA384":          0xc02a,
	"TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA256":        0xc025,
	"TLS_ECDH_RSA_WITH_AES_128_CBC_SHA256":          0xc029,
	"TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA":          0xc00a,
	"TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA":            0xc014,
	"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA":          0xc009,
	"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA":            0xc013,
	"TLS_DHE_RSA_WITH_AES_256_CBC_SHA":              0x0039,
	"TLS_DHE_DSS_WITH_AES_256_CBC_SHA":              0x0038,
	"TLS_DHE_RSA_WITH_AES_128_CBC_SHA":              0x0033,
	"TLS_DHE_DSS_WITH_AES_128_CBC_SHA":              0x0032,
	"TLS_ECDH_ECDSA_WITH_AES_256_CBC_SHA":           0xc005,
	"TLS_ECDH_RSA_WITH_AES_256_CBC_SHA":             0xc00f,
	"TLS_ECDH_ECDSA_WITH_AES_128_CBC_SHA":           0xc004,
	"TLS_ECDH_RSA_WITH_AES_128_CBC_SHA":             0xc00e,
	"TLS_RSA_WITH_AES_256_GCM_SHA384":               0x009d,
	"TLS_RSA_WITH_AES_128_GCM_SHA256":               0x009c,
	"TLS_RSA_WITH_AES_256_CBC_SHA256":               0x003d,
	"TLS_RSA_WITH_AES_128_CBC_SHA256":               0x003c,
	"TLS_RSA_WITH_AES_256_CBC_SHA":                  0x0035,
	"TLS_RSA_WITH_AES_128_CBC_SHA":                  0x002f,
	"TLS_ECDHE_ECDSA_WITH_3DES_EDE_CBC_SHA":         0xc008,
	"TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA":           0xc012,
	"SSL_DHE_RSA_WITH_3DES_EDE_CBC_SHA":             0x0016,
	"TLS_DHE_RSA_WITH_3DES_EDE_CBC_SHA":             0x0016,
	"SSL_DHE_DSS_WITH_3DES_EDE_CBC_SHA":             0x0013,
	"TLS_DHE_DSS_WITH_3DES_EDE_CBC_SHA":             0x0013,
	"TLS_ECDH_ECDSA_WITH_3DES_EDE_CBC_SHA":          0xc003,
	"TLS_ECDH_RSA_WITH_3DES_EDE_CBC_SHA":            0xc00d,
	"SSL_RSA_WITH_3DES_EDE_CBC_SHA":                 0x000a,
	"TLS_RSA_WITH_3DES_EDE_CBC_SHA":                 0x000a,
	"TLS_EMPTY_RENEGOTIATION_INFO_SCSV":             0x00ff,
	"TLS_DH_anon_WITH_AES_256_GCM_SHA384":           0x00a7,
	"TLS_DH_anon_WITH_AES_128_GCM_SHA256":           0x00a6,
	"TLS_DH_anon_WITH_AES_256_CBC_SHA256":           0x006d,
	"TLS_ECDH_anon_WITH_AES_256_CBC_SHA":            0xc019,
	"TLS_DH_anon_WITH_AES_256_CBC_SHA":              0x003a,
	"TLS_DH_anon_WITH_AES_128_CBC_SHA256":           0x006c,
	"TLS_ECDH_anon_WITH_AES_128_CBC_SHA":            0xc018,
	"TLS_DH_anon_WITH_AES_128_CBC_SHA":              0x0034,
	"TLS_ECDH_anon_WITH_3DES_EDE_CBC_SHA":           0xc017,
	"SSL_DH_anon_WITH_3DES_EDE_CBC_SHA":             0x001b,
	"TLS_DH_anon_WITH_3DES_EDE_CBC_SHA":             0x001b,
	"TLS_ECDHE_ECDSA_WITH_RC4_128_SHA":              0xc007,
	"TLS_ECDHE_RSA_WITH_RC4_128_SHA":                0xc011,
	"SSL_RSA_WITH_RC4_128_SHA":                      0x0005,
	"TLS_RSA_WITH_RC4_128_SHA":                      0x0005,
	"TLS_ECDH_ECDSA_WITH_RC4_128_SHA":               0xc002,
	"TLS_ECDH_RSA_WITH_RC4_128_SHA":                 0xc00c,
	"SSL_RSA_WITH_RC4_128_MD5":                      0x0004,
	"TLS_RSA_WITH_RC4_128_MD5":                      0x0004,
	"TLS_ECDH_anon_WITH_RC4_128_SHA":                0xc016,
	"SSL_DH_anon_WITH_RC4_128_MD5":                  0x0018,
	"TLS_DH_anon_WITH_RC4_128_MD5":                  0x0018,
	"SSL_RSA_WITH_DES_CBC_SHA":                      0x0009,
	"TLS_RSA_WITH_DES_CBC_SHA":                      0x0009,
	"SSL_DHE_RSA_WITH_DES_CBC_SHA":                  0x0015,
	"TLS_DHE_RSA_WITH_DES_CBC_SHA":                  0x0015,
	"SSL_DHE_DSS_WITH_DES_CBC_SHA":                  0x0012,
	"TLS_DHE_DSS_WITH_DES_CBC_SHA":                  0x0012,
	"SSL_DH_anon_WITH_DES_CBC_SHA":                  0x001a,
	"TLS_DH_anon_WITH_DES_CBC_SHA":                  0x001a,
	"SSL_RSA_EXPORT_WITH_DES40_CBC_SHA":             0x0008,
	"TLS_RSA_EXPORT_WITH_DES40_CBC_SHA":             0x0008,
	"SSL_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA":         0x0014,
	"TLS_DHE_RSA_EXPORT_WITH_DES40_CBC_SHA":         0x0014,
	"SSL_DHE_DSS_EXPORT_WITH_DES40_CBC_SHA":         0x0011,
	"TLS_DHE_DSS_EXPORT_WITH_DES40_CBC_SHA":         0x0011,
	"SSL_DH_anon_EXPORT_WITH_DES40_CBC_SHA":         0x0019,
	"TLS_DH_anon_EXPORT_WITH_DES40_CBC_SHA":         0x0019,
	"SSL_RSA_EXPORT_WITH_RC4_40_MD5":                0x0003,
	"TLS_RSA_EXPORT_WITH_RC4_40_MD5":                0x0003,
	"SSL_DH_anon_EXPORT_WITH_RC4_40_MD5":            0x0017,
	"TLS_DH_anon_EXPORT_WITH_RC4_40_MD5":            0x0017,
	"TLS_RSA_WITH_NULL_SHA256":                      0x003b,
	"TLS_ECDHE_ECDSA_WITH_NULL_SHA":                 0xc006,
	"TLS_ECDHE_RSA_WITH_NULL_SHA":                   0xc010,
	"SSL_RSA_WITH_NULL_SHA":                         0x0002,
	"TLS_RSA_WITH_NULL_SHA":                         0x0002,
	"TLS_ECDH_ECDSA_WITH_NULL_SHA":                  0xc001,
	"TLS_ECDH_RSA_WITH_NULL_SHA":                    0xc00b,
	"TLS_ECDH_anon_WITH_NULL_SHA":                   0xc015,
	"SSL_RSA_WITH_NULL_MD5":                         0x0001,
	"TLS_RSA_WITH_NULL_MD5":                         0x0001,
}

// tls13Suites are TLS 1.3's suites (Go always offers all of them).
var tls13Suites = map[uint16]bool{
	tls.TLS_AES_128_GCM_SHA256:       true,
	tls.TLS_AES_256_GCM_SHA384:       true,
	tls.TLS_CHACHA20_POLY1305_SHA256: true,
}

// goSuites are the TLS 1.0-1.2 suites Go implements, secure or not.
func goSuites() map[uint16]bool {
	out := map[uint16]bool{}
	for _, s := range tls.CipherSuites() {
		out[s.ID] = true
	}
	for _, s := range tls.InsecureCipherSuites() {
		out[s.ID] = true
	}
	return out
}

// cipherSuites reads ssl.cipher.suites (key is its name as configured,
// for messages). It returns Go's suites for TLS 1.2 and below (nil: Go's
// defaults), whether TLS 1.3 may be used and whether anything below it
// may, and the warnings for suites left out.
func cipherSuites(key string, names []string) (suites []uint16, allow13, allowBelow13 bool, warnings []string, err error) {
	if len(names) == 0 {
		return nil, true, true, nil, nil
	}
	implemented := goSuites()
	var skipped []string
	for _, n := range names {
		id, ok := javaCipherSuites[n]
		switch {
		case !ok:
			return nil, false, false, nil, fmt.Errorf("Invalid value %s for configuration %s: Unsupported CipherSuite: %s", strings.Join(names, ","), key, n)
		case id == 0x00ff:
			// TLS_EMPTY_RENEGOTIATION_INFO_SCSV is a signal, not a
			// suite; Go sends the renegotiation extension anyway.
		case tls13Suites[id]:
			allow13 = true
		case implemented[id]:
			suites = append(suites, id)
		default:
			skipped = append(skipped, n)
		}
	}
	if len(skipped) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s: Go's TLS does not implement %s; they are left out", key, strings.Join(skipped, ", ")))
	}
	if len(suites) == 0 && !allow13 {
		return nil, false, false, warnings, fmt.Errorf("%s lists no cipher suite Gregor implements (%s)", key, strings.Join(names, ","))
	}
	return suites, allow13, len(suites) > 0, warnings, nil
}

// tlsVersions are Java's protocol names that Go implements.
var tlsVersions = map[string]uint16{
	"TLSv1":   tls.VersionTLS10,
	"TLSv1.1": tls.VersionTLS11,
	"TLSv1.2": tls.VersionTLS12,
	"TLSv1.3": tls.VersionTLS13,
}

// versions reads ssl.enabled.protocols and ssl.protocol into the lowest
// and highest TLS version to use. Go cannot leave a version out between
// two it uses, so a list with a gap uses the whole range.
func versions(enabledKey string, enabled []string, protocolKey, protocol string) (lo, hi uint16, err error) {
	// ssl.protocol caps the versions (Kafka: with TLSv1.2 a client does
	// not use TLSv1.3 even if ssl.enabled.protocols has it); Gregor caps
	// its listeners alike.
	limit := uint16(tls.VersionTLS13)
	switch protocol {
	case "TLS", "TLSv1.3", "SSL", "SSLv3", "":
	case "TLSv1.2", "TLSv1.1", "TLSv1":
		limit = tlsVersions[protocol]
	default:
		return 0, 0, fmt.Errorf("Invalid value %s for configuration %s: Gregor implements TLS, TLSv1.3, TLSv1.2, TLSv1.1 and TLSv1", protocol, protocolKey)
	}
	if len(enabled) == 0 {
		lo = tls.VersionTLS12
		if limit < lo {
			lo = limit
		}
		return lo, limit, nil
	}
	for _, p := range enabled {
		if p == "SSLv2Hello" {
			continue // a hello format, not a version
		}
		v, ok := tlsVersions[p]
		if !ok {
			return 0, 0, fmt.Errorf("Invalid value %s for configuration %s: Gregor implements TLSv1.3, TLSv1.2, TLSv1.1 and TLSv1, not %s", strings.Join(enabled, ","), enabledKey, p)
		}
		if lo == 0 || v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	if lo == 0 {
		return 0, 0, fmt.Errorf("%s enables no TLS version", enabledKey)
	}
	if hi = min(hi, limit); hi < lo {
		return 0, 0, fmt.Errorf("%s %s leaves none of %s %s", protocolKey, protocol, enabledKey, strings.Join(enabled, ","))
	}
	return lo, hi, nil
}
