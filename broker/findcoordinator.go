package broker

// FindCoordinator (key 10), versions 0-6; v4+ batches keys.
//
// A group's coordinator is the leader of its __consumer_offsets partition
// (Kafka's hash of the group id modulo the topic's partition count). When
// the topic does not exist yet it is created, as Kafka does on first use,
// and the answer is COORDINATOR_NOT_AVAILABLE until it has a leader; the
// client retries. Like Kafka, the answer does not wait for the partition's
// groups to be loaded: the group APIs answer COORDINATOR_LOAD_IN_PROGRESS
// meanwhile.
//
// A transactional id's coordinator (type 1) is likewise the leader of its
// __transaction_state partition, and a share partition's (type 2, v6+,
// "group:topicId:partition", sent by brokers' share group state
// persisters) the leader of its __share_group_state partition; a share key
// before v6, or one that does not parse, is INVALID_REQUEST.
//
// Deliberate deviation: Kafka names the partition's leader from its image
// whatever that broker's state. Gregor fences a killed broker within a
// second (controller/liveness.go), and brokers whose Metadata no longer
// lists a fenced broker must not be contradicted by a FindCoordinator
// answer that names it (kgo then fails a transactional producer with
// "unknown broker"). So the answer is COORDINATOR_NOT_AVAILABLE, which
// clients retry, until the partition has a leader that can serve: one in
// the ISR, unfenced, not in controlled shutdown, and not this broker once
// it is shutting down. A broker whose image lags can still name a broker
// just fenced; Metadata keeps listing such a broker for a while
// (metadata.go, departedbrokers.go) so that the client can resolve it.
//
// Authorization: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or on
// the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key;
// CLUSTER_ACTION for share keys (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"slices"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Coordinator key types.
const (
	coordinatorGroup       int8 = 0
	coordinatorTransaction int8 = 1
	coordinatorShare       int8 = 2
)

// kafkaErrorMessage is Kafka's default message for the errors
// FindCoordinator answers with.
func kafkaErrorMessage(code int16) *string {
	msg := kafkaMessage(code)
	return &msg
}

func (b *Broker) handleFindCoordinator(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	img := b.meta.Image()
	v := r.Version()
	validType := req.CoordinatorType == coordinatorGroup || req.CoordinatorType == coordinatorTransaction ||
		req.CoordinatorType == coordinatorShare && v >= 6

	if v < 4 {
		c := b.findCoordinator(r, img, req.CoordinatorType, req.CoordinatorKey)
		if !validType {
			c = noCoordinator(req.CoordinatorKey, kerr.InvalidRequest.Code)
		}
		resp.ErrorCode = c.ErrorCode
		resp.ErrorMessage = kafkaErrorMessage(c.ErrorCode)
		resp.NodeID, resp.Host, resp.Port = c.NodeID, c.Host, c.Port
		r.Respond(resp)
		return
	}
	resp.Coordinators = make([]kmsg.FindCoordinatorResponseCoordinator, 0, len(req.CoordinatorKeys))
	for _, key := range req.CoordinatorKeys {
		var c kmsg.FindCoordinatorResponseCoordinator
		if !validType {
			// Kafka fails the whole request, every key with its message.
			c = noCoordinator(key, kerr.InvalidRequest.Code)
			c.ErrorMessage = kafkaErrorMessage(c.ErrorCode)
		} else {
			c = b.findCoordinator(r, img, req.CoordinatorType, key)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	r.Respond(resp)
}

func noCoordinator(key string, code int16) kmsg.FindCoordinatorResponseCoordinator {
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID, c.Port = -1, -1
	c.ErrorCode = code
	return c
}

// findCoordinator locates one key's coordinator for r.
func (b *Broker) findCoordinator(r *network.Request, img *metadata.Image, keyType int8, key string) kmsg.FindCoordinatorResponseCoordinator {
	listenerName := r.Listener()
	switch {
	case keyType == coordinatorGroup && !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeGroup, key):
		return noCoordinator(key, kerr.GroupAuthorizationFailed.Code)
	case keyType == coordinatorTransaction && !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, key):
		return noCoordinator(key, kerr.TransactionalIDAuthorizationFailed.Code)
	case keyType == coordinatorShare && !b.clusterAllowed(identityOf(r), kmsg.ACLOperationClusterAction):
		c := noCoordinator(key, kerr.ClusterAuthorizationFailed.Code)
		c.ErrorMessage = kafkaErrorMessage(c.ErrorCode)
		return c
	case keyType == coordinatorShare && b.shares != nil:
		k, ok := share.ParseCoordinatorKey(key)
		if !ok {
			c := noCoordinator(key, kerr.InvalidRequest.Code)
			c.ErrorMessage = kafkaErrorMessage(c.ErrorCode)
			return c
		}
		n := b.shares.cfg.NumPartitions
		if t := img.Topic(share.StateTopic); t != nil && t.Partitions.Len() > 0 {
			n = int32(t.Partitions.Len())
		}
		return b.coordinatorOn(img, listenerName, b.shares.runtime, share.PartitionFor(k, n), key)
	case keyType == coordinatorGroup && b.groups != nil:
		return b.coordinatorOn(img, listenerName, b.groups.runtime, b.groups.coord.PartitionFor(key), key)
	case keyType == coordinatorTransaction && b.txns != nil:
		if key == "" {
			// Kafka: an empty transactional id has no coordinator.
			return noCoordinator(key, kerr.InvalidRequest.Code)
		}
		return b.coordinatorOn(img, listenerName, b.txns.runtime, b.txns.coord.PartitionFor(key), key)
	}
	return noCoordinator(key, kerr.CoordinatorNotAvailable.Code)
}

