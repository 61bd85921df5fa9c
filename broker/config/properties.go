// Package config is Gregor's configuration system: Kafka 4.3's broker
// config keys, the server.properties parser, loading and validating a
// broker's configuration, DescribeConfigs answers, and the controller's
// config schema. The key machinery (types, validators, synonyms) and the
// topic- and group-level key tables live in the config package
// (imported as cfgdef), which the log and the controller share.
package config

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProperties reads text in java.util.Properties format, the format of
// Kafka's server.properties:
//   - lines end with \n, \r or \r\n; leading whitespace is skipped;
//   - a line whose first non-blank character is # or ! is a comment;
//   - a line ending in an odd number of backslashes continues on the next
//     line, whose leading whitespace is dropped;
//   - the key ends at the first unescaped '=', ':' or whitespace; whitespace
//     and one '=' or ':' after it are skipped, the rest is the value;
//   - escapes \t \n \r \f \uXXXX work in keys and values, and a backslash
//     before any other character stands for that character.
//
// A later duplicate key replaces an earlier one, as in Java. One deliberate
// difference: the input is read as UTF-8, whereas Properties.load(InputStream)
// reads ISO-8859-1; a UTF-8 file therefore keeps its non-ASCII text intact.
func ParseProperties(text string) (map[string]string, error) {
	props := make(map[string]string)
	lines := logicalLines(text)
	for _, ln := range lines {
		key, value, err := splitProperty(ln.text)
		if err != nil {
			return nil, fmt.Errorf("properties line %d: %w", ln.number, err)
		}
		props[key] = value
	}
	return props, nil
}

type logicalLine struct {
	number int // first natural line, 1-based
	text   string
}

func isPropertiesBlank(c rune) bool { return c == ' ' || c == '\t' || c == '\f' }

// logicalLines splits text into logical lines: comments and blank lines
// dropped, continuations joined.
func logicalLines(text string) []logicalLine {
	var out []logicalLine
	var natural []string
	for len(text) > 0 {
		i := strings.IndexAny(text, "\r\n")
		if i < 0 {
			natural = append(natural, text)
			break
		}
		natural = append(natural, text[:i])
		if text[i] == '\r' && i+1 < len(text) && text[i+1] == '\n' {
			i++
		}
		text = text[i+1:]
	}

	for n := 0; n < len(natural); n++ {
		line := strings.TrimLeftFunc(natural[n], isPropertiesBlank)
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		start := n
		var b strings.Builder
		for {
			cont := endsWithOddBackslashes(line)
			if !cont {
				b.WriteString(line)
				break
			}
			b.WriteString(line[:len(line)-1])
			if n+1 >= len(natural) {
				break // a trailing backslash at end of input is dropped
			}
			n++
			line = strings.TrimLeftFunc(natural[n], isPropertiesBlank)
		}
		out = append(out, logicalLine{number: start + 1, text: b.String()})
	}
	return out
}

func endsWithOddBackslashes(s string) bool {
	count := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		count++
	}
	return count%2 == 1
}

// splitProperty splits one logical line into its unescaped key and value.
func splitProperty(line string) (string, string, error) {
	keyEnd, valueStart := len(line), len(line)
	hasSeparator := false
	precedingBackslash := false
	for i := 0; i < len(line); i++ {
		c := line[i]
		if !precedingBackslash && (c == '=' || c == ':') {
			keyEnd, valueStart, hasSeparator = i, i+1, true
			break
		}
		if !precedingBackslash && isPropertiesBlank(rune(c)) {
			keyEnd, valueStart = i, i+1
			break
		}
		precedingBackslash = c == '\\' && !precedingBackslash
	}
	for valueStart < len(line) {
		c := line[valueStart]
		if !isPropertiesBlank(rune(c)) {
			if hasSeparator || (c != '=' && c != ':') {
				break
			}
			hasSeparator = true
		}
		valueStart++
	}
	key, err := unescapeProperties(line[:keyEnd])
	if err != nil {
		return "", "", err
	}
	value, err := unescapeProperties(line[valueStart:])
	if err != nil {
		return "", "", err
	}
	return key, value, nil
}

var errMalformedUnicode = errors.New(`Malformed \uxxxx encoding.`)

func unescapeProperties(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone trailing backslash stands for nothing
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, ok := hex4(s[i+1:])
			if !ok {
				return "", errMalformedUnicode
			}
			i += 4
			// A UTF-16 surrogate pair written as two escapes is one
			// character, as in a Java string.
			if utf16.IsSurrogate(r) && strings.HasPrefix(s[i+1:], `\u`) {
				if low, ok := hex4(s[i+3:]); ok {
					if pair := utf16.DecodeRune(r, low); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			b.WriteRune(r)
		default:
			// Any other escaped character is itself (a multi-byte UTF-8
			// character is copied whole by the following iterations).
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}

// hex4 decodes the four hex digits at the start of s.
func hex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, h := range s[:4] {
		r <<= 4
		switch {
		case h >= '0' && h <= '9':
			r |= h - '0'
		case h >= 'a' && h <= 'f':
			r |= h - 'a' + 10
		case h >= 'A' && h <= 'F':
			r |= h - 'A' + 10
		default:
			return 0, false
		}
	}
	return r, true
}
