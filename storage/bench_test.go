package storage

import (
	"path/filepath"
	"testing"

	"github.com/gregorbroker/gregor/config"
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
