package config

import (
	"maps"
	"testing"
)

// kafkaGroupBrokerDefaults are Kafka 4.3's defaults of the broker keys the
// group keys read (their synonyms and bounds).
func kafkaGroupBrokerDefaults() map[string]string {
	return map[string]string{
		"group.consumer.session.timeout.ms":          "45000",
		"group.consumer.min.session.timeout.ms":      "45000",
		"group.consumer.max.session.timeout.ms":      "60000",
		"group.consumer.heartbeat.interval.ms":       "5000",
		"group.consumer.min.heartbeat.interval.ms":   "5000",
		"group.consumer.max.heartbeat.interval.ms":   "15000",
		"group.consumer.assignment.interval.ms":      "1000",
		"group.consumer.min.assignment.interval.ms":  "0",
		"group.consumer.max.assignment.interval.ms":  "15000",
		"group.share.session.timeout.ms":             "45000",
		"group.share.min.session.timeout.ms":         "45000",
		"group.share.max.session.timeout.ms":         "60000",
		"group.share.heartbeat.interval.ms":          "5000",
		"group.share.min.heartbeat.interval.ms":      "5000",
		"group.share.max.heartbeat.interval.ms":      "15000",
		"group.share.record.lock.duration.ms":        "30000",
		"group.share.min.record.lock.duration.ms":    "15000",
		"group.share.max.record.lock.duration.ms":    "60000",
		"group.share.delivery.count.limit":           "5",
		"group.share.min.delivery.count.limit":       "2",
		"group.share.max.delivery.count.limit":       "10",
		"group.share.partition.max.record.locks":     "2000",
		"group.share.min.partition.max.record.locks": "100",
		"group.share.max.partition.max.record.locks": "4000",
		"group.share.assignment.interval.ms":         "1000",
		"group.share.min.assignment.interval.ms":     "0",
		"group.share.max.assignment.interval.ms":     "15000",
		"group.streams.session.timeout.ms":           "45000",
		"group.streams.min.session.timeout.ms":       "45000",
		"group.streams.max.session.timeout.ms":       "60000",
		"group.streams.heartbeat.interval.ms":        "5000",
		"group.streams.min.heartbeat.interval.ms":    "5000",
		"group.streams.max.heartbeat.interval.ms":    "15000",
		"group.streams.num.standby.replicas":         "0",
		"group.streams.max.standby.replicas":         "2",
		"group.streams.initial.rebalance.delay.ms":   "3000",
		"group.streams.assignment.interval.ms":       "1000",
		"group.streams.min.assignment.interval.ms":   "0",
		"group.streams.max.assignment.interval.ms":   "15000",
	}
}

