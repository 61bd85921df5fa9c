package broker

// brokerPeers sends requests to other brokers on their inter-broker
// listener (inter.broker.listener.name): transaction markers to the
// leaders of a transaction's partitions, a partition leader's KIP-890
// verification to the transaction coordinator, where those live on
// another broker, and followers' fetches from their leaders. One pipelined
// connection per broker for the first two, and one per follower fetcher
// (so that a long poll holds up nothing else), each redialled when it
// fails or the broker's endpoint changes. It is the replica manager's
// replica.Peers. Connections are dialled with Options.InterBrokerDial:
// TLS (and, once it lands, SASL) as the inter-broker listener asks.
//
// Locks: those of controllerclient.Pool.

import (
	"context"
	"fmt"

	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type brokerPeers struct {
	b    *Broker
	pool *controllerclient.Pool[peerLane]
}

// peerLane names a connection to a broker: lane 0 carries transaction
// markers, laneVerify KIP-890 verifications, lane 1+n follower fetcher
// n's requests. Markers and verifications must not share a pipelined
// connection (Kafka gives each its own sender too): a verification the
// coordinator holds while a transaction ends (CONCURRENT_TRANSACTIONS,
// add.partitions.to.txn.retry.backoff.max.ms) would hold up, behind it,
// the very markers that end it.
type peerLane struct {
	id   int32
	lane int
}

const (
	laneMarkers = 0
	laneVerify  = -1
	// laneLag carries the consumer lag metrics' ListOffsets
	// (lagmetrics.go), apart from the markers it would delay.
	laneLag = -2
)

func newBrokerPeers(b *Broker) *brokerPeers {
	return &brokerPeers{b: b, pool: controllerclient.NewPool[peerLane](b.opts.NodeID, b.opts.InterBrokerDial)}
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

// send sends req to broker id on lane and returns its answer.
func (p *brokerPeers) send(ctx context.Context, id int32, lane int, req kmsg.Request) (kmsg.Response, error) {
	return p.sendOn(ctx, peerLane{id: id, lane: lane}, req)
}

func (p *brokerPeers) sendOn(ctx context.Context, lane peerLane, req kmsg.Request) (kmsg.Response, error) {
	addr, err := p.addr(lane.id)
	if err != nil {
		return nil, err
	}
	conn, err := p.pool.Get(ctx, lane, addr)
	if err != nil {
		return nil, fmt.Errorf("broker %d: %w", lane.id, err)
	}
	resp, _, err := conn.RoundTrip(ctx, req)
	if err != nil {
		p.pool.Drop(lane, conn, err)
		return nil, fmt.Errorf("%s to broker %d: %w", kmsg.NameForKey(req.Key()), lane.id, err)
	}
	return resp, nil
}

// SendToBroker is replica.Peers': a follower fetcher's request to a
// leader, on the fetcher's own connection.
func (p *brokerPeers) SendToBroker(ctx context.Context, id int32, conn int, req kmsg.Request) (kmsg.Response, error) {
	return p.sendOn(ctx, peerLane{id: id, lane: 1 + conn}, req)
}

// SendToController is replica.Peers': AlterPartition to the active
// controller.
func (p *brokerPeers) SendToController(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return p.b.ctrl.Handle(ctx, req)
}

func (p *brokerPeers) close() { p.pool.Close() }
