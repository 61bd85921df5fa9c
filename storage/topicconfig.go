package storage

// Topic-level config keys (Kafka's LogConfig): definitions, defaults, broker
// synonyms, validation, and building a LogConfig from them. The small typed
// config system here (ConfigKey, ParseConfigValue, the validators) is the
// one Kafka's ConfigDef has, written for Gregor; broker/config reuses it for
// the broker keys so that parsing, error messages and printed values match
// Kafka's everywhere, down to the text a client sees in INVALID_CONFIG.

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ConfigType is a config key's value type. The numbers are the ConfigType
// codes of DescribeConfigs v3+.
type ConfigType int8

const (
	ConfigTypeUnknown  ConfigType = 0
	ConfigTypeBoolean  ConfigType = 1
	ConfigTypeString   ConfigType = 2
	ConfigTypeInt      ConfigType = 3
	ConfigTypeShort    ConfigType = 4
	ConfigTypeLong     ConfigType = 5
	ConfigTypeDouble   ConfigType = 6
	ConfigTypeList     ConfigType = 7
	ConfigTypeClass    ConfigType = 8
	ConfigTypePassword ConfigType = 9
)

// String is the upper-case name Kafka uses in messages ("Not a number of
// type INT").
func (t ConfigType) String() string {
	switch t {
	case ConfigTypeBoolean:
		return "BOOLEAN"
	case ConfigTypeString:
		return "STRING"
	case ConfigTypeInt:
		return "INT"
	case ConfigTypeShort:
		return "SHORT"
	case ConfigTypeLong:
		return "LONG"
	case ConfigTypeDouble:
		return "DOUBLE"
	case ConfigTypeList:
		return "LIST"
	case ConfigTypeClass:
		return "CLASS"
	case ConfigTypePassword:
		return "PASSWORD"
	}
	return "UNKNOWN"
}

// ConfigKey describes one config key. Parsed values have these Go types:
// BOOLEAN bool, STRING/CLASS/PASSWORD string, INT int32, SHORT int16, LONG
// int64, DOUBLE float64, LIST []string.
type ConfigKey struct {
	Name string
	Type ConfigType
	// Default is the default as Kafka prints it (DescribeConfigs, docs).
	// It is meaningless when DefaultNull or Required is set.
	Default string
	// DefaultNull means the key has no value unless one is configured
	// (Kafka prints "null").
	DefaultNull bool
	// Required means there is no default at all: the key must be set.
	Required bool
	// Validator checks a parsed value; nil accepts anything of the type.
	Validator ConfigValidator
	// Doc is a one-line description (DescribeConfigs IncludeDocumentation).
	Doc string
	// Internal keys are accepted but not listed by DescribeConfigs.
	Internal bool
}

// HasValue reports whether the key has a value when nothing is configured.
func (k *ConfigKey) HasValue() bool { return !k.DefaultNull && !k.Required }

// Parse parses raw as Kafka does (surrounding whitespace trimmed) and runs
// the key's validator. Errors carry Kafka's message.
func (k *ConfigKey) Parse(raw string) (any, error) {
	v, err := ParseConfigValue(k.Name, k.Type, raw)
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
func (k *ConfigKey) Canonical(raw string) (string, error) {
	v, err := k.Parse(raw)
	if err != nil {
		return "", err
	}
	return FormatConfigValue(v), nil
}

// ConfigValueError is Kafka's ConfigException(name, value, message): "Invalid
// value V for configuration K: M".
type ConfigValueError struct {
	Key    string
	Value  string
	Reason string
}

func (e *ConfigValueError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("Invalid value %s for configuration %s", e.Value, e.Key)
	}
	return fmt.Sprintf("Invalid value %s for configuration %s: %s", e.Value, e.Key, e.Reason)
}

// listWhitespaceComma is the separator of LIST values: a comma with any
// whitespace around it.
var listWhitespaceComma = regexp.MustCompile(`\s*,\s*`)

