package broker

// The share coordinator's APIs, the inter-broker RPCs of Kafka's share
// group state persister, answered by the share coordinator
// (coordinator/share) on __share_group_state:
//
//	InitializeShareGroupState 0, ReadShareGroupState 0,
//	WriteShareGroupState 0-1, DeleteShareGroupState 0,
//	ReadShareGroupStateSummary 0-1
//
// Each partition of a request is answered on its own: NOT_COORDINATOR when
// its __share_group_state partition is not led here,
// COORDINATOR_LOAD_IN_PROGRESS while it loads. Authorization, as Kafka's:
// CLUSTER_ACTION on the cluster, or every partition
// CLUSTER_AUTHORIZATION_FAILED.
//
// The persister (sharePersister) is this broker's client of them: the group
// coordinator initializes and deletes share state through it, and a
// partition's leader reads and writes it. Each call names one share
// partition; it goes to the leader of that partition's __share_group_state
// partition (this broker's own share coordinator directly, another broker
// on the inter-broker listener) and is retried, with backoff, while the
// coordinator is not available, loading or moving, as Kafka's
// PersisterStateManager retries. FindCoordinator's share keys are in
// findcoordinator.go.
//
// The coordinator's shards are loaded and unloaded with the leadership of
// their __share_group_state partitions by the coordinator runtime.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/coordinator/share"
	"github.com/gregorbroker/gregor/metrics"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareCoordinator is the share coordinator inside the broker.
type shareCoordinator struct {
	cfg       share.Config
	coord     *share.Coordinator
	runtime   *runtime.Runtime
	loadTimes metrics.Window
}

// startShares builds the share coordinator and its runtime. An existing
// __share_group_state decides the partition count, as for the others.
func (b *Broker) startShares(ctx context.Context) *shareCoordinator {
	cfg := share.DefaultConfig()
	if b.opts.ShareCoordinator != nil {
		cfg = *b.opts.ShareCoordinator
	}
	if img := b.meta.Image(); img != nil {
		if t := img.Topic(share.StateTopic); t != nil && t.Partitions.Len() > 0 {
			cfg.NumPartitions = int32(t.Partitions.Len())
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = b.log.With("component", "share-coordinator")
	}
	if cfg.Now == nil {
		cfg.Now = b.now
	}
	s := &shareCoordinator{cfg: cfg, coord: share.New(cfg)}
	s.runtime = runtime.Start(ctx, runtime.Options{
		Topic:       cfg.TopicSpec(),
		Coordinator: s.coord,
		Replicas:    b.replicas,
		CreateTopic: b.createInternalTopic,
		Logger:      cfg.Logger,
		Loaded:      func(took time.Duration) { s.loadTimes.Record(millis(took), b.now()) },
	})
	return s
}

// serveShareState answers one of the five RPCs after the CLUSTER_ACTION
// check, off the connection's reader (a write waits for its append).
func (b *Broker) serveShareState(r *network.Request, fn func(ctx context.Context) kmsg.Response) {
	who := identityOf(r)
	if !b.clusterAllowed(who, kmsg.ACLOperationClusterAction) {
		r.Respond(errorResponse(r.Body, clusterDenied(who, kmsg.ACLOperationClusterAction)))
		return
	}
	r.GoAsync(func() { r.Respond(fn(context.Background())) })
}

func (b *Broker) handleInitializeShareGroupState(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.InitializeShareGroupStateRequest)
	b.serveShareState(r, func(ctx context.Context) kmsg.Response { return b.shares.coord.InitializeShareGroupState(ctx, req) })
}

func (b *Broker) handleReadShareGroupState(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ReadShareGroupStateRequest)
	b.serveShareState(r, func(ctx context.Context) kmsg.Response { return b.shares.coord.ReadShareGroupState(ctx, req) })
}

func (b *Broker) handleWriteShareGroupState(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.WriteShareGroupStateRequest)
	b.serveShareState(r, func(ctx context.Context) kmsg.Response { return b.shares.coord.WriteShareGroupState(ctx, req) })
}

func (b *Broker) handleDeleteShareGroupState(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteShareGroupStateRequest)
	b.serveShareState(r, func(ctx context.Context) kmsg.Response { return b.shares.coord.DeleteShareGroupState(ctx, req) })
}

func (b *Broker) handleReadShareGroupStateSummary(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ReadShareGroupStateSummaryRequest)
	b.serveShareState(r, func(ctx context.Context) kmsg.Response {
		return b.shares.coord.ReadShareGroupStateSummary(ctx, req)
	})
}

// --- the persister --------------------------------------------------------------

// sharePersister is this broker's client of the share coordinators.
type sharePersister struct{ b *Broker }

