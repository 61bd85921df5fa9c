package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// jmxExporterRules are the JMX exporter rules the kafka target's node is
// scraped with: the naming convention of the exporter's example Kafka
// rules, which Kafka operators' dashboards are built on (lower-cased
// kafka_<domain>_<type>_<name>; a meter's Count as ..._total without
// PerSec; a gauge's Value as is; a histogram's Count as ..._count and its
// percentiles with a quantile label; the MBean's other keys as labels).
// Kafka's own metrics (kafka.server:type=raft-metrics and the other MBeans
// without a name key) follow the exporter's KRaft example rules
// (kafka-kraft-3_0_0.yml): kafka_server_<type>_<attribute>, dashes as
// underscores, an attribute ending in -total a counter, raft's
// current-state an info gauge labelled with the state; its quota rules go
// before its generic ones here (in the example a generic rule takes the
// quota MBeans first and folds user and client id into the name), and an
// MBean's tags (socket-server-metrics' listener and networkProcessor, the
// group coordinator's protocol and state) are labels, as Strimzi's rules
// make them, instead of parts of the name. The kafka.coordinator rule is
// kafka-2_0_0.yml's. The request handler pool's idle meter is read by its
// one-minute rate, a fraction, as dashboards read it (the example rules
// keep only a meter's Count, which for this meter is idle nanoseconds).
const jmxExporterRules = `lowercaseOutputName: true
rules:
  - pattern: 'kafka.server<type=KafkaRequestHandlerPool, name=RequestHandlerAvgIdlePercent><>OneMinuteRate'
    name: kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent
    type: GAUGE
  - pattern: 'kafka.coordinator.(\w+)<type=(.+), name=(.+)><>Value'
    name: kafka_coordinator_$1_$2_$3
    type: GAUGE
  - pattern: 'kafka.server<type=raft-metrics><>current-state: ([a-z-]+)'
    name: kafka_server_raft_metrics_current_state_info
    type: GAUGE
    value: 1
    labels: {"state": "$1"}
  - pattern: 'kafka.server<type=(.+), user=(.+), client-id=(.*)><>([a-z-]+)'
    name: kafka_server_quota_$4
    type: GAUGE
    labels: {"resource": "$1", "user": "$2", "clientId": "$3"}
  - pattern: 'kafka.server<type=(.+), client-id=(.*)><>([a-z-]+)'
    name: kafka_server_quota_$3
    type: GAUGE
    labels: {"resource": "$1", "clientId": "$2"}
  - pattern: 'kafka.server<type=(.+), user=(.+)><>([a-z-]+)'
    name: kafka_server_quota_$3
    type: GAUGE
    labels: {"resource": "$1", "user": "$2"}
  - pattern: 'kafka.server<type=([a-z-]+), listener=(.+), networkProcessor=(.+)><>([a-z-]+)-total'
    name: kafka_server_$1_$4_total
    type: COUNTER
    labels: {"listener": "$2", "networkProcessor": "$3"}
  - pattern: 'kafka.server<type=([a-z-]+), listener=(.+), networkProcessor=(.+)><>([a-z-]+)'
    name: kafka_server_$1_$4
    type: GAUGE
    labels: {"listener": "$2", "networkProcessor": "$3"}
  - pattern: 'kafka.server<type=([a-z-]+), (\w+)=([\w-]+)><>([a-z-]+)-total'
    name: kafka_server_$1_$4_total
    type: COUNTER
    labels: {"$2": "$3"}
  - pattern: 'kafka.server<type=([a-z-]+), (\w+)=([\w-]+)><>([a-z-]+)'
    name: kafka_server_$1_$4
    type: GAUGE
    labels: {"$2": "$3"}
  - pattern: 'kafka.server<type=([a-z-]+)><>([a-z-]+)-total'
    name: kafka_server_$1_$2_total
    type: COUNTER
  - pattern: 'kafka.server<type=([a-z-]+)><>([a-z-]+)'
    name: kafka_server_$1_$2
    type: GAUGE
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+), (.+)=(.+)><>Count'
    name: kafka_$1_$2_$3_total
    type: COUNTER
    labels: {"$4": "$5", "$6": "$7"}
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+)PerSec\w*, (.+)=(.+)><>Count'
    name: kafka_$1_$2_$3_total
    type: COUNTER
    labels: {"$4": "$5"}
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+)PerSec\w*><>Count'
    name: kafka_$1_$2_$3_total
    type: COUNTER
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+), (.+)=(.+)><>Value'
    name: kafka_$1_$2_$3
    type: GAUGE
    labels: {"$4": "$5", "$6": "$7"}
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Value'
    name: kafka_$1_$2_$3
    type: GAUGE
    labels: {"$4": "$5"}
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+)><>Value'
    name: kafka_$1_$2_$3
    type: GAUGE
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+), (.+)=(.+)><>Count'
    name: kafka_$1_$2_$3_count
    type: COUNTER
    labels: {"$4": "$5"}
  - pattern: 'kafka.(\w+)<type=(.+), name=(.+), (.+)=(.*)><>(\d+)thPercentile'
    name: kafka_$1_$2_$3
    type: GAUGE
    labels: {"$4": "$5", "quantile": "0.$6"}
`

