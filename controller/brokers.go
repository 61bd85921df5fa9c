package controller

// Broker registration, heartbeats and fencing (Kafka's ClusterControlManager
// and BrokerHeartbeatManager), producer-id blocks, and the partition
// leadership changes that follow a broker's state (decided by
// controller/decide).
//
// A broker's epoch is the offset of its RegisterBrokerRecord, as in Kafka.
// Brokers start fenced; a heartbeat from a broker that has caught up with
// the record that fenced it last (its registration, or the fencing of a
// lapsed session) unfences it; a broker whose heartbeats stop for
// BrokerSessionTimeout is fenced by the leader. Kafka asks only for the
// registration: a broker cut off from the quorum, fenced, and back with
// metadata from before the fencing would be unfenced at once, and would
// take its heartbeat's answer as leave to lead the partitions its stale
// image still gives it (replica/lease.go) until that image caught up. Fencing, controlled
// shutdown and unregistration take the broker out of the ISRs (into the
// ELR where the ISR falls below min.insync.replicas) and its leaderships;
// unfencing elects leaders for the partitions that have none; a new
// incarnation that does not name its predecessor's epoch (an unclean
// restart) leaves the ELRs too.
//
// What each change writes is decided by controller/decide (brokers.go
// there); RegisterBroker and BrokerHeartbeat also read and keep this
// leader's broker sessions (c.sessions), so they run here rather than as
// decisions (decisions.go), as UnregisterBroker does for now. Producer-id
// blocks (AllocateProducerIDs) are a decision.

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// RegisterBroker registers a broker (or amends the registration of the same
// incarnation).
func (c *Controller) RegisterBroker(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	type result struct {
		err   *decide.Error
		epoch int64
	}
	res, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, result) {
		recs, epoch, e := c.env.RegisterBroker(img, offset, req, c.hasLiveContact)
		return recs, result{err: e, epoch: epoch}
	})
	switch {
	case !ok || err != nil:
		resp.ErrorCode = errorCode(err)
	case res.err != nil:
		resp.ErrorCode = res.err.Code()
		c.logger.Info("refused broker registration", "broker", req.BrokerID, "err", res.err.Kind().Message, "reason", res.err.Reason())
	default:
		resp.BrokerEpoch = res.epoch
	}
	return resp
}

// hasValidSession reports whether the broker heartbeated recently (loop).
func (c *Controller) hasValidSession(id int32) bool {
	s := c.sessions[id]
	return s != nil && c.now().Sub(s.lastSeen) < c.cfg.BrokerSessionTimeout
}

// hasLiveContact reports whether the broker's current incarnation has
// registered or heartbeated to this leader within the session timeout.
func (c *Controller) hasLiveContact(id int32) bool {
	s := c.sessions[id]
	return s != nil && s.contacted && c.hasValidSession(id)
}

type brokerState int

const (
	stateFenced brokerState = iota
	stateUnfenced
	stateControlledShutdown
	stateShutdownNow
)

func currentBrokerState(b *metadata.Broker) brokerState {
	switch {
	case b.Fenced:
		return stateFenced
	case b.InControlledShutdown:
		return stateControlledShutdown
	}
	return stateUnfenced
}

// BrokerHeartbeat keeps a broker's session, and fences, unfences or shuts
// it down as it asks and as the cluster allows.
func (c *Controller) BrokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.BrokerHeartbeatResponse)
	resp.IsFenced = true
	type result struct {
		err    *decide.Error
		next   brokerState
		caught bool
	}
	res, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, result) {
		if e := decide.CheckBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); e != nil {
			return nil, result{err: e}
		}
		b := img.Brokers[req.BrokerID]
		s := c.sessions[req.BrokerID]
		if s == nil {
			// Not known to this leader's sessions: fenced, as far as it
			// can tell, no later than the pending image.
			s = &brokerSession{controlledShutdownOffset: -1, fencedOffset: img.Offset}
			c.sessions[req.BrokerID] = s
		}
		cur := currentBrokerState(b)
		next := c.nextBrokerState(img, b, s, cur, req)
		s.lastSeen = c.now()
		s.contacted = true
		s.metadataOffset = req.CurrentMetadataOffset
		var recs []metadata.Record
		if cur != next {
			switch next {
			case stateFenced, stateShutdownNow:
				if cur != stateFenced {
					recs = c.env.FenceBrokerRecords(img, b)
				}
			case stateUnfenced:
				recs = c.env.UnfenceBrokerRecords(img, b)
			case stateControlledShutdown:
				recs = c.env.ControlledShutdownRecords(img, b)
			}
		}
		return recs, result{next: next, caught: req.CurrentMetadataOffset >= b.Epoch}
	})
	if resp.ErrorCode = answerCode(ok, err, res.err); resp.ErrorCode == 0 {
		resp.IsCaughtUp = res.caught
		resp.IsFenced = res.next == stateFenced || res.next == stateShutdownNow
		resp.ShouldShutdown = res.next == stateShutdownNow
	}
	return resp
}

