package controller

// Broker registration, heartbeats and fencing (Kafka's ClusterControlManager
// and BrokerHeartbeatManager), producer-id blocks, and the partition
// leadership changes that follow a broker's state (decided by
// partitionchange.go).
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
// AllocateProducerIDs is a decision of the image and the request
// (decide.go); RegisterBroker and BrokerHeartbeat also read and keep this
// leader's broker sessions (c.sessions), so they stay on the Controller,
// as UnregisterBroker does for now.

import (
	"context"
	"maps"
	"math"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const producerIDBlockSize = 1000

// RegisterBroker registers a broker (or amends the registration of the same
// incarnation).
func (c *Controller) RegisterBroker(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	resp := req.ResponseKind().(*kmsg.BrokerRegistrationResponse)
	resp.BrokerEpoch = -1
	type result struct {
		err   *apiError
		epoch int64
	}
	res, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, result) {
		var recs []metadata.Record
		if old := img.Brokers[req.BrokerID]; old != nil && old.IncarnationID != req.IncarnationID {
			// A new incarnation means the old one went away: take it out
			// of ISRs and leadership first. The records come first, so
			// the registration is at a later offset.
			recs = c.brokerRestartRecords(img, old, req.PreviousBrokerEpoch)
		}
		rec, e := c.registerBroker(img, req, offset)
		if e != nil {
			return nil, result{err: e, epoch: -1}
		}
		return append(recs, rec), result{epoch: rec.BrokerEpoch}
	})
	switch {
	case !ok || err != nil:
		resp.ErrorCode = errorCode(err)
	case res.err != nil:
		resp.ErrorCode = res.err.code()
		c.logger.Info("refused broker registration", "broker", req.BrokerID, "err", res.err.err.Message, "reason", res.err.msg)
	default:
		resp.BrokerEpoch = res.epoch
	}
	return resp
}

func (c *Controller) registerBroker(img *metadata.Image, req *kmsg.BrokerRegistrationRequest, offset int64) (*metadata.RegisterBrokerRecord, *apiError) {
	if req.ClusterID != img.ClusterID {
		return nil, newAPIError(kerr.InconsistentClusterID, "Expected cluster ID %s, but got cluster ID %s", img.ClusterID, req.ClusterID)
	}
	existing := img.Brokers[req.BrokerID]
	// A different incarnation may take over a registration when the old
	// one has no live session with this leader, or when it names the old
	// registration's epoch (it is the same broker restarted, KIP-966).
	if existing != nil && existing.IncarnationID != req.IncarnationID && c.hasLiveContact(req.BrokerID) && req.PreviousBrokerEpoch != existing.Epoch {
		return nil, newAPIError(kerr.DuplicateBrokerRegistration, "Another broker is registered with that broker id.")
	}
	if req.IsMigratingZkBroker {
		return nil, newAPIError(kerr.BrokerIDNotRegistered, "Controller does not support registering ZK brokers.")
	}
	var logDirs []protocol.UUID
	if req.Version >= 2 {
		if len(req.LogDirs) == 0 {
			return nil, newAPIError(kerr.InvalidRegistration, "No directories specified in request")
		}
		seen := map[protocol.UUID]bool{}
		for _, d := range req.LogDirs {
			u := protocol.UUID(d)
			if reservedDirectoryID(u) {
				return nil, newAPIError(kerr.InvalidRegistration, "Reserved directory ID in request")
			}
			if seen[u] {
				return nil, newAPIError(kerr.InvalidRegistration, "Duplicate directory ID in request")
			}
			seen[u] = true
			logDirs = append(logDirs, u)
		}
		for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
			if id == req.BrokerID {
				continue
			}
			for _, d := range img.Brokers[id].LogDirs {
				if seen[d] {
					return nil, newAPIError(kerr.InvalidRegistration, "Broker %d is already registered with directory %s", id, d)
				}
			}
		}
	}
	// Every feature the broker names must include the finalized level, and
	// every finalized feature must be supported by the broker.
	var features []metadata.BrokerFeature
	named := map[string]bool{}
	for _, f := range req.Features {
		if e := checkBrokerFeature(img, f.Name, f.MinSupportedVersion, f.MaxSupportedVersion); e != nil {
			return nil, e
		}
		named[f.Name] = true
		features = append(features, metadata.BrokerFeature{Name: f.Name, MinLevel: f.MinSupportedVersion, MaxLevel: f.MaxSupportedVersion})
	}
	if !named[metadata.MetadataVersionFeature] {
		// Kafka assumes a broker that names no metadata.version supports
		// only the first KRaft one.
		if e := checkBrokerFeature(img, metadata.MetadataVersionFeature, 1, 1); e != nil {
			return nil, e
		}
		features = append(features, metadata.BrokerFeature{Name: metadata.MetadataVersionFeature, MinLevel: 1, MaxLevel: 1})
	}
	for _, name := range slices.Sorted(maps.Keys(img.Features)) {
		if !named[name] && name != metadata.MetadataVersionFeature && img.Features[name] != 0 {
			if e := checkBrokerFeature(img, name, 0, 0); e != nil {
				return nil, e
			}
		}
	}
	rec := &metadata.RegisterBrokerRecord{
		BrokerID:      req.BrokerID,
		IncarnationID: req.IncarnationID,
		Rack:          req.Rack,
		Features:      features,
		LogDirs:       logDirs,
		Fenced:        true,
		BrokerEpoch:   offset,
	}
	for _, l := range req.Listeners {
		rec.Endpoints = append(rec.Endpoints, metadata.Endpoint{Name: l.Name, Host: l.Host, Port: int32(l.Port), SecurityProtocol: l.SecurityProtocol})
	}
	if existing != nil && existing.IncarnationID == req.IncarnationID {
		// The same incarnation amends its registration and keeps its
		// epoch and state.
		rec.BrokerEpoch = existing.Epoch
		rec.Fenced = existing.Fenced
		rec.InControlledShutdown = existing.InControlledShutdown
	}
	return rec, nil
}

