package config

// The typed config system of Kafka's ConfigDef, written for Gregor: value
// types, parsing and printing with Java's rules, validators with Kafka's
// messages, and broker synonyms. Every schema (broker, topic, group) is a
// table of Keys, so that parsing, error messages and printed values match
// Kafka's everywhere, down to the text a client sees in INVALID_CONFIG.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// Type is a config key's value type. The numbers are the ConfigType
// codes of DescribeConfigs v3+.
type Type int8

const (
	TypeUnknown  Type = 0
	TypeBoolean  Type = 1
	TypeString   Type = 2
	TypeInt      Type = 3
	TypeShort    Type = 4
	TypeLong     Type = 5
	TypeDouble   Type = 6
	TypeList     Type = 7
	TypeClass    Type = 8
	TypePassword Type = 9
)

// String is the upper-case name Kafka uses in messages ("Not a number of
// type INT").
func (t Type) String() string {
	switch t {
	case TypeBoolean:
		return "BOOLEAN"
	case TypeString:
		return "STRING"
	case TypeInt:
		return "INT"
	case TypeShort:
		return "SHORT"
	case TypeLong:
		return "LONG"
	case TypeDouble:
		return "DOUBLE"
	case TypeList:
		return "LIST"
	case TypeClass:
		return "CLASS"
	case TypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// Key describes one config key. Parsed values have these Go types:
// BOOLEAN bool, STRING/CLASS/PASSWORD string, INT int32, SHORT int16, LONG
// int64, DOUBLE float64, LIST []string.
type Key struct {
	Name string
	Type Type
	// Default is the default as Kafka prints it (DescribeConfigs, docs).
	// It is meaningless when DefaultNull or Required is set.
	Default string
	// DefaultNull means the key has no value unless one is configured
	// (Kafka prints "null").
	DefaultNull bool
	// Required means there is no default at all: the key must be set.
	Required bool
	// Validator checks a parsed value; nil accepts anything of the type.
	Validator Validator
	// Doc is a one-line description (DescribeConfigs IncludeDocumentation).
	Doc string
	// Internal keys are accepted but not listed by DescribeConfigs.
	Internal bool
}

// HasValue reports whether the key has a value when nothing is configured.
func (k *Key) HasValue() bool { return !k.DefaultNull && !k.Required }

// Parse parses raw as Kafka does (surrounding whitespace trimmed) and runs
// the key's validator. Errors carry Kafka's message.
func (k *Key) Parse(raw string) (any, error) {
	v, err := ParseValue(k.Name, k.Type, raw)
	if err != nil {
		return nil, err
	}
	if k.Validator != nil {
		if err := k.Validator.Validate(k.Name, v); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// Canonical parses and validates raw and prints it back the way Kafka
// prints the parsed value ("  24 " becomes "24", "a , b" becomes "a,b").
func (k *Key) Canonical(raw string) (string, error) {
	v, err := k.Parse(raw)
	if err != nil {
		return "", err
	}
	return FormatValue(v), nil
}

// ValueError is Kafka's ConfigException(name, value, message): "Invalid
// value V for configuration K: M".
type ValueError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ValueError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("Invalid value %s for configuration %s", e.Value, e.Key)
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Key, e.Reason)
}

// listWhitespaceComma is the separator of LIST values: a comma with any
// whitespace around it.
var listWhitespaceComma = regexp.MustCompile(`\s*,\s*`)

// ParseValue converts raw to the Go value of type t with Kafka's
// rules: surrounding whitespace is trimmed, booleans are case-insensitive,
// an empty LIST is an empty slice and list items are split on commas.
func ParseValue(key string, t Type, raw string) (any, error) {
	trimmed := strings.TrimSpace(raw)
	notNumber := func() error {
		return &ValueError{Key: key, Value: raw, Reason: "Not a number of type " + t.String()}
	}
	switch t {
	case TypeBoolean:
		switch strings.ToLower(trimmed) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, &ValueError{Key: key, Value: raw, Reason: "Expected value to be either true or false"}
	case TypeString, TypePassword, TypeClass:
		return trimmed, nil
	case TypeInt:
		n, err := parseJavaInteger(trimmed, 32)
		if err != nil {
			return nil, notNumber()
		}
		return int32(n), nil
	case TypeShort:
		n, err := parseJavaInteger(trimmed, 16)
		if err != nil {
			return nil, notNumber()
		}
		return int16(n), nil
	case TypeLong:
		n, err := parseJavaInteger(trimmed, 64)
		if err != nil {
			return nil, notNumber()
		}
		return n, nil
	case TypeDouble:
		f, err := parseJavaDouble(trimmed)
		if err != nil {
			return nil, notNumber()
		}
		return f, nil
	case TypeList:
		if trimmed == "" {
			return []string{}, nil
		}
		return listWhitespaceComma.Split(trimmed, -1), nil
	}
	return nil, fmt.Errorf("config %s: unknown type %d", key, t)
}

// parseJavaInteger accepts what Integer.parseInt / Long.parseLong accept:
// an optional sign and ASCII digits, nothing else.
func parseJavaInteger(s string, bits int) (int64, error) {
	digits := s
	if strings.HasPrefix(digits, "+") || strings.HasPrefix(digits, "-") {
		digits = digits[1:]
	}
	if digits == "" {
		return 0, errors.New("empty number")
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, errors.New("not a digit")
		}
	}
	return strconv.ParseInt(s, 10, bits)
}

// parseJavaDouble accepts the decimal forms Double.parseDouble accepts,
// including a trailing f/F/d/D and "Infinity"/"NaN"; Go-only spellings
// ("inf", underscores, hex) are refused.
func parseJavaDouble(s string) (float64, error) {
	body := s
	if n := len(body); n > 0 && strings.ContainsRune("fFdD", rune(body[n-1])) && !strings.HasSuffix(body, "Infinity") {
		body = body[:n-1]
	}
	unsigned := strings.TrimLeft(body, "+-")
	switch unsigned {
	case "Infinity":
		if strings.HasPrefix(body, "-") {
			return math.Inf(-1), nil
		}
		return math.Inf(1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if len(body)-len(unsigned) > 1 || unsigned == "" {
		return 0, errors.New("bad sign")
	}
	for _, c := range unsigned {
		if !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
			return 0, errors.New("not a decimal number")
		}
	}
	f, err := strconv.ParseFloat(body, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, err
	}
	return f, nil
}

// FormatValue prints a parsed value as Kafka's ConfigDef does:
// doubles as Java's Double.toString, lists joined with commas.
func FormatValue(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case bool:
		return strconv.FormatBool(x)
	case string:
		return x
	case int16:
		return strconv.FormatInt(int64(x), 10)
	case int32:
		return strconv.FormatInt(int64(x), 10)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return FormatJavaDouble(x)
	case []string:
		return strings.Join(x, ",")
	}
	return fmt.Sprint(v)
}

// FormatJavaDouble prints f the way Java's Double.toString does: plain
// decimal with at least one fraction digit between 1e-3 and 1e7, otherwise
// "d.dddE±n".
func FormatJavaDouble(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	abs := math.Abs(f)
	if abs >= 1e-3 && abs < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(f, 'e', -1, 64)
	mantissa, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mantissa, ".") {
		mantissa += ".0"
	}
	e, _ := strconv.Atoi(exp)
	return mantissa + "E" + strconv.Itoa(e)
}

