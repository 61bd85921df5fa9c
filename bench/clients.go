package bench

// The connections benchmark's client phases, on a second fresh node
// after the connection storm's (each phase takes its own baseline after a
// collection):
//
//   - idempotent producers: -producers connections, each an idempotent
//     producer: InitProducerId, then one acks=all Produce of one record
//     (sequence 0) to its partition of a topic of -producer-partitions
//     partitions. Memory per producer once all have produced and closed
//     their connections (the state the node keeps for them), and the
//     producer snapshot bytes per producer the node writes at its clean
//     shutdown (the round ends with SIGTERM).
//   - group members: -members classic consumer group members in -groups
//     groups, each on its own connection (as a consumer's coordinator
//     connection is): JoinGroup (asking for its member id first, as
//     clients since KIP-394 do), the leader's SyncGroup with an
//     assignment for every member, the others' SyncGroup, then Heartbeat
//     every 3 s (the Java consumer's heartbeat.interval.ms); a member told
//     REBALANCE_IN_PROGRESS joins again, as a consumer does. The time
//     until every group is stable with all its members synced in one
//     generation, memory per member, and the node's CPU per heartbeat over
//     a 30 s window of steady heartbeats.

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	figIdemAll       = "idempotent producers: InitProducerId and one acks=all produce each, all answered (s)"
	figIdemRSS       = "RSS per idempotent producer (KiB)"
	figIdemHeap      = "Go heap in use per idempotent producer (KiB, gregor)"
	figIdemSnapshot  = "producer snapshot bytes per producer, written at clean shutdown"
	figGroupsStable  = "group members: every group stable, all members synced (s)"
	figGroupRSS      = "RSS per group member (KiB)"
	figGroupHeap     = "Go heap in use per group member (KiB, gregor)"
	figHeartbeatCPU  = "node CPU per heartbeat, steady (µs)"
	idemTopic        = "bench-idem"
	heartbeatEvery   = 3 * time.Second
	heartbeatWindow  = 30 * time.Second
	groupSessionMs   = 45_000
	groupRebalanceMs = 300_000
)

// clientFigures are the client phases' figures in report order.
func clientFigures() []string {
	return []string{figIdemAll, figIdemRSS, figIdemHeap, figIdemSnapshot, figGroupsStable, figGroupRSS, figGroupHeap, figHeartbeatCPU}
}

// call sends req at version and decodes its answer.
func (bc *benchConn) call(req kmsg.Request, version int16, correlation int32) (kmsg.Response, error) {
	body, err := bc.exchange(req, version, correlation)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(version)
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		// The response header's tagged fields: none are sent here.
		if len(body) == 0 || body[0] != 0 {
			return nil, errors.New("response header with tagged fields")
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %s v%d: %w", kmsg.NameForKey(req.Key()), version, err)
	}
	return resp, nil
}

// dialBench opens a connection to addr.
func dialBench(addr string) (*benchConn, error) {
	c, err := net.DialTimeout("tcp", addr, 30*time.Second)
	if err != nil {
		return nil, err
	}
	return &benchConn{c: c, br: bufio.NewReaderSize(c, 512)}, nil
}

// memoryBaseline is a node's RSS and Go heap (gregor) after a collection.
type memoryBaseline struct{ rss, heap float64 }

func (n *scaleNode) memory(ctx context.Context) memoryBaseline {
	forceGC(ctx, n.metrics)
	rss, _ := rssMiB(n.proc.Pid())
	heap, err := heapInUse(ctx, n.metrics)
	if err != nil {
		heap = -1
	}
	return memoryBaseline{rss, heap}
}

// perClient sets the RSS (and, for gregor, heap) figures: the growth from
// before to after over count, in KiB.
func perClient(figs map[string]float64, rssFig, heapFig string, before, after memoryBaseline, count int) {
	figs[rssFig] = (after.rss - before.rss) * 1024 / float64(count)
	if before.heap >= 0 && after.heap >= 0 {
		figs[heapFig] = (after.heap - before.heap) / 1024 / float64(count)
	}
}

