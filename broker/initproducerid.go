package broker

// InitProducerId (key 22), versions 0-5.
//
// Idempotent producers (no transactional id) get a fresh producer id with
// epoch 0, as in Kafka, drawn from blocks the controller hands out
// (AllocateProducerIds, so ids are unique across brokers and restarts).
// Transactional ids belong to the transaction coordinator, which does not
// exist yet: they are answered with COORDINATOR_NOT_AVAILABLE, as
// FindCoordinator answers transaction keys, so transactional clients retry
// and then fail with a clear error instead of misbehaving.

import (
	"context"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleInitProducerID(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.respond(resp)
		return
	}
	r.goAsync(func() {
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
		r.respond(resp)
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
