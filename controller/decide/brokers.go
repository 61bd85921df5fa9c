package decide

// The records that follow a broker's state (Kafka's ClusterControlManager
// and ReplicationControlManager): a broker's registration and what a new
// incarnation does to the partitions of the old one, fencing, controlled
// shutdown, unfencing and unregistration, each moving leadership and ISR
// membership through the partition-change builder (partitionchange.go);
// and AllocateProducerIDs, the decision of a block of producer ids. The
// controller keeps the brokers' sessions and decides from them when a
// broker changes state; what the change writes is decided here.

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

// ProducerIDBlockSize is how many producer ids AllocateProducerIDs hands
// out at a time.
const ProducerIDBlockSize = 1000

// RegisterBroker decides a registration at offset: the records, the
// broker's epoch once they are committed, or the error that refuses it.
// A new incarnation of a registered broker takes the old one out of ISRs
// and leadership first (brokerRestartRecords); hasLiveContact reports
// whether the old incarnation of a broker still has a live session with
// this leader, which lets it keep its registration.
func (e *Env) RegisterBroker(img *metadata.Image, offset int64, req *kmsg.BrokerRegistrationRequest, hasLiveContact func(id int32) bool) ([]metadata.Record, int64, *Error) {
	var recs []metadata.Record
	if old := img.Brokers[req.BrokerID]; old != nil && old.IncarnationID != req.IncarnationID {
		// A new incarnation means the old one went away: take it out
		// of ISRs and leadership first. The records come first, so
		// the registration is at a later offset.
		recs = e.brokerRestartRecords(img, old, req.PreviousBrokerEpoch)
	}
	rec, err := registration(img, req, offset, hasLiveContact)
	if err != nil {
		return nil, -1, err
	}
	return append(recs, rec), rec.BrokerEpoch, nil
}

