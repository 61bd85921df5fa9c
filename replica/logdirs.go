package replica

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// AlterLogDir moves tp's log to dir, one of this node's log.dirs
// (AlterReplicaLogDirs), answering as Kafka's
// ReplicaManager.alterReplicaLogDirs does: the dir first
// (LOG_DIR_NOT_FOUND when it is not one of log.dirs, KAFKA_STORAGE_ERROR
// when it is offline), then the partition (KAFKA_STORAGE_ERROR when
// offline here, REPLICA_NOT_AVAILABLE when the topic exists but this node
// holds no log of it, UNKNOWN_TOPIC_OR_PARTITION when it does not exist).
// The move runs in the background; DescribeLogDirs shows it as a future
// replica until it is done.
func (m *Manager) AlterLogDir(tp TopicPartition, dir string) *kerr.Error {
	err := m.logs.MoveLog(tp, dir)
	if err == nil {
		return nil
	}
	switch ke := storageErr(err); ke {
	case kerr.ReplicaNotAvailable, kerr.NotLeaderForPartition:
		if p := m.hosted(tp); p != nil && (p.log == nil || p.log.Err() != nil) {
			return kerr.KafkaStorageError
		}
		if !m.imageHas(tp) {
			return kerr.UnknownTopicOrPartition
		}
		return kerr.ReplicaNotAvailable
	default:
		return ke
	}
}
