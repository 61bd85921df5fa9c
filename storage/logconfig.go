package storage

// LogConfig is the effective topic-level configuration of one partition's
// log: the topic's overrides on top of the broker's log.* defaults. Field
// comments name the Kafka topic key; topicconfig.go holds the definitions,
// defaults, broker synonyms and validation.
type LogConfig struct {
	SegmentBytes       int32 // segment.bytes
	SegmentMs          int64 // segment.ms
	SegmentJitterMs    int64 // segment.jitter.ms
	SegmentIndexBytes  int32 // segment.index.bytes
	IndexIntervalBytes int32 // index.interval.bytes
	FlushMessages      int64 // flush.messages
	FlushMs            int64 // flush.ms
	RetentionBytes     int64 // retention.bytes
	RetentionMs        int64 // retention.ms
	DeleteRetentionMs  int64 // delete.retention.ms
	FileDeleteDelayMs  int64 // file.delete.delay.ms
	MinCompactionLagMs int64 // min.compaction.lag.ms
	MaxCompactionLagMs int64 // max.compaction.lag.ms
	MinCleanableRatio  float64
	Compact            bool // cleanup.policy contains compact
	Delete             bool // cleanup.policy contains delete
	MaxMessageBytes    int32
	// LogAppendTime is message.timestamp.type=LogAppendTime.
	LogAppendTime               bool
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64
	MinInsyncReplicas           int32
	CompressionType             string // producer, uncompressed, gzip, snappy, lz4, zstd
	Preallocate                 bool

	// Fields below were added with topicconfig.go; each is the topic key in
	// its comment.
	CompressionGzipLevel                 int32    // compression.gzip.level
	CompressionLz4Level                  int32    // compression.lz4.level
	CompressionZstdLevel                 int32    // compression.zstd.level
	UncleanLeaderElectionEnable          bool     // unclean.leader.election.enable
	LocalRetentionBytes                  int64    // local.retention.bytes (-2: use RetentionBytes)
	LocalRetentionMs                     int64    // local.retention.ms (-2: use RetentionMs)
	RemoteStorageEnable                  bool     // remote.storage.enable
	RemoteLogCopyDisable                 bool     // remote.log.copy.disable
	RemoteLogDeleteOnDisable             bool     // remote.log.delete.on.disable
	LeaderReplicationThrottledReplicas   []string // leader.replication.throttled.replicas
	FollowerReplicationThrottledReplicas []string // follower.replication.throttled.replicas
}

// DefaultLogConfig is Kafka 4.3's default topic configuration.
func DefaultLogConfig() LogConfig {
	return LogConfig{
		SegmentBytes:                1 << 30,
		SegmentMs:                   7 * 24 * 3600 * 1000,
		SegmentIndexBytes:           10 << 20,
		IndexIntervalBytes:          4096,
		FlushMessages:               1<<63 - 1,
		FlushMs:                     1<<63 - 1,
		RetentionBytes:              -1,
		RetentionMs:                 7 * 24 * 3600 * 1000,
		DeleteRetentionMs:           24 * 3600 * 1000,
		FileDeleteDelayMs:           60000,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          1<<63 - 1,
		MinCleanableRatio:           0.5,
		Delete:                      true,
		MaxMessageBytes:             1048588,
		MessageTimestampBeforeMaxMs: 1<<63 - 1,
		MessageTimestampAfterMaxMs:  3600 * 1000,
		MinInsyncReplicas:           1,
		CompressionType:             "producer",
		CompressionGzipLevel:        -1,
		CompressionLz4Level:         9,
		CompressionZstdLevel:        3,
		LocalRetentionBytes:         -2,
		LocalRetentionMs:            -2,
	}
}
