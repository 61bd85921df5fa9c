package broker

// AlterReplicaLogDirs (key 34), versions 1-2 (Kafka 4.3 serves 1-2; v0
// was removed by KIP-896).
//
// Moves partitions between this node's log dirs: each partition's log is
// copied to the named dir in the background while it keeps serving, then
// swapped in (storage/logmove.go). The answer comes once each move is
// under way, as in Kafka; DescribeLogDirs shows the future replica
// (IsFuture, OffsetLag) until the move is done. Errors per partition as
// Kafka's: LOG_DIR_NOT_FOUND for a dir that is not one of log.dirs
// (compared as cleaned paths, where Kafka wants the absolute path),
// KAFKA_STORAGE_ERROR for an offline dir or partition,
// REPLICA_NOT_AVAILABLE for a partition with no replica here,
// UNKNOWN_TOPIC_OR_PARTITION for one that does not exist,
// INVALID_TOPIC_EXCEPTION when the future dir's name would pass 255 bytes.
// A partition named under several dirs goes to the last one, as in Kafka.
//
// Deviations: no cluster ALTER authorisation yet (Gregor has no
// authoriser); a partition whose log is not created yet is refused rather
// than remembered for when it is; a move cut short by a restart is
// abandoned, not resumed.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleAlterReplicaLogDirs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.AlterReplicaLogDirsRequest)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationAlter) {
		// ALTER on the cluster is needed to move replicas.
		r.Respond(errorResponse(req, errCode(kerr.ClusterAuthorizationFailed)))
		return
	}
	resp := req.ResponseKind().(*kmsg.AlterReplicaLogDirsResponse)
	var order []replica.TopicPartition
	dirOf := map[replica.TopicPartition]string{}
	for _, d := range req.Dirs {
		for _, t := range d.Topics {
			for _, p := range t.Partitions {
				tp := replica.TopicPartition{Topic: t.Topic, Partition: p}
				if _, ok := dirOf[tp]; !ok {
					order = append(order, tp)
				}
				dirOf[tp] = d.Dir
			}
		}
	}
	byTopic := map[string]int{}
	for _, tp := range order {
		i, ok := byTopic[tp.Topic]
		if !ok {
			rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
			rt.Topic = tp.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[tp.Topic] = i
		}
		rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
		rp.Partition = tp.Partition
		if ke := b.replicas.AlterLogDir(tp, dirOf[tp]); ke != nil {
			rp.ErrorCode = ke.Code
			b.log.Warn("cannot move a replica to another log dir", "topic", tp.Topic, "partition", tp.Partition, "dir", dirOf[tp], "err", ke.Message)
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, rp)
	}
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.AlterReplicaLogDirs, min: 1, max: 2,
		listeners:    clientListeners,
		authorizedAs: "ALTER on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.AlterReplicaLogDirsRequest, out *kmsg.AlterReplicaLogDirsResponse, e apiErr) {
			for _, d := range r.Dirs {
				for _, t := range d.Topics {
					rt := kmsg.NewAlterReplicaLogDirsResponseTopic()
					rt.Topic = t.Topic
					for _, p := range t.Partitions {
						rp := kmsg.NewAlterReplicaLogDirsResponseTopicPartition()
						rp.Partition, rp.ErrorCode = p, e.code
						rt.Partitions = append(rt.Partitions, rp)
					}
					out.Topics = append(out.Topics, rt)
				}
			}
		}),
		handle: (*Broker).handleAlterReplicaLogDirs,
	})
}
