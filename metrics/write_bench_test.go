package metrics

import (
	"io"
	"strconv"
	"testing"
)

// BenchmarkWrite10kPartitions writes what a node hosting 10,000 partitions
// exposes per partition (Kafka's kafka.log:type=Log: four series each,
// labelled with topic and partition) and a few unlabelled gauges: the
// scrape the issue bounds at 100 ms. B/op is what one scrape allocates.
func BenchmarkWrite10kPartitions(b *testing.B) {
	r := partitionsRegistry(10_000)
	if err := r.Write(io.Discard, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := r.Write(io.Discard, false); err != nil {
			b.Fatal(err)
		}
	}
}

// TestScrapeOfManySeriesAllocs: what a scrape allocates is
// the same for 1,000 partitions as for 10,000 (the samples' memory is the
// registry's, kept from the scrape before).
func TestScrapeOfManySeriesAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningful without the race detector")
	}
	allocs := func(partitions int) float64 {
		r := partitionsRegistry(partitions)
		return testing.AllocsPerRun(5, func() {
			if err := r.Write(io.Discard, false); err != nil {
				t.Fatal(err)
			}
		})
	}
	if small, large := allocs(1_000), allocs(10_000); large > small || large > 50 {
		t.Fatalf("a scrape allocates %v times at 1,000 partitions and %v at 10,000", small, large)
	}
}

// partitionsRegistry is a registry with the per-partition log series of
// n partitions and a few unlabelled gauges.
func partitionsRegistry(n int) *Registry {
	type logState struct {
		topic, partition string
		v                float64
	}
	logs := make([]logState, n)
	for i := range logs {
		logs[i] = logState{topic: "topic-" + strconv.Itoa(i/100), partition: strconv.Itoa(i % 100), v: float64(i)}
	}
	r := NewRegistry()
	for _, d := range []*Desc{LogSize, LogStartOffset, LogEndOffset, NumLogSegments} {
		r.Collect(d, func(emit *Emit) {
			for i := range logs {
				emit.Add(logs[i].v, logs[i].topic, logs[i].partition)
			}
		})
	}
	for _, d := range []*Desc{PartitionCount, LeaderCount, UnderReplicatedPartitions} {
		r.Gauge(d, func() float64 { return float64(n) })
	}
	return r
}
