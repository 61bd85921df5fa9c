package storage

import (
	"encoding/binary"
	"fmt"

	"github.com/gregorbroker/gregor/protocol"
)

// walkRecordTimestamps calls fn with each record's offset and timestamp
// until fn returns false. Under LogAppendTime every record carries the
// batch's max timestamp, as Kafka's DefaultRecord.timestamp() reports.
//
// TODO(records merge): switch to protocol.ForEachRecord, which also
// handles compressed batches; until then only uncompressed batches can be
// walked.
func walkRecordTimestamps(batch []byte, h protocol.BatchHeader, scratch *[]byte, fn func(offset, ts int64) bool) error {
	if h.LogAppendTime() {
		fn(h.BaseOffset, h.MaxTimestamp)
		return nil
	}
	if h.Codec() != protocol.CodecNone {
		return fmt.Errorf("walking records of a %s batch is not supported yet", h.Codec())
	}
	b := batch[protocol.BatchHeaderSize:]
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(b)
		if n <= 0 || length < 0 || int64(len(b)-n) < length {
			return fmt.Errorf("record %d of batch at offset %d is malformed", i, h.BaseOffset)
		}
		rec := b[n : n+int(length)]
		b = b[n+int(length):]
		if len(rec) < 1 {
			return fmt.Errorf("record %d of batch at offset %d is empty", i, h.BaseOffset)
		}
		tsDelta, n1 := binary.Varint(rec[1:])
		if n1 <= 0 {
			return fmt.Errorf("record %d of batch at offset %d has a malformed timestamp", i, h.BaseOffset)
		}
		offDelta, n2 := binary.Varint(rec[1+n1:])
		if n2 <= 0 {
			return fmt.Errorf("record %d of batch at offset %d has a malformed offset delta", i, h.BaseOffset)
		}
		if !fn(h.BaseOffset+offDelta, h.BaseTimestamp+tsDelta) {
			return nil
		}
	}
	return nil
}
