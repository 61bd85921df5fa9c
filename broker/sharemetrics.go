package broker

// Share-group metrics (KIP-932) of the share partitions this node leads:
// Kafka's ShareGroupMetrics (records acknowledged by type) and
// SharePartitionMetrics (in-flight records, lock timeouts, per group and
// partition when gregor.metrics.per.partition allows), and, through the
// replica manager's topic meters, BrokerTopicMetrics' share fetch and
// acknowledgement requests.

import (
	"strconv"

	sharepart "github.com/gregorbroker/gregor/broker/share"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ackTypeNames are the ackType label values, by AcknowledgeTypes value
// (Kafka's capitalized AcknowledgeType names; 0, a gap, is not counted).
var ackTypeNames = [...]string{sharepart.AckAccept: "Accept", sharepart.AckRelease: "Release", sharepart.AckReject: "Reject", sharepart.AckRenew: "Renew"}

// countAcknowledged counts the records of batches, acknowledged, by type.
func (m *shareManager) countAcknowledged(batches []sharepart.AckBatch) {
	for _, b := range batches {
		if len(b.Types) == 1 {
			m.countAck(b.Types[0], uint64(b.Last-b.First+1))
			continue
		}
		for _, t := range b.Types {
			m.countAck(t, 1)
		}
	}
}

func (m *shareManager) countAck(t sharepart.AckType, n uint64) {
	if t > 0 && int(t) < len(m.acks) {
		m.acks[t].Add(n)
	}
}

// countRequestTopics marks each topic a share request named once, failed
// when one of its partitions was answered with an error (failed holds the
// topics' outcome by topic id).
func (b *Broker) countRequestTopics(failed map[[16]byte]bool, mark func(topic string, failed bool)) {
	img := b.meta.Image()
	for id, f := range failed {
		if t := img.TopicByID(protocol.UUID(id)); t != nil {
			mark(t.Name, f)
		}
	}
}

// shareFetchOutcomes are the topics of a ShareFetch answer and whether a
// partition of each had an error (AcknowledgeErrorCode aside).
func shareFetchOutcomes(resp *kmsg.ShareFetchResponse, ids []sharePartitionID) map[[16]byte]bool {
	out := map[[16]byte]bool{}
	for _, id := range ids {
		if _, ok := out[id.topic]; !ok {
			out[id.topic] = false
		}
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[t.TopicID] = out[t.TopicID] || p.ErrorCode != 0
		}
	}
	return out
}

func (b *Broker) registerShareMetrics(r *metrics.Registry, perPartition bool) {
	m := b.shareParts
	r.Collect(metrics.RecordAcknowledgements, func(emit *metrics.Emit) {
		for t := sharepart.AckAccept; int(t) < len(m.acks); t++ {
			emit.Add(float64(m.acks[t].Value()), ackTypeNames[t])
		}
	})
	if !perPartition {
		return
	}
	type partStat struct {
		group, topic, partition string
		inFlight                int64
		timeouts                uint64
	}
	var stats []partStat
	r.OnScrape(func() {
		stats = stats[:0]
		m.mu.Lock()
		parts := make([]*sharePart, 0, len(m.parts))
		for _, sp := range m.parts {
			parts = append(parts, sp)
		}
		m.mu.Unlock()
		for _, sp := range parts {
			sp.mu.Lock()
			if sp.p != nil {
				stats = append(stats, partStat{sp.key.Group, sp.tp.Topic, strconv.Itoa(int(sp.tp.Partition)), sp.p.InFlight(), sp.lockTimeouts})
			}
			sp.mu.Unlock()
		}
	})
	r.Collect(metrics.ShareInFlightMessageCount, func(emit *metrics.Emit) {
		for _, s := range stats {
			emit.Add(float64(s.inFlight), s.group, s.topic, s.partition)
		}
	})
	r.Collect(metrics.ShareAcquisitionLockTimeouts, func(emit *metrics.Emit) {
		for _, s := range stats {
			emit.Add(float64(s.timeouts), s.group, s.topic, s.partition)
		}
	})
}
