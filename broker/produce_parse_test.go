package broker

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
)

// protocol.ParseProduceBatch is to replace checkSingleBatch (it also hands
// the parsed header on to the log): both must answer every input with the
// same code and message.
func TestParseProduceBatchMatchesCheckSingleBatch(t *testing.T) {
	build := func(c protocol.Codec) []byte {
		bb := protocol.NewBatchBuilder(c)
		bb.Add([]byte("k"), []byte("v"), nil, time.Now().UnixMilli())
		b, err := bb.Build()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	one, zstd := build(protocol.CodecNone), build(protocol.CodecZstd)
	magic1 := bytes.Clone(one)
	magic1[16] = 1
	negative := bytes.Clone(one)
	binary.BigEndian.PutUint32(negative[8:], 0xFFFFFFF0)
	inputs := [][]byte{nil, {}, one, zstd, magic1, negative, one[:10], one[:30], one[:len(one)-1],
		append(bytes.Clone(one), one...), append(bytes.Clone(one), 0), append(bytes.Clone(zstd), one...)}
	for i, records := range inputs {
		for _, v := range []int16{3, 6, 7, 9, 13} {
			old := checkSingleBatch(records, v)
			_, err := protocol.ParseProduceBatch(records, v)
			var ve *protocol.ValidationError
			if (old == nil) != (err == nil) || err != nil && !errors.As(err, &ve) {
				t.Fatalf("input %d v%d: checkSingleBatch %v, ParseProduceBatch %v", i, v, old, err)
			}
			if old == nil {
				continue
			}
			code, msg := kerr.InvalidRecord, old.Error()
			if old == errZstdNeedsV7 {
				code, msg = kerr.UnsupportedCompressionType, ""
			}
			if ve.Code != code || ve.Message != msg {
				t.Fatalf("input %d v%d: checkSingleBatch %v %q, ParseProduceBatch %v %q", i, v, code, msg, ve.Code, ve.Message)
			}
		}
	}
}
