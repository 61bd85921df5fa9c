package broker

// InitProducerId (key 22), versions 0-5.
//
// Idempotent producers (no transactional id) get a fresh producer id with
// epoch 0, as in Kafka, drawn from blocks the controller hands out
// (AllocateProducerIds, so ids are unique across brokers and restarts).
// Transactional ids go to the transaction coordinator (coordinator/txn):
// a new id gets a producer id, a known one its epoch bumped (fencing the
// older producer), an open transaction is aborted first
// (CONCURRENT_TRANSACTIONS, the client retries), and v3+ requests that
// name their producer id and epoch recover after an abortable error
// (KIP-360). transaction.timeout.ms above transaction.max.timeout.ms gets
// INVALID_TRANSACTION_TIMEOUT; PRODUCER_FENCED is INVALID_PRODUCER_EPOCH
// before v4, as in Kafka. A producer id without an epoch (or the reverse)
// is INVALID_REQUEST.
//
// Authorization: WRITE on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs
// IDEMPOTENT_WRITE on the cluster or WRITE on some topic
// (CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"fmt"
	"sync"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleInitProducerID(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.InitProducerIDRequest)
	if b.authz != nil {
		who := identityOf(r)
		if req.TransactionalID != nil && !b.allowed(who, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, *req.TransactionalID) {
			r.Respond(errorResponse(req, errCode(kerr.TransactionalIDAuthorizationFailed)))
			return
		}
		if req.TransactionalID == nil && !b.allowedQuiet(who, kmsg.ACLOperationIdempotentWrite, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName) &&
			!b.allowedAnyOfType(who, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic) {
			r.Respond(errorResponse(req, errCode(kerr.ClusterAuthorizationFailed)))
			return
		}
	}
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if (req.ProducerID == -1) != (req.ProducerEpoch == -1) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.Respond(resp)
		return
	}
	if req.TransactionalID != nil {
		if b.txns == nil {
			resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			r.Respond(resp)
			return
		}
		r.GoAsync(func() {
			pid, epoch, code := b.txns.coord.InitProducerID(ctx, *req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
			resp.ProducerID, resp.ProducerEpoch = pid, epoch
			resp.ErrorCode = fencedForOldClients(code, r.Version(), 4)
			r.Respond(resp)
		})
		return
	}
	r.GoAsync(func() {
		id, err := b.producerIDs.next(ctx, b)
		if err != nil {
			b.log.Warn("allocating a producer id", "err", err)
			resp.ErrorCode = codeOf(err)
			if resp.ErrorCode == kerr.UnknownServerError.Code {
				resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
			}
		} else {
			resp.ProducerID, resp.ProducerEpoch = id, 0
		}
		r.Respond(resp)
	})
}

// producerIDBlocks hands out producer ids from blocks allocated by the
// controller. mu is held across the allocation's round trip to the
// controller, so concurrent InitProducerIds wait for one block (LOCKS.md).
type producerIDBlocks struct {
	mu     sync.Mutex
	nextID int64
	end    int64 // exclusive
}

func (p *producerIDBlocks) next(ctx context.Context, b *Broker) (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nextID >= p.end {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = b.opts.NodeID
		req.BrokerEpoch = b.brokerEpoch
		answer, err := b.forward(ctx, req)
		if err != nil {
			return 0, fmt.Errorf("allocating producer ids: %w", err)
		}
		resp := answer.(*kmsg.AllocateProducerIDsResponse)
		if err := errFromCode(resp.ErrorCode); err != nil {
			return 0, fmt.Errorf("allocating producer ids: %w", err)
		}
		p.nextID, p.end = resp.ProducerIDStart, resp.ProducerIDStart+int64(resp.ProducerIDLen)
	}
	id := p.nextID
	p.nextID++
	return id, nil
}

func init() {
	register(api{
		key: kmsg.InitProducerID, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "WRITE on the transactional id, else IDEMPOTENT_WRITE on the cluster or WRITE on any topic",
		errorAnswer: errorAnswerOf(func(_ *kmsg.InitProducerIDRequest, out *kmsg.InitProducerIDResponse, e apiErr) {
			out.ErrorCode, out.ProducerID, out.ProducerEpoch = e.code, -1, -1
		}),
		handle: (*Broker).handleInitProducerID,
	})
}
