package replica

import (
	"testing"
	"time"
)

// flagOp completes when ready is set.
type flagOp struct{ ready bool }

func (o *flagOp) TryComplete() bool { return o.ready }
func (o *flagOp) Expire()           {}

// BenchmarkPurgatoryParkAndWake is one long-poll fetch's life in the
// purgatory: watched under its partition with a timer, then completed by
// an append's wake-up. Run with -benchmem.
func BenchmarkPurgatoryParkAndWake(b *testing.B) {
	p := NewPurgatory[TopicPartition]()
	tp := TopicPartition{Topic: "t", Partition: 1}
	op := &flagOp{}
	b.ReportAllocs()
	for b.Loop() {
		op.ready = false
		p.TryCompleteElseWatch(op, 500*time.Millisecond, tp)
		op.ready = true
		if p.CheckAndComplete(tp) != 1 {
			b.Fatal("not completed")
		}
	}
}
