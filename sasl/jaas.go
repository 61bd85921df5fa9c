package sasl

// JAAS configuration text, as Kafka's sasl.jaas.config holds it:
//
//	<loginModuleClass> <controlFlag> (<optionName>=<optionValue>)*;
//
// Kafka reads it with java.io.StreamTokenizer, and so does this parser, rule
// for rule, so that a value Kafka accepts is read the same way and one it
// refuses is refused: words are letters, digits and . - _ $ (and any
// character from U+00A0 up) starting with a letter; a token starting with a
// digit, '.' or '-' is a number, which has no string value (so an unquoted
// numeric option value is an error in Kafka, and here); strings are quoted
// with " or ' and take backslash escapes; // and /* */ are comments, and so
// is a lone / up to the end of its line.

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// JAASEntry is one login module entry of a JAAS configuration.
type JAASEntry struct {
	LoginModule string
	// Flag is the control flag, upper case (REQUIRED, REQUISITE,
	// SUFFICIENT or OPTIONAL).
	Flag    string
	Options map[string]string
}

// Option returns the option's value and whether it is set.
func (e *JAASEntry) Option(name string) (string, bool) {
	if e == nil {
		return "", false
	}
	v, ok := e.Options[name]
	return v, ok
}

// Kafka's login module classes.
const (
	PlainLoginModule       = "org.apache.kafka.common.security.plain.PlainLoginModule"
	ScramLoginModule       = "org.apache.kafka.common.security.scram.ScramLoginModule"
	OAuthBearerLoginModule = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
)

// ParseJAASEntries parses a JAAS configuration into its entries.
func ParseJAASEntries(text string) ([]JAASEntry, error) {
	t := &jaasTokenizer{src: text}
	var entries []JAASEntry
	for {
		tok := t.next()
		if tok.kind == tokEOF {
			break
		}
		e, err := parseJAASEntry(t, tok)
		if err != nil {
			return nil, err
		}
		entries = append(entries, e)
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("Login module not specified in JAAS config")
	}
	return entries, nil
}

// ParseJAAS parses the value of a sasl.jaas.config property, which must
// hold exactly one login module entry (Kafka's JaasContext.load).
func ParseJAAS(text string) (*JAASEntry, error) {
	entries, err := ParseJAASEntries(text)
	if err != nil {
		return nil, err
	}
	if len(entries) != 1 {
		return nil, fmt.Errorf("JAAS config property contains %d login modules, should be 1 module", len(entries))
	}
	return &entries[0], nil
}

func parseJAASEntry(t *jaasTokenizer, first jaasToken) (JAASEntry, error) {
	if !first.hasString() {
		return JAASEntry{}, fmt.Errorf("Login module not specified in JAAS config")
	}
	e := JAASEntry{LoginModule: first.text, Options: map[string]string{}}
	flag := t.next()
	if flag.kind == tokEOF {
		return JAASEntry{}, fmt.Errorf("Login module control flag not specified in JAAS config")
	}
	if !flag.hasString() {
		return JAASEntry{}, fmt.Errorf("Login module control flag is not available in the JAAS config")
	}
	switch f := strings.ToUpper(flag.text); f {
	case "REQUIRED", "REQUISITE", "SUFFICIENT", "OPTIONAL":
		e.Flag = f
	default:
		return JAASEntry{}, fmt.Errorf("Invalid login module control flag '%s' in JAAS config", flag.text)
	}
	for {
		key := t.next()
		if key.kind == tokEOF || key.isChar(';') {
			if !key.isChar(';') {
				return JAASEntry{}, fmt.Errorf("JAAS config entry not terminated by semi-colon")
			}
			return e, nil
		}
		eq := t.next()
		if !eq.isChar('=') {
			return JAASEntry{}, fmt.Errorf("Value not specified for key '%s' in JAAS config", key.text)
		}
		val := t.next()
		if val.kind == tokEOF || !val.hasString() {
			return JAASEntry{}, fmt.Errorf("Value not specified for key '%s' in JAAS config", key.text)
		}
		if !key.hasString() {
			// A number or a lone character where a key belongs: Kafka
			// stores it under a null key that no one reads.
			continue
		}
		e.Options[key.text] = val.text
	}
}

type tokKind int

const (
	tokEOF tokKind = iota
	tokWord
	tokQuoted
	tokNumber
	tokChar
)

