package broker

// DescribeLogDirs (key 35), versions 1-4 (v5's IsCordoned is not in kmsg;
// Kafka 4.3 serves 1-5).
//
// Reports each log dir with its partitions' sizes and, from v4, the
// filesystem's total and usable bytes; an offline dir with
// KAFKA_STORAGE_ERROR. A partition being moved here by AlterReplicaLogDirs
// appears as a future replica (IsFuture, the bytes copied, and OffsetLag
// from the first segment not wholly copied). A null topic list means every
// partition.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDescribeLogDirs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationDescribe) {
		// DESCRIBE on the cluster is needed; without it no dir is listed.
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	var want map[string]map[int32]bool
	if req.Topics != nil {
		want = map[string]map[int32]bool{}
		for _, t := range req.Topics {
			if want[t.Topic] == nil {
				want[t.Topic] = map[int32]bool{}
			}
			for _, p := range t.Partitions {
				want[t.Topic][p] = true
			}
		}
	}
	for _, d := range b.replicas.DescribeLogDirs() {
		rd := kmsg.NewDescribeLogDirsResponseDir()
		rd.Dir = d.Path
		rd.TotalBytes, rd.UsableBytes = -1, -1
		if d.Err != nil {
			rd.ErrorCode = kerr.KafkaStorageError.Code
			resp.Dirs = append(resp.Dirs, rd)
			continue
		}
		rd.TotalBytes, rd.UsableBytes = d.TotalBytes, d.FreeBytes
		byTopic := map[string]int{}
		for _, p := range d.Partitions {
			tp := p.TopicPartition
			if want != nil && !want[tp.Topic][tp.Partition] {
				continue
			}
			i, ok := byTopic[tp.Topic]
			if !ok {
				t := kmsg.NewDescribeLogDirsResponseDirTopic()
				t.Topic = tp.Topic
				rd.Topics = append(rd.Topics, t)
				i = len(rd.Topics) - 1
				byTopic[tp.Topic] = i
			}
			rp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
			rp.Partition, rp.Size, rp.OffsetLag, rp.IsFuture = tp.Partition, p.Size, p.OffsetLag, p.IsFuture
			rd.Topics[i].Partitions = append(rd.Topics[i].Partitions, rp)
		}
		resp.Dirs = append(resp.Dirs, rd)
	}
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.DescribeLogDirs, min: 1, max: 4,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on the cluster",
		handle:       (*Broker).handleDescribeLogDirs,
	})
}
