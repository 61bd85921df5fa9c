package config

// Group-level config keys (Kafka 4.3's GroupConfig, KIP-848 and KIP-932):
// definitions, the broker keys that give their defaults, validation
// against the broker's bounds, and a group's effective configuration.

import (
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// GroupKey is a group-level config key. BrokerSynonym is the broker key
// whose value a group that does not set the key gets (Kafka's
// ALL_GROUP_CONFIG_SYNONYMS); "" when the key's own default applies.
type GroupKey struct {
	Key
	BrokerSynonym string
	// MinKey and MaxKey are the broker keys that bound a group's value
	// ("" when that side is unbounded).
	MinKey, MaxKey string
	// checkedWhenUnset: validation puts the broker's value of the key into
	// the group's configuration before checking it (Kafka's
	// GroupCoordinatorConfig.extractGroupConfigMap), so its bounds and the
	// session/heartbeat relations hold even for a group that never set it.
	// The assignment intervals are left out there and are checked only
	// when the group sets them.
	checkedWhenUnset bool
}

// groupKeys returns Kafka 4.3's group-level keys in the order Kafka
// defines them, which is the order their values are parsed in (and so
// which error a request with several bad values gets). It builds a fresh
// table on every call so that no caller can change another's view.
func groupKeys() []GroupKey {
	const (
		consumer = "group.consumer."
		share    = "group.share."
		streams  = "group.streams."
	)
	intKey := func(name, def string, atLeast int64, synonym, minKey, maxKey string, checkedWhenUnset bool, doc string) GroupKey {
		return GroupKey{
			Key:           Key{Name: name, Type: TypeInt, Default: def, Validator: AtLeast(atLeast), Doc: doc},
			BrokerSynonym: synonym, MinKey: minKey, MaxKey: maxKey, checkedWhenUnset: checkedWhenUnset,
		}
	}
	return []GroupKey{
		intKey("consumer.session.timeout.ms", "45000", 1,
			consumer+"session.timeout.ms", consumer+"min.session.timeout.ms", consumer+"max.session.timeout.ms", true,
			"How long a member of a consumer-protocol group may go without a heartbeat before it is removed from the group."),
		intKey("consumer.heartbeat.interval.ms", "5000", 1,
			consumer+"heartbeat.interval.ms", consumer+"min.heartbeat.interval.ms", consumer+"max.heartbeat.interval.ms", true,
			"How often the members of a consumer-protocol group are told to heartbeat."),
		intKey("consumer.assignment.interval.ms", "1000", 0,
			consumer+"assignment.interval.ms", consumer+"min.assignment.interval.ms", consumer+"max.assignment.interval.ms", false,
			"Shortest time between two target assignment computations of a consumer-protocol group."),
		intKey("share.session.timeout.ms", "45000", 1,
			share+"session.timeout.ms", share+"min.session.timeout.ms", share+"max.session.timeout.ms", true,
			"How long a member of a share group may go without a heartbeat before it is removed from the group."),
		intKey("share.heartbeat.interval.ms", "5000", 1,
			share+"heartbeat.interval.ms", share+"min.heartbeat.interval.ms", share+"max.heartbeat.interval.ms", true,
			"How often the members of a share group are told to heartbeat."),
		intKey("share.record.lock.duration.ms", "30000", 1000,
			share+"record.lock.duration.ms", share+"min.record.lock.duration.ms", share+"max.record.lock.duration.ms", true,
			"How long a share-group consumer holds the lock on a record it acquired before the record may be delivered again."),
		intKey("share.delivery.count.limit", "5", 2,
			share+"delivery.count.limit", share+"min.delivery.count.limit", share+"max.delivery.count.limit", true,
			"How many times a record is delivered to a share group before it is archived as undeliverable."),
		intKey("share.partition.max.record.locks", "2000", 100,
			share+"partition.max.record.locks", share+"min.partition.max.record.locks", share+"max.partition.max.record.locks", true,
			"Most records of one share-partition that may be locked (in flight) at once."),
		{Key: Key{Name: "share.auto.offset.reset", Type: TypeString, Default: "latest", Validator: shareAutoOffsetResetValidator(),
			Doc: "Where a share group starts reading a partition it has no state for: earliest, latest, or by_duration:<ISO-8601 duration> for that far back from now."}},
		{Key: Key{Name: "share.isolation.level", Type: TypeString, Default: "read_uncommitted",
			Validator: OneOf{Values: []string{"read_committed", "read_uncommitted"}},
			Doc:       "Whether a share group is delivered only committed transactional records (read_committed) or every record (read_uncommitted)."}},
		{Key: Key{Name: "share.renew.acknowledge.enable", Type: TypeBoolean, Default: "true",
			Doc: "Whether the members of a share group may acknowledge a record with RENEW to extend its lock."}},
		intKey("share.assignment.interval.ms", "1000", 0,
			share+"assignment.interval.ms", share+"min.assignment.interval.ms", share+"max.assignment.interval.ms", false,
			"Shortest time between two target assignment computations of a share group."),
		intKey("streams.session.timeout.ms", "45000", 1,
			streams+"session.timeout.ms", streams+"min.session.timeout.ms", streams+"max.session.timeout.ms", true,
			"How long a member of a streams group may go without a heartbeat before it is removed from the group."),
		intKey("streams.heartbeat.interval.ms", "5000", 1,
			streams+"heartbeat.interval.ms", streams+"min.heartbeat.interval.ms", streams+"max.heartbeat.interval.ms", true,
			"How often the members of a streams group are told to heartbeat."),
		intKey("streams.num.standby.replicas", "0", 0,
			streams+"num.standby.replicas", "", streams+"max.standby.replicas", true,
			"How many standby replicas of each task a streams group keeps."),
		intKey("streams.initial.rebalance.delay.ms", "3000", 0,
			streams+"initial.rebalance.delay.ms", "", "", true,
			"How long a new streams group waits for more members to join before its first assignment."),
		intKey("streams.assignment.interval.ms", "1000", 0,
			streams+"assignment.interval.ms", streams+"min.assignment.interval.ms", streams+"max.assignment.interval.ms", false,
			"Shortest time between two target assignment computations of a streams group."),
	}
}

// GroupKeys returns every group-level config key of Kafka 4.3 in Kafka's
// definition order.
func GroupKeys() []GroupKey { return groupKeys() }

// LookupGroupKey returns the definition of a group-level key.
func LookupGroupKey(name string) (GroupKey, bool) {
	for _, k := range groupKeys() {
		if k.Name == name {
			return k, true
		}
	}
	return GroupKey{}, false
}

// UnknownGroupKeyError is Kafka's InvalidConfigurationException for a key
// that is not a group config.
type UnknownGroupKeyError struct{ Name string }

func (e *UnknownGroupKeyError) Error() string { return "Unknown group config name: " + e.Name }

// groupBoundOrder is the order Kafka's GroupConfig.validateValues checks
// the bounds in (heartbeat before session in each family), which decides
// the error of a request that breaks several.
func groupBoundOrder() []string {
	return []string{
		"consumer.heartbeat.interval.ms", "consumer.session.timeout.ms", "consumer.assignment.interval.ms",
		"share.heartbeat.interval.ms", "share.session.timeout.ms", "share.record.lock.duration.ms",
		"share.delivery.count.limit", "share.partition.max.record.locks", "share.assignment.interval.ms",
		"streams.heartbeat.interval.ms", "streams.session.timeout.ms", "streams.num.standby.replicas",
		"streams.assignment.interval.ms",
	}
}

// sessionHeartbeatPairs are the session timeouts that must exceed their
// family's heartbeat interval.
func sessionHeartbeatPairs() [][2]string {
	return [][2]string{
		{"consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"},
		{"share.session.timeout.ms", "share.heartbeat.interval.ms"},
		{"streams.session.timeout.ms", "streams.heartbeat.interval.ms"},
	}
}

// brokerInt reads an INT broker setting through brokerValue.
func brokerInt(brokerValue func(string) (string, bool), name string) (int32, error) {
	raw, ok := brokerValue(name)
	if !ok {
		return 0, fmt.Errorf("broker config %s has no value", name)
	}
	v, err := ParseValue(name, TypeInt, raw)
	if err != nil {
		return 0, fmt.Errorf("reading broker config %s: %w", name, err)
	}
	return v.(int32), nil
}

// ValidateGroup checks a group's complete set of overrides as Kafka's
// GroupConfig.validate does, given the broker's settings (brokerValue
// reports a broker key's effective value): every name must be a group
// key; the overrides, on top of the broker's values of the keys checked
// when unset, must parse and pass their validators; every value must lie
// within the broker's bounds (group.consumer.min.session.timeout.ms and
// the like); and each session timeout must exceed its heartbeat interval.
// The messages are Kafka's.
func ValidateGroup(overrides map[string]string, brokerValue func(brokerKey string) (string, bool)) error {
	names := make([]string, 0, len(overrides))
	for name := range overrides {
		names = append(names, name)
	}
	sort.Strings(names)
	keys := groupKeys()
	byName := make(map[string]*GroupKey, len(keys))
	for i := range keys {
		byName[keys[i].Name] = &keys[i]
	}
	for _, name := range names {
		if byName[name] == nil {
			return &UnknownGroupKeyError{Name: name}
		}
	}
	// present holds the keys the check sees: the overrides and the
	// broker's values of the keys checked when unset.
	present := map[string]int32{}
	for _, k := range keys {
		raw, set := overrides[k.Name]
		if !set && k.checkedWhenUnset {
			v, err := brokerInt(brokerValue, k.BrokerSynonym)
			if err != nil {
				return err
			}
			present[k.Name] = v
			continue
		}
		if !set {
			raw = k.Default
		}
		v, err := k.Parse(raw)
		if err != nil {
			return err
		}
		if n, ok := v.(int32); ok && set {
			present[k.Name] = n
		}
	}
	for _, name := range groupBoundOrder() {
		v, ok := present[name]
		if !ok {
			continue
		}
		k := byName[name]
		if k.MinKey != "" {
			lo, err := brokerInt(brokerValue, k.MinKey)
			if err != nil {
				return err
			}
			if v < lo {
				return fmt.Errorf("%s must be greater than or equal to %s", name, k.MinKey)
			}
		}
		if k.MaxKey != "" {
			hi, err := brokerInt(brokerValue, k.MaxKey)
			if err != nil {
				return err
			}
			if v > hi {
				return fmt.Errorf("%s must be less than or equal to %s", name, k.MaxKey)
			}
		}
	}
	for _, p := range sessionHeartbeatPairs() {
		if present[p[0]] <= present[p[1]] {
			return fmt.Errorf("%s must be greater than %s", p[0], p[1])
		}
	}
	return nil
}

// Group is a group's effective configuration: its dynamic overrides,
// clamped to the broker's current bounds, on top of the broker's group.*
// settings (Kafka's GroupConfig as GroupConfigManager builds it). Field
// comments name the group key.
type Group struct {
	ConsumerSessionTimeoutMs     int32 // consumer.session.timeout.ms
	ConsumerHeartbeatIntervalMs  int32 // consumer.heartbeat.interval.ms
	ConsumerAssignmentIntervalMs int32 // consumer.assignment.interval.ms

	ShareSessionTimeoutMs        int32  // share.session.timeout.ms
	ShareHeartbeatIntervalMs     int32  // share.heartbeat.interval.ms
	ShareRecordLockDurationMs    int32  // share.record.lock.duration.ms
	ShareDeliveryCountLimit      int32  // share.delivery.count.limit
	SharePartitionMaxRecordLocks int32  // share.partition.max.record.locks
	ShareAutoOffsetReset         string // share.auto.offset.reset
	ShareIsolationLevel          string // share.isolation.level
	ShareRenewAcknowledgeEnable  bool   // share.renew.acknowledge.enable
	ShareAssignmentIntervalMs    int32  // share.assignment.interval.ms

	StreamsSessionTimeoutMs        int32 // streams.session.timeout.ms
	StreamsHeartbeatIntervalMs     int32 // streams.heartbeat.interval.ms
	StreamsNumStandbyReplicas      int32 // streams.num.standby.replicas
	StreamsInitialRebalanceDelayMs int32 // streams.initial.rebalance.delay.ms
	StreamsAssignmentIntervalMs    int32 // streams.assignment.interval.ms
}

// EvaluateGroup returns a group's effective configuration from its
// overrides (validated when they were committed) and the broker's
// settings. As Kafka's GroupConfig.evaluate does, an override outside the
// broker's current bounds (they may have changed since it was committed)
// is clamped to the nearest bound; Kafka also logs a warning then, which
// Gregor leaves out because it evaluates on every lookup.
func EvaluateGroup(overrides map[string]string, brokerValue func(brokerKey string) (string, bool)) (Group, error) {
	values := map[string]any{}
	for _, k := range groupKeys() {
		raw, set := overrides[k.Name]
		if !set && k.BrokerSynonym != "" {
			if b, ok := brokerValue(k.BrokerSynonym); ok {
				raw, set = b, true
			}
		}
		if !set {
			raw = k.Default
		}
		v, err := k.Parse(raw)
		if err != nil {
			return Group{}, err
		}
		if n, ok := v.(int32); ok {
			if _, overridden := overrides[k.Name]; overridden {
				if n, err = clampToBroker(k, n, brokerValue); err != nil {
					return Group{}, err
				}
				v = n
			}
		}
		values[k.Name] = v
	}
	i32 := func(k string) int32 { return values[k].(int32) }
	return Group{
		ConsumerSessionTimeoutMs:       i32("consumer.session.timeout.ms"),
		ConsumerHeartbeatIntervalMs:    i32("consumer.heartbeat.interval.ms"),
		ConsumerAssignmentIntervalMs:   i32("consumer.assignment.interval.ms"),
		ShareSessionTimeoutMs:          i32("share.session.timeout.ms"),
		ShareHeartbeatIntervalMs:       i32("share.heartbeat.interval.ms"),
		ShareRecordLockDurationMs:      i32("share.record.lock.duration.ms"),
		ShareDeliveryCountLimit:        i32("share.delivery.count.limit"),
		SharePartitionMaxRecordLocks:   i32("share.partition.max.record.locks"),
		ShareAutoOffsetReset:           values["share.auto.offset.reset"].(string),
		ShareIsolationLevel:            values["share.isolation.level"].(string),
		ShareRenewAcknowledgeEnable:    values["share.renew.acknowledge.enable"].(bool),
		ShareAssignmentIntervalMs:      i32("share.assignment.interval.ms"),
		StreamsSessionTimeoutMs:        i32("streams.session.timeout.ms"),
		StreamsHeartbeatIntervalMs:     i32("streams.heartbeat.interval.ms"),
		StreamsNumStandbyReplicas:      i32("streams.num.standby.replicas"),
		StreamsInitialRebalanceDelayMs: i32("streams.initial.rebalance.delay.ms"),
		StreamsAssignmentIntervalMs:    i32("streams.assignment.interval.ms"),
	}, nil
}

func clampToBroker(k GroupKey, v int32, brokerValue func(string) (string, bool)) (int32, error) {
	if k.MinKey != "" {
		lo, err := brokerInt(brokerValue, k.MinKey)
		if err != nil {
			return 0, err
		}
		v = max(v, lo)
	}
	if k.MaxKey != "" {
		hi, err := brokerInt(brokerValue, k.MaxKey)
		if err != nil {
			return 0, err
		}
		v = min(v, hi)
	}
	return v, nil
}

// isoDuration is what Java's Duration.parse accepts: PnDTnHnMn.nS with
// optional signs, any letter case, at least one part, and a T only when
// a time part follows.
var isoDuration = regexp.MustCompile(`(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$`)

// nonNegativeISODuration reports whether s parses as a Java Duration
// (Duration.parse, whose arithmetic refuses overflow of a long number of
// seconds) that is not negative.
func nonNegativeISODuration(s string) bool {
	m := isoDuration.FindStringSubmatch(s)
	if m == nil || (m[2] == "" && m[3] == "") || strings.EqualFold(m[3], "T") {
		return false
	}
	fitsLong := func(n *big.Int) bool { return n.IsInt64() }
	// Parts in Java's order: seconds, then minutes, hours and days added
	// on, each product and sum within a long.
	total := new(big.Int)
	for _, p := range []struct {
		text string
		unit int64
	}{{m[6], 1}, {m[5], 60}, {m[4], 3600}, {m[2], 86400}} {
		if p.text == "" {
			continue
		}
		n, err := strconv.ParseInt(p.text, 10, 64)
		if err != nil {
			return false
		}
		part := new(big.Int).Mul(big.NewInt(n), big.NewInt(p.unit))
		if !fitsLong(part) || !fitsLong(total.Add(total, part)) {
			return false
		}
	}
	nanos := new(big.Int)
	if m[7] != "" {
		frac, _ := strconv.ParseInt((m[7] + "000000000")[:9], 10, 64)
		nanos.SetInt64(frac)
		if strings.HasPrefix(m[6], "-") {
			nanos.Neg(nanos)
		}
	}
	value := total.Mul(total, big.NewInt(1e9)).Add(total, nanos)
	if m[1] == "-" {
		value.Neg(value)
	}
	return value.Sign() >= 0
}

// shareAutoOffsetResetValidator accepts what Kafka's
// ShareGroupAutoOffsetResetStrategy does: earliest, latest or
// by_duration:<a non-negative ISO-8601 duration>, case-sensitive.
func shareAutoOffsetResetValidator() Validator {
	return CustomValidator{
		Text: "[earliest, latest, by_duration:PnDTnHnMn.nS]",
		Check: func(key string, value any) error {
			s, _ := value.(string)
			if s == "earliest" || s == "latest" {
				return nil
			}
			if d, ok := strings.CutPrefix(s, "by_duration:"); ok && nonNegativeISODuration(d) {
				return nil
			}
			return &ValueError{Key: key, Value: s, Reason: "Invalid value `" + s + "` for configuration " + key +
				". The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."}
		},
	}
}
