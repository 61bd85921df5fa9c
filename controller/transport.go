package controller

// NetTransport carries raft messages between controllers over their
// CONTROLLER listeners, as RaftMessages frames (protocol/raftmsg.go).
//
// Goroutines and ownership: each peer has a sender goroutine that owns its
// connection: it dials, writes batches of queued messages, and on a write
// failure drops the connection, tells raft the peer is unreachable (and
// that any snapshot in the batch failed), and dials again after a backoff.
// Send only queues, never blocks: when a peer's queue is full the message
// is dropped, and raft resends it. The receiving side is the broker
// server's RaftMessages handler, which hands each message to
// Controller.Step. Locks: mu guards peers and the controller binding; it
// nests nothing.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/internal/peerdial"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kmsg"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

const (
	// peerQueueLen bounds the messages waiting for one peer.
	peerQueueLen = 4096
	// maxMessagesPerFrame bounds one RaftMessages frame.
	maxMessagesPerFrame   = 256
	transportDialTimeout  = 3 * time.Second
	transportWriteTimeout = 10 * time.Second
	transportBackoff      = 200 * time.Millisecond
)

var errUnknownPeer = errors.New("no CONTROLLER endpoint known for the peer")

// Receive hands the messages of a RaftMessages frame from a peer to c.
// Messages from another cluster or for another node are refused whole.
func (c *Controller) Receive(ctx context.Context, req *protocol.RaftMessagesRequest) error {
	if req.ClusterID != c.info.ClusterID {
		return fmt.Errorf("raft messages from node %d of cluster %s, not %s", req.From, req.ClusterID, c.info.ClusterID)
	}
	msgs := make([]*pb.Message, 0, len(req.Messages))
	for _, data := range req.Messages {
		m := &pb.Message{}
		if err := proto.Unmarshal(data, m); err != nil {
			return fmt.Errorf("raft message from node %d: %w", req.From, err)
		}
		if m.GetTo() != c.raftID || m.GetFrom() != raftIDOf(req.From) {
			return fmt.Errorf("raft message from %d to %d arrived at node %d from node %d", nodeIDOf(m.GetFrom()), nodeIDOf(m.GetTo()), c.cfg.NodeID, req.From)
		}
		msgs = append(msgs, m)
	}
	for _, m := range msgs {
		if err := c.Step(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

// VoterAddress is host:port of voter id's endpoint on listener: from the
// committed voter set (or learners), else the formatted one, else the
// configured one, else (a joining controller with no log yet) where the
// active controller was last heard to be.
func (c *Controller) VoterAddress(id int32, listener string) (string, bool) {
	if h := c.leaderHint.Load(); h != nil && h.id == id && len(c.Image().Voters) == 0 {
		return h.addr, true
	}
	img := c.Image()
	for _, voters := range [][]metadata.Voter{img.Voters, img.Learners, c.info.Voters, c.cfg.Voters} {
		if addr, ok := metadata.VoterEndpoint(voters, id, listener); ok {
			return addr, true
		}
	}
	return "", false
}

// NetTransport is the Transport of a controller in a quorum of several.
type NetTransport struct {
	clusterID string
	self      int32
	logger    *slog.Logger
	// listener is the controller listener peers are reached on, and
	// voters the configured ones, whose addresses serve until a
	// controller is bound.
	listener string
	voters   []metadata.Voter
	// dial connects to a peer's controller listener (with TLS when the
	// listener is SSL).
	dial func(ctx context.Context, addr string) (net.Conn, error)

	mu     sync.Mutex
	ctrl   *Controller
	peers  map[uint64]*peerSender
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewNetTransport returns a transport for node self of clusterID that
// reaches peers on listener, at the addresses of the bound controller
// (Controller.VoterAddress) or, until Start binds it, of voters, and
// connects to them with dial (nil: plain TCP).
func NewNetTransport(clusterID string, self int32, listener string, voters []metadata.Voter, dial func(ctx context.Context, addr string) (net.Conn, error), logger *slog.Logger) *NetTransport {
	if dial == nil {
		dial = peerdial.Dial
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &NetTransport{
		clusterID: clusterID, self: self, listener: listener, voters: voters, dial: dial,
		logger: logger.With("component", "raft-transport", "node", self),
		peers:  map[uint64]*peerSender{}, ctx: ctx, cancel: cancel,
	}
}

// Bind names the controller that hears of unreachable peers and snapshot
// outcomes, and whose image gives peers' addresses (Start binds it). Until
// it is bound those reports are dropped.
func (t *NetTransport) Bind(c *Controller) {
	t.mu.Lock()
	t.ctrl = c
	t.mu.Unlock()
}

func (t *NetTransport) controller() *Controller {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ctrl
}

// Send queues msgs for their peers.
func (t *NetTransport) Send(msgs []*pb.Message) {
	for _, m := range msgs {
		p := t.peer(m.GetTo())
		if p == nil {
			continue
		}
		select {
		case p.queue <- m:
		default:
			// Raft resends; a snapshot must be reported as failed so
			// that raft sends it again.
			if m.GetType() == pb.MsgSnap {
				t.reportSnapshot(m.GetTo(), true)
			}
		}
	}
}

func (t *NetTransport) peer(raftID uint64) *peerSender {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	if p := t.peers[raftID]; p != nil {
		return p
	}
	p := &peerSender{t: t, id: nodeIDOf(raftID), queue: make(chan *pb.Message, peerQueueLen)}
	t.peers[raftID] = p
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		p.run(t.ctx)
	}()
	return p
}

func (t *NetTransport) reportSnapshot(raftID uint64, failed bool) {
	if c := t.controller(); c != nil {
		c.ReportSnapshot(nodeIDOf(raftID), failed)
	}
}

func (t *NetTransport) reportUnreachable(nodeID int32) {
	if c := t.controller(); c != nil {
		c.ReportUnreachable(nodeID)
	}
}

// Close stops every sender and closes their connections.
func (t *NetTransport) Close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.cancel()
	t.wg.Wait()
}

// peerSender owns the connection to one peer.
type peerSender struct {
	t     *NetTransport
	id    int32
	queue chan *pb.Message
}

func (p *peerSender) run(ctx context.Context) {
	var (
		conn net.Conn
		bw   *bufio.Writer
		corr int32
		buf  []byte
	)
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("gregor-raft"))
	batch := make([]*pb.Message, 0, maxMessagesPerFrame)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return
		case m := <-p.queue:
			batch = append(batch, m)
		}
	more:
		for len(batch) < maxMessagesPerFrame {
			select {
			case m := <-p.queue:
				batch = append(batch, m)
			default:
				break more
			}
		}
		if conn != nil && sasl.Expiring(conn) {
			// Its SASL session is due for renewal: the messages
			// already written are delivered, new ones go on a
			// freshly authenticated connection.
			conn.Close()
			conn, bw = nil, nil
		}
		if conn == nil {
			c, err := p.dial(ctx)
			if err != nil {
				p.failed(batch, err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(transportBackoff):
				}
				continue
			}
			conn, bw = c, bufio.NewWriterSize(c, 64<<10)
		}
		req := &protocol.RaftMessagesRequest{ClusterID: p.t.clusterID, From: p.t.self, Messages: make([][]byte, 0, len(batch))}
		for _, m := range batch {
			data, err := proto.Marshal(m)
			if err != nil {
				p.t.logger.Error("marshalling raft message", "err", err)
				continue
			}
			req.Messages = append(req.Messages, data)
		}
		corr++
		buf = formatter.AppendRequest(buf[:0], req, corr)
		_ = conn.SetWriteDeadline(time.Now().Add(transportWriteTimeout))
		_, err := bw.Write(buf)
		if err == nil {
			err = bw.Flush()
		}
		if err != nil {
			conn.Close()
			conn, bw = nil, nil
			p.failed(batch, err)
			continue
		}
		for _, m := range batch {
			if m.GetType() == pb.MsgSnap {
				p.t.reportSnapshot(m.GetTo(), false)
			}
		}
	}
}

func (p *peerSender) dial(ctx context.Context) (net.Conn, error) {
	addr, ok := p.t.resolve(p.id)
	if !ok {
		return nil, errUnknownPeer
	}
	ctx, cancel := context.WithTimeout(ctx, transportDialTimeout)
	defer cancel()
	return p.t.dial(ctx, addr)
}

// failed reports a batch that did not reach the peer.
func (p *peerSender) failed(batch []*pb.Message, err error) {
	p.t.logger.Debug("raft messages not sent", "peer", p.id, "messages", len(batch), "err", err)
	p.t.reportUnreachable(p.id)
	for _, m := range batch {
		if m.GetType() == pb.MsgSnap {
			p.t.reportSnapshot(m.GetTo(), true)
		}
	}
}

// resolve is a peer's address on the controller listener.
func (t *NetTransport) resolve(nodeID int32) (string, bool) {
	if c := t.controller(); c != nil {
		return c.VoterAddress(nodeID, t.listener)
	}
	return metadata.VoterEndpoint(t.voters, nodeID, t.listener)
}
