package replica

import (
	"reflect"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kerr"
)

func consumerFetch(maxWait time.Duration, minBytes int32) FetchParams {
	return FetchParams{ReplicaID: -1, MaxWait: maxWait, MinBytes: minBytes, MaxBytes: 1 << 20}
}

func fetchAt(tp TopicPartition, offset int64) FetchEntry {
	return FetchEntry{TopicPartition: tp, FetchOffset: offset, MaxBytes: 1 << 20, CurrentLeaderEpoch: -1}
}

func TestFetchAnswersAtOnceWhenDataIsThere(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	f.produce(tp, 1, 3)
	done := make(fetchResults, 1)
	f.m.Fetch(consumerFetch(time.Hour, 1), []FetchEntry{fetchAt(tp, 0)}, done)
	r := ready(t, done)[0].Result
	if r.Err != nil || r.Records.Size == 0 || r.HighWatermark != 3 || r.LogStartOffset != 0 {
		t.Fatalf("fetch: %+v", r)
	}
}

// A long poll is answered by the append that brings its data, on the
// appender's goroutine, before the append returns.
func TestFetchLongPollWokenByAppend(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	done := make(fetchResults, 1)
	f.m.Fetch(consumerFetch(time.Hour, 1), []FetchEntry{fetchAt(tp, 0)}, done)
	pending(t, done)
	if w := f.m.fetchWaits.Watched(); w != 1 {
		t.Fatalf("%d fetches wait, want 1", w)
	}
	f.produce(tp, 1, 2)
	r := ready(t, done)[0].Result
	if r.Err != nil || r.Records.Size == 0 || r.HighWatermark != 2 {
		t.Fatalf("woken fetch: %+v", r)
	}
	if w := f.m.fetchWaits.Watched(); w != 0 {
		t.Fatalf("%d fetches still wait", w)
	}
}

// MinBytes above one batch: the first append is not enough, the second is.
func TestFetchWaitsForMinBytes(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	size := int32(len(batch(t, 1, 1)))
	done := make(fetchResults, 1)
	f.m.Fetch(consumerFetch(time.Hour, size+1), []FetchEntry{fetchAt(tp, 0)}, done)
	f.produce(tp, 1, 1)
	pending(t, done)
	f.produce(tp, 1, 1)
	if r := receive(t, done)[0].Result; r.Records.Size <= int64(size) {
		t.Fatalf("answered with %d bytes, want more than %d", r.Records.Size, size)
	}
}

func TestFetchMaxWaitAnswersEmpty(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	done := make(fetchResults, 1)
	start := time.Now()
	f.m.Fetch(consumerFetch(30*time.Millisecond, 1), []FetchEntry{fetchAt(TopicPartition{Topic: "t"}, 0)}, done)
	r := receive(t, done)[0].Result
	if r.Err != nil || r.Records.Size != 0 || time.Since(start) < 30*time.Millisecond {
		t.Fatalf("after the max wait: %+v", r)
	}
}

