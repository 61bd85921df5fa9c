package storage

import (
	"os"
	"testing"

	"github.com/gregorbroker/gregor/vfs"
)

// FuzzCheckpointDecoders: malformed checkpoint, partition.metadata and
// properties files give errors, never panics.
func FuzzCheckpointDecoders(f *testing.F) {
	f.Add([]byte("0\n1\nt 0 5\n"))
	f.Add([]byte("0\n2\n0 0\n4 100\n"))
	f.Add([]byte("version: 0\ntopic_id: AQIDBAUGBwgJCgsMDQ4PEA"))
	f.Add([]byte("#c\nversion=1\nnode.id=1\ncluster.id=x\\:y\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		decodeOffsetCheckpoint(data)
		decodeEpochCheckpoint(data)
		decodePartitionMetadata(data)
		parseJavaProperties(data)
		decodeCleanShutdown(data)
	})
}

// FuzzProducerSnapshot: a snapshot that decodes survives a re-encode;
// anything else is refused without panicking.
func FuzzProducerSnapshot(f *testing.F) {
	e := emptyProducerEntry()
	e.addBatch(1, producerBatch{lastSeq: 4, lastOffset: 10, offsetDelta: 4, timestamp: 99})
	f.Add(encodeSnapshot(map[int64]*producerEntry{3: &e}))
	f.Add(encodeSnapshot(nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := decodeSnapshot(data)
		if err != nil {
			return
		}
		again, err := decodeSnapshot(encodeSnapshot(entries))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded snapshot does not decode: %v", err)
		}
		for pid, e := range entries {
			if *again[pid] != *e {
				t.Fatalf("producer %d: %+v became %+v", pid, e, again[pid])
			}
		}
	})
}

// FuzzSegmentRecovery: arbitrary bytes in a segment file are recovered to a
// consistent log (whole, valid batches with dense offsets) or refused.
func FuzzSegmentRecovery(f *testing.F) {
	f.Add(plainBatch(f, 3), int64(0))
	two := append(plainBatch(f, 1), plainBatch(f, 2)...)
	f.Add(two, int64(0))
	f.Add(two[:len(two)-5], int64(7))
	f.Fuzz(func(t *testing.T, data []byte, recoveryPoint int64) {
		fsys := vfs.NewMemFS()
		fsys.MkdirAll("/d/t-0", 0o755)
		fl, _ := fsys.OpenFile("/d/t-0/00000000000000000000.log", os.O_CREATE|os.O_RDWR, 0o644)
		fl.Write(data)
		fl.Close()
		l, err := OpenLog(LogOptions{FS: fsys, Dir: "/d/t-0", Config: smallConfig(), RecoveryPoint: recoveryPoint})
		if err != nil {
			return
		}
		defer l.Close()
		next := l.LogStartOffset()
		for next < l.LogEndOffset() {
			r, err := l.Read(next, 1<<20, l.LogEndOffset(), true)
			if err != nil {
				t.Fatalf("read at %d: %v", next, err)
			}
			hs := batchesIn(t, readRange(t, r))
			if len(hs) == 0 {
				t.Fatalf("nothing at %d below %d", next, l.LogEndOffset())
			}
			for _, h := range hs {
				if h.BaseOffset < next {
					t.Fatalf("offsets go back: %d after %d", h.BaseOffset, next)
				}
				next = h.LastOffset() + 1
			}
		}
		if _, _, err := l.Append(plainBatch(t, 1), 0, AppendClient); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzTxnIndex: any bytes in a .txnindex file open without panicking; what
// opens clean is whole entries that re-encode to the same bytes, and
// validity and range queries over them never panic.
func FuzzTxnIndex(f *testing.F) {
	var entry [txnIndexEntrySize]byte
	abortedTxn{producerID: 7, firstOffset: 1, lastOffset: 4, lastStableOffset: 2}.encode(&entry)
	f.Add(entry[:])
	f.Add(append(entry[:], entry[:10]...))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys := vfs.NewMemFS()
		if err := fsys.MkdirAll("/d", 0o755); err != nil {
			t.Fatal(err)
		}
		file := segmentFile{"/d", 0, txnIndexSuffix}
		if err := vfs.WriteFileSynced(fsys, file.String(), data); err != nil {
			t.Fatal(err)
		}
		x, err := openTxnIndex(fsys, file, 0)
		if err != nil {
			t.Fatal(err)
		}
		x.validFor(1 << 40)
		x.collect(0, 1<<40, func(abortedTxn) {})
		if x.corrupt {
			return
		}
		for i, a := range x.all() {
			var b [txnIndexEntrySize]byte
			a.encode(&b)
			if string(b[:]) != string(data[i*txnIndexEntrySize:(i+1)*txnIndexEntrySize]) {
				t.Fatalf("entry %d re-encodes differently", i)
			}
		}
	})
}