// formatJavaList prints a list the way Java's List.toString does; Kafka
// puts it into some of its messages.
func formatJavaList(items []string) string {
	return "[" + strings.Join(items, ", ") + "]"
}

// Validator checks a parsed value and describes the valid values as
// Kafka's documentation prints them.
type Validator interface {
	Validate(key string, value any) error
	String() string
}

// Bound is one end of a Range: Text is how Kafka prints it.
type Bound struct {
	Value float64
	Text  string
}

// IntBound is a Bound for a whole number.
func IntBound(n int64) *Bound {
	return &Bound{Value: float64(n), Text: strconv.FormatInt(n, 10)}
}

// Range is Kafka's Range validator: [min,...], [min,...,max] or [...,max].
type Range struct {
	Min, Max *Bound
}

// AtLeast is Range.atLeast(n).
func AtLeast(n int64) Range { return Range{Min: IntBound(n)} }

// Between is Range.between(lo, hi).
func Between(lo, hi int64) Range { return Range{Min: IntBound(lo), Max: IntBound(hi)} }

func (r Range) Validate(key string, value any) error {
	var f float64
	switch x := value.(type) {
	case int16:
		f = float64(x)
	case int32:
		f = float64(x)
	case int64:
		f = float64(x)
	case float64:
		f = x
	default:
		return &ValueError{Key: key, Value: "null", Reason: "Value must be non-null"}
	}
	if r.Min != nil && f < r.Min.Value {
		return &ValueError{Key: key, Value: FormatValue(value), Reason: "Value must be at least " + r.Min.Text}
	}
	if r.Max != nil && f > r.Max.Value {
		return &ValueError{Key: key, Value: FormatValue(value), Reason: "Value must be no more than " + r.Max.Text}
	}
	return nil
}