// idempotentProducers runs the producers phase and returns its note; the
// connections stay open (returned) until the caller closes them, so that
// the node holds every producer while it is measured.
func idempotentProducers(ctx context.Context, cfg ConnConfig, n *scaleNode, figs map[string]float64) ([]*benchConn, string, error) {
	admin, err := dialBench(n.bootstrap)
	if err != nil {
		return nil, "", err
	}
	defer admin.c.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = idemTopic, int32(cfg.ProducerPartitions), 1
	create.Topics = append(create.Topics, t)
	create.TimeoutMillis = 30_000
	resp, err := admin.call(create, 7, 1)
	if err != nil {
		return nil, "", fmt.Errorf("creating %s: %w", idemTopic, err)
	}
	if err := kerr.ErrorForCode(resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode); err != nil {
		return nil, "", fmt.Errorf("creating %s: %w", idemTopic, err)
	}
	if err := waitLeaders(ctx, admin, idemTopic, cfg.ProducerPartitions); err != nil {
		return nil, "", err
	}
	// The first producer id block is the controller's to hand out; it is
	// not timed.
	if _, err := initProducerID(ctx, admin); err != nil {
		return nil, "", err
	}
	before := n.memory(ctx)
	conns := make([]*benchConn, cfg.Producers)
	start := time.Now()
	err = forEachParallel(cfg.Producers, cfg.Dialers, func(k int) error {
		bc, err := dialBench(n.bootstrap)
		if err != nil {
			return err
		}
		conns[k] = bc
		ir, err := initProducerID(ctx, bc)
		if err != nil {
			return err
		}
		b := protocol.NewBatchBuilder(protocol.CodecNone).SetProducer(ir.ProducerID, ir.ProducerEpoch, 0)
		b.Add(nil, []byte(fmt.Sprintf("producer %d", k)), nil, time.Now().UnixMilli())
		batch, err := b.Build()
		if err != nil {
			return err
		}
		produce := kmsg.NewPtrProduceRequest()
		produce.Acks, produce.TimeoutMillis = -1, 30_000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = idemTopic
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Partition, pp.Records = int32(k%cfg.ProducerPartitions), batch
		pt.Partitions = append(pt.Partitions, pp)
		produce.Topics = append(produce.Topics, pt)
		// A partition's new leader may not serve yet though Metadata
		// names it: the client retries the same batch, as idempotence
		// allows.
		_, err = bc.callRetrying(ctx, produce, 9, func(r kmsg.Response) (int16, error) {
			return r.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode, nil
		})
		return err
	})
	if err != nil {
		return conns, "", fmt.Errorf("idempotent producers: %w", err)
	}
	figs[figIdemAll] = time.Since(start).Seconds()
	// The producers' state outlives their connections: it is measured
	// without them.
	for i, c := range conns {
		c.c.Close()
		conns[i] = nil
	}
	time.Sleep(2 * time.Second)
	after := n.memory(ctx)
	perClient(figs, figIdemRSS, figIdemHeap, before, after, cfg.Producers)
	return conns, fmt.Sprintf("%s idempotent producers on %d partitions: RSS %.0f → %.0f MiB", thousands(cfg.Producers), cfg.ProducerPartitions, before.rss, after.rss), nil
}

// callRetrying sends req until its answer's error code (code reads it)
// is not a retriable one, 100 ms apart as a client backs off, at most
// 600 times; a nil error means the answer's code was 0.
func (bc *benchConn) callRetrying(ctx context.Context, req kmsg.Request, version int16, code func(kmsg.Response) (int16, error)) (kmsg.Response, error) {
	name := kmsg.NameForKey(req.Key())
	for corr := int32(1); ; corr++ {
		r, err := bc.call(req, version, corr)
		if err == nil {
			var c int16
			if c, err = code(r); err == nil {
				err = kerr.ErrorForCode(c)
				if err == nil {
					return r, nil
				}
				if kerr.IsRetriable(err) && corr < 600 {
					if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
						return nil, err
					}
					continue
				}
			}
		}
		return nil, fmt.Errorf("%s: %w", name, err)
	}
}