type jaasToken struct {
	kind tokKind
	text string // words and quoted strings
	char rune   // tokChar
}

func (t jaasToken) hasString() bool    { return t.kind == tokWord || t.kind == tokQuoted }
func (t jaasToken) isChar(c rune) bool { return t.kind == tokChar && t.char == c }

// jaasTokenizer is java.io.StreamTokenizer as JaasConfig sets it up.
type jaasTokenizer struct {
	src string
	pos int
}

func (t *jaasTokenizer) peek() (rune, int) {
	if t.pos >= len(t.src) {
		return -1, 0
	}
	r, n := utf8.DecodeRuneInString(t.src[t.pos:])
	return r, n
}

func isJAASSpace(r rune) bool { return r >= 0 && r <= ' ' }

func isJAASAlpha(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= 160 ||
		r == '-' || r == '_' || r == '$'
}

func isJAASDigit(r rune) bool { return r >= '0' && r <= '9' || r == '.' || r == '-' }

func (t *jaasTokenizer) skipLine() {
	for {
		r, n := t.peek()
		if r < 0 || r == '\n' || r == '\r' {
			return
		}
		t.pos += n
	}
}

func (t *jaasTokenizer) next() jaasToken {
	for {
		r, n := t.peek()
		switch {
		case r < 0:
			return jaasToken{kind: tokEOF}
		case isJAASSpace(r):
			t.pos += n
			continue
		case r == '/':
			t.pos += n
			switch c, m := t.peek(); c {
			case '*':
				t.pos += m
				end := strings.Index(t.src[t.pos:], "*/")
				if end < 0 {
					t.pos = len(t.src)
					return jaasToken{kind: tokEOF}
				}
				t.pos += end + 2
			default:
				// "//" and a lone '/' (the comment character)
				// both run to the end of the line.
				t.skipLine()
			}
			continue
		case isJAASDigit(r) && (r != '-' || t.minusStartsNumber()):
			t.readNumber()
			return jaasToken{kind: tokNumber}
		case r == '-':
			t.pos += n
			return jaasToken{kind: tokChar, char: '-'}
		case isJAASAlpha(r):
			start := t.pos
			for {
				c, m := t.peek()
				if c < 0 || !(isJAASAlpha(c) || isJAASDigit(c)) {
					break
				}
				t.pos += m
			}
			return jaasToken{kind: tokWord, text: t.src[start:t.pos]}
		case r == '"' || r == '\'':
			t.pos += n
			return jaasToken{kind: tokQuoted, text: t.readQuoted(r)}
		default:
			t.pos += n
			return jaasToken{kind: tokChar, char: r}
		}
	}
}

// minusStartsNumber: StreamTokenizer reads '-' as a number only when a digit
// or '.' follows it.
func (t *jaasTokenizer) minusStartsNumber() bool {
	if t.pos+1 >= len(t.src) {
		return false
	}
	c := t.src[t.pos+1]
	return c == '.' || c >= '0' && c <= '9'
}

func (t *jaasTokenizer) readNumber() {
	if t.src[t.pos] == '-' {
		t.pos++
	}
	seenDot := false
	for t.pos < len(t.src) {
		c := t.src[t.pos]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !seenDot:
			seenDot = true
		default:
			return
		}
		t.pos++
	}
}

// readQuoted reads a quoted string after its opening quote: it ends at the
// matching quote, a line end or the end of the text, and takes
// StreamTokenizer's escapes (\a \b \f \n \r \t \v, octal \ooo, and \c for
// any other c).
func (t *jaasTokenizer) readQuoted(quote rune) string {
	var b strings.Builder
	for {
		r, n := t.peek()
		if r < 0 || r == '\n' || r == '\r' {
			return b.String()
		}
		t.pos += n
		if r == quote {
			return b.String()
		}
		if r != '\\' {
			b.WriteRune(r)
			continue
		}
		c, m := t.peek()
		if c < 0 {
			return b.String()
		}
		t.pos += m
		switch c {
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		default:
			if c >= '0' && c <= '7' {
				v := c - '0'
				maxDigits := 2
				if c > '3' {
					maxDigits = 1
				}
				for i := 0; i < maxDigits; i++ {
					d, k := t.peek()
					if d < '0' || d > '7' {
						break
					}
					t.pos += k
					v = v*8 + d - '0'
				}
				b.WriteRune(v)
				continue
			}
			b.WriteRune(c)
		}
	}
}