// registration is the record of a registration, or the error that
// refuses it.
func registration(img *metadata.Image, req *kmsg.BrokerRegistrationRequest, offset int64, hasLiveContact func(id int32) bool) (*metadata.RegisterBrokerRecord, *Error) {
	if req.ClusterID != img.ClusterID {
		return nil, NewError(kerr.InconsistentClusterID, "Expected cluster ID %s, but got cluster ID %s", img.ClusterID, req.ClusterID)
	}
	existing := img.Brokers[req.BrokerID]
	// A different incarnation may take over a registration when the old
	// one has no live session with this leader, or when it names the old
	// registration's epoch (it is the same broker restarted, KIP-966).
	if existing != nil && existing.IncarnationID != req.IncarnationID && hasLiveContact(req.BrokerID) && req.PreviousBrokerEpoch != existing.Epoch {
		return nil, NewError(kerr.DuplicateBrokerRegistration, "Another broker is registered with that broker id.")
	}
	if req.IsMigratingZkBroker {
		return nil, NewError(kerr.BrokerIDNotRegistered, "Controller does not support registering ZK brokers.")
	}
	var logDirs []protocol.UUID
	if req.Version >= 2 {
		if len(req.LogDirs) == 0 {
			return nil, NewError(kerr.InvalidRegistration, "No directories specified in request")
		}
		seen := map[protocol.UUID]bool{}
		for _, d := range req.LogDirs {
			u := protocol.UUID(d)
			if reservedDirectoryID(u) {
				return nil, NewError(kerr.InvalidRegistration, "Reserved directory ID in request")
			}
			if seen[u] {
				return nil, NewError(kerr.InvalidRegistration, "Duplicate directory ID in request")
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
					return nil, NewError(kerr.InvalidRegistration, "Broker %d is already registered with directory %s", id, d)
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

func checkBrokerFeature(img *metadata.Image, name string, minLevel, maxLevel int16) *Error {
	finalized, ok := img.Features[name]
	if !ok {
		finalized = 0
		if name == metadata.MetadataVersionFeature {
			finalized = 1
		}
	}
	if finalized < minLevel || finalized > maxLevel {
		return NewError(kerr.UnsupportedVersion, "Unable to register because the broker does not support finalized version %d of %s. The broker wants a version between %d and %d, inclusive.", finalized, name, minLevel, maxLevel)
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

// CheckBrokerEpoch refuses a stale or unknown broker epoch (invariant 3).
func CheckBrokerEpoch(img *metadata.Image, id int32, epoch int64) *Error {
	b := img.Brokers[id]
	if b == nil {
		return NewError(kerr.StaleBrokerEpoch, "No broker registration found for broker id %d", id)
	}
	if b.Epoch != epoch {
		return NewError(kerr.StaleBrokerEpoch, "Expected broker epoch %d, but got broker epoch %d", b.Epoch, epoch)
	}
	return nil
}

// FenceBrokerRecords fences b: it leaves every ISR it is in (to the ELR
// when the ISR falls below min.insync.replicas; without ELR a partition
// whose ISR would become empty keeps it and loses its leader) and leaders
// move to other ISR members.
func (e *Env) FenceBrokerRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := e.removeBrokerFromPartitions(img, b.ID)
	return append(recs, &metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceChangeFence})
}

// ControlledShutdownRecords moves leadership and ISR membership away from
// a broker that asked to shut down.
func (e *Env) ControlledShutdownRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := e.removeBrokerFromPartitions(img, b.ID)
	return append(recs, &metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, InControlledShutdown: metadata.ControlledShutdownChangeShutdown})
}

// UnfenceBrokerRecords unfences b and elects leaders for the leaderless
// partitions that can have one now (b from the ISR or the ELR, or as the
// last known leader, or by an unclean election where the topic allows it).
func (e *Env) UnfenceBrokerRecords(img *metadata.Image, b *metadata.Broker) []metadata.Record {
	recs := []metadata.Record{&metadata.BrokerRegistrationChangeRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch, Fenced: metadata.FenceChangeUnfence}}
	return append(recs, e.leaderAndISRUpdates(img, -1, b.ID, -1, func(p metadata.Partition) bool { return p.Leader == -1 })...)
}

// brokerRestartRecords handles a new incarnation of old registering (Kafka's
// handleBrokerShutdown). A broker that names the epoch of its last
// registration shut down cleanly and leaves the ISRs as if fenced. One
// that does not may have lost an unflushed tail of its logs: with ELR it
// leaves the ELRs too; without ELR it is treated as fenced.
func (e *Env) brokerRestartRecords(img *metadata.Image, old *metadata.Broker, previousEpoch int64) []metadata.Record {
	if !elrEnabled(img) || previousEpoch == old.Epoch {
		return e.removeBrokerFromPartitions(img, old.ID)
	}
	return e.leaderAndISRUpdates(img, -1, -1, old.ID, func(p metadata.Partition) bool {
		return containsInt32(p.ISR, old.ID) || containsInt32(p.ELR, old.ID) || p.Leader == old.ID
	})
}

// removeBrokerFromPartitions takes id out of every ISR and leadership.
func (e *Env) removeBrokerFromPartitions(img *metadata.Image, id int32) []metadata.Record {
	return e.leaderAndISRUpdates(img, id, -1, -1, func(p metadata.Partition) bool {
		return containsInt32(p.ISR, id) || p.Leader == id
	})
}

// leaderAndISRUpdates is Kafka's generateLeaderAndIsrUpdates: in every
// partition selected, remove leaves the ISR, uncleanShutdown leaves the
// ISR and the ELR, neither may lead, add may lead although the image still
// shows it fenced (-1 for none of each), and the partition gets a new
// leader if its current one can no longer lead (partitionchange.go).
func (e *Env) leaderAndISRUpdates(img *metadata.Image, remove, add, uncleanShutdown int32, selected func(metadata.Partition) bool) []metadata.Record {
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
	for _, name := range slices.Sorted(img.Topics.Keys()) {
		t := img.Topic(name)
		for i, p := range t.Partitions.All() {
			fn(t, i, *p)
		}
	}
}

// AllocateProducerIDs decides an AllocateProducerIDs request
// (ProducerIdControlManager.generateNextProducerId).
func (e *Env) AllocateProducerIDs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AllocateProducerIDsRequest) ([]metadata.Record, *kmsg.AllocateProducerIDsResponse) {
	if err := CheckBrokerEpoch(img, req.BrokerID, req.BrokerEpoch); err != nil {
		return nil, AllocateProducerIDsFailed(req, err)
	}
	start := img.NextProducerID
	if start > math.MaxInt64-ProducerIDBlockSize {
		return nil, AllocateProducerIDsFailed(req, NewError(kerr.UnknownServerError, "Exhausted all producerIds as the next block's end producerId has exceeded the int64 type limit"))
	}
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ProducerIDStart, resp.ProducerIDLen = start, ProducerIDBlockSize
	return []metadata.Record{&metadata.ProducerIdsRecord{BrokerID: req.BrokerID, BrokerEpoch: req.BrokerEpoch, NextProducerID: start + ProducerIDBlockSize}}, resp
}

// AllocateProducerIDsFailed answers the request with e's code, without a
// block (the response has no message).
func AllocateProducerIDsFailed(req *kmsg.AllocateProducerIDsRequest, e *Error) *kmsg.AllocateProducerIDsResponse {
	resp := req.ResponseKind().(*kmsg.AllocateProducerIDsResponse)
	resp.ErrorCode = e.Code()
	return resp
}

// UnregisterBroker decides the removal of broker id's registration
// (kafka-cluster unregister), after moving it out of every ISR, ELR and
// leadership.
func (e *Env) UnregisterBroker(img *metadata.Image, id int32) ([]metadata.Record, *Error) {
	b := img.Brokers[id]
	if b == nil {
		return nil, NewError(kerr.BrokerIDNotRegistered, "Broker ID %d is not currently registered", id)
	}
	recs := e.leaderAndISRUpdates(img, b.ID, -1, -1, func(p metadata.Partition) bool {
		return containsInt32(p.ISR, b.ID) || containsInt32(p.ELR, b.ID) || p.Leader == b.ID
	})
	return append(recs, &metadata.UnregisterBrokerRecord{BrokerID: b.ID, BrokerEpoch: b.Epoch}), nil
}