// ParseConfigValue converts raw to the Go value of type t with Kafka's
// rules: surrounding whitespace is trimmed, booleans are case-insensitive,
// an empty LIST is an empty slice and list items are split on commas.
func ParseConfigValue(key string, t ConfigType, raw string) (any, error) {
	trimmed := strings.TrimSpace(raw)
	notNumber := func() error {
		return &ConfigValueError{Key: key, Value: raw, Reason: "Not a number of type " + t.String()}
	}
	switch t {
	case ConfigTypeBoolean:
		switch strings.ToLower(trimmed) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, &ConfigValueError{Key: key, Value: raw, Reason: "Expected value to be either true or false"}
	case ConfigTypeString, ConfigTypePassword, ConfigTypeClass:
		return trimmed, nil
	case ConfigTypeInt:
		n, err := parseJavaInteger(trimmed, 32)
		if err != nil {
			return nil, notNumber()
		}
		return int32(n), nil
	case ConfigTypeShort:
		n, err := parseJavaInteger(trimmed, 16)
		if err != nil {
			return nil, notNumber()
		}
		return int16(n), nil
	case ConfigTypeLong:
		n, err := parseJavaInteger(trimmed, 64)
		if err != nil {
			return nil, notNumber()
		}
		return n, nil
	case ConfigTypeDouble:
		f, err := parseJavaDouble(trimmed)
		if err != nil {
			return nil, notNumber()
		}
		return f, nil
	case ConfigTypeList:
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

// FormatConfigValue prints a parsed value as Kafka's ConfigDef does:
// doubles as Java's Double.toString, lists joined with commas.
func FormatConfigValue(v any) string {
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

// ConfigValidator checks a parsed value and describes the valid values as
// Kafka's documentation prints them.
type ConfigValidator interface {
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
		return &ConfigValueError{Key: key, Value: "null", Reason: "Value must be non-null"}
	}
	if r.Min != nil && f < r.Min.Value {
		return &ConfigValueError{Key: key, Value: FormatConfigValue(value), Reason: "Value must be at least " + r.Min.Text}
	}
	if r.Max != nil && f > r.Max.Value {
		return &ConfigValueError{Key: key, Value: FormatConfigValue(value), Reason: "Value must be no more than " + r.Max.Text}
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
		return &ConfigValueError{Key: key, Value: s, Reason: "String must be one of (case insensitive): " + strings.Join(o.Values, ", ")}
	}
	return &ConfigValueError{Key: key, Value: s, Reason: "String must be one of: " + strings.Join(o.Values, ", ")}
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
		return &ConfigValueError{Key: key, Value: "", Reason: "String must be non-empty"}
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

// GzipLevel is the validator of compression.gzip.level: 1 to 9, or -1 for
// the codec's own default.
var gzipLevelValidator = CustomValidator{
	Text: "[1,...,9] or -1",
	Check: func(key string, value any) error {
		level, _ := value.(int32)
		if level > 9 || (level < 1 && level != -1) {
			return &ConfigValueError{Key: key, Value: FormatConfigValue(value), Reason: "Value must be between 1 and 9 or equal to -1"}
		}
		return nil
	},
}

// throttledReplicasPattern is one item of a throttled replica list:
// partition:broker, or empty.
var throttledReplicasPattern = regexp.MustCompile(`^([0-9]+:[0-9]+)?$`)

var throttledReplicasValidator = CustomValidator{
	Text: "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
	Check: func(key string, value any) error {
		items, _ := value.([]string)
		if strings.Join(items, "") == "*" {
			return nil
		}
		for _, it := range items {
			if !throttledReplicasPattern.MatchString(strings.TrimSpace(it)) {
				return &ConfigValueError{Key: key, Value: formatJavaList(items),
					Reason: key + " must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."}
			}
		}
		return nil
	},
}

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
		return "", &ConfigValueError{Key: s.Name, Value: raw, Reason: "Not a number of type INT"}
	}
	factor := int64(60 * 1000)
	if s.Unit == HoursToMs {
		factor *= 60
	}
	return strconv.FormatInt(n*factor, 10), nil
}

// TopicConfigDef is a topic-level config key with the broker keys that
// supply its default, highest precedence first (the order DescribeConfigs
// lists them as synonyms).
type TopicConfigDef struct {
	ConfigKey
	Synonyms []BrokerSynonym
}

const maxInt64Text = "9223372036854775807"

func same(names ...string) []BrokerSynonym {
	out := make([]BrokerSynonym, len(names))
	for i, n := range names {
		out[i] = BrokerSynonym{Name: n}
	}
	return out
}

// topicConfigDefs returns Kafka 4.3's topic-level keys (LogConfig), sorted
// by name. It builds a fresh table on every call so that no caller can
// change another's view.
func topicConfigDefs() []TopicConfigDef {
	return []TopicConfigDef{
		{ConfigKey{Name: "cleanup.policy", Type: ConfigTypeList, Default: "delete",
			Validator: ListOf{Values: []string{"compact", "delete"}, AllowEmpty: true},
			Doc:       "What happens to old segments: \"delete\" removes them past the retention limits, \"compact\" keeps the last record per key; both may be given, and an empty list keeps everything forever."},
			same("log.cleanup.policy")},
		{ConfigKey{Name: "compression.gzip.level", Type: ConfigTypeInt, Default: "-1", Validator: gzipLevelValidator,
			Doc: "Level used when the topic's compression.type is gzip."},
			same("compression.gzip.level")},
		{ConfigKey{Name: "compression.lz4.level", Type: ConfigTypeInt, Default: "9", Validator: Between(1, 17),
			Doc: "Level used when the topic's compression.type is lz4."},
			same("compression.lz4.level")},
		{ConfigKey{Name: "compression.type", Type: ConfigTypeString, Default: "producer",
			Validator: OneOf{Values: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
			Doc:       "Codec the broker stores batches with: one of gzip, snappy, lz4, zstd, uncompressed, or producer to keep whatever the producer used."},
			same("compression.type")},
		{ConfigKey{Name: "compression.zstd.level", Type: ConfigTypeInt, Default: "3", Validator: Between(-131072, 22),
			Doc: "Level used when the topic's compression.type is zstd."},
			same("compression.zstd.level")},
		{ConfigKey{Name: "delete.retention.ms", Type: ConfigTypeLong, Default: "86400000", Validator: AtLeast(0),
			Doc: "How long tombstones stay in a compacted topic; a consumer reading from the start must finish within this time to see every delete."},
			same("log.cleaner.delete.retention.ms")},
		{ConfigKey{Name: "file.delete.delay.ms", Type: ConfigTypeLong, Default: "60000", Validator: AtLeast(0),
			Doc: "Delay between marking a segment deleted and removing its files."},
			same("log.segment.delete.delay.ms")},
		{ConfigKey{Name: "flush.messages", Type: ConfigTypeLong, Default: maxInt64Text, Validator: AtLeast(1),
			Doc: "Force an fsync after this many records; normally left alone, replication gives durability."},
			same("log.flush.interval.messages")},
		{ConfigKey{Name: "flush.ms", Type: ConfigTypeLong, Default: maxInt64Text, Validator: AtLeast(0),
			Doc: "Force an fsync when the oldest unflushed record is this old; checked every log.flush.scheduler.interval.ms."},
			same("log.flush.interval.ms", "log.flush.scheduler.interval.ms")},
		{ConfigKey{Name: "follower.replication.throttled.replicas", Type: ConfigTypeList, Default: "", Validator: throttledReplicasValidator,
			Doc: "Replicas (partition:broker pairs, or *) whose follower-side replication is throttled."},
			nil},
		{ConfigKey{Name: "index.interval.bytes", Type: ConfigTypeInt, Default: "4096", Validator: AtLeast(0),
			Doc: "Bytes of log between two entries of the offset index (and, when timestamps grow, the time index)."},
			same("log.index.interval.bytes")},
		{ConfigKey{Name: "internal.segment.bytes", Type: ConfigTypeInt, DefaultNull: true, Internal: true,
			Doc: "Segment size that bypasses the segment.bytes minimum; for tests only."},
			nil},
		{ConfigKey{Name: "leader.replication.throttled.replicas", Type: ConfigTypeList, Default: "", Validator: throttledReplicasValidator,
			Doc: "Replicas (partition:broker pairs, or *) whose leader-side replication is throttled."},
			nil},
		{ConfigKey{Name: "local.retention.bytes", Type: ConfigTypeLong, Default: "-2", Validator: AtLeast(-2),
			Doc: "With tiered storage, the most bytes of a partition kept on local disk; -2 means use retention.bytes."},
			same("log.local.retention.bytes")},
		{ConfigKey{Name: "local.retention.ms", Type: ConfigTypeLong, Default: "-2", Validator: AtLeast(-2),
			Doc: "With tiered storage, how long segments stay on local disk; -2 means use retention.ms."},
			same("log.local.retention.ms")},
		{ConfigKey{Name: "max.compaction.lag.ms", Type: ConfigTypeLong, Default: maxInt64Text, Validator: AtLeast(1),
			Doc: "Longest time a record may wait before it becomes eligible for compaction."},
			same("log.cleaner.max.compaction.lag.ms")},
		{ConfigKey{Name: "max.message.bytes", Type: ConfigTypeInt, Default: "1048588", Validator: AtLeast(0),
			Doc: "Largest record batch the topic accepts, measured after compression."},
			same("message.max.bytes")},
		{ConfigKey{Name: "message.timestamp.after.max.ms", Type: ConfigTypeLong, Default: "3600000", Validator: AtLeast(0),
			Doc: "With CreateTime, how far a record's timestamp may be ahead of the broker's clock before the batch is refused."},
			same("log.message.timestamp.after.max.ms")},
		{ConfigKey{Name: "message.timestamp.before.max.ms", Type: ConfigTypeLong, Default: maxInt64Text, Validator: AtLeast(0),
			Doc: "With CreateTime, how far a record's timestamp may lag the broker's clock before the batch is refused."},
			same("log.message.timestamp.before.max.ms")},
		{ConfigKey{Name: "message.timestamp.type", Type: ConfigTypeString, Default: "CreateTime",
			Validator: OneOf{Values: []string{"CreateTime", "LogAppendTime"}},
			Doc:       "Whether record timestamps are the producer's (CreateTime) or stamped by the broker on append (LogAppendTime)."},
			same("log.message.timestamp.type")},
		{ConfigKey{Name: "min.cleanable.dirty.ratio", Type: ConfigTypeDouble, Default: "0.5",
			Validator: Range{Min: IntBound(0), Max: IntBound(1)},
			Doc:       "Share of uncompacted log that makes a partition eligible for cleaning; the compaction lag settings bound it in time."},
			same("log.cleaner.min.cleanable.ratio")},
		{ConfigKey{Name: "min.compaction.lag.ms", Type: ConfigTypeLong, Default: "0", Validator: AtLeast(0),
			Doc: "Shortest time a record stays uncompacted."},
			same("log.cleaner.min.compaction.lag.ms")},
		{ConfigKey{Name: "min.insync.replicas", Type: ConfigTypeInt, Default: "1", Validator: AtLeast(1),
			Doc: "Fewest in-sync replicas (leader included) that must hold a write before an acks=all produce succeeds."},
			same("min.insync.replicas")},
		{ConfigKey{Name: "preallocate", Type: ConfigTypeBoolean, Default: "false",
			Doc: "Reserve a new segment's full size on disk when it is created."},
			same("log.preallocate")},
		{ConfigKey{Name: "remote.log.copy.disable", Type: ConfigTypeBoolean, Default: "false",
			Doc: "Stop uploading to tiered storage and treat the tiered data as read-only; retention then follows retention.ms/bytes."},
			nil},
		{ConfigKey{Name: "remote.log.delete.on.disable", Type: ConfigTypeBoolean, Default: "false",
			Doc: "Delete the tiered data when tiered storage is turned off for the topic."},
			nil},
		{ConfigKey{Name: "remote.storage.enable", Type: ConfigTypeBoolean, Default: "false",
			Doc: "Keep this topic's older segments in tiered (remote) storage."},
			nil},
		{ConfigKey{Name: "retention.bytes", Type: ConfigTypeLong, Default: "-1",
			Doc: "Largest size a partition may grow to before old segments are deleted (delete policy); -1 means no size limit."},
			same("log.retention.bytes")},
		{ConfigKey{Name: "retention.ms", Type: ConfigTypeLong, Default: "604800000", Validator: AtLeast(-1),
			Doc: "How long records are kept before their segment is deleted (delete policy); -1 means forever."},
			[]BrokerSynonym{{Name: "log.retention.ms"}, {Name: "log.retention.minutes", Unit: MinutesToMs}, {Name: "log.retention.hours", Unit: HoursToMs}}},
		{ConfigKey{Name: "segment.bytes", Type: ConfigTypeInt, Default: "1073741824", Validator: AtLeast(1048576),
			Doc: "Size at which the active segment is rolled; retention and compaction work a whole segment at a time."},
			same("log.segment.bytes")},
		{ConfigKey{Name: "segment.index.bytes", Type: ConfigTypeInt, Default: "10485760", Validator: AtLeast(4),
			Doc: "Size preallocated for a segment's offset and time index files."},
			same("log.index.size.max.bytes")},
		{ConfigKey{Name: "segment.jitter.ms", Type: ConfigTypeLong, Default: "0", Validator: AtLeast(0),
			Doc: "Random amount taken off segment.ms per segment so that partitions do not all roll at once."},
			[]BrokerSynonym{{Name: "log.roll.jitter.ms"}, {Name: "log.roll.jitter.hours", Unit: HoursToMs}}},
		{ConfigKey{Name: "segment.ms", Type: ConfigTypeLong, Default: "604800000", Validator: AtLeast(1),
			Doc: "Age at which the active segment is rolled even if not full, so that retention can act on it."},
			[]BrokerSynonym{{Name: "log.roll.ms"}, {Name: "log.roll.hours", Unit: HoursToMs}}},
		{ConfigKey{Name: "unclean.leader.election.enable", Type: ConfigTypeBoolean, Default: "false",
			Doc: "Allow a replica outside the ISR to become leader as a last resort, at the risk of losing acknowledged data."},
			same("unclean.leader.election.enable")},
	}
}

// TopicConfigDefs returns every topic-level config key of Kafka 4.3 sorted
// by name, internal ones included.
func TopicConfigDefs() []TopicConfigDef { return topicConfigDefs() }

// LookupTopicConfig returns the definition of a topic-level key.
func LookupTopicConfig(name string) (TopicConfigDef, bool) {
	for _, d := range topicConfigDefs() {
		if d.Name == name {
			return d, true
		}
	}
	return TopicConfigDef{}, false
}

// UnknownTopicConfigError is Kafka's InvalidConfigurationException for a
// key that is not a topic config.
type UnknownTopicConfigError struct{ Name string }

func (e *UnknownTopicConfigError) Error() string { return "Unknown topic config name: " + e.Name }

// ValidateTopicConfigs checks a topic's complete set of overrides as Kafka's
// LogConfig.validate does: every name must be a topic key, every value must
// parse and pass its validator, and min.compaction.lag.ms may not exceed
// max.compaction.lag.ms once the overrides sit on top of base (the
// broker-derived topic defaults, keyed by topic name; nil means Kafka's
// defaults). Keys are checked in sorted order so the error is stable.
func ValidateTopicConfigs(base, overrides map[string]string) error {
	defs := topicConfigDefs()
	byName := make(map[string]*TopicConfigDef, len(defs))
	for i := range defs {
		byName[defs[i].Name] = &defs[i]
	}
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if byName[name] == nil {
			return &UnknownTopicConfigError{Name: name}
		}
	}
	for _, name := range names {
		if _, err := byName[name].Parse(overrides[name]); err != nil {
			return err
		}
	}
	lag := func(key string) (int64, error) {
		raw, ok := overrides[key]
		if !ok {
			raw, ok = base[key]
		}
		if !ok {
			raw = byName[key].Default
		}
		v, err := byName[key].Parse(raw)
		if err != nil {
			return 0, err
		}
		return v.(int64), nil
	}
	minLag, err := lag("min.compaction.lag.ms")
	if err != nil {
		return err
	}
	maxLag, err := lag("max.compaction.lag.ms")
	if err != nil {
		return err
	}
	if minLag > maxLag {
		return fmt.Errorf("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)", minLag, maxLag)
	}
	return nil
}

// TopicDefaultsFromBroker computes the topic-keyed defaults a broker gives
// its topics, as Kafka's KafkaConfig.extractLogConfigMap does: for each
// topic key, the first of its broker synonyms that has a value (brokerValue
// reports the broker's effective value, its own default included, and
// false when the key is null), converted to the topic key's unit. Keys with
// no synonym set are left out, so the topic default applies.
func TopicDefaultsFromBroker(brokerValue func(brokerKey string) (string, bool)) (map[string]string, error) {
	out := make(map[string]string)
	for _, d := range topicConfigDefs() {
		for _, syn := range d.Synonyms {
			raw, ok := brokerValue(syn.Name)
			if !ok {
				continue
			}
			v, err := syn.ToTopicValue(raw)
			if err != nil {
				return nil, err
			}
			canonical, err := ParseConfigValue(d.Name, d.Type, v)
			if err != nil {
				return nil, fmt.Errorf("deriving %s from broker config %s: %w", d.Name, syn.Name, err)
			}
			text := FormatConfigValue(canonical)
			// Kafka reports any negative broker retention time as -1.
			if d.Name == "retention.ms" && canonical.(int64) < 0 {
				text = "-1"
			}
			out[d.Name] = text
			break
		}
	}
	return out, nil
}

// BuildLogConfig returns the effective LogConfig of a topic: overrides on
// top of base (broker-derived defaults keyed by topic name, see
// TopicDefaultsFromBroker) on top of Kafka's topic defaults. Values are
// validated; unknown override names are an error.
func BuildLogConfig(base, overrides map[string]string) (LogConfig, error) {
	if err := ValidateTopicConfigs(base, overrides); err != nil {
		return LogConfig{}, err
	}
	values := make(map[string]any)
	for _, d := range topicConfigDefs() {
		raw, ok := overrides[d.Name]
		if !ok {
			raw, ok = base[d.Name]
		}
		if !ok {
			if !d.HasValue() {
				continue
			}
			raw = d.Default
		}
		v, err := d.Parse(raw)
		if err != nil {
			return LogConfig{}, fmt.Errorf("topic config %s from broker defaults: %w", d.Name, err)
		}
		values[d.Name] = v
	}
	i32 := func(k string) int32 { return values[k].(int32) }
	i64 := func(k string) int64 { return values[k].(int64) }
	flag := func(k string) bool { return values[k].(bool) }
	list := func(k string) []string {
		if l := values[k].([]string); len(l) > 0 {
			return l
		}
		return nil
	}

	lc := LogConfig{
		SegmentBytes:                i32("segment.bytes"),
		SegmentMs:                   i64("segment.ms"),
		SegmentJitterMs:             i64("segment.jitter.ms"),
		SegmentIndexBytes:           i32("segment.index.bytes"),
		IndexIntervalBytes:          i32("index.interval.bytes"),
		FlushMessages:               i64("flush.messages"),
		FlushMs:                     i64("flush.ms"),
		RetentionBytes:              i64("retention.bytes"),
		RetentionMs:                 i64("retention.ms"),
		DeleteRetentionMs:           i64("delete.retention.ms"),
		FileDeleteDelayMs:           i64("file.delete.delay.ms"),
		MinCompactionLagMs:          i64("min.compaction.lag.ms"),
		MaxCompactionLagMs:          i64("max.compaction.lag.ms"),
		MinCleanableRatio:           values["min.cleanable.dirty.ratio"].(float64),
		MaxMessageBytes:             i32("max.message.bytes"),
		LogAppendTime:               values["message.timestamp.type"].(string) == "LogAppendTime",
		MessageTimestampBeforeMaxMs: i64("message.timestamp.before.max.ms"),
		MessageTimestampAfterMaxMs:  i64("message.timestamp.after.max.ms"),
		MinInsyncReplicas:           i32("min.insync.replicas"),
		CompressionType:             values["compression.type"].(string),
		Preallocate:                 flag("preallocate"),

		CompressionGzipLevel:                 i32("compression.gzip.level"),
		CompressionLz4Level:                  i32("compression.lz4.level"),
		CompressionZstdLevel:                 i32("compression.zstd.level"),
		UncleanLeaderElectionEnable:          flag("unclean.leader.election.enable"),
		LocalRetentionBytes:                  i64("local.retention.bytes"),
		LocalRetentionMs:                     i64("local.retention.ms"),
		RemoteStorageEnable:                  flag("remote.storage.enable"),
		RemoteLogCopyDisable:                 flag("remote.log.copy.disable"),
		RemoteLogDeleteOnDisable:             flag("remote.log.delete.on.disable"),
		LeaderReplicationThrottledReplicas:   list("leader.replication.throttled.replicas"),
		FollowerReplicationThrottledReplicas: list("follower.replication.throttled.replicas"),
	}
	for _, p := range list("cleanup.policy") {
		switch p {
		case "compact":
			lc.Compact = true
		case "delete":
			lc.Delete = true
		}
	}
	// internal.segment.bytes lets tests go below segment.bytes' minimum.
	if v, ok := values["internal.segment.bytes"]; ok {
		lc.SegmentBytes = v.(int32)
	}
	return lc, nil
}

// GzipLevelValidator is the validator of compression.gzip.level, which the
// broker key of the same name shares.
func GzipLevelValidator() ConfigValidator { return gzipLevelValidator }