func checkBrokerFeature(img *metadata.Image, name string, minLevel, maxLevel int16) *apiError {
	finalized, ok := img.Features[name]
	if !ok {
		finalized = 0
		if name == metadata.MetadataVersionFeature {
			finalized = 1
		}
	}
	if finalized < minLevel || finalized > maxLevel {
		return newAPIError(kerr.UnsupportedVersion, "Unable to register because the broker does not support finalized version %d of %s. The broker wants a version between %d and %d, inclusive.", finalized, name, minLevel, maxLevel)
	}
	return nil
}

// reservedDirectoryID: Kafka reserves the UUIDs whose first 8 bytes are 0
// and last 8 bytes below 100 (UNASSIGNED, LOST, MIGRATING, ...).
func reservedDirectoryID(u protocol.UUID) bool {
	for _, b := range u[:8] {
		if b != 0 {
			return false
		}
	}
	var low uint64
	for _, b := range u[8:] {
		low = low<<8 | uint64(b)
	}
	return low < 100
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

// checkBrokerEpoch refuses a stale or unknown broker epoch (invariant 3).
func checkBrokerEpoch(img *metadata.Image, id int32, epoch int64) *apiError {
	b := img.Brokers[id]
	if b == nil {
		return newAPIError(kerr.StaleBrokerEpoch, "No broker registration found for broker id %d", id)
	}
	if b.Epoch != epoch {
		return newAPIError(kerr.StaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", b.Epoch, epoch)
	}
	return nil
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
		err    *apiError
		next   brokerState
		caught bool
	}
	res, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, result) {
		if e := checkBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); e != nil {
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
					recs = c.fenceBrokerRecords(img, b)
				}
			case stateUnfenced:
				recs = c.unfenceBrokerRecords(img, b)
			case stateControlledShutdown:
				recs = c.controlledShutdownRecords(img, b)
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
	for _, t := range img.Topics {
		for _, p := range t.Partitions {
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
		c.propose(c.fenceBrokerRecords(img, b), c.nextIndex(), func(err error) {
			if err != nil {
				c.logger.Warn("fencing broker was not committed", "broker", id, "err", err)
			}
		})
		return
	}
}

// fenceBrokerRecords fences b: it leaves every ISR it is in (to the ELR
// when the ISR falls below min.insync.replicas; without ELR a partition
// whose ISR would become empty keeps it and loses its leader) and leaders
// move to other ISR members.
func (c *Controller) fenceBrokerRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := c.removeBrokerFromPartitions(img, b.ID)
	return append(recs, &metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceChangeFence})
}

// controlledShutdownRecords moves leadership and ISR membership away from
// a broker that asked to shut down.
func (c *Controller) controlledShutdownRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := c.removeBrokerFromPartitions(img, b.ID)
	return append(recs, &metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: metadata.ControlledShutdownChangeShutdown})
}

// unfenceBrokerRecords unfences b and elects leaders for the leaderless
// partitions that can have one now (b from the ISR or the ELR, or as the
// last known leader, or by an unclean election where the topic allows it).
func (c *Controller) unfenceBrokerRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceChangeUnfence}}
	return append(recs, c.leaderAndISRUpdates(img, -1, b.ID, -1, func(p metadata.Partition) bool { return p.Leader == -1 })...)
}

// brokerRestartRecords handles a new incarnation of old registering (Kafka's
// handleBrokerShutdown). A broker that names the epoch of its last
// registration shut down cleanly and leaves the ISRs as if fenced. One
// that does not may have lost an unflushed tail of its logs: with ELR it
// leaves the ELRs too; without ELR it is treated as fenced.
func (e *env) brokerRestartRecords(img *metadata.Image, old *metadata.Broker, previousEpoch int64) []metadata.Record {
	if !elrEnabled(img) || previousEpoch == old.Epoch {
		return e.removeBrokerFromPartitions(img, old.ID)
	}
	return e.leaderAndISRUpdates(img, -1, -1, old.ID, func(p metadata.Partition) bool {
		return containsInt32(p.ISR, old.ID) || containsInt32(p.ELR, old.ID) || p.Leader == old.ID
	})
}