// coordinatorTopic is the internal topic a coordinator lives in:
// *runtime.Runtime, or a test's stand-in.
type coordinatorTopic interface {
	Topic() runtime.TopicSpec
	EnsureTopic()
}

// coordinatorOn answers where key's coordinator is: the leader of its
// partition of the coordinator's topic, on the listener the request came
// in on. The topic is created on first use. The answer is
// COORDINATOR_NOT_AVAILABLE while the partition has no leader that can
// serve: none yet, one that is not in the ISR, one fenced or in controlled
// shutdown, or this very broker once it is shutting down or while it does
// not serve as the partition's leader (its log is not open yet, or its
// leader lease lapsed: replica/lease.go) (the client asks again and finds
// the next leader).
func (b *Broker) coordinatorOn(img *metadata.Image, listenerName string, ct coordinatorTopic, partition int32, key string) kmsg.FindCoordinatorResponseCoordinator {
	none := noCoordinator(key, kerr.CoordinatorNotAvailable.Code)
	t := img.Topic(ct.Topic().Name)
	if t == nil {
		ct.EnsureTopic()
		return none
	}
	if partition < 0 || int(partition) >= t.Partitions.Len() {
		return none
	}
	p := *t.Partitions.At(int(partition))
	leader := p.Leader
	br := img.Brokers[leader]
	switch {
	case leader < 0 || br == nil || br.Fenced || br.InControlledShutdown:
		return none
	case !slices.Contains(p.ISR, leader):
		return none
	case leader == b.opts.NodeID && (b.stopping.Load() || !b.replicas.Leads(replica.TopicPartition{Topic: t.Name, Partition: partition})):
		return none
	}
	ep, ok := endpointFor(br, listenerName)
	if !ok {
		return none
	}
	c := kmsg.NewFindCoordinatorResponseCoordinator()
	c.Key = key
	c.NodeID, c.Host, c.Port = leader, ep.Host, ep.Port
	return c
}

func init() {
	register(api{
		key: kmsg.FindCoordinator, min: 0, max: 6,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on the group or transactional id, CLUSTER_ACTION for share keys",
		handle:       (*Broker).handleFindCoordinator,
	})
}