func lookupIn(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

// The table is Kafka 4.3.1's GroupConfig: names in definition order, types,
// defaults, validators and broker synonyms (ALL_GROUP_CONFIG_SYNONYMS).
func TestGroupKeysAreKafkas(t *testing.T) {
	want := []struct {
		name, typ, def, valid, synonym string
	}{
		{"consumer.session.timeout.ms", "INT", "45000", "[1,...]", "group.consumer.session.timeout.ms"},
		{"consumer.heartbeat.interval.ms", "INT", "5000", "[1,...]", "group.consumer.heartbeat.interval.ms"},
		{"consumer.assignment.interval.ms", "INT", "1000", "[0,...]", "group.consumer.assignment.interval.ms"},
		{"share.session.timeout.ms", "INT", "45000", "[1,...]", "group.share.session.timeout.ms"},
		{"share.heartbeat.interval.ms", "INT", "5000", "[1,...]", "group.share.heartbeat.interval.ms"},
		{"share.record.lock.duration.ms", "INT", "30000", "[1000,...]", "group.share.record.lock.duration.ms"},
		{"share.delivery.count.limit", "INT", "5", "[2,...]", "group.share.delivery.count.limit"},
		{"share.partition.max.record.locks", "INT", "2000", "[100,...]", "group.share.partition.max.record.locks"},
		{"share.auto.offset.reset", "STRING", "latest", "[earliest, latest, by_duration:PnDTnHnMn.nS]", ""},
		{"share.isolation.level", "STRING", "read_uncommitted", "[read_committed, read_uncommitted]", ""},
		{"share.renew.acknowledge.enable", "BOOLEAN", "true", "", ""},
		{"share.assignment.interval.ms", "INT", "1000", "[0,...]", "group.share.assignment.interval.ms"},
		{"streams.session.timeout.ms", "INT", "45000", "[1,...]", "group.streams.session.timeout.ms"},
		{"streams.heartbeat.interval.ms", "INT", "5000", "[1,...]", "group.streams.heartbeat.interval.ms"},
		{"streams.num.standby.replicas", "INT", "0", "[0,...]", "group.streams.num.standby.replicas"},
		{"streams.initial.rebalance.delay.ms", "INT", "3000", "[0,...]", "group.streams.initial.rebalance.delay.ms"},
		{"streams.assignment.interval.ms", "INT", "1000", "[0,...]", "group.streams.assignment.interval.ms"},
	}
	got := GroupKeys()
	if len(got) != len(want) {
		t.Fatalf("%d group keys, want %d", len(got), len(want))
	}
	for i, w := range want {
		k := got[i]
		valid := ""
		if k.Validator != nil {
			valid = k.Validator.String()
		}
		if k.Name != w.name || k.Type.String() != w.typ || k.Default != w.def || valid != w.valid || k.BrokerSynonym != w.synonym {
			t.Errorf("key %d = %s %s %q %q synonym %q, want %+v", i, k.Name, k.Type, k.Default, valid, k.BrokerSynonym, w)
		}
		if k.Doc == "" {
			t.Errorf("%s has no documentation", k.Name)
		}
		if c, err := k.Canonical(k.Default); err != nil || c != k.Default {
			t.Errorf("%s: default %q prints back as %q (%v)", k.Name, k.Default, c, err)
		}
		if k.BrokerSynonym != "" && kafkaGroupBrokerDefaults()[k.BrokerSynonym] != k.Default {
			t.Errorf("%s: default %s differs from the broker default of %s", k.Name, k.Default, k.BrokerSynonym)
		}
	}
}

// The messages and their order are what Apache Kafka 4.3.1 answers to
// IncrementalAlterConfigs on a GROUP resource with the broker defaults.
func TestValidateGroupErrors(t *testing.T) {
	cases := []struct {
		overrides map[string]string
		want      string
	}{
		{map[string]string{"foo": "1"}, "Unknown group config name: foo"},
		{map[string]string{"consumer.session.timeout.ms": "55000", "consumer.heartbeat.interval.ms": "abc", "foo": "x"}, "Unknown group config name: foo"},
		{map[string]string{"consumer.heartbeat.interval.ms": "abc"}, "Invalid value abc for configuration consumer.heartbeat.interval.ms: Not a number of type INT"},
		{map[string]string{"consumer.heartbeat.interval.ms": "0"}, "Invalid value 0 for configuration consumer.heartbeat.interval.ms: Value must be at least 1"},
		{map[string]string{"consumer.heartbeat.interval.ms": "20000"}, "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"},
		{map[string]string{"consumer.heartbeat.interval.ms": "4000"}, "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"},
		{map[string]string{"consumer.session.timeout.ms": "40000"}, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{map[string]string{"consumer.session.timeout.ms": "70000"}, "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"},
		{map[string]string{"consumer.assignment.interval.ms": "20000"}, "consumer.assignment.interval.ms must be less than or equal to group.consumer.max.assignment.interval.ms"},
		{map[string]string{"consumer.assignment.interval.ms": "-1"}, "Invalid value -1 for configuration consumer.assignment.interval.ms: Value must be at least 0"},
		{map[string]string{"share.auto.offset.reset": "bogus"}, "Invalid value bogus for configuration share.auto.offset.reset: Invalid value `bogus` for configuration share.auto.offset.reset. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'."},
		{map[string]string{"share.isolation.level": "READ_COMMITTED"}, "Invalid value READ_COMMITTED for configuration share.isolation.level: String must be one of: read_committed, read_uncommitted"},
		{map[string]string{"share.renew.acknowledge.enable": "yes"}, "Invalid value yes for configuration share.renew.acknowledge.enable: Expected value to be either true or false"},
		{map[string]string{"share.record.lock.duration.ms": "500"}, "Invalid value 500 for configuration share.record.lock.duration.ms: Value must be at least 1000"},
		{map[string]string{"share.record.lock.duration.ms": "10000"}, "share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms"},
		{map[string]string{"share.delivery.count.limit": "1"}, "Invalid value 1 for configuration share.delivery.count.limit: Value must be at least 2"},
		{map[string]string{"streams.num.standby.replicas": "5"}, "streams.num.standby.replicas must be less than or equal to group.streams.max.standby.replicas"},
		{map[string]string{"streams.initial.rebalance.delay.ms": "-1"}, "Invalid value -1 for configuration streams.initial.rebalance.delay.ms: Value must be at least 0"},
		// Heartbeat bounds are checked before session bounds, family by
		// family.
		{map[string]string{"consumer.session.timeout.ms": "45000", "consumer.heartbeat.interval.ms": "15000", "share.heartbeat.interval.ms": "1"}, "share.heartbeat.interval.ms must be greater than or equal to group.share.min.heartbeat.interval.ms"},
		{map[string]string{"share.heartbeat.interval.ms": "1", "consumer.session.timeout.ms": "1"}, "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"},
		{map[string]string{"streams.session.timeout.ms": "5000", "streams.heartbeat.interval.ms": "5000"}, "streams.session.timeout.ms must be greater than or equal to group.streams.min.session.timeout.ms"},
	}
	broker := lookupIn(kafkaGroupBrokerDefaults())
	for _, tc := range cases {
		err := ValidateGroup(tc.overrides, broker)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: got %v, want %q", tc.overrides, err, tc.want)
		}
	}
	for _, ok := range []map[string]string{
		nil,
		{"consumer.session.timeout.ms": " 55000 ", "share.isolation.level": "read_committed"},
		{"consumer.session.timeout.ms": "60000", "consumer.heartbeat.interval.ms": "15000"},
		{"consumer.assignment.interval.ms": " 7 ", "share.renew.acknowledge.enable": " TRUE ", "share.auto.offset.reset": " latest "},
		{"share.auto.offset.reset": "by_duration:PT1H"},
	} {
		if err := ValidateGroup(ok, broker); err != nil {
			t.Errorf("%v refused: %v", ok, err)
		}
	}
}

// A session timeout must exceed its heartbeat interval; with Kafka's
// default bounds that cannot fail, so widen them.
func TestValidateGroupSessionMustExceedHeartbeat(t *testing.T) {
	broker := kafkaGroupBrokerDefaults()
	broker["group.consumer.min.session.timeout.ms"] = "1000"
	broker["group.share.min.session.timeout.ms"] = "1000"
	cases := map[string]map[string]string{
		"consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms": {"consumer.session.timeout.ms": "5000"},
		"share.session.timeout.ms must be greater than share.heartbeat.interval.ms":       {"share.session.timeout.ms": "4000"},
	}
	for want, overrides := range cases {
		if err := ValidateGroup(overrides, lookupIn(broker)); err == nil || err.Error() != want {
			t.Errorf("%v: got %v, want %q", overrides, err, want)
		}
	}
	// The broker's own values take part: a broker heartbeat interval at
	// or above a group's session timeout is refused too.
	broker["group.consumer.heartbeat.interval.ms"] = "6000"
	if err := ValidateGroup(map[string]string{"consumer.session.timeout.ms": "6000"}, lookupIn(broker)); err == nil {
		t.Error("session timeout equal to the broker's heartbeat interval accepted")
	}
}

// What Apache Kafka 4.3.1 accepts for share.auto.offset.reset (Java's
// Duration.parse, non-negative).
func TestShareAutoOffsetReset(t *testing.T) {
	accepted := []string{"latest", "earliest", "by_duration:PT1H", "by_duration:pt1h", "by_duration:P1D",
		"by_duration:PT1.5S", "by_duration:PT1,5S", "by_duration:P-1DT25H", "by_duration:+PT1H", "by_duration:PT0S",
		"by_duration:P1DT2H3M4S"}
	refused := []string{"none", "by_duration", "by_duration:", "by_duration:-PT1H", "by_duration:PT-1H",
		"by_duration:P1DT", "by_duration:PT", "by_duration:P", "by_duration: PT1H", "BY_DURATION:PT1H",
		"by_duration:P1W", "by_duration:PT1.1234567891S", "EARLIEST", "by_duration:PT-0.5S",
		"by_duration:P9223372036854775807D"}
	k, _ := LookupGroupKey("share.auto.offset.reset")
	for _, v := range accepted {
		if _, err := k.Parse(v); err != nil {
			t.Errorf("%q refused: %v", v, err)
		}
	}
	for _, v := range refused {
		if _, err := k.Parse(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
}

func TestEvaluateGroup(t *testing.T) {
	broker := kafkaGroupBrokerDefaults()
	broker["group.consumer.session.timeout.ms"] = "50000"
	g, err := EvaluateGroup(nil, lookupIn(broker))
	if err != nil {
		t.Fatal(err)
	}
	if g.ConsumerSessionTimeoutMs != 50000 || g.ConsumerHeartbeatIntervalMs != 5000 || g.ShareAutoOffsetReset != "latest" ||
		g.ShareIsolationLevel != "read_uncommitted" || !g.ShareRenewAcknowledgeEnable || g.StreamsInitialRebalanceDelayMs != 3000 {
		t.Fatalf("defaults %+v", g)
	}
	g, err = EvaluateGroup(map[string]string{"consumer.heartbeat.interval.ms": " 6000 ", "share.isolation.level": "read_committed"}, lookupIn(broker))
	if err != nil || g.ConsumerHeartbeatIntervalMs != 6000 || g.ConsumerSessionTimeoutMs != 50000 || g.ShareIsolationLevel != "read_committed" {
		t.Fatalf("overrides %+v %v", g, err)
	}
	// Bounds that moved since the override was committed clamp it.
	narrowed := maps.Clone(broker)
	narrowed["group.consumer.max.heartbeat.interval.ms"] = "8000"
	narrowed["group.consumer.min.session.timeout.ms"] = "55000"
	g, err = EvaluateGroup(map[string]string{"consumer.heartbeat.interval.ms": "12000", "consumer.session.timeout.ms": "50000"}, lookupIn(narrowed))
	if err != nil || g.ConsumerHeartbeatIntervalMs != 8000 || g.ConsumerSessionTimeoutMs != 55000 {
		t.Fatalf("clamped %+v %v", g, err)
	}
}
