package ssl

// ssl.principal.mapping.rules: how a client certificate's distinguished
// name (as DistinguishedName prints it) becomes the principal's name, with
// Kafka's syntax and semantics (SslPrincipalMapper):
//
//	DEFAULT                      the name is the whole DN
//	RULE:pattern/replacement/    if the DN matches pattern as a whole, the
//	RULE:pattern/replacement/L   name is the DN with every match of pattern
//	RULE:pattern/replacement/U   replaced (Java's replaceAll), then lower-
//	                             or upper-cased
//
// Rules are separated by commas and tried in order; the first that applies
// gives the name, and a DN no rule applies to fails the connection. A '/'
// or '\' inside a pattern or replacement is escaped with '\'. Splitting
// and parsing follow Kafka's two regular expressions, which Go's regexp
// evaluates with the same preferences (leftmost, then the alternative a
// backtracking engine tries first), so a rules string splits into the same
// rules. Replacements use Java's syntax ($n, ${name}, \c for a literal c),
// after Kafka's own rewriting of references past the last group into
// literals, and replaceAll's treatment of an empty match right after the
// previous one (Java replaces it; Go's ReplaceAll would skip it) is kept
// where it can arise, at the end of the name.
//
// Deliberate departures: patterns are Go (RE2) regular expressions, so
// Java-only syntax (lookaround, back references, possessive quantifiers)
// is refused at start-up, with a message naming the rule; a replacement
// that would throw in Java whenever its rule applies (a group that does
// not exist) is refused at start-up too, where Kafka fails each connection
// the rule matches. Case conversion is Go's, which differs from Java's
// Locale.ENGLISH only for a few characters (ß, the dotted İ).

import (
	"errors"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
)

// ruleSplitter and ruleParser are Kafka's RULE_SPLITTER and RULE_PARSER,
// with Java's \s spelled out (Go's lacks the vertical tab).
const (
	javaSpace   = `[ \t\n\x0B\f\r]`
	rulePattern = `(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)`
)

var (
	ruleSplitter = regexp.MustCompile(javaSpace + `*(` + rulePattern + `)` + javaSpace + `*(,` + javaSpace + `*|$)`)
	ruleParser   = regexp.MustCompile(`^(?:` + rulePattern + `)`)
)

// PrincipalMapper applies ssl.principal.mapping.rules.
type PrincipalMapper struct {
	rules []mappingRule
	text  string
}

type mappingRule struct {
	isDefault bool
	source    string // the rule as written, for messages
	// whole matches the entire name; each finds the matches replaceAll
	// replaces.
	whole, each *regexp.Regexp
	replacement []replacementPart
	lower       bool
	upper       bool
	// emptyAtEnd[lastIsWord][endsInNewline] says whether the pattern
	// matches the empty string at the end of a non-empty name, given its
	// last character.
	emptyAtEnd [2][2]bool
}

// replacementPart is literal text, or a group's text when group >= 0.
type replacementPart struct {
	literal string
	group   int
}

// ErrNoMatchingRule is returned when no rule applies to a name.
var ErrNoMatchingRule = errors.New("no rules apply")

// NewPrincipalMapper parses ssl.principal.mapping.rules.
func NewPrincipalMapper(rules string) (*PrincipalMapper, error) {
	m := &PrincipalMapper{text: rules}
	trimmed := strings.TrimFunc(rules, func(r rune) bool { return r <= ' ' }) // Java's String.trim
	for _, sm := range ruleSplitter.FindAllStringSubmatch(trimmed, -1) {
		text := sm[1]
		loc := ruleParser.FindStringSubmatchIndex(text)
		if loc == nil {
			return nil, fmt.Errorf("Invalid rule: %s", text)
		}
		if loc[1] != len(text) {
			return nil, fmt.Errorf("Invalid rule: `%s`, unmatched substring: `%s`", text, text[loc[1]:])
		}
		group := func(i int) (string, bool) {
			if loc[2*i] < 0 {
				return "", false
			}
			return text[loc[2*i]:loc[2*i+1]], true
		}
		if _, ok := group(1); ok {
			m.rules = append(m.rules, mappingRule{isDefault: true, source: text})
			continue
		}
		pattern, ok := group(2)
		if !ok {
			continue // an empty rule
		}
		replacement, _ := group(4)
		flag, _ := group(6)
		r, err := newMappingRule(text, pattern, replacement, flag)
		if err != nil {
			return nil, err
		}
		m.rules = append(m.rules, r)
	}
	return m, nil
}

