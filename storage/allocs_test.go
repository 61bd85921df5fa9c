package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/gregorbroker/gregor/config"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// Where the base sequence and the CRC sit in a v2 batch header.
const (
	baseSequencePos = 53
	crcPos          = 17
)

// TestAppendDoesNotAllocate appends idempotent batches the way a producer
// sends them (through ParseProduceBatch and AppendBatch, and through
// Append) and checks that an append costs no allocation once the log is
// warm, whatever the number of records in the batch.
func TestAppendDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	for _, codec := range []protocol.Codec{protocol.CodecNone, protocol.CodecLZ4} {
		for _, n := range []int{10, 500} {
			for _, parsed := range []bool{true, false} {
				name := fmt.Sprintf("%s/%d records/parsed=%v", codec, n, parsed)
				t.Run(name, func(t *testing.T) {
					cfg := config.DefaultTopic()
					l := openTest(t, vfs.OSFS{}, filepath.Join(t.TempDir(), "t-0"), cfg)
					defer l.Close()
					proto := makeBatch(t, batchSpec{n: n, value: 100, pid: 7, codec: codec})
					buf := make([]byte, len(proto))
					seq := int32(0)
					appendOne := func() {
						// The producer's next batch: same records, the
						// next sequence, base offset 0 again.
						copy(buf, proto)
						binary.BigEndian.PutUint32(buf[baseSequencePos:], uint32(seq))
						binary.BigEndian.PutUint32(buf[crcPos:], protocol.ComputeBatchCRC(buf))
						seq += int32(n)
						var err error
						if parsed {
							var b protocol.Batch
							if b, err = protocol.ParseProduceBatch(buf, 9); err == nil {
								_, _, err = l.AppendBatch(b, 1, AppendClient)
							}
						} else {
							_, _, err = l.Append(buf, 1, AppendClient)
						}
						if err != nil {
							t.Fatal(err)
						}
					}
					for range 5 {
						appendOne()
					}
					if allocs := testing.AllocsPerRun(50, appendOne); allocs != 0 {
						t.Fatalf("%v allocations per append", allocs)
					}
				})
			}
		}
	}
}