func (c *Controller) nextBrokerState(img *metadata.Image, b *metadata.Broker, s *brokerSession, cur brokerState, req *kmsg.BrokerHeartbeatRequest) brokerState {
	switch cur {
	case stateFenced:
		if req.WantShutdown {
			return stateShutdownNow
		}
		if !req.WantFence && req.CurrentMetadataOffset >= max(b.Epoch, s.fencedOffset) {
			return stateUnfenced
		}
		return stateFenced
	case stateUnfenced:
		if req.WantFence {
			if req.WantShutdown {
				return stateShutdownNow
			}
			return stateFenced
		}
		if req.WantShutdown {
			if hasLeaderships(img, b.ID) {
				return stateControlledShutdown
			}
			return stateShutdownNow
		}
		return stateUnfenced
	case stateControlledShutdown:
		if hasLeaderships(img, b.ID) {
			return stateControlledShutdown
		}
		if s.controlledShutdownOffset < 0 || s.controlledShutdownOffset <= c.lowestActiveOffset(img) {
			return stateShutdownNow
		}
		return stateControlledShutdown
	}
	return stateShutdownNow
}

// lowestActiveOffset is the lowest metadata offset reported by an active
// (unfenced, not shutting down) broker.
func (c *Controller) lowestActiveOffset(img *metadata.Image) int64 {
	lowest := int64(math.MaxInt64)
	for id, b := range img.Brokers {
		if b.Fenced || b.InControlledShutdown {
			continue
		}
		if s := c.sessions[id]; s != nil && s.metadataOffset < lowest {
			lowest = s.metadataOffset
		}
	}
	return lowest
}

func hasLeaderships(img *metadata.Image, id int32) bool {
	for _, t := range img.Topics.All() {
		for _, p := range t.Partitions.All() {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

// maybeFenceStaleBroker fences one broker whose session expired (loop).
func (c *Controller) maybeFenceStaleBroker() {
	now := c.now()
	img := c.latest()
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		b := img.Brokers[id]
		if b.Fenced {
			continue
		}
		s := c.sessions[id]
		if s == nil {
			s = &brokerSession{lastSeen: now, metadataOffset: -1, controlledShutdownOffset: -1}
			c.sessions[id] = s
			continue
		}
		if now.Sub(s.lastSeen) < c.cfg.BrokerSessionTimeout {
			continue
		}
		c.logger.Info("fencing broker whose session expired", "broker", id, "last_heartbeat", s.lastSeen)
		c.propose(c.env.FenceBrokerRecords(img, b), c.nextIndex(), func(err error) {
			if err != nil {
				c.logger.Warn("fencing broker was not committed", "broker", id, "err", err)
			}
		})
		return
	}
}

// UnregisterBroker removes a broker's registration (kafka-cluster
// unregister), after moving it out of every ISR and leadership.
func (c *Controller) UnregisterBroker(ctx context.Context, req *kmsg.UnregisterBrokerRequest) *kmsg.UnregisterBrokerResponse {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	e, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, *decide.Error) {
		return c.env.UnregisterBroker(img, req.BrokerID)
	})
	if !ok || err != nil {
		e = commitError(err)
	}
	resp.ErrorCode = e.Code()
	if e != nil {
		resp.ErrorMessage = e.Message()
	}
	return resp
}

func init() {
	decides((*Controller).RegisterBroker)
	decides((*Controller).BrokerHeartbeat)
	decides((*Controller).UnregisterBroker)
}