// initProducerID asks for an idempotent producer's id.
func initProducerID(ctx context.Context, bc *benchConn) (*kmsg.InitProducerIDResponse, error) {
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionTimeoutMillis = 60_000
	r, err := bc.callRetrying(ctx, init, 4, func(r kmsg.Response) (int16, error) {
		return r.(*kmsg.InitProducerIDResponse).ErrorCode, nil
	})
	if err != nil {
		return nil, err
	}
	return r.(*kmsg.InitProducerIDResponse), nil
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// findCoordinator waits until FindCoordinator names a coordinator for
// group (the first one creates __consumer_offsets).
func findCoordinator(ctx context.Context, bc *benchConn, group string) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKeys = []string{group}
	_, err := bc.callRetrying(ctx, req, 4, func(r kmsg.Response) (int16, error) {
		resp := r.(*kmsg.FindCoordinatorResponse)
		if len(resp.Coordinators) != 1 {
			return 0, fmt.Errorf("%d coordinators for one key", len(resp.Coordinators))
		}
		return resp.Coordinators[0].ErrorCode, nil
	})
	return err
}

// snapshotBytes sums the sizes of the producer snapshots of topic's
// partition directories under dir (the node stopped).
func snapshotBytes(dir, topic string) (int64, int, error) {
	var total int64
	files := 0
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".snapshot") || !strings.HasPrefix(filepath.Base(filepath.Dir(path)), topic+"-") {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		files++
		return nil
	})
	return total, files, err
}

