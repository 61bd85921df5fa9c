package storage

import (
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// The last stable offset stops at the first offset of the oldest open
// transaction, and at a transaction whose marker is not below the high
// watermark yet; it survives a restart and follows truncation.
func TestLastStableOffsetFollowsTransactions(t *testing.T) {
	fsys := vfs.NewMemFS()
	cfg := smallConfig()
	l := openTest(t, fsys, "/data/t-0", cfg)
	now := int64(testNowMs)
	plain := func() { appendReplicated(t, l, keyedBatch(t, protocol.CodecNone, now, kv{"k", val("v")})) }
	commit := func() { l.AdvanceHighWatermark(l.LogEndOffset()) }
	plain()
	commit()
	if lso := l.LastStableOffset(); lso != 1 {
		t.Fatalf("without transactions the LSO is %d, want the high watermark 1", lso)
	}
	appendReplicated(t, l, txnBatch(t, 7, 0, now, kv{"a", val("1")})) // offset 1
	plain()                                                           // 2
	appendReplicated(t, l, txnBatch(t, 8, 0, now, kv{"b", val("1")})) // 3
	commit()
	if lso := l.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d with producer 7's transaction open from 1", lso)
	}
	appendReplicated(t, l, protocol.EndTxnMarkerBatch(7, 0, true, 1, now)) // 4
	// The marker is not below the high watermark yet.
	if lso := l.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d before the marker at 4 is below the high watermark", lso)
	}
	commit()
	if lso := l.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d once 7's marker is below the high watermark, want 3 (8's transaction)", lso)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, clean := range []bool{true, false} {
		l = openTest(t, fsys, "/data/t-0", cfg, func(o *LogOptions) { o.CleanShutdown = clean; o.HighWatermark = 5 })
		if lso := l.LastStableOffset(); lso != 3 {
			t.Fatalf("clean=%v: LSO %d after a restart, want 3 (8's transaction is still open)", clean, lso)
		}
		if !clean {
			break
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	appendReplicated(t, l, protocol.EndTxnMarkerBatch(8, 0, false, 1, now)) // 5
	commit()
	if lso := l.LastStableOffset(); lso != 6 {
		t.Fatalf("LSO %d with every transaction ended and replicated, want 6", lso)
	}
	// Truncating the abort marker away opens 8's transaction again.
	if err := l.TruncateTo(5); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 3 {
		t.Fatalf("LSO %d after truncating 8's marker, want 3", lso)
	}
	// Truncating to 3 takes 8's batch and 7's marker: 7's transaction
	// is open again from 1.
	if err := l.TruncateTo(3); err != nil {
		t.Fatal(err)
	}
	if lso := l.LastStableOffset(); lso != 1 {
		t.Fatalf("LSO %d after truncating to 3, want 1", lso)
	}
	// And to 1, nothing transactional is left.
	if err := l.TruncateTo(1); err != nil {
		t.Fatal(err)
	}
	plain()
	commit()
	if lso := l.LastStableOffset(); lso != 2 {
		t.Fatalf("LSO %d after truncating to 1 and one plain batch, want the high watermark 2", lso)
	}
	l.Close()
}

// A follower's log forgets a completed transaction once the high
// watermark passes its marker, though nothing asks it for its LSO.
func TestCompletedTransactionsForgottenAtTheHighWatermark(t *testing.T) {
	l := openTest(t, vfs.NewMemFS(), "/data/t-0", smallConfig())
	now := int64(testNowMs)
	for pid := int64(1); pid <= 100; pid++ {
		appendReplicated(t, l, txnBatch(t, pid, 0, now, kv{"a", val("1")}))
		appendReplicated(t, l, protocol.EndTxnMarkerBatch(pid, 0, pid%5 != 0, 1, now))
		l.AdvanceHighWatermark(l.LogEndOffset())
	}
	l.txnMu.Lock()
	held := len(l.unreplicated)
	l.txnMu.Unlock()
	if held != 0 || l.txnsHeld.Load() {
		t.Fatalf("%d completed transactions held (txnsHeld %v) with every marker below the high watermark", held, l.txnsHeld.Load())
	}
	if lso := l.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d, want the log end %d", lso, l.LogEndOffset())
	}
}
