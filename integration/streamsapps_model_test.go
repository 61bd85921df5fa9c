package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's default partitioner hashes keys as the Java producer does;
// the models' own hash must agree with it.
func TestKafkaPartitionMatchesJavaDefault(t *testing.T) {
	for _, n := range []int32{1, 2, 3, 4, 7} {
		p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := range 500 {
			// Every length mod 4, so that each tail of the hash is covered.
			key := fmt.Sprintf("%c%d-%s", 'a'+i%26, i, "xyzw"[:i%4])
			if got, want := kafkaPartition(key, n), int32(p.Partition(&kgo.Record{Key: []byte(key)}, int(n))); got != want {
				t.Fatalf("kafkaPartition(%q, %d) = %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}

// A hand-worked case of the windowed aggregation: 10 ms windows, 5 ms
// grace, two partitions with their own stream time.
func TestWindowModel(t *testing.T) {
	rec := func(p int32, key string, ts int64, v string) inputRecord {
		return inputRecord{Partition: p, Key: key, Value: str(v), Time: time.UnixMilli(ts)}
	}
	input := []inputRecord{
		rec(0, "a", 1, "1"),   // [0,10)
		rec(0, "a", 12, "2"),  // [10,20); stream time 12
		rec(0, "a", 9, "4"),   // [0,10) still open: 10+5 > 12
		rec(0, "b", 15, "8"),  // stream time 15: [0,10) closes (10+5 <= 15)
		rec(0, "a", 3, "16"),  // late for [0,10)
		rec(1, "c", 2, "32"),  // partition 1's stream time is its own: 2
		rec(0, "a", 19, "64"), // [10,20)
		rec(0, "z", 40, "0"),  // stream time 40 closes [10,20) (20+5 <= 40), not [40,50)
		rec(1, "c", 14, "0"),  // partition 1 at 14: its [0,10) stays open (10+5 > 14)
	}
	want, late := windowModel(input, 10, 5)
	if late != 1 {
		t.Errorf("late = %d, want 1", late)
	}
	exp := updates{"a@0": {str("2:5")}, "a@10": {str("2:66")}, "b@10": {str("1:8")}}
	if err := checkUpdates(toOutput(want), exp, true); err != nil {
		t.Error(err)
	}
	if len(want) != len(exp) {
		t.Errorf("model has %d windows, want %d: %v", len(want), len(exp), want)
	}
}

func toOutput(u updates) []outputRecord {
	var out []outputRecord
	for k, vs := range u {
		for _, v := range vs {
			out = append(out, outputRecord{Key: k, Value: v})
		}
	}
	return out
}

func TestParseStreamsAssignments(t *testing.T) {
	got, err := parseStreamsAssignments("ACTIVE: 0:[1,3]; STANDBY: 0:[0,2] 1:[4]; TARGET-ACTIVE: 0:[1,3]; TARGET-STANDBY: 0:[0,2] 1:[4];")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"ACTIVE": {"0_1", "0_3"}, "STANDBY": {"0_0", "0_2", "1_4"},
		"TARGET-ACTIVE": {"0_1", "0_3"}, "TARGET-STANDBY": {"0_0", "0_2", "1_4"}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
