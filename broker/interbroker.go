package broker

// brokerPeers sends requests to other brokers on their inter-broker
// listener (inter.broker.listener.name): transaction markers to the
// leaders of a transaction's partitions, and a partition leader's KIP-890
// verification to the transaction coordinator, where those live on
// another broker. One pipelined connection per broker, redialled when
// it fails or the broker's endpoint changes.
//
// Locks: those of connPool.

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type brokerPeers struct {
	b    *Broker
	pool *connPool[int32]
}

func newBrokerPeers(b *Broker) *brokerPeers {
	return &brokerPeers{b: b, pool: newConnPool[int32](b.opts.NodeID)}
}

// addr is broker id's inter-broker address in the current image.
func (p *brokerPeers) addr(id int32) (string, error) {
	br := p.b.meta.Image().Brokers[id]
	if br == nil {
		return "", fmt.Errorf("broker %d is not registered", id)
	}
	ep, ok := endpointFor(br, p.b.opts.InterBrokerListener)
	if !ok {
		return "", fmt.Errorf("broker %d has no %s listener", id, p.b.opts.InterBrokerListener)
	}
	return ep.Addr(), nil
}

// send sends req to broker id and returns its answer.
func (p *brokerPeers) send(ctx context.Context, id int32, req kmsg.Request) (kmsg.Response, error) {
	addr, err := p.addr(id)
	if err != nil {
		return nil, err
	}
	conn, err := p.pool.get(ctx, id, addr)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	resp, _, err := conn.roundTrip(ctx, req)
	if err != nil {
		p.pool.drop(id, conn, err)
		return nil, fmt.Errorf("%s to broker %d: %w", kmsg.NameForKey(req.Key()), id, err)
	}
	return resp, nil
}

func (p *brokerPeers) close() { p.pool.close() }
