package config

import "testing"

func TestBrokerKeyDefaultsValidate(t *testing.T) {
	s := NewSchema()
	keys := s.Keys()
	if len(keys) != 360 {
		t.Errorf("%d broker keys, want Kafka 4.3's 360", len(keys))
	}
	for i, k := range keys {
		if i > 0 && keys[i-1].Name >= k.Name {
			t.Errorf("keys not sorted at %s", k.Name)
		}
		if k.Doc == "" {
			t.Errorf("%s: no documentation", k.Name)
		}
		if !k.HasValue() {
			continue
		}
		canonical, err := k.Canonical(k.Default)
		if err != nil {
			// Kafka does not validate null or list-empty defaults against
			// "non-empty" validators; these few are known.
			if k.Name == "controller.quorum.bootstrap.servers" || k.Name == "controller.quorum.voters" {
				continue
			}
			t.Errorf("%s: default %q does not validate: %v", k.Name, k.Default, err)
			continue
		}
		if canonical != k.Default {
			t.Errorf("%s: default %q prints back as %q", k.Name, k.Default, canonical)
		}
	}
}

func TestBrokerSynonymOrder(t *testing.T) {
	cases := map[string][]string{
		"log.roll.hours":                                {"log.roll.ms", "log.roll.hours"},
		"log.retention.minutes":                         {"log.retention.ms", "log.retention.minutes", "log.retention.hours"},
		"log.flush.interval.ms":                         {"log.flush.interval.ms", "log.flush.scheduler.interval.ms"},
		"log.flush.scheduler.interval.ms":               {"log.flush.scheduler.interval.ms"},
		"listener.name.external.ssl.keystore.location":  {"listener.name.external.ssl.keystore.location", "ssl.keystore.location"},
		"listener.name.sasl_ssl.plain.sasl.jaas.config": {"listener.name.sasl_ssl.plain.sasl.jaas.config", "sasl.jaas.config"},
		"num.partitions":                                {"num.partitions"},
	}
	for name, want := range cases {
		got := brokerSynonyms(name)
		if len(got) != len(want) {
			t.Errorf("%s: got %v, want %v", name, got, want)
			continue
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: got %v, want %v", name, got, want)
			}
		}
	}
}
