package storage

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// 1 KiB records, 16 per batch (a typical producer batch).
func benchBatch(b *testing.B) []byte {
	return makeBatch(b, batchSpec{n: 16, value: 1024, pid: -1})
}

func BenchmarkAppend(b *testing.B) {
	cfg := config.DefaultTopic()
	l := openTest(b, vfs.OSFS{}, filepath.Join(b.TempDir(), "t-0"), cfg)
	defer l.Close()
	proto := benchBatch(b)
	buf := make([]byte, len(proto))
	b.SetBytes(int64(len(proto)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		copy(buf, proto)
		if _, _, err := l.Append(buf, 1, AppendClient); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead(b *testing.B) {
	cfg := config.DefaultTopic()
	l := openTest(b, vfs.OSFS{}, filepath.Join(b.TempDir(), "t-0"), cfg)
	defer l.Close()
	proto := benchBatch(b)
	for i := 0; i < 2000; i++ {
		buf := append([]byte(nil), proto...)
		if _, _, err := l.Append(buf, 1, AppendClient); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64(i*997) % leo
		r, err := l.Read(off, 1<<20, leo, true)
		if err != nil || r.Size == 0 {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkCleanerRound cleans a 20 MB log of 2,000 keys (1 KiB values in
// batches of 100, half of them lz4) from scratch, on the real filesystem.
func BenchmarkCleanerRound(b *testing.B) {
	cfg := compactConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.SegmentIndexBytes = 1 << 20
	cfg.IndexIntervalBytes = 4096
	value := make([]byte, 1024)
	for i := range value {
		value[i] = byte(i * 7)
	}
	var total int64
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir := b.TempDir()
		l := openTest(b, vfs.OSFS{}, dir, cfg)
		for i := range 200 {
			codec := protocol.CodecNone
			if i%2 == 1 {
				codec = protocol.CodecLZ4
			}
			bb := protocol.NewBatchBuilder(codec)
			for j := range 100 {
				bb.Add(fmt.Appendf(nil, "key-%04d", (i*100+j)%2000), value, nil, testNowMs)
			}
			batch, _ := bb.Build()
			mustAppend(b, l, batch)
		}
		rollAndCommit(b, l)
		total = l.Size()
		cl := newTestCleaner(l, 8<<20)
		c, _ := l.cleanableRange(0, false, testNowMs)
		b.StartTimer()
		if _, _, err := cl.clean(c); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		l.Close()
	}
	b.SetBytes(total)
}
