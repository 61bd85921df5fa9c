package storage

import (
	"os"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// TestWriteSampleLogForKafkaTools writes a small log with idempotent and
// plain batches, two segments, indexes and producer snapshots into
// $GEN_DIR, so that Kafka's own DumpLogSegments (kafka-dump-log.sh
// --index-sanity-check) can be pointed at it. Skipped without GEN_DIR.
func TestWriteSampleLogForKafkaTools(t *testing.T) {
	dir := os.Getenv("GEN_DIR")
	if dir == "" {
		t.Skip()
	}
	cfg := smallConfig()
	cfg.SegmentBytes = 4096
	cfg.IndexIntervalBytes = 300
	l := openTest(t, vfs.OSFS{}, dir, cfg)
	for i := 0; i < 40; i++ {
		spec := batchSpec{n: 1 + i%3, value: 50, pid: -1}
		if i%2 == 0 {
			spec.pid, spec.epoch, spec.seq = 5, 1, int32(i/2*10)
			spec.n = 10
			spec.value = 5
		}
		mustAppend(t, l, makeBatch(t, spec))
	}
	l.Close()
}
