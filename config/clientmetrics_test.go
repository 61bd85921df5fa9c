package config

import (
	"errors"
	"testing"
)

// TestClientMetricsValidation: Kafka's ClientMetricsConfigs.validate, its
// messages and which of them are INVALID_REQUEST.
func TestClientMetricsValidation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		overrides map[string]string
		msg       string
		request   bool
	}{
		{"", nil, "Subscription name can't be empty", true},
		{"s", map[string]string{"metric": "a"}, "Unknown client metrics configuration: metric", true},
		{"s", map[string]string{"interval.ms": "99"}, "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)", true},
		{"s", map[string]string{"interval.ms": "3600001"}, "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)", true},
		{"s", map[string]string{"interval.ms": "x"}, "Invalid value x for configuration interval.ms: Not a number of type INT", false},
		{"s", map[string]string{"metrics": "a,a"}, "Configuration 'metrics' values must not be duplicated.", false},
		{"s", map[string]string{"match": "client_id"}, "Illegal client matching pattern: client_id", false},
		{"s", map[string]string{"match": "client_id="}, "Illegal client matching pattern: client_id=", false},
		{"s", map[string]string{"match": "client_id=a=b"}, "Illegal client matching pattern: client_id=a=b", false},
		{"s", map[string]string{"match": "client_rack=a"}, "Illegal client matching pattern: client_rack=a", false},
		{"s", map[string]string{"match": "client_id=["}, "Illegal client matching pattern: client_id=[", false},
		{"s", map[string]string{"metrics": "org.apache.kafka.producer.,*", "interval.ms": "100", "match": "client_software_name = apache-kafka-java , client_source_port=5.*"}, "", false},
		{"s", map[string]string{}, "", false},
	} {
		err := ValidateClientMetrics(tc.name, tc.overrides)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%v: %v", tc.overrides, err)
			}
			continue
		}
		var re *ClientMetricsRequestError
		if err == nil || err.Error() != tc.msg || errors.As(err, &re) != tc.request {
			t.Errorf("%q %v: got %v (INVALID_REQUEST %v), want %q (INVALID_REQUEST %v)", tc.name, tc.overrides, err, errors.As(err, &re), tc.msg, tc.request)
		}
	}
}

// TestClientMetricsMatching: every pattern must match its whole
// attribute; an attribute the client lacks matches nothing.
func TestClientMetricsMatching(t *testing.T) {
	cm, err := ParseClientMetrics("s", map[string]string{"match": "client_software_name=apache-kafka-java,client_software_version=4\\.3.*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		attrs map[string]string
		want  bool
	}{
		{map[string]string{MatchClientSoftwareName: "apache-kafka-java", MatchClientSoftwareVersion: "4.3.1"}, true},
		{map[string]string{MatchClientSoftwareName: "apache-kafka-java", MatchClientSoftwareVersion: "14.3.1"}, false},
		{map[string]string{MatchClientSoftwareName: "apache-kafka-javas", MatchClientSoftwareVersion: "4.3.1"}, false},
		{map[string]string{MatchClientSoftwareName: "apache-kafka-java"}, false},
	} {
		if got := cm.Matches(tc.attrs); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.attrs, got, tc.want)
		}
	}
	all, _ := ParseClientMetrics("s", nil)
	if !all.Matches(nil) || all.IntervalMs != 300000 || len(all.Metrics) != 0 {
		t.Errorf("no pattern: matches %v, interval %d, metrics %v", all.Matches(nil), all.IntervalMs, all.Metrics)
	}
}
