package integration

import (
	"bufio"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// VerifiableEvent is one JSON line printed by Apache's VerifiableProducer
// or VerifiableConsumer (--verbose). Only the fields the checks use.
type VerifiableEvent struct {
	Name      string  `json:"name"`
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Offset    int64   `json:"offset"`
	Key       *string `json:"key"`
	Value     *string `json:"value"`
	Exception string  `json:"exception"`
	Message   string  `json:"message"`
	Acked     int64   `json:"acked"`
	Sent      int64   `json:"sent"`
	Success   *bool   `json:"success"`
	Error     string  `json:"error"`
	// Partitions of partitions_assigned and partitions_revoked; Offsets
	// of offsets_committed.
	Partitions []VerifiablePartition `json:"partitions"`
	Offsets    []VerifiablePartition `json:"offsets"`
}

// VerifiablePartition is one entry of a verifiable consumer's partition or
// offset list.
type VerifiablePartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// Count is VerifiableShareConsumer's records of the partition in a
	// records_consumed or offsets_acknowledged event.
	Count int64 `json:"count"`
}

// ParseVerifiable decodes the JSON lines of a verifiable client's stdout,
// ignoring non-JSON lines (some versions print warnings to stdout).
func ParseVerifiable(stdout string) ([]VerifiableEvent, error) {
	var events []VerifiableEvent
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var ev VerifiableEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return nil, fmt.Errorf("decoding %q: %w", truncate(line, 200), err)
		}
		events = append(events, ev)
	}
	return events, sc.Err()
}

// ackedValues returns the values the producer reports as acknowledged,
// and the first send error it reported, if any.
func ackedValues(events []VerifiableEvent) (acked []string, sendErr string) {
	for _, ev := range events {
		switch ev.Name {
		case "producer_send_success":
			if ev.Value != nil {
				acked = append(acked, *ev.Value)
			}
		case "producer_send_error":
			if sendErr == "" {
				sendErr = ev.Exception + ": " + ev.Message
			}
		}
	}
	return acked, sendErr
}

// consumedValues returns the values a --verbose VerifiableConsumer printed.
func consumedValues(events []VerifiableEvent) []string {
	var out []string
	for _, ev := range events {
		if ev.Name == "record_data" && ev.Value != nil {
			out = append(out, *ev.Value)
		}
	}
	return out
}

// validateDelivery is Apache's rule from kafkatest's
// produce_consume_validate.py: every acked value must have been consumed,
// and with idempotence on no value may be consumed twice. Consumed values
// that were never acked are allowed (an un-acked send may still land).
func validateDelivery(acked, consumed []string, idempotent bool) error {
	seen := make(map[string]int, len(consumed))
	for _, v := range consumed {
		seen[v]++
	}
	var missing, dups []string
	for _, v := range acked {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	if idempotent {
		for v, n := range seen {
			if n > 1 {
				dups = append(dups, v)
			}
		}
	}
	if len(missing) == 0 && len(dups) == 0 {
		return nil
	}
	sort.Strings(dups)
	var parts []string
	if len(missing) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d acked values never consumed (first: %s)", len(missing), len(acked), sample(missing)))
	}
	if len(dups) > 0 {
		parts = append(parts, fmt.Sprintf("%d values consumed more than once with idempotence on (first: %s)", len(dups), sample(dups)))
	}
	return fmt.Errorf("delivery check failed: %s", strings.Join(parts, "; "))
}

func sample(vs []string) string {
	if len(vs) > 5 {
		return strings.Join(vs[:5], ",") + ",…"
	}
	return strings.Join(vs, ",")
}
