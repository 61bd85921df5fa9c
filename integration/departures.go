package integration

// departure is a place where Gregor deliberately behaves otherwise than
// Apache Kafka, because Kafka loses or leaks data there (or wastes what a
// user pays for); the report lists them with the test that proves it.
type departure struct {
	topic, kafka, gregor, proof string
}

func departures() []departure {
	return []departure{
		{
			topic:  "DeleteRecords and a crash",
			kafka:  "writes log-start-offset-checkpoint every log.flush.start.offset.checkpoint.interval.ms (60 s): after a crash in between, a log start inside a segment goes back to the segment's base and the deleted records are readable again",
			gregor: "writes the checkpoint before it answers DeleteRecords",
			proof:  "integration/lifecycle TestLogStartOffsetSurvivesKillAndIsHonoured (kill -9 right after DeleteRecords), storage TestDeleteRecordsLogStartSurvivesCrash",
		},
		{
			topic:  "tombstones past delete.retention.ms",
			kafka:  "drops them only in a cleaning that the log's dirty ratio triggers: a compacted topic that is no longer written keeps its deleted keys for good",
			gregor: "also cleans a log when the delete horizon of a tombstone or marker it kept has passed",
			proof:  "storage TestCleanerTombstonesStayUntilTheDeleteHorizon; cli/compaction (Kafka needs new writes to get there)",
		},
		{
			topic:  "a full disk",
			kafka:  "treats ENOSPC as any I/O error: the whole log dir goes offline, reads included, until the broker is restarted",
			gregor: "refuses the append with KAFKA_STORAGE_ERROR, leaves the log as it was, keeps serving reads, and takes appends again once space is freed (a failed fsync still takes the dir offline)",
			proof:  "integration/lifecycle TestFullDiskRefusesAppendsAndRecovers, storage TestFullDiskRefusesAppendsAndRecovers and TestFullDiskAtRollKeepsTheActiveSegment",
		},
		{
			topic:  "the cleaner's memory",
			kafka:  "allocates log.cleaner.dedupe.buffer.size (128 MiB) when the cleaner starts, whatever it will clean",
			gregor: "grows each thread's offset map up to its share of the buffer, as keys come",
			proof:  "storage TestOffsetMapFillsAtItsBudget",
		},
	}
}
