// Package storage is a partition's log on disk, in Kafka's own format:
// segments (.log) with their mmap'ed offset and time indexes, the
// transaction index, recovery after a crash, the checkpoints of a log dir
// (recovery points, log start offsets, the cleaner's offsets), the
// leader-epoch cache, producer state and the last stable offset,
// retention and the cleaner (compaction), and the log manager over
// log.dirs that opens, moves, deletes and flushes logs.
//
// It knows nothing of replication or of the protocol beyond record
// batches: the replica layer above decides what is appended and what is
// visible. Every file operation goes through vfs, so that tests can crash,
// tear, fill and fail the disk.
//
// It imports, of Gregor's packages, only vfs, protocol and config (the
// README's import table).
package storage