// laneShare carries the persister's requests to other brokers, apart from
// the markers and verifications.
const laneShare = -3

// shareRetryable are the partition errors a persister call is retried on:
// the coordinator is moving, loading or not there yet.
func shareRetryable(code int16) bool {
	switch code {
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code,
		kerr.UnknownTopicOrPartition.Code, kerr.RequestTimedOut.Code:
		return true
	}
	return false
}

// shareStateLeader is the broker leading key's __share_group_state
// partition, or false while there is none (the topic is created on first
// use).
func (p *sharePersister) shareStateLeader(key share.Key) (int32, bool) {
	b := p.b
	img := b.meta.Image()
	if img == nil {
		return -1, false
	}
	t := img.Topic(share.StateTopic)
	if t == nil || t.Partitions.Len() == 0 {
		b.shares.runtime.EnsureTopic()
		return -1, false
	}
	leader := t.Partitions.At(int(share.PartitionFor(key, t.PartitionCount()))).Leader
	if br := img.Brokers[leader]; leader < 0 || br == nil || br.Fenced {
		return -1, false
	}
	return leader, true
}

// call sends req, about key alone, to key's share coordinator and returns
// its answer once the partition's error (code) is not one to retry.
func (p *sharePersister) call(ctx context.Context, key share.Key, req kmsg.Request, code func(kmsg.Response) int16) (kmsg.Response, error) {
	backoff := 50 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("share state of %s: %w (last: %v)", key.CoordinatorKey(), ctx.Err(), last)
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Second)
		}
		leader, ok := p.shareStateLeader(key)
		if !ok {
			last = kerr.CoordinatorNotAvailable
			continue
		}
		var resp kmsg.Response
		if leader == p.b.opts.NodeID {
			resp = p.local(ctx, req)
		} else {
			var err error
			if resp, err = p.b.peers.send(ctx, leader, laneShare, req); err != nil {
				last = err
				continue
			}
		}
		c := code(resp)
		if shareRetryable(c) {
			last = kerr.ErrorForCode(c)
			continue
		}
		if c != 0 {
			return resp, kerr.ErrorForCode(c)
		}
		return resp, nil
	}
}

// local answers req with this broker's own share coordinator.
func (p *sharePersister) local(ctx context.Context, req kmsg.Request) kmsg.Response {
	c := p.b.shares.coord
	switch r := req.(type) {
	case *kmsg.InitializeShareGroupStateRequest:
		return c.InitializeShareGroupState(ctx, r)
	case *kmsg.ReadShareGroupStateRequest:
		return c.ReadShareGroupState(ctx, r)
	case *kmsg.WriteShareGroupStateRequest:
		return c.WriteShareGroupState(ctx, r)
	case *kmsg.DeleteShareGroupStateRequest:
		return c.DeleteShareGroupState(ctx, r)
	case *kmsg.ReadShareGroupStateSummaryRequest:
		return c.ReadShareGroupStateSummary(ctx, r)
	}
	panic(fmt.Sprintf("share persister: unexpected request %T", req))
}

// Initialize is group.ShareState's: each partition initialized on its own,
// its start left to share.auto.offset.reset.
func (p *sharePersister) Initialize(ctx context.Context, group string, stateEpoch int32, partitions map[[16]byte][]int32) error {
	offsets := map[[16]byte]map[int32]int64{}
	for topic, ps := range partitions {
		offsets[topic] = map[int32]int64{}
		for _, part := range ps {
			offsets[topic][part] = -1
		}
	}
	return p.InitializeAt(ctx, group, stateEpoch, offsets)
}