func newMappingRule(source, pattern, replacement, flag string) (mappingRule, error) {
	r := mappingRule{source: source, lower: flag == "L", upper: flag == "U"}
	var err error
	if r.each, err = regexp.Compile(pattern); err != nil {
		return r, fmt.Errorf("rule `%s`: Gregor's regular expressions (Go's RE2 syntax) cannot read the pattern: %w", source, err)
	}
	r.whole = regexp.MustCompile(`\A(?:` + pattern + `)\z`)
	escaped, err := kafkaEscapeBackReferences(replacement, r.each.NumSubexp())
	if err == nil {
		r.replacement, err = parseJavaReplacement(escaped, r.each)
	}
	if err != nil {
		return r, fmt.Errorf("rule `%s`: %w (Kafka would fail every connection this rule applies to)", source, err)
	}
	parsed, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return r, err
	}
	for word := range 2 {
		for newline := range 2 {
			re, err := syntax.Compile(atEnd(parsed, word == 1, newline == 1).Simplify())
			if err == nil {
				r.emptyAtEnd[word][newline] = matchesEmpty(re)
			}
		}
	}
	return r, nil
}

// Name maps a distinguished name to a principal name.
func (m *PrincipalMapper) Name(dn string) (string, error) {
	for _, r := range m.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %s, rules %s", ErrNoMatchingRule, dn, m)
}