// removeBrokerFromPartitions takes id out of every ISR and leadership.
func (e *env) removeBrokerFromPartitions(img *metadata.Image, id int32) []metadata.Record {
	return e.leaderAndISRUpdates(img, id, -1, -1, func(p metadata.Partition) bool {
		return containsInt32(p.ISR, id) || p.Leader == id
	})
}

// leaderAndISRUpdates is Kafka's generateLeaderAndIsrUpdates: in every
// partition selected, remove leaves the ISR, uncleanShutdown leaves the
// ISR and the ELR, neither may lead, add may lead although the image still
// shows it fenced (-1 for none of each), and the partition gets a new
// leader if its current one can no longer lead (partitionchange.go).
func (e *env) leaderAndISRUpdates(img *metadata.Image, remove, add, uncleanShutdown int32, selected func(metadata.Partition) bool) []metadata.Record {
	canLead := func(r int32) bool {
		return r != remove && r != uncleanShutdown && (r == add || isActiveBroker(img, r))
	}
	var recs []metadata.Record
	forEachPartition(img, func(t *metadata.Topic, i int, p metadata.Partition) {
		if !selected(p) {
			return
		}
		pc := e.newPartitionChange(img, t, int32(i))
		pc.canLead, pc.uncleanShutdown = canLead, uncleanShutdown
		pc.isr = withoutInt32(withoutInt32(p.ISR, remove), uncleanShutdown)
		if rec := pc.build(); rec != nil {
			recs = append(recs, rec)
		}
	})
	return recs
}

func isActiveBroker(img *metadata.Image, id int32) bool {
	b := img.Brokers[id]
	return b != nil && !b.Fenced && !b.InControlledShutdown
}

// forEachPartition visits partitions in topic-name order.
func forEachPartition(img *metadata.Image, fn func(t *metadata.Topic, i int, p metadata.Partition)) {
	for _, name := range slices.Sorted(maps.Keys(img.Topics)) {
		t := img.Topics[name]
		for i, p := range t.Partitions {
			fn(t, i, p)
		}
	}
}

// UnregisterBroker removes a broker's registration (kafka-cluster
// unregister), after moving it out of every ISR and leadership.
func (c *Controller) UnregisterBroker(ctx context.Context, req *kmsg.UnregisterBrokerRequest) *kmsg.UnregisterBrokerResponse {
	resp := req.ResponseKind().(*kmsg.UnregisterBrokerResponse)
	e, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, *apiError) {
		b := img.Brokers[req.BrokerID]
		if b == nil {
			return nil, newAPIError(kerr.BrokerIDNotRegistered, "Broker ID %d is not currently registered", req.BrokerID)
		}
		recs := c.leaderAndISRUpdates(img, b.ID, -1, -1, func(p metadata.Partition) bool {
			return containsInt32(p.ISR, b.ID) || containsInt32(p.ELR, b.ID) || p.Leader == b.ID
		})
		return append(recs, &metadata.UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch}), nil
	})
	if !ok || err != nil {
		e = commitError(err)
	}
	resp.ErrorCode = e.code()
	if e != nil {
		resp.ErrorMessage = e.message()
	}
	return resp
}

// AllocateProducerIDs hands the broker the next block of 1000 producer ids.
func (c *Controller) AllocateProducerIDs(ctx context.Context, req *kmsg.AllocateProducerIDsRequest) *kmsg.AllocateProducerIDsResponse {
	return decide(c, ctx, req, (*env).allocateProducerIDs, allocateProducerIDsFailed)
}

// allocateProducerIDs decides an AllocateProducerIDs request
// (ProducerIdControlManager.generateNextProducerId).
func (e *env) allocateProducerIDs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AllocateProducerIDsRequest) ([]metadata.Record, *kmsg.AllocateProducerIDsResponse) {
	if err := checkBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); err != nil {
		return nil, allocateProducerIDsFailed(req, err)
	}
	start := img.NextProducerID
	if start > math.MaxInt64-producerIDBlockSize {
		return nil, allocateProducerIDsFailed(req, newAPIError(kerr.UnknownServerError, "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"))
	}
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ProducerIDStart, resp.ProducerIDLen = start, producerIDBlockSize
	return []metadata.Record{&metadata.ProducerIdsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: start + producerIDBlockSize}}, resp
}

// allocateProducerIDsFailed answers the request with e's code, without a
// block (the response has no message).
func allocateProducerIDsFailed(req *kmsg.AllocateProducerIDsRequest, e *apiError) *kmsg.AllocateProducerIDsResponse {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ErrorCode = e.code()
	return resp
}

func init() {
	decides((*Controller).RegisterBroker)
	decides((*Controller).BrokerHeartbeat)
	decides((*Controller).AllocateProducerIDs)
	decides((*Controller).UnregisterBroker)
}