// Errors answer at once; a leadership change wakes a waiting fetch, which
// answers NOT_LEADER_OR_FOLLOWER with the new leader.
func TestFetchErrors(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(3))
	tp := TopicPartition{Topic: "t"}
	for _, tc := range []struct {
		name  string
		entry FetchEntry
		want  *kerr.Error
	}{
		{"unknown topic", fetchAt(TopicPartition{Topic: "missing"}, 0), kerr.UnknownTopicOrPartition},
		{"fenced epoch", FetchEntry{TopicPartition: tp, CurrentLeaderEpoch: 2, MaxBytes: 100}, kerr.FencedLeaderEpoch},
		{"unknown epoch", FetchEntry{TopicPartition: tp, CurrentLeaderEpoch: 4, MaxBytes: 100}, kerr.UnknownLeaderEpoch},
		{"offset out of range", fetchAt(tp, 5), kerr.OffsetOutOfRange},
	} {
		done := make(fetchResults, 1)
		f.m.Fetch(consumerFetch(time.Hour, 1), []FetchEntry{fetchAt(tp, 0), tc.entry}, done)
		if r := ready(t, done)[1].Result; r.Err != tc.want {
			t.Fatalf("%s: %v, want %v", tc.name, r.Err, tc.want)
		}
	}
	// Set by the caller (an unknown topic ID): kept, and answered at once.
	preset := fetchAt(TopicPartition{}, 0)
	preset.Result.Err = kerr.UnknownTopicID
	done := make(fetchResults, 1)
	f.m.Fetch(consumerFetch(time.Hour, 1), []FetchEntry{preset}, done)
	if r := ready(t, done)[0].Result; r.Err != kerr.UnknownTopicID {
		t.Fatalf("a preset error: %v", r.Err)
	}

	f.m.Fetch(consumerFetch(time.Hour, 1), []FetchEntry{fetchAt(tp, 0)}, done)
	pending(t, done)
	f.setTopic("t", 1, led(2, 4, []int32{self, 2}, []int32{2}))
	r := receive(t, done)[0].Result
	if r.Err != kerr.NotLeaderForPartition || r.CurrentLeader != (LeaderHint{2, 4}) {
		t.Fatalf("after the leader moved: %+v", r)
	}
}

// KIP-74: the first partition with data gets a whole batch beyond the
// limits; the request's byte budget then leaves the next one empty.
func TestFetchMinOneBatchAndBudget(t *testing.T) {
	f := newFixture(t)
	f.setTopic("a", 1, solo(0))
	f.setTopic("b", 2, solo(0))
	for _, name := range []string{"a", "b"} {
		f.produce(TopicPartition{Topic: name}, 1, 5)
	}
	params := consumerFetch(0, 1)
	params.MaxBytes = 10
	done := make(fetchResults, 1)
	f.m.Fetch(params, []FetchEntry{
		{TopicPartition: TopicPartition{Topic: "a"}, MaxBytes: 1, CurrentLeaderEpoch: -1},
		{TopicPartition: TopicPartition{Topic: "b"}, MaxBytes: 1, CurrentLeaderEpoch: -1},
	}, done)
	got := ready(t, done)
	if got[0].Result.Records.Size != int64(len(batch(t, 5, 1))) || got[1].Result.Records.Size != 0 || got[1].Result.HighWatermark != 5 {
		t.Fatalf("first %+v, second %+v", got[0].Result, got[1].Result)
	}
}

// ReadForLoad reads up to the log end, above the high watermark: a new
// leader's coordinator loads what the previous leader's term wrote.
func TestReadForLoad(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 0, []int32{self, 2}, []int32{self, 2}))
	tp := TopicPartition{Topic: "t"}
	for range 3 {
		f.produce(tp, 1, 2)
	}
	f.m.recordFollowerLogEnd(tp, 2, 4) // committed: the first two batches
	read := func(offset int64) (bases []int64) {
		t.Helper()
		b, err := f.m.ReadForLoad(tp, offset, 1)
		if err != nil {
			t.Fatalf("ReadForLoad(%d): %v", offset, err)
		}
		for len(b) > 0 {
			_, rest, h, err := protocol.NextBatch(b)
			if err != nil {
				t.Fatal(err)
			}
			bases = append(bases, h.BaseOffset)
			b = rest
		}
		return bases
	}
	if got := read(0); len(got) != 1 || got[0] != 0 {
		t.Fatalf("from 0 with max 1 byte: %v, want the first batch only", got)
	}
	if got := read(3); len(got) != 1 || got[0] != 2 {
		t.Fatalf("from inside the second batch: %v", got)
	}
	if got := read(4); len(got) != 1 || got[0] != 4 {
		t.Fatalf("at the high watermark: %v, want the batch above it", got)
	}
	if got := read(6); got != nil {
		t.Fatalf("at the log end: %v", got)
	}
	if low, ke, _ := f.m.DeleteRecords(tp, 2); ke != nil || low != 2 {
		t.Fatalf("DeleteRecords: %d %v", low, ke)
	}
	if got := read(0); len(got) != 1 || got[0] != 2 {
		t.Fatalf("from below the log start: %v", got)
	}
}