// waitLeaders waits until Metadata gives every partition of topic a
// leader.
func waitLeaders(ctx context.Context, bc *benchConn, topic string, partitions int) error {
	deadline := time.Now().Add(time.Minute)
	for corr := int32(100); ; corr++ {
		req := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, mt)
		r, err := bc.call(req, 12, corr)
		if err != nil {
			return err
		}
		led := 0
		for _, t := range r.(*kmsg.MetadataResponse).Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					led++
				}
			}
		}
		if led == partitions {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d of %d partitions led after a minute", topic, led, partitions)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// forEachParallel calls f for 0..n-1 from workers goroutines and returns
// the first error (the others stop taking work then).
func forEachParallel(n, workers int, f func(int) error) error {
	var next atomic.Int64
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= n {
					return
				}
				mu.Lock()
				failed := first != nil
				mu.Unlock()
				if failed {
					return
				}
				if err := f(k); err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("client %d: %w", k, err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// consumerProtocolV0 is both a version 0 ConsumerProtocolSubscription
// (no topics, null user data) and a version 0 ConsumerProtocolAssignment
// (no partitions, null user data): the members subscribe to nothing.
var consumerProtocolV0 = []byte{0, 0, 0, 0, 0, 0, 255, 255, 255, 255}

// groupMember is one classic consumer group member on its own connection.
// Its goroutine alone uses it.
type groupMember struct {
	bc         *benchConn
	group      string
	memberID   string
	generation int32
	corr       int32
	// synced is the generation it last synced in (-1 before).
	synced atomic.Int32
}

func (m *groupMember) call(req kmsg.Request, version int16) (kmsg.Response, error) {
	m.corr++
	return m.bc.call(req, version, m.corr)
}

// join runs JoinGroup (twice the first time: the coordinator hands out
// the member id) and SyncGroup until it synced a generation; the leader
// assigns every member an empty assignment.
func (m *groupMember) join() error {
	for attempt := 0; attempt < 100; attempt++ {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = m.group, m.memberID, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = groupSessionMs, groupRebalanceMs
		p := kmsg.NewJoinGroupRequestProtocol()
		p.Name, p.Metadata = "range", consumerProtocolV0
		req.Protocols = append(req.Protocols, p)
		r, err := m.call(req, 9)
		if err != nil {
			return fmt.Errorf("JoinGroup: %w", err)
		}
		jr := r.(*kmsg.JoinGroupResponse)
		switch code := kerr.ErrorForCode(jr.ErrorCode); {
		case errors.Is(code, kerr.MemberIDRequired):
			m.memberID = jr.MemberID
			continue
		case errors.Is(code, kerr.RebalanceInProgress):
			continue
		case kerr.IsRetriable(code):
			// The coordinator is loading or moving: a client looks it up
			// again after its backoff; on one node it is the same one.
			time.Sleep(100 * time.Millisecond)
			continue
		case code != nil:
			return fmt.Errorf("JoinGroup: %w", code)
		}
		m.memberID, m.generation = jr.MemberID, jr.Generation
		sync := kmsg.NewPtrSyncGroupRequest()
		sync.Group, sync.Generation, sync.MemberID = m.group, jr.Generation, m.memberID
		sync.ProtocolType, sync.Protocol = kmsg.StringPtr("consumer"), jr.Protocol
		if jr.LeaderID == m.memberID {
			for _, member := range jr.Members {
				a := kmsg.NewSyncGroupRequestGroupAssignment()
				a.MemberID, a.MemberAssignment = member.MemberID, consumerProtocolV0
				sync.GroupAssignment = append(sync.GroupAssignment, a)
			}
		}
		r, err = m.call(sync, 5)
		if err != nil {
			return fmt.Errorf("SyncGroup: %w", err)
		}
		switch code := kerr.ErrorForCode(r.(*kmsg.SyncGroupResponse).ErrorCode); {
		case errors.Is(code, kerr.RebalanceInProgress):
			continue
		case code != nil:
			return fmt.Errorf("SyncGroup: %w", code)
		}
		m.synced.Store(m.generation)
		return nil
	}
	return errors.New("no generation synced after 100 joins")
}

// heartbeat sends one Heartbeat; a rebalance makes the member join again.
func (m *groupMember) heartbeat(beats *atomic.Int64) error {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Group, req.Generation, req.MemberID = m.group, m.generation, m.memberID
	r, err := m.call(req, 4)
	if err != nil {
		return fmt.Errorf("Heartbeat: %w", err)
	}
	beats.Add(1)
	switch code := kerr.ErrorForCode(r.(*kmsg.HeartbeatResponse).ErrorCode); {
	case code == nil:
		return nil
	case errors.Is(code, kerr.RebalanceInProgress), errors.Is(code, kerr.IllegalGeneration):
		m.synced.Store(-1)
		return m.join()
	default:
		return fmt.Errorf("Heartbeat: %w", code)
	}
}

// manyGroupMembers runs the group phase and returns its note.
func manyGroupMembers(ctx context.Context, cfg ConnConfig, n *scaleNode, figs map[string]float64, profileName string) (string, error) {
	// __consumer_offsets is created and loaded before the clock starts.
	admin, err := dialBench(n.bootstrap)
	if err != nil {
		return "", err
	}
	err = findCoordinator(ctx, admin, "bench-group-0")
	admin.c.Close()
	if err != nil {
		return "", err
	}
	before := n.memory(ctx)
	members := make([]*groupMember, cfg.Members)
	for k := range members {
		members[k] = &groupMember{group: fmt.Sprintf("bench-group-%d", k%cfg.Groups)}
		members[k].synced.Store(-1)
	}
	runCtx, stop := context.WithCancel(ctx)
	// The phase ends in this order: stop (no member starts another
	// request), close every connection (a request under way fails at
	// once), wait for the members' goroutines.
	var wg sync.WaitGroup
	defer wg.Wait()
	var connMu sync.Mutex // guards the members' bc and closed
	closed := false
	defer func() {
		connMu.Lock()
		defer connMu.Unlock()
		closed = true
		for _, m := range members {
			if m.bc != nil {
				m.bc.c.Close()
			}
		}
	}()
	defer stop()
	var beats atomic.Int64
	errs := make(chan error, len(members))
	start := time.Now()
	// Members connect in a storm from -dialers goroutines; each then
	// joins and heartbeats on its own goroutine until the phase ends.
	var next atomic.Int64
	for range cfg.Dialers {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(members) || runCtx.Err() != nil {
					return
				}
				m := members[k]
				bc, err := dialBench(n.bootstrap)
				if err == nil {
					connMu.Lock()
					if closed {
						connMu.Unlock()
						bc.c.Close()
						return
					}
					m.bc = bc
					connMu.Unlock()
				}
				if err != nil {
					if runCtx.Err() == nil {
						errs <- fmt.Errorf("member %d of %s: %w", k, m.group, err)
						stop()
					}
					return
				}
				// Each member then runs on its own, as each consumer
				// does: a JoinGroup waits for the group's other members.
				wg.Go(func() {
					if err := m.join(); err != nil {
						if runCtx.Err() == nil {
							errs <- fmt.Errorf("member of %s: %w", m.group, err)
							stop()
						}
						return
					}
					for {
						select {
						case <-runCtx.Done():
							return
						case <-time.After(heartbeatEvery):
						}
						if err := m.heartbeat(&beats); err != nil {
							if runCtx.Err() == nil {
								errs <- fmt.Errorf("member of %s: %w", m.group, err)
								stop()
							}
							return
						}
					}
				})
			}
		})
	}
	stable := func() bool {
		gens := map[string]int32{}
		for _, m := range members {
			g := m.synced.Load()
			if g < 0 {
				return false
			}
			if prev, ok := gens[m.group]; ok && prev != g {
				return false
			}
			gens[m.group] = g
		}
		return true
	}
	limit := time.After(10 * time.Minute)
	for !stable() {
		select {
		case err := <-errs:
			return "", err
		case <-limit:
			return "", errors.New("groups not stable after 10 minutes")
		case <-time.After(50 * time.Millisecond):
		}
	}
	figs[figGroupsStable] = time.Since(start).Seconds()
	// Heartbeats settle into their 3 s rhythm, then the window.
	time.Sleep(2 * heartbeatEvery)
	pid := n.proc.Pid()
	profiled := cpuProfile(ctx, cfg.ProfileDir, n.metrics, strings.TrimSuffix(profileName, "-heap")+"-heartbeat-cpu")
	defer profiled()
	cpu0, err0 := cpuSeconds(pid)
	beats0 := beats.Load()
	select {
	case err := <-errs:
		return "", err
	case <-time.After(heartbeatWindow):
	}
	cpu1, err1 := cpuSeconds(pid)
	beats1 := beats.Load()
	if err0 == nil && err1 == nil && beats1 > beats0 {
		figs[figHeartbeatCPU] = (cpu1 - cpu0) / float64(beats1-beats0) * 1e6
	}
	after := n.memory(ctx)
	saveProfile(ctx, cfg.ProfileDir, n.metrics, "heap?gc=1", profileName)
	perClient(figs, figGroupRSS, figGroupHeap, before, after, cfg.Members)
	if !stable() {
		return "", errors.New("a group rebalanced during the heartbeat window")
	}
	return fmt.Sprintf("%s members in %s groups: %d heartbeats in %s (%.0f/s), node CPU %.1f s; RSS %.0f → %.0f MiB",
		thousands(cfg.Members), thousands(cfg.Groups), beats1-beats0, heartbeatWindow, float64(beats1-beats0)/heartbeatWindow.Seconds(), cpu1-cpu0, before.rss, after.rss), nil
}

