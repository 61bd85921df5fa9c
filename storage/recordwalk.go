package storage

import (
	"errors"

	"github.com/gregorbroker/gregor/protocol"
)

// errStopWalk ends a record walk early; it is not an error.
var errStopWalk = errors.New("stop")

// walkRecordTimestamps calls fn with each record's offset and timestamp
// until fn returns false, decompressing into *scratch. Under LogAppendTime
// every record carries the batch's max timestamp, as Kafka's
// DefaultRecord.timestamp() reports.
func walkRecordTimestamps(batch []byte, h protocol.BatchHeader, scratch *[]byte, fn func(offset, ts int64) bool) error {
	if h.LogAppendTime() {
		fn(h.BaseOffset, h.MaxTimestamp)
		return nil
	}
	err := protocol.ForEachRecord(batch, scratch, func(r *protocol.Record) error {
		if !fn(h.BaseOffset+int64(r.OffsetDelta), h.BaseTimestamp+r.TimestampDelta) {
			return errStopWalk
		}
		return nil
	})
	if errors.Is(err, errStopWalk) {
		return nil
	}
	return err
}
