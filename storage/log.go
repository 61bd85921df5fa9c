package storage

// API CONTRACT (stub): the storage helper replaces the bodies below with the
// real implementation, keeping these names and signatures. The broker is
// written against them.

import (
	"errors"

	"github.com/gregorbroker/gregor/protocol"
	"log/slog"
	"time"
)

var errNotImplemented = errors.New("storage: not implemented yet")

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// AppendOrigin says who appends: a client through Produce, a follower
// replicating, or a coordinator writing its own records.
type AppendOrigin int8

const (
	AppendClient AppendOrigin = iota
	AppendReplication
	AppendCoordinator
)

// LogOptions opens one partition's log.
type LogOptions struct {
	FS             FS
	Dir            string // <log.dir>/<topic>-<partition>
	TopicPartition TopicPartition
	TopicID        [16]byte
	Config         LogConfig
	RecoveryPoint  int64 // from recovery-point-offset-checkpoint; 0 if unknown
	LogStartOffset int64 // from log-start-offset-checkpoint; 0 if unknown
	HighWatermark  int64 // from replication-offset-checkpoint
	Logger         *slog.Logger
	Now            func() time.Time
}

// AppendResult describes a successful append (or an idempotent duplicate,
// answered with the offsets the original append got).
type AppendResult struct {
	FirstOffset    int64
	LastOffset     int64
	LogAppendTime  int64 // -1 unless message.timestamp.type=LogAppendTime
	LogStartOffset int64
	Duplicate      bool
}

// FileRange is a contiguous byte range of a segment file holding whole
// record batches, sent to the client with sendfile where File supports it.
type FileRange struct {
	File File
	Pos  int64
	Size int64
}

// Log is one partition's log. Append, Read and the offset queries are safe
// for concurrent use.
type Log struct{}

// OpenLog opens (creating if needed) and recovers a partition's log.
func OpenLog(opts LogOptions) (*Log, error) { return nil, errNotImplemented }

// Append validates batches (a produce request's records field, one or more
// v2 record batches), assigns offsets, stamps the leader epoch and, when
// configured, LogAppendTime, and writes them. Errors are *kerr.Error values
// (possibly wrapped) such as CORRUPT_MESSAGE, INVALID_RECORD,
// MESSAGE_TOO_LARGE, OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH,
// INVALID_TIMESTAMP; per-record problems come with RecordErrors.
func (l *Log) Append(batches []byte, leaderEpoch int32, origin AppendOrigin) (AppendResult, []protocol.RecordError, error) {
	return AppendResult{}, nil, errNotImplemented
}

// Read returns the batches starting with the one containing offset, up to
// maxBytes (but at least the first batch when minOneBatch, KIP-74), and never
// a batch whose base offset is >= maxOffset (the high watermark or LSO).
// offset outside [LogStartOffset, LogEndOffset] is OFFSET_OUT_OF_RANGE.
func (l *Log) Read(offset int64, maxBytes int32, maxOffset int64, minOneBatch bool) (FileRange, error) {
	return FileRange{}, errNotImplemented
}

func (l *Log) LogStartOffset() int64  { return 0 }
func (l *Log) LogEndOffset() int64    { return 0 }
func (l *Log) HighWatermark() int64   { return 0 }
func (l *Log) SetHighWatermark(int64) {}
func (l *Log) RecoveryPoint() int64   { return 0 }
func (l *Log) Size() int64            { return 0 }
func (l *Log) Dir() string            { return "" }
func (l *Log) SetConfig(LogConfig)    {}

// OffsetForTimestamp finds the first offset whose timestamp is >= ts.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, found bool, err error) {
	return 0, 0, 0, false, errNotImplemented
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp (ListOffsets -3).
func (l *Log) MaxTimestamp() (offset, timestamp int64, leaderEpoch int32) { return -1, -1, -1 }

// EpochForOffset returns the leader epoch of the batch holding offset
// (-1 when unknown), from the leader epoch cache.
func (l *Log) EpochForOffset(offset int64) int32 { return -1 }

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the leader epoch cache.
func (l *Log) EndOffsetForEpoch(epoch int32) (foundEpoch int32, endOffset int64) { return -1, -1 }

func (l *Log) Flush() error                  { return errNotImplemented }
func (l *Log) TruncateTo(offset int64) error { return errNotImplemented }
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	return 0, errNotImplemented
}
func (l *Log) Close() error { return nil }
