package config

// Topic-level config keys (Kafka's LogConfig): definitions, defaults, broker
// synonyms, validation, and building the effective Topic configuration
// from them.

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// gzipLevelValidator is the validator of compression.gzip.level: 1 to 9, or -1 for
// the codec's own default.
var gzipLevelValidator = CustomValidator{
	Text: "[1,...,9] or -1",
	Check: func(key string, value any) error {
		level, _ := value.(int32)
		if level > 9 || (level < 1 && level != -1) {
			return &ValueError{Key: key, Value: FormatValue(value), Reason: "Value must be between 1 and 9 or equal to -1"}
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
				return &ValueError{Key: key, Value: formatJavaList(items),
					Reason: key + " must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."}
			}
		}
		return nil
	},
}

// TopicKey is a topic-level config key with the broker keys that
// supply its default, highest precedence first (the order DescribeConfigs
// lists them as synonyms).
type TopicKey struct {
	Key
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

// topicKeys returns Kafka 4.3's topic-level keys (LogConfig), sorted
// by name. It builds a fresh table on every call so that no caller can
// change another's view.
func topicKeys() []TopicKey {
	return []TopicKey{
		{Key{Name: "cleanup.policy", Type: TypeList, Default: "delete",
			Validator: ListOf{Values: []string{"compact", "delete"}, AllowEmpty: true},
			Doc:       "What happens to old segments: \"delete\" removes them past the retention limits, \"compact\" keeps the last record per key; both may be given, and an empty list keeps everything forever."},
			same("log.cleanup.policy")},
		{Key{Name: "compression.gzip.level", Type: TypeInt, Default: "-1", Validator: gzipLevelValidator,
			Doc: "Level used when the topic's compression.type is gzip."},
			same("compression.gzip.level")},
		{Key{Name: "compression.lz4.level", Type: TypeInt, Default: "9", Validator: Between(1, 17),
			Doc: "Level used when the topic's compression.type is lz4."},
			same("compression.lz4.level")},
		{Key{Name: "compression.type", Type: TypeString, Default: "producer",
			Validator: OneOf{Values: []string{"uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"}},
			Doc:       "Codec the broker stores batches with: one of gzip, snappy, lz4, zstd, uncompressed, or producer to keep whatever the producer used."},
			same("compression.type")},
		{Key{Name: "compression.zstd.level", Type: TypeInt, Default: "3", Validator: Between(-131072, 22),
			Doc: "Level used when the topic's compression.type is zstd."},
			same("compression.zstd.level")},
		{Key{Name: "delete.retention.ms", Type: TypeLong, Default: "86400000", Validator: AtLeast(0),
			Doc: "How long tombstones stay in a compacted topic; a consumer reading from the start must finish within this time to see every delete."},
			same("log.cleaner.delete.retention.ms")},
		{Key{Name: "file.delete.delay.ms", Type: TypeLong, Default: "60000", Validator: AtLeast(0),
			Doc: "Delay between marking a segment deleted and removing its files."},
			same("log.segment.delete.delay.ms")},
		{Key{Name: "flush.messages", Type: TypeLong, Default: maxInt64Text, Validator: AtLeast(1),
			Doc: "Force an fsync after this many records; normally left alone, replication gives durability."},
			same("log.flush.interval.messages")},
		{Key{Name: "flush.ms", Type: TypeLong, Default: maxInt64Text, Validator: AtLeast(0),
			Doc: "Force an fsync when the oldest unflushed record is this old; checked every log.flush.scheduler.interval.ms."},
			same("log.flush.interval.ms", "log.flush.scheduler.interval.ms")},
		{Key{Name: "follower.replication.throttled.replicas", Type: TypeList, Default: "", Validator: throttledReplicasValidator,
			Doc: "Replicas (partition:broker pairs, or *) whose follower-side replication is throttled."},
			nil},
		{Key{Name: "index.interval.bytes", Type: TypeInt, Default: "4096", Validator: AtLeast(0),
			Doc: "Bytes of log between two entries of the offset index (and, when timestamps grow, the time index)."},
			same("log.index.interval.bytes")},
		{Key{Name: "internal.segment.bytes", Type: TypeInt, DefaultNull: true, Internal: true,
			Doc: "Segment size that bypasses the segment.bytes minimum; for tests only."},
			nil},
		{Key{Name: "leader.replication.throttled.replicas", Type: TypeList, Default: "", Validator: throttledReplicasValidator,
			Doc: "Replicas (partition:broker pairs, or *) whose leader-side replication is throttled."},
			nil},
		{Key{Name: "local.retention.bytes", Type: TypeLong, Default: "-2", Validator: AtLeast(-2),
			Doc: "With tiered storage, the most bytes of a partition kept on local disk; -2 means use retention.bytes."},
			same("log.local.retention.bytes")},
		{Key{Name: "local.retention.ms", Type: TypeLong, Default: "-2", Validator: AtLeast(-2),
			Doc: "With tiered storage, how long segments stay on local disk; -2 means use retention.ms."},
			same("log.local.retention.ms")},
		{Key{Name: "max.compaction.lag.ms", Type: TypeLong, Default: maxInt64Text, Validator: AtLeast(1),
			Doc: "Longest time a record may wait before it becomes eligible for compaction."},
			same("log.cleaner.max.compaction.lag.ms")},
		{Key{Name: "max.message.bytes", Type: TypeInt, Default: "1048588", Validator: AtLeast(0),
			Doc: "Largest record batch the topic accepts, measured after compression."},
			same("message.max.bytes")},
		{Key{Name: "message.timestamp.after.max.ms", Type: TypeLong, Default: "3600000", Validator: AtLeast(0),
			Doc: "With CreateTime, how far a record's timestamp may be ahead of the broker's clock before the batch is refused."},
			same("log.message.timestamp.after.max.ms")},
		{Key{Name: "message.timestamp.before.max.ms", Type: TypeLong, Default: maxInt64Text, Validator: AtLeast(0),
			Doc: "With CreateTime, how far a record's timestamp may lag the broker's clock before the batch is refused."},
			same("log.message.timestamp.before.max.ms")},
		{Key{Name: "message.timestamp.type", Type: TypeString, Default: "CreateTime",
			Validator: OneOf{Values: []string{"CreateTime", "LogAppendTime"}},
			Doc:       "Whether record timestamps are the producer's (CreateTime) or stamped by the broker on append (LogAppendTime)."},
			same("log.message.timestamp.type")},
		{Key{Name: "min.cleanable.dirty.ratio", Type: TypeDouble, Default: "0.5",
			Validator: Range{Min: IntBound(0), Max: IntBound(1)},
			Doc:       "Share of uncompacted log that makes a partition eligible for cleaning; the compaction lag settings bound it in time."},
			same("log.cleaner.min.cleanable.ratio")},
		{Key{Name: "min.compaction.lag.ms", Type: TypeLong, Default: "0", Validator: AtLeast(0),
			Doc: "Shortest time a record stays uncompacted."},
			same("log.cleaner.min.compaction.lag.ms")},
		{Key{Name: "min.insync.replicas", Type: TypeInt, Default: "1", Validator: AtLeast(1),
			Doc: "Fewest in-sync replicas (leader included) that must hold a write before an acks=all produce succeeds."},
			same("min.insync.replicas")},
		{Key{Name: "preallocate", Type: TypeBoolean, Default: "false",
			Doc: "Reserve a new segment's full size on disk when it is created."},
			same("log.preallocate")},
		{Key{Name: "remote.log.copy.disable", Type: TypeBoolean, Default: "false",
			Doc: "Stop uploading to tiered storage and treat the tiered data as read-only; retention then follows retention.ms/bytes."},
			nil},
		{Key{Name: "remote.log.delete.on.disable", Type: TypeBoolean, Default: "false",
			Doc: "Delete the tiered data when tiered storage is turned off for the topic."},
			nil},
		{Key{Name: "remote.storage.enable", Type: TypeBoolean, Default: "false",
			Doc: "Keep this topic's older segments in tiered (remote) storage."},
			nil},
		{Key{Name: "retention.bytes", Type: TypeLong, Default: "-1",
			Doc: "Largest size a partition may grow to before old segments are deleted (delete policy); -1 means no size limit."},
			same("log.retention.bytes")},
		{Key{Name: "retention.ms", Type: TypeLong, Default: "604800000", Validator: AtLeast(-1),
			Doc: "How long records are kept before their segment is deleted (delete policy); -1 means forever."},
			[]BrokerSynonym{{Name: "log.retention.ms"}, {Name: "log.retention.minutes", Unit: MinutesToMs}, {Name: "log.retention.hours", Unit: HoursToMs}}},
		{Key{Name: "segment.bytes", Type: TypeInt, Default: "1073741824", Validator: AtLeast(1048576),
			Doc: "Size at which the active segment is rolled; retention and compaction work a whole segment at a time."},
			same("log.segment.bytes")},
		{Key{Name: "segment.index.bytes", Type: TypeInt, Default: "10485760", Validator: AtLeast(4),
			Doc: "Size preallocated for a segment's offset and time index files."},
			same("log.index.size.max.bytes")},
		{Key{Name: "segment.jitter.ms", Type: TypeLong, Default: "0", Validator: AtLeast(0),
			Doc: "Random amount taken off segment.ms per segment so that partitions do not all roll at once."},
			[]BrokerSynonym{{Name: "log.roll.jitter.ms"}, {Name: "log.roll.jitter.hours", Unit: HoursToMs}}},
		{Key{Name: "segment.ms", Type: TypeLong, Default: "604800000", Validator: AtLeast(1),
			Doc: "Age at which the active segment is rolled even if not full, so that retention can act on it."},
			[]BrokerSynonym{{Name: "log.roll.ms"}, {Name: "log.roll.hours", Unit: HoursToMs}}},
		{Key{Name: "unclean.leader.election.enable", Type: TypeBoolean, Default: "false",
			Doc: "Allow a replica outside the ISR to become leader as a last resort, at the risk of losing acknowledged data."},
			same("unclean.leader.election.enable")},
	}
}

// TopicKeys returns every topic-level config key of Kafka 4.3 sorted
// by name, internal ones included.
func TopicKeys() []TopicKey { return topicKeys() }

// LookupTopicKey returns the definition of a topic-level key.
func LookupTopicKey(name string) (TopicKey, bool) {
	for _, d := range topicKeys() {
		if d.Name == name {
			return d, true
		}
	}
	return TopicKey{}, false
}

// UnknownTopicKeyError is Kafka's InvalidConfigurationException for a
// key that is not a topic config.
type UnknownTopicKeyError struct{ Name string }

func (e *UnknownTopicKeyError) Error() string { return "Unknown topic config name: " + e.Name }

// topicKeysByName indexes the topic keys by name.
func topicKeysByName() map[string]*TopicKey {
	defs := topicKeys()
	byName := make(map[string]*TopicKey, len(defs))
	for i := range defs {
		byName[defs[i].Name] = &defs[i]
	}
	return byName
}

// effectiveTopicValue is key's value in overrides, else in base (the
// broker-derived defaults), else the key's default, parsed.
func effectiveTopicValue(byName map[string]*TopicKey, base, overrides map[string]string, key string) (any, error) {
	raw, ok := overrides[key]
	if !ok {
		raw, ok = base[key]
	}
	if !ok {
		raw = byName[key].Default
	}
	return byName[key].Parse(raw)
}

// ValidateTopic checks a topic's complete set of overrides as Kafka's
// LogConfig.validate does: every name must be a topic key, every value must
// parse and pass its validator, and min.compaction.lag.ms may not exceed
// max.compaction.lag.ms once the overrides sit on top of base (the
// broker-derived topic defaults, keyed by topic name; nil means Kafka's
// defaults). Keys are checked in sorted order so the error is stable.
func ValidateTopic(base, overrides map[string]string) error {
	byName := topicKeysByName()
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if byName[name] == nil {
			return &UnknownTopicKeyError{Name: name}
		}
	}
	for _, name := range names {
		if _, err := byName[name].Parse(overrides[name]); err != nil {
			return err
		}
	}
	lag := func(key string) (int64, error) {
		v, err := effectiveTopicValue(byName, base, overrides, key)
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
	for _, d := range topicKeys() {
		for _, syn := range d.Synonyms {
			raw, ok := brokerValue(syn.Name)
			if !ok {
				continue
			}
			v, err := syn.ToTopicValue(raw)
			if err != nil {
				return nil, err
			}
			canonical, err := ParseValue(d.Name, d.Type, v)
			if err != nil {
				return nil, fmt.Errorf("deriving %s from broker config %s: %w", d.Name, syn.Name, err)
			}
			text := FormatValue(canonical)
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

// BuildTopic returns a topic's effective configuration: overrides on
// top of base (broker-derived defaults keyed by topic name, see
// TopicDefaultsFromBroker) on top of Kafka's topic defaults. Values are
// validated; unknown override names are an error.
func BuildTopic(base, overrides map[string]string) (Topic, error) {
	if err := ValidateTopic(base, overrides); err != nil {
		return Topic{}, err
	}
	values := make(map[string]any)
	for _, d := range topicKeys() {
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
			return Topic{}, fmt.Errorf("topic config %s from broker defaults: %w", d.Name, err)
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

	lc := Topic{
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
func GzipLevelValidator() Validator { return gzipLevelValidator }

// Topic is the effective topic-level configuration of one partition's
// log (Kafka's LogConfig): the topic's overrides on top of the broker's
// log.* defaults. Field comments name the Kafka topic key; BuildTopic
// fills it from the key table above.
type Topic struct {
	SegmentBytes       int32 // segment.bytes
	SegmentMs          int64 // segment.ms
	SegmentJitterMs    int64 // segment.jitter.ms
	SegmentIndexBytes  int32 // segment.index.bytes
	IndexIntervalBytes int32 // index.interval.bytes
	FlushMessages      int64 // flush.messages
	FlushMs            int64 // flush.ms
	RetentionBytes     int64 // retention.bytes
	RetentionMs        int64 // retention.ms
	DeleteRetentionMs  int64 // delete.retention.ms
	FileDeleteDelayMs  int64 // file.delete.delay.ms
	MinCompactionLagMs int64 // min.compaction.lag.ms
	MaxCompactionLagMs int64 // max.compaction.lag.ms
	MinCleanableRatio  float64
	Compact            bool // cleanup.policy contains compact
	Delete             bool // cleanup.policy contains delete
	MaxMessageBytes    int32
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime               bool
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	MinInsyncReplicas           int32
	CompressionType             string // producer, uncompressed, gzip, snappy, lz4, zstd
	Preallocate                 bool

	// Each field below is the topic key in its comment.
	CompressionGzipLevel                 int32    // compression.gzip.level
	CompressionLz4Level                  int32    // compression.lz4.level
	CompressionZstdLevel                 int32    // compression.zstd.level
	UncleanLeaderElectionEnable          bool     // unclean.leader.election.enable
	LocalRetentionBytes                  int64    // local.retention.bytes (-2: use RetentionBytes)
	LocalRetentionMs                     int64    // local.retention.ms (-2: use RetentionMs)
	RemoteStorageEnable                  bool     // remote.storage.enable
	RemoteLogCopyDisable                 bool     // remote.log.copy.disable
	RemoteLogDeleteOnDisable             bool     // remote.log.delete.on.disable
	LeaderReplicationThrottledReplicas   []string // leader.replication.throttled.replicas
	FollowerReplicationThrottledReplicas []string // follower.replication.throttled.replicas
}

// DefaultTopic is Kafka 4.3's default topic configuration.
func DefaultTopic() Topic {
	return Topic{
		SegmentBytes:                1 << 30,
		SegmentMs:                   7 * 24 * 3600 * 1000,
		SegmentIndexBytes:           10 << 20,
		IndexIntervalBytes:          4096,
		FlushMessages:               1<<63 - 1,
		FlushMs:                     1<<63 - 1,
		RetentionBytes:              -1,
		RetentionMs:                 7 * 24 * 3600 * 1000,
		DeleteRetentionMs:           24 * 3600 * 1000,
		FileDeleteDelayMs:           60000,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          1<<63 - 1,
		MinCleanableRatio:           0.5,
		Delete:                      true,
		MaxMessageBytes:             1048588,
		MessageTimestampBeforeMaxMs: 1<<63 - 1,
		MessageTimestampAfterMaxMs:  3600 * 1000,
		MinInsyncReplicas:           1,
		CompressionType:             "producer",
		CompressionGzipLevel:        -1,
		CompressionLz4Level:         9,
		CompressionZstdLevel:        3,
		LocalRetentionBytes:         -2,
		LocalRetentionMs:            -2,
	}
}

// ValidateTopicRemote is Kafka's tiered storage checks of a topic's
// configs (LogConfig.validateTopicLogConfigValues), on overrides over base
// as ValidateTopic takes them: remote.storage.enable only when the broker
// has remote.log.storage.system.enable, never on a compacted topic,
// local.retention.* within retention.*, equal to them when
// remote.log.copy.disable is set; and, for a change (before is the
// topic's overrides before it, nil for a new topic), remote storage turned
// off only with remote.log.delete.on.disable. Call it after ValidateTopic.
func ValidateTopicRemote(base, overrides map[string]string, systemEnabled bool, before map[string]string) error {
	byName := topicKeysByName()
	value := func(m map[string]string, key string) any {
		v, err := effectiveTopicValue(byName, base, m, key)
		if err != nil {
			// ValidateTopic refused what does not parse; an old
			// override that no longer does counts as the default.
			v, _ = byName[key].Parse(byName[key].Default)
		}
		return v
	}
	long := func(key string) int64 { return value(overrides, key).(int64) }
	flag := func(m map[string]string, key string) bool { return value(m, key).(bool) }
	if !flag(overrides, "remote.storage.enable") {
		if before != nil && flag(before, "remote.storage.enable") && !flag(overrides, "remote.log.delete.on.disable") {
			return fmt.Errorf("It is invalid to disable remote storage without deleting remote data. " +
				"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
				"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
		}
		return nil
	}
	if !systemEnabled {
		return fmt.Errorf("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	for _, p := range value(overrides, "cleanup.policy").([]string) {
		if strings.EqualFold(p, "compact") {
			return fmt.Errorf("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.")
		}
	}
	for _, pair := range [][2]string{{"retention.bytes", "local.retention.bytes"}, {"retention.ms", "local.retention.ms"}} {
		total, local := long(pair[0]), long(pair[1])
		if total == -1 || local == -2 {
			continue
		}
		if local == -1 {
			return fmt.Errorf("Invalid value %d for configuration %s: Value must not be -1 as %s value is set as %d.", local, pair[1], pair[0], total)
		}
		if local > total {
			return fmt.Errorf("Invalid value %d for configuration %s: Value must not be more than %s property value: %d", local, pair[1], pair[0], total)
		}
	}
	if flag(overrides, "remote.log.copy.disable") {
		for _, pair := range [][2]string{{"retention.bytes", "local.retention.bytes"}, {"retention.ms", "local.retention.ms"}} {
			if local := long(pair[1]); local != -2 && local != long(pair[0]) {
				return fmt.Errorf("When `remote.log.copy.disable` is set to true, the `%s` and `%s` must be set to the identical value because there will be no more logs copied to the remote storage.", pair[1], pair[0])
			}
		}
	}
	return nil
}