// String lists the rules as Kafka's SslPrincipalMapper.toString does.
func (m *PrincipalMapper) String() string {
	parts := make([]string, len(m.rules))
	for i, r := range m.rules {
		parts[i] = r.String()
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func (r mappingRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	// The rule's pattern and replacement as written.
	loc := ruleParser.FindStringSubmatch(r.source)
	s := "RULE:" + loc[2] + "/" + loc[4]
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}

func (r mappingRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	if !r.whole.MatchString(dn) {
		return "", false
	}
	var b strings.Builder
	last := 0
	matches := r.each.FindAllStringSubmatchIndex(dn, -1)
	for _, loc := range matches {
		b.WriteString(dn[last:loc[0]])
		r.expand(&b, dn, loc)
		last = loc[1]
	}
	b.WriteString(dn[last:])
	// Java's replaceAll also replaces an empty match where the previous
	// match ended; Go's skips it. At the end of the name it is the
	// pattern's empty match there.
	if n := len(matches); n > 0 && matches[n-1][1] == len(dn) && matches[n-1][0] < len(dn) {
		lastIsWord, endsInNewline := 0, 0
		if c := dn[len(dn)-1]; c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' {
			lastIsWord = 1
		}
		if dn[len(dn)-1] == '\n' {
			endsInNewline = 1
		}
		if r.emptyAtEnd[lastIsWord][endsInNewline] {
			empty := make([]int, 2*(r.each.NumSubexp()+1))
			for i := range empty {
				empty[i] = -1
			}
			empty[0], empty[1] = len(dn), len(dn)
			r.expand(&b, dn, empty)
		}
	}
	name := b.String()
	switch {
	case r.lower:
		name = strings.ToLower(name)
	case r.upper:
		name = strings.ToUpper(name)
	}
	return name, true
}

// expand appends the replacement for the match loc.
func (r mappingRule) expand(b *strings.Builder, s string, loc []int) {
	for _, p := range r.replacement {
		if p.group < 0 {
			b.WriteString(p.literal)
		} else if loc[2*p.group] >= 0 {
			b.WriteString(s[loc[2*p.group]:loc[2*p.group+1]])
		}
	}
}

var backReference = regexp.MustCompile(`\$(\d+)`)

// kafkaEscapeBackReferences is SslPrincipalMapper's
// escapeLiteralBackReferences: a reference $n past the last group, after
// dropping trailing digits while n >= 10, is made a literal by a
// backslash put before its '$'. As in Kafka, positions are those of the
// original text, so a second such reference gets its backslash one place
// earlier for each one added before it.
func kafkaEscapeBackReferences(unescaped string, groups int) (string, error) {
	if groups == 0 {
		return unescaped, nil
	}
	value := unescaped
	for _, m := range backReference.FindAllStringSubmatchIndex(unescaped, -1) {
		num := unescaped[m[2]:m[3]]
		if strings.HasPrefix(num, "0") {
			continue
		}
		idx, err := strconv.ParseInt(num, 10, 32)
		if err != nil {
			// Java's Integer.parseInt throws: Kafka fails the
			// connections the rule applies to.
			return "", fmt.Errorf("back reference $%s is too large", num)
		}
		for idx > int64(groups) && idx >= 10 {
			idx /= 10
		}
		if idx > int64(groups) {
			start := m[2] - 1
			value = value[:start] + `\` + value[start:]
		}
	}
	return value, nil
}

// parseJavaReplacement reads a replacement as Java's
// Matcher.appendReplacement does.
func parseJavaReplacement(s string, re *regexp.Regexp) ([]replacementPart, error) {
	var parts []replacementPart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacementPart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	groups := re.NumSubexp()
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			i++
			if i == len(s) {
				return nil, errors.New("character to be escaped is missing")
			}
			lit.WriteByte(s[i])
		case '$':
			i++
			if i == len(s) {
				return nil, errors.New("Illegal group reference: group index is missing")
			}
			var ref int
			if s[i] == '{' {
				end := strings.IndexByte(s[i:], '}')
				if end < 0 {
					return nil, errors.New("named capturing group is missing trailing '}'")
				}
				name := s[i+1 : i+end]
				if name == "" {
					return nil, errors.New("named capturing group has 0 length name")
				}
				ref = re.SubexpIndex(name)
				if ref < 0 {
					return nil, fmt.Errorf("No group with name {%s}", name)
				}
				i += end
			} else {
				if s[i] < '0' || s[i] > '9' {
					return nil, errors.New("Illegal group reference")
				}
				ref = int(s[i] - '0')
				for i+1 < len(s) && s[i+1] >= '0' && s[i+1] <= '9' {
					next := ref*10 + int(s[i+1]-'0')
					if next > groups {
						break
					}
					ref = next
					i++
				}
				if ref > groups {
					return nil, fmt.Errorf("No group %d", ref)
				}
			}
			flush()
			parts = append(parts, replacementPart{group: ref})
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

// atEnd rewrites a pattern's context-dependent empty assertions as they
// hold at the end of a non-empty name (so neither ^ nor \A matches there
// unless, in multi-line mode, the name ends in a newline).
func atEnd(re *syntax.Regexp, lastIsWord, endsInNewline bool) *syntax.Regexp {
	out := *re
	out.Sub = make([]*syntax.Regexp, len(re.Sub))
	for i, s := range re.Sub {
		out.Sub[i] = atEnd(s, lastIsWord, endsInNewline)
	}
	holds := func(ok bool) *syntax.Regexp {
		if ok {
			return &syntax.Regexp{Op: syntax.OpEmptyMatch}
		}
		return &syntax.Regexp{Op: syntax.OpNoMatch}
	}
	switch re.Op {
	case syntax.OpBeginText:
		return holds(false)
	case syntax.OpBeginLine:
		return holds(endsInNewline)
	case syntax.OpEndText, syntax.OpEndLine:
		return holds(true)
	case syntax.OpWordBoundary:
		return holds(lastIsWord)
	case syntax.OpNoWordBoundary:
		return holds(!lastIsWord)
	}
	return &out
}

// matchesEmpty reports whether a compiled program, now free of
// assertions, matches the empty string.
func matchesEmpty(p *syntax.Prog) bool {
	seen := map[uint32]bool{}
	var walk func(pc uint32) bool
	walk = func(pc uint32) bool {
		if seen[pc] {
			return false
		}
		seen[pc] = true
		in := p.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstAlt, syntax.InstAltMatch:
			return walk(in.Out) || walk(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			return walk(in.Out)
		case syntax.InstEmptyWidth:
			// Only what the input's edges decide is left: the empty
			// string is at the start and the end of text and of line.
			return walk(in.Out)
		}
		return false // a rune or a failure
	}
	return walk(uint32(p.Start))
}