// exchange sends req and returns the answer's body after the correlation
// id.
func (bc *benchConn) exchange(req kmsg.Request, version int16, correlation int32) ([]byte, error) {
	req.SetVersion(version)
	body := []byte{0, 0, 0, 0}
	body = binary.BigEndian.AppendUint16(body, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(version))
	body = binary.BigEndian.AppendUint32(body, uint32(correlation))
	body = binary.BigEndian.AppendUint16(body, uint16(len("connbench")))
	body = append(body, "connbench"...)
	if req.IsFlexible() {
		body = append(body, 0) // no tagged fields in the header
	}
	body = req.AppendTo(body)
	binary.BigEndian.PutUint32(body, uint32(len(body)-4))
	_ = bc.c.SetDeadline(time.Now().Add(60 * time.Second))
	defer bc.c.SetDeadline(time.Time{})
	if _, err := bc.c.Write(body); err != nil {
		return nil, err
	}
	var size [4]byte
	if _, err := io.ReadFull(bc.br, size[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("answer of %d bytes", n)
	}
	resp := make([]byte, n)
	if _, err := io.ReadFull(bc.br, resp); err != nil {
		return nil, err
	}
	if got := int32(binary.BigEndian.Uint32(resp)); got != correlation {
		return nil, fmt.Errorf("correlation id %d, want %d", got, correlation)
	}
	return resp[4:], nil
}
