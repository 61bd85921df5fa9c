package storage

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// testClock is a settable clock for logs under test.
type testClock struct{ ms int64 }

func (c *testClock) now() time.Time { return time.UnixMilli(c.ms) }

const testNowMs = 1_700_000_000_000

func smallConfig() config.Topic {
	c := config.DefaultTopic()
	c.SegmentBytes = 16 << 10
	c.SegmentIndexBytes = 1024
	c.IndexIntervalBytes = 512
	c.FileDeleteDelayMs = 0
	return c
}

type batchSpec struct {
	n        int
	ts       int64 // timestamp of the first record; each next one +1
	value    int
	pid      int64
	epoch    int16
	seq      int32
	codec    protocol.Codec
	txn      bool
	sameTime bool
}

func makeBatch(t testing.TB, s batchSpec) []byte {
	t.Helper()
	b := protocol.NewBatchBuilder(s.codec)
	if s.pid > 0 || s.pid == 0 && s.epoch != 0 {
		b.SetProducer(s.pid, s.epoch, s.seq)
	}
	b.SetTransactional(s.txn)
	if s.ts == 0 {
		s.ts = testNowMs
	}
	val := make([]byte, s.value)
	for i := 0; i < s.n; i++ {
		for j := range val {
			val[j] = byte(i + j)
		}
		ts := s.ts + int64(i)
		if s.sameTime {
			ts = s.ts
		}
		b.Add([]byte(fmt.Sprintf("k%d", i)), val, nil, ts)
	}
	out, err := b.Build()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func plainBatch(t testing.TB, n int) []byte {
	return makeBatch(t, batchSpec{n: n, value: 20, pid: -1})
}

func openTest(t testing.TB, fsys vfs.FS, dir string, cfg config.Topic, mod ...func(*LogOptions)) *Log {
	t.Helper()
	clock := &testClock{ms: testNowMs}
	opts := LogOptions{FS: fsys, Dir: dir, TopicPartition: TopicPartition{"t", 0}, Config: cfg, Now: clock.now}
	for _, f := range mod {
		f(&opts)
	}
	l, err := OpenLog(opts)
	if err != nil {
		t.Fatalf("OpenLog: %v", err)
	}
	return l
}

func mustAppend(t testing.TB, l *Log, batch []byte) AppendResult {
	t.Helper()
	res, recErrs, err := l.Append(batch, 3, AppendClient)
	if err != nil {
		t.Fatalf("Append: %v %v", err, recErrs)
	}
	return res
}

func kerrOf(err error) *kerr.Error {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke
	}
	return nil
}

// readRange copies a range's bytes and releases it.
func readRange(t testing.TB, r vfs.FileRange) []byte {
	t.Helper()
	defer r.Release()
	if r.Size == 0 {
		return nil
	}
	buf := make([]byte, r.Size)
	if _, err := r.File.ReadAt(buf, r.Pos); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("reading range: %v", err)
	}
	return buf
}

// batchesIn splits whole batches, failing on any partial one.
func batchesIn(t testing.TB, b []byte) []protocol.BatchHeader {
	t.Helper()
	var out []protocol.BatchHeader
	for len(b) > 0 {
		batch, rest, h, err := protocol.NextBatch(b)
		if err != nil {
			t.Fatalf("range holds a partial or bad batch: %v", err)
		}
		if !protocol.CheckBatchCRC(batch) {
			t.Fatalf("batch at %d fails its CRC", h.BaseOffset)
		}
		out = append(out, h)
		b = rest
	}
	return out
}

func ptr[T any](v T) *T { return &v }
