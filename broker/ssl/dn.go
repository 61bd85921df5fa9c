package ssl

// A certificate's subject as Java's X500Principal.getName() prints it: RFC
// 2253 form with the JDK's own choices, which is the text Kafka's principal
// mapping rules (ssl.principal.mapping.rules) are matched against, so it
// must come out byte for byte as the JDK writes it.
//
// What the JDK (sun.security.x509.X500Name.getRFC2253Name) does:
//   - RDNs from the last in the certificate to the first, joined by ",";
//     the attributes of a multi-valued RDN in their encoded order, joined
//     by "+".
//   - The type is one of RFC 2253's keywords (CN, C, L, ST, O, OU, STREET,
//     DC, UID), else the dotted object identifier.
//   - A value whose type has no keyword, or that is not one of the string
//     types (PrintableString, T61String, IA5String, GeneralString,
//     BMPString, UTF8String), is "#" and the lower-case hex of its whole
//     DER encoding.
//   - A string value is decoded (as UTF-8 whatever its type, as JDK 17
//     does); each of , = + < > # ; " \
//     gets a backslash before it, NUL becomes \00, every other character
//     is kept as it is; then each space or carriage return before the
//     first other character or after the last one gets a backslash.

import (
	"encoding/asn1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// rfc2253Keywords are the attribute types Java names in RFC 2253 output.
var rfc2253Keywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// ASN.1 universal tags of the string types Java prints as text.
const (
	tagUTF8String      = 12
	tagPrintableString = 19
	tagT61String       = 20
	tagIA5String       = 22
	tagGeneralString   = 27
	tagBMPString       = 30
)

// attributeTypeAndValue is one AVA with its value kept raw.
type attributeTypeAndValue struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// DistinguishedName formats a DER-encoded Name (a certificate's
// RawSubject) as Java's X500Principal.getName() does.
func DistinguishedName(rawName []byte) (string, error) {
	var rdns []asn1.RawValue
	rest, err := asn1.Unmarshal(rawName, &rdns)
	if err != nil {
		return "", fmt.Errorf("reading a distinguished name: %w", err)
	}
	if len(rest) > 0 {
		return "", errors.New("reading a distinguished name: trailing data")
	}
	parts := make([]string, len(rdns))
	for i, rdn := range rdns {
		if rdn.Class != asn1.ClassUniversal || rdn.Tag != asn1.TagSet {
			return "", errors.New("reading a distinguished name: an RDN is not a SET")
		}
		var avas []string
		for b := rdn.Bytes; len(b) > 0; {
			var ava attributeTypeAndValue
			if b, err = asn1.Unmarshal(b, &ava); err != nil {
				return "", fmt.Errorf("reading a distinguished name's attribute: %w", err)
			}
			avas = append(avas, formatAVA(ava))
		}
		if len(avas) == 0 {
			return "", errors.New("reading a distinguished name: an empty RDN")
		}
		// Last RDN first.
		parts[len(rdns)-1-i] = strings.Join(avas, "+")
	}
	return strings.Join(parts, ","), nil
}

func formatAVA(ava attributeTypeAndValue) string {
	oid := ava.Type.String()
	keyword, named := rfc2253Keywords[oid]
	if !named {
		keyword = oid
	}
	text, isString := decodeDirectoryString(ava.Value)
	if !named || !isString {
		return keyword + "=#" + hex.EncodeToString(ava.Value.FullBytes)
	}
	return keyword + "=" + escapeRFC2253(text)
}

// decodeDirectoryString decodes the string types Java prints as text.
// The JDK 17 that Kafka 4.3 runs on decodes every one of them as UTF-8
// (later JDKs decode BMPString as UTF-16 and the 8-bit types as
// ISO-8859-1); Gregor prints what a Kafka on JDK 17 prints.
func decodeDirectoryString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal || v.IsCompound {
		return "", false
	}
	switch v.Tag {
	case tagUTF8String, tagPrintableString, tagT61String, tagIA5String, tagGeneralString, tagBMPString:
		return decodeJavaUTF8(v.Bytes), true
	}
	return "", false
}

// decodeJavaUTF8 decodes UTF-8 as Java's decoder does, one U+FFFD for
// each malformed sequence: the longest start of a well-formed sequence,
// or an encoded surrogate, or a single byte.
func decodeJavaUTF8(b []byte) string {
	var out strings.Builder
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r != utf8.RuneError || size > 1 {
			out.WriteRune(r)
			b = b[size:]
			continue
		}
		out.WriteRune(utf8.RuneError)
		b = b[malformedLength(b):]
	}
	return out.String()
}

// malformedLength is how many bytes of a malformed sequence Java's
// decoder replaces with one U+FFFD.
func malformedLength(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xbf)
	switch c := b[0]; {
	case c >= 0xc2 && c <= 0xdf:
		need = 1
	case c == 0xe0:
		need, lo = 2, 0xa0
	case c == 0xed:
		if len(b) >= 3 && b[1] >= 0xa0 && b[1] <= 0xbf && b[2] >= 0x80 && b[2] <= 0xbf {
			return 3 // an encoded surrogate
		}
		need, hi = 2, 0x9f
	case c >= 0xe1 && c <= 0xef:
		need = 2
	case c == 0xf0:
		need, lo = 3, 0x90
	case c >= 0xf1 && c <= 0xf3:
		need = 3
	case c == 0xf4:
		need, hi = 3, 0x8f
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		if x := b[n]; k == 0 && (x < lo || x > hi) || k > 0 && (x < 0x80 || x > 0xbf) {
			break
		}
		n++
	}
	return n
}

// escapeRFC2253 escapes a value as AVA.toRFC2253String does.
func escapeRFC2253(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case strings.ContainsRune(`,=+<>#;"\`, r):
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == 0:
			b.WriteString(`\00`)
		default:
			b.WriteRune(r)
		}
	}
	escaped := b.String()
	lead := strings.IndexFunc(escaped, func(r rune) bool { return r != ' ' && r != '\r' })
	if lead < 0 {
		// All blanks: every one is leading.
		return escapeEach(escaped)
	}
	trail := strings.LastIndexFunc(escaped, func(r rune) bool { return r != ' ' && r != '\r' })
	_, size := utf8.DecodeRuneInString(escaped[trail:])
	return escapeEach(escaped[:lead]) + escaped[lead:trail+size] + escapeEach(escaped[trail+size:])
}

// escapeEach puts a backslash before every character of s.
func escapeEach(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteByte('\\')
		b.WriteRune(r)
	}
	return b.String()
}