// InitializeAt is group.ShareState's: each partition initialized at its
// start offset.
func (p *sharePersister) InitializeAt(ctx context.Context, group string, stateEpoch int32, offsets map[[16]byte]map[int32]int64) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for topic, ps := range offsets {
		for part, start := range ps {
			req := kmsg.NewPtrInitializeShareGroupStateRequest()
			req.GroupID = group
			req.Topics = []kmsg.InitializeShareGroupStateRequestTopic{{TopicID: topic,
				Partitions: []kmsg.InitializeShareGroupStateRequestTopicPartition{{Partition: part, StateEpoch: stateEpoch, StartOffset: start}}}}
			_, err := p.call(ctx, share.Key{Group: group, TopicID: topic, Partition: part}, req, func(r kmsg.Response) int16 {
				return r.(*kmsg.InitializeShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Delete is group.ShareState's.
func (p *sharePersister) Delete(ctx context.Context, group string, partitions map[[16]byte][]int32) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var errs []error
	for topic, ps := range partitions {
		for _, part := range ps {
			req := kmsg.NewPtrDeleteShareGroupStateRequest()
			req.GroupID = group
			req.Topics = []kmsg.DeleteShareGroupStateRequestTopic{{TopicID: topic,
				Partitions: []kmsg.DeleteShareGroupStateRequestTopicPartition{{Partition: part}}}}
			_, err := p.call(ctx, share.Key{Group: group, TopicID: topic, Partition: part}, req, func(r kmsg.Response) int16 {
				return r.(*kmsg.DeleteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
			})
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Summary reads key's share state summary (DescribeShareGroupOffsets).
func (p *sharePersister) Summary(ctx context.Context, key share.Key) (kmsg.ReadShareGroupStateSummaryResponseTopicPartition, error) {
	req := kmsg.NewPtrReadShareGroupStateSummaryRequest()
	req.Version = 1
	req.GroupID = key.Group
	req.Topics = []kmsg.ReadShareGroupStateSummaryRequestTopic{{TopicID: key.TopicID,
		Partitions: []kmsg.ReadShareGroupStateSummaryRequestTopicPartition{{Partition: key.Partition, LeaderEpoch: -1}}}}
	resp, err := p.call(ctx, key, req, func(r kmsg.Response) int16 {
		return r.(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0].ErrorCode
	})
	if resp == nil {
		return kmsg.ReadShareGroupStateSummaryResponseTopicPartition{}, err
	}
	return resp.(*kmsg.ReadShareGroupStateSummaryResponse).Topics[0].Partitions[0], err
}

// Read reads key's share state for its partition's leader at leaderEpoch.
func (p *sharePersister) Read(ctx context.Context, key share.Key, leaderEpoch int32) (kmsg.ReadShareGroupStateResponseTopicPartition, error) {
	req := kmsg.NewPtrReadShareGroupStateRequest()
	req.GroupID = key.Group
	req.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: key.TopicID,
		Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: key.Partition, LeaderEpoch: leaderEpoch}}}}
	resp, err := p.call(ctx, key, req, func(r kmsg.Response) int16 {
		return r.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	})
	if resp == nil {
		return kmsg.ReadShareGroupStateResponseTopicPartition{}, err
	}
	return resp.(*kmsg.ReadShareGroupStateResponse).Topics[0].Partitions[0], err
}

// Write records a leader's changes to key's share state.
func (p *sharePersister) Write(ctx context.Context, key share.Key, part kmsg.WriteShareGroupStateRequestTopicPartition) error {
	req := kmsg.NewPtrWriteShareGroupStateRequest()
	req.Version = 1
	req.GroupID = key.Group
	part.Partition = key.Partition
	req.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: key.TopicID, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{part}}}
	_, err := p.call(ctx, key, req, func(r kmsg.Response) int16 {
		return r.(*kmsg.WriteShareGroupStateResponse).Topics[0].Partitions[0].ErrorCode
	})
	return err
}

func init() {
	register(api{
		key: kmsg.InitializeShareGroupState, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.InitializeShareGroupStateRequest, out *kmsg.InitializeShareGroupStateResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.InitializeShareGroupStateResponseTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.InitializeShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: e.code})
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleInitializeShareGroupState,
	})
	register(api{
		key: kmsg.ReadShareGroupState, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.ReadShareGroupStateRequest, out *kmsg.ReadShareGroupStateResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.ReadShareGroupStateResponseTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rp := kmsg.NewReadShareGroupStateResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleReadShareGroupState,
	})
	register(api{
		key: kmsg.WriteShareGroupState, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.WriteShareGroupStateRequest, out *kmsg.WriteShareGroupStateResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.WriteShareGroupStateResponseTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.WriteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: e.code})
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleWriteShareGroupState,
	})
	register(api{
		key: kmsg.DeleteShareGroupState, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.DeleteShareGroupStateRequest, out *kmsg.DeleteShareGroupStateResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.DeleteShareGroupStateResponseTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rt.Partitions = append(rt.Partitions, kmsg.DeleteShareGroupStateResponseTopicPartition{Partition: p.Partition, ErrorCode: e.code})
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleDeleteShareGroupState,
	})
	register(api{
		key: kmsg.ReadShareGroupStateSummary, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "CLUSTER_ACTION on the cluster",
		errorAnswer: errorAnswerOf(func(r *kmsg.ReadShareGroupStateSummaryRequest, out *kmsg.ReadShareGroupStateSummaryResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.ReadShareGroupStateSummaryResponseTopic{TopicID: t.TopicID}
				for _, p := range t.Partitions {
					rp := kmsg.NewReadShareGroupStateSummaryResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p.Partition, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleReadShareGroupStateSummary,
	})
}