func (r Range) String() string {
	switch {
	case r.Min == nil && r.Max == nil:
		return "[...]"
	case r.Min == nil:
		return "[...," + r.Max.Text + "]"
	case r.Max == nil:
		return "[" + r.Min.Text + ",...]"
	}
	return "[" + r.Min.Text + ",...," + r.Max.Text + "]"
}

// OneOf is Kafka's ValidString (or CaseInsensitiveValidString when
// IgnoreCase): the value must be one of Values.
type OneOf struct {
	Values     []string
	IgnoreCase bool
}

func (o OneOf) Validate(key string, value any) error {
	s, _ := value.(string)
	for _, v := range o.Values {
		if s == v || (o.IgnoreCase && strings.EqualFold(s, v)) {
			return nil
		}
	}
	if o.IgnoreCase {
		return &ValueError{Key: key, Value: s, Reason: "String must be one of (case insensitive): " + strings.Join(o.Values, ", ")}
	}
	return &ValueError{Key: key, Value: s, Reason: "String must be one of: " + strings.Join(o.Values, ", ")}
}

func (o OneOf) String() string {
	if o.IgnoreCase {
		return "(case insensitive) " + formatJavaList(o.Values)
	}
	return formatJavaList(o.Values)
}

// ListOf is Kafka's ValidList: no duplicate and no empty items, optionally
// only items from Values, and an empty list only when AllowEmpty.
type ListOf struct {
	Values     []string
	AllowEmpty bool
}

func (l ListOf) Validate(key string, value any) error {
	items, _ := value.([]string)
	if !l.AllowEmpty && len(items) == 0 {
		valid := "any non-empty value"
		if len(l.Values) > 0 {
			valid = formatJavaList(l.Values)
		}
		return fmt.Errorf("Configuration '%s' must not be empty. Valid values include: %s", key, valid)
	}
	seen := make(map[string]bool, len(items))
	for _, it := range items {
		if seen[it] {
			return fmt.Errorf("Configuration '%s' values must not be duplicated.", key)
		}
		seen[it] = true
	}
	for _, it := range items {
		if it == "" {
			return fmt.Errorf("Configuration '%s' values must not be empty.", key)
		}
		if len(l.Values) > 0 {
			if err := (OneOf{Values: l.Values}).Validate(key, it); err != nil {
				return err
			}
		}
	}
	return nil
}

func (l ListOf) String() string {
	if len(l.Values) == 0 {
		return ""
	}
	return formatJavaList(l.Values)
}

// NonEmptyString refuses "" (a missing value is fine).
type NonEmptyString struct{}

func (NonEmptyString) Validate(key string, value any) error {
	if s, _ := value.(string); s == "" {
		return &ValueError{Key: key, Value: "", Reason: "String must be non-empty"}
	}
	return nil
}

func (NonEmptyString) String() string { return "non-empty string" }

// NonNullString accepts any string; Kafka only refuses a missing value,
// which a properties file cannot express.
type NonNullString struct{}

func (NonNullString) Validate(string, any) error { return nil }
func (NonNullString) String() string             { return "non-null string" }

// CustomValidator wraps a check that has no general form in Kafka (gzip
// level, throttled replica lists, quorum addresses).
type CustomValidator struct {
	Text  string
	Check func(key string, value any) error
}

func (c CustomValidator) Validate(key string, value any) error { return c.Check(key, value) }
func (c CustomValidator) String() string                       { return c.Text }

// SynonymUnit says how a broker synonym's value converts to the topic
// key's unit.
type SynonymUnit int8

const (
	SameUnit SynonymUnit = iota
	MinutesToMs
	HoursToMs
)

// BrokerSynonym is a broker key that supplies a topic key's default.
type BrokerSynonym struct {
	Name string
	Unit SynonymUnit
}

// ToTopicValue converts the synonym's raw broker value to the topic key's
// unit (hours and minutes become milliseconds).
func (s BrokerSynonym) ToTopicValue(raw string) (string, error) {
	if s.Unit == SameUnit {
		return raw, nil
	}
	n, err := parseJavaInteger(strings.TrimSpace(raw), 64)
	if err != nil {
		return "", &ValueError{Key: s.Name, Value: raw, Reason: "Not a number of type INT"}
	}
	factor := int64(60 * 1000)
	if s.Unit == HoursToMs {
		factor *= 60
	}
	return strconv.FormatInt(n*factor, 10), nil
}