// withJMXExporter attaches Prometheus' JMX exporter to a java command,
// serving on addr with jmxExporterRules (written into dir).
func withJMXExporter(ctx context.Context, t *Tools, cmd Cmd, dir, addr string) (Cmd, error) {
	libs, err := t.MavenLibs(ctx, SetJMXExporter)
	if err != nil {
		return cmd, err
	}
	rules := filepath.Join(dir, "jmx-exporter.yml")
	if err := os.WriteFile(rules, []byte(jmxExporterRules), 0o644); err != nil {
		return cmd, err
	}
	jar := filepath.Join(libs, "jmx_prometheus_javaagent-"+JMXExporterVersion+".jar")
	cmd.Args = append([]string{"-javaagent:" + jar + "=" + addr + ":" + rules}, cmd.Args...)
	return cmd, nil
}

// Sample is one sample of a Prometheus text exposition: the metric's name,
// its labels and its value.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// ParseExposition parses the Prometheus text format (0.0.4) as Gregor and
// the JMX exporter write it.
func ParseExposition(text string) ([]Sample, error) {
	var out []Sample
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		s := Sample{Labels: map[string]string{}}
		rest := line
		if i := strings.IndexAny(line, "{ "); i >= 0 && line[i] == '{' {
			s.Name = line[:i]
			end := strings.LastIndexByte(line, '}')
			if end < i {
				return nil, fmt.Errorf("sample %q: unterminated labels", line)
			}
			for _, pair := range splitLabels(line[i+1 : end]) {
				k, v, ok := strings.Cut(pair, "=")
				if !ok {
					return nil, fmt.Errorf("sample %q: label %q", line, pair)
				}
				uq, err := strconv.Unquote(v)
				if err != nil {
					return nil, fmt.Errorf("sample %q: label %q: %w", line, pair, err)
				}
				s.Labels[k] = uq
			}
			rest = strings.TrimSpace(line[end+1:])
		} else {
			name, value, _ := strings.Cut(line, " ")
			s.Name, rest = name, value
		}
		value, _, _ := strings.Cut(rest, " ") // a timestamp may follow
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: value: %w", line, err)
		}
		s.Value = v
		out = append(out, s)
	}
	return out, nil
}

// splitLabels splits `a="x",b="y,z"` at the commas between pairs.
func splitLabels(s string) []string {
	var out []string
	inQuote, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			if part := strings.TrimSpace(s[start:i]); part != "" {
				out = append(out, part)
			}
			start = i + 1
		}
	}
	if part := strings.TrimSpace(s[start:]); part != "" {
		out = append(out, part)
	}
	return out
}