// ListOffsets as Kafka answers it (Partition.fetchOffsetForTimestamp and
// the lastFetchableOffset filter): a consumer sees only below the high
// watermark, and the max-timestamp record above it is -1/-1, not the
// largest timestamp below.
func TestListOffset(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, led(self, 4, []int32{self, 2}, []int32{self, 2}))
	tp := TopicPartition{Topic: "t"}
	for _, ts := range []int64{1000, 3000, 2000, 9000} {
		done := make(appendResults, 1)
		appendTo(f.m, 1, time.Second, OriginClient, []AppendEntry{{TopicPartition: tp, Records: batch(t, 1, ts), LeaderEpoch: -1}}, done)
		receive(t, done)
	}
	f.m.recordFollowerLogEnd(tp, 2, 3) // offset 3 (timestamp 9000) is not committed
	f.setTopic("followed", 2, led(2, 1, []int32{self, 2}, []int32{self, 2}))
	tests := []struct {
		name      string
		tp        TopicPartition
		epoch     int32
		ts        int64
		replicaID int32
		want      ListedOffset
	}{
		{"latest", tp, -1, LatestTimestamp, -1, ListedOffset{Offset: 3, Timestamp: -1, LeaderEpoch: 4}},
		{"latest for a replica: the log end", tp, -1, LatestTimestamp, 2, ListedOffset{Offset: 4, Timestamp: -1, LeaderEpoch: 4}},
		{"earliest", tp, -1, EarliestTimestamp, -1, ListedOffset{Offset: 0, Timestamp: -1, LeaderEpoch: 4}},
		{"earliest local", tp, -1, EarliestLocalTimestamp, -1, ListedOffset{Offset: 0, Timestamp: -1, LeaderEpoch: 4}},
		{"max timestamp above the high watermark", tp, -1, MaxTimestamp, -1, ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"max timestamp for a replica", tp, -1, MaxTimestamp, 2, ListedOffset{Offset: 3, Timestamp: 9000, LeaderEpoch: 4}},
		{"by timestamp", tp, -1, 1500, -1, ListedOffset{Offset: 1, Timestamp: 3000, LeaderEpoch: 4}},
		{"by timestamp, found above the high watermark", tp, -1, 5000, -1, ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"by timestamp, none", tp, -1, 10000, -1, ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"latest tiered", tp, -1, LatestTieredTimestamp, -1, ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"earliest pending upload", tp, -1, EarliestPendingUploadTimestamp, -1, ListedOffset{Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"bad negative timestamp", tp, -1, -7, -1, ListedOffset{Err: kerr.InvalidRequest, Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"fenced", tp, 3, LatestTimestamp, -1, ListedOffset{Err: kerr.FencedLeaderEpoch, Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"unknown epoch", tp, 5, LatestTimestamp, -1, ListedOffset{Err: kerr.UnknownLeaderEpoch, Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"follower", TopicPartition{Topic: "followed"}, -1, LatestTimestamp, -1, ListedOffset{Err: kerr.NotLeaderForPartition, Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
		{"follower, debugging replica id", TopicPartition{Topic: "followed"}, -1, EarliestTimestamp, DebuggingReplicaID, ListedOffset{Offset: 0, Timestamp: -1, LeaderEpoch: -1}},
		{"unknown topic", TopicPartition{Topic: "missing"}, -1, LatestTimestamp, -1, ListedOffset{Err: kerr.UnknownTopicOrPartition, Offset: -1, Timestamp: -1, LeaderEpoch: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.m.ListOffset(tc.tp, tc.epoch, tc.ts, ReadUncommitted, tc.replicaID); got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
	// The max timestamp below the high watermark once it covers it.
	f.m.recordFollowerLogEnd(tp, 2, 4)
	if got := f.m.ListOffset(tp, -1, MaxTimestamp, ReadUncommitted, -1); got.Offset != 3 || got.Timestamp != 9000 {
		t.Fatalf("max timestamp once committed: %+v", got)
	}
}

func TestDeleteRecordsAndOffsetForLeaderEpoch(t *testing.T) {
	f := newFixture(t)
	cfg := config.DefaultTopic()
	cfg.Compact, cfg.Delete = true, false
	f.configs["compacted"] = cfg
	f.setTopic("t", 1, solo(2))
	f.setTopic("compacted", 2, solo(0))
	tp := TopicPartition{Topic: "t"}
	f.produce(tp, 1, 4)
	if _, ke, _ := f.m.DeleteRecords(tp, 5); ke != kerr.OffsetOutOfRange {
		t.Fatalf("past the high watermark: %v", ke)
	}
	if low, ke, _ := f.m.DeleteRecords(tp, -1); ke != nil || low != 4 {
		t.Fatalf("to the high watermark: %d %v", low, ke)
	}
	if _, ke, msg := f.m.DeleteRecords(TopicPartition{Topic: "compacted"}, 0); ke != kerr.PolicyViolation || msg == "" {
		t.Fatalf("on a compacted topic: %v %q", ke, msg)
	}
	if got := f.m.OffsetForLeaderEpoch(tp, 2, 2); got.Err != nil || got.LeaderEpoch != 2 || got.EndOffset != 4 {
		t.Fatalf("OffsetForLeaderEpoch: %+v", got)
	}
	if got := f.m.OffsetForLeaderEpoch(tp, 1, 2); got.Err != kerr.FencedLeaderEpoch {
		t.Fatalf("fenced: %+v", got)
	}
	if _, ke := f.m.ActiveProducers(tp); ke != nil {
		t.Fatalf("ActiveProducers: %v", ke)
	}
}

// A read_committed fetch carries the aborted transactions overlapping
// what it returns, a read_uncommitted one none; a long poll read again
// when woken reports them afresh.
func TestFetchReadCommittedReportsAbortedTransactions(t *testing.T) {
	f := newFixture(t)
	f.setTopic("t", 1, solo(0))
	tp := TopicPartition{Topic: "t"}
	l, ok := f.logs.Get(tp)
	if !ok {
		t.Fatal("no log")
	}
	now := time.Now().UnixMilli()
	txn := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(42, 0, 0).SetTransactional(true)
	txn.Add(nil, []byte("aborted"), nil, now)
	data, err := txn.Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range [][]byte{batch(t, 1, now), data, protocol.EndTxnMarkerBatch(42, 0, false, 0, now)} {
		protocol.SetBaseOffset(b, l.LogEndOffset())
		if _, _, err := l.Append(b, 0, storage.AppendReplication); err != nil {
			t.Fatal(err)
		}
	}
	l.AdvanceHighWatermark(l.LogEndOffset())
	want := []AbortedTransaction{{ProducerID: 42, FirstOffset: 1}}
	for _, iso := range []Isolation{ReadCommitted, ReadUncommitted} {
		params := consumerFetch(0, 1)
		params.Isolation = iso
		done := make(fetchResults, 1)
		f.m.Fetch(params, []FetchEntry{fetchAt(tp, 0)}, done)
		r := ready(t, done)[0].Result
		r.Records.Release()
		if got := r.AbortedTransactions; iso == ReadCommitted && !reflect.DeepEqual(got, want) || iso == ReadUncommitted && got != nil {
			t.Fatalf("isolation %d: aborted %v", iso, got)
		}
	}
	// Waiting for more than there is, then woken by an append.
	params := consumerFetch(time.Hour, int32(l.Size())+1)
	params.Isolation = ReadCommitted
	done := make(fetchResults, 1)
	f.m.Fetch(params, []FetchEntry{fetchAt(tp, 0)}, done)
	pending(t, done)
	f.produce(tp, 1, 1)
	r := receive(t, done)[0].Result
	r.Records.Release()
	if !reflect.DeepEqual(r.AbortedTransactions, want) {
		t.Fatalf("woken long poll: aborted %v", r.AbortedTransactions)
	}
}
