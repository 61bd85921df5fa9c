package broker

// TxnOffsetCommit (key 28), versions 0-5, answered by the group
// coordinator (coordinator/group) like the other group requests
// (groups.go): off the connection's reader goroutine, after the
// connection's earlier group requests.
//
// Behaviour: the offsets are written to the group's __consumer_offsets
// partition as a transactional batch of the request's producer id and
// epoch, and answered once it is durable. They stay pending, invisible to
// OffsetFetch (UNSTABLE_OFFSET_COMMIT with require_stable), until the
// transaction coordinator ends the transaction on that partition: the
// marker path of WriteTxnMarkers calls completeGroupTransaction, which
// has the group coordinator append the COMMIT or ABORT marker itself and
// then commit or drop the pending offsets, as Kafka's KafkaApis delegates
// __consumer_offsets markers to its group coordinator. Partitions of
// unknown topics get UNKNOWN_TOPIC_OR_PARTITION, the group's errors
// (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, INVALID_GROUP_ID,
// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID) the other
// partitions, and versions 0-1 get COORDINATOR_NOT_AVAILABLE instead of
// COORDINATOR_LOAD_IN_PROGRESS, as in Kafka.
//
// The group's __consumer_offsets partition is first verified with the
// transaction coordinator (KIP-890 part 1), or for v5 added to the
// transaction (Transactions V2's implicit AddOffsetsToTxn).
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition), then READ on
// the group (GROUP_AUTHORIZATION_FAILED on every partition); the
// partitions of topics the principal may not READ get
// TOPIC_AUTHORIZATION_FAILED, and when no other partition is left the
// coordinator is not asked.
//
// Deviation: v6 (topic ids) is not served.

import (
	"context"
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleTxnOffsetCommit(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.TxnOffsetCommitRequest)
	if !b.can(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		r.Respond(errorResponse(req, errCode(kerr.TransactionalIDAuthorizationFailed)))
		return
	}
	if b.groupDenied(r, kmsg.ACLOperationRead, req.Group) {
		return
	}
	inner := req
	var denied []kmsg.TxnOffsetCommitResponseTopic
	if b.authz != nil {
		who := identityOf(r)
		cp := *req
		cp.Topics = nil
		for _, t := range req.Topics {
			if b.allowed(who, kmsg.ACLOperationRead, kmsg.ACLResourceTypeTopic, t.Topic) {
				cp.Topics = append(cp.Topics, t)
				continue
			}
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, kerr.TopicAuthorizationFailed.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			denied = append(denied, rt)
		}
		if len(cp.Topics) == 0 && len(denied) > 0 {
			resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
			resp.Topics = denied
			r.Respond(resp)
			return
		}
		inner = &cp
	}
	b.serveGroupRequest(ctx, r, func(ctx context.Context) kmsg.Response {
		if code := b.verifyTxnOffsetCommit(ctx, r.Version(), inner); code != 0 {
			resp := txnOffsetCommitError(inner, code)
			resp.Topics = append(resp.Topics, denied...)
			return resp
		}
		resp := b.groups.coord.TxnOffsetCommit(ctx, inner)
		resp.Topics = append(resp.Topics, denied...)
		return resp
	})
}

// verifyTxnOffsetCommit checks with the transaction coordinator that the
// group's __consumer_offsets partition is in the producer's transaction
// (KIP-890 part 1: AddOffsetsToTxn added it), or, for v5 (Transactions
// V2), adds it, in place of the client's AddOffsetsToTxn. The answer is
// the error every partition gets, 0 to go on. As for Produce, the
// coordinator's passing conditions become an error the client retries on
// the same coordinator, and TRANSACTION_ABORTABLE reaches only clients
// that know it.
func (b *Broker) verifyTxnOffsetCommit(ctx context.Context, version int16, req *kmsg.TxnOffsetCommitRequest) int16 {
	if b.txns == nil || !b.txnVerification.Load() || req.Group == "" {
		return 0
	}
	parts := []txn.TopicPartition{{Topic: group.OffsetsTopic, Partition: b.groups.coord.PartitionFor(req.Group)}}
	code := b.askTxnCoordinator(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, version < 5)
	switch code {
	case kerr.ProducerFenced.Code:
		return kerr.InvalidProducerEpoch.Code
	case kerr.TransactionAbortable.Code:
		if version < 5 {
			return kerr.InvalidTxnState.Code
		}
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return kerr.CoordinatorLoadInProgress.Code
	}
	return code
}

// txnOffsetCommitError answers every partition of req with code.
func txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	if code == kerr.CoordinatorLoadInProgress.Code && req.Version < 2 {
		code = kerr.CoordinatorNotAvailable.Code
	}
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// completeGroupTransaction writes a transaction marker to a
// __consumer_offsets partition through the group coordinator, which
// applies it to the producer's pending offsets there; WriteTxnMarkers
// calls it for __consumer_offsets partitions instead of appending the
// marker. It returns once the marker is durable. The error wraps the
// *kerr.Error to answer for the partition: as in Kafka, the group
// coordinator not being ready here (NOT_COORDINATOR,
// COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE) is
// NOT_LEADER_OR_FOLLOWER to the transaction coordinator, which retries
// it; a wait that ran out is REQUEST_TIMED_OUT.
func (b *Broker) completeGroupTransaction(ctx context.Context, partition int32, pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	err := b.groups.coord.CompleteTransaction(ctx, partition, pid, epoch, coordinatorEpoch, commit)
	if err == nil {
		return nil
	}
	switch codeOf(err) {
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code:
		return fmt.Errorf("%w: %w", kerr.NotLeaderForPartition, err)
	case kerr.UnknownServerError.Code:
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			return fmt.Errorf("%w: %w", kerr.RequestTimedOut, err)
		}
	}
	return err
}

func init() {
	register(api{
		key: kmsg.TxnOffsetCommit, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "WRITE on the transactional id, READ on the group and each topic",
		errorAnswer: errorAnswerOf(func(r *kmsg.TxnOffsetCommitRequest, out *kmsg.TxnOffsetCommitResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.NewTxnOffsetCommitResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleTxnOffsetCommit,
	})
}
