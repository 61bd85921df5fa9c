package storage

// API CONTRACT (stub): replaced by the storage helper's implementation.

import (
	"context"
	"log/slog"
	"time"
)

// ManagerOptions opens the log manager over log.dirs.
type ManagerOptions struct {
	FS     FS
	Dirs   []string
	Logger *slog.Logger
	Now    func() time.Time
	// FlushSchedulerInterval, CheckpointInterval: how often background work
	// runs (log.flush.scheduler.interval.ms, log.flush.offset.checkpoint.interval.ms).
	FlushSchedulerInterval time.Duration
	CheckpointInterval     time.Duration
}

// DirDescription is one log dir for DescribeLogDirs.
type DirDescription struct {
	Path       string
	Err        error
	TotalBytes int64
	FreeBytes  int64
	Partitions []PartitionDescription
}

// PartitionDescription is one partition's log in a dir.
type PartitionDescription struct {
	TopicPartition TopicPartition
	Size           int64
	OffsetLag      int64
	IsFuture       bool
}

// Manager owns every partition log under log.dirs, their checkpoints and
// the background flush/roll/checkpoint work.
type Manager struct{}

func OpenManager(opts ManagerOptions) (*Manager, error) { return nil, errNotImplemented }

// GetOrCreate opens the partition's existing log (recovering it) or creates
// a new one, in the dir with the fewest partitions.
func (m *Manager) GetOrCreate(tp TopicPartition, topicID [16]byte, cfg LogConfig) (*Log, error) {
	return nil, errNotImplemented
}
func (m *Manager) Get(tp TopicPartition) (*Log, bool) { return nil, false }

// Delete removes a partition's log (renamed to a -delete dir, then removed).
func (m *Manager) Delete(tp TopicPartition) error { return errNotImplemented }

// OnDisk lists the partitions that have a log on disk (to find stray logs).
func (m *Manager) OnDisk() []TopicPartition { return nil }

func (m *Manager) DescribeDirs() []DirDescription { return nil }
func (m *Manager) Checkpoint() error              { return errNotImplemented }

// Run does the background work until ctx ends.
func (m *Manager) Run(ctx context.Context) {}

// Close flushes every log, writes the checkpoints and the clean-shutdown
// marker, and closes the files.
func (m *Manager) Close() error { return nil }

// MetaProperties is a log dir's meta.properties.
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID string
}

func ReadMetaProperties(fsys FS, dir string) (MetaProperties, error) {
	return MetaProperties{}, errNotImplemented
}
func WriteMetaProperties(fsys FS, dir string, mp MetaProperties) error { return errNotImplemented }
