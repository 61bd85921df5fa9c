package protocol

// API CONTRACT (stub): the records helper replaces the body with Kafka's
// LogValidator rules, keeping the names and signatures.

import "errors"

// RecordError names one bad record inside a batch (ProduceResponse
// RecordErrors: BatchIndex is the record's index in its batch).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// ValidateOptions are the topic and broker settings a batch is checked
// against.
type ValidateOptions struct {
	NowMs                int64
	LogAppendTime        bool  // message.timestamp.type=LogAppendTime
	TimestampBeforeMaxMs int64 // message.timestamp.before.max.ms
	TimestampAfterMaxMs  int64 // message.timestamp.after.max.ms
	Compacted            bool  // cleanup.policy has compact: keyless records are INVALID_RECORD
	MaxBatchBytes        int32 // max.message.bytes
	// TargetCodec is compression.type: -1 for "producer" (keep the
	// producer's codec), else the codec the broker must store.
	TargetCodec Codec
	// Origin client: control batches from clients are refused.
	FromClient bool
}

// BatchInfo is what validation learned about a batch.
type BatchInfo struct {
	Header BatchHeader
	// MaxTimestamp and OffsetDeltaOfMaxTimestamp locate the record with
	// the largest timestamp (for the time index).
	MaxTimestamp              int64
	OffsetDeltaOfMaxTimestamp int32
	// Rewritten is true when out differs from the input (recompressed).
	Rewritten bool
}

var errValidateNotImplemented = errors.New("protocol: ValidateBatch not implemented yet")

// ValidateBatch checks one whole v2 record batch the way Kafka's
// LogValidator does and returns the batch to store: the input itself, or a
// recompressed copy when TargetCodec differs from the batch's codec. Errors
// are *kerr.Error values (CORRUPT_MESSAGE, INVALID_RECORD, INVALID_TIMESTAMP,
// MESSAGE_TOO_LARGE, UNSUPPORTED_COMPRESSION_TYPE, ...), with per-record
// details in recordErrors where Kafka reports them.
func ValidateBatch(batch []byte, opts ValidateOptions) (out []byte, info BatchInfo, recordErrors []RecordError, err error) {
	return nil, BatchInfo{}, nil, errValidateNotImplemented
}
