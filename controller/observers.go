package controller

// Serving the committed metadata log to brokers that follow it without
// voting (protocol.MetadataFetch), and the observers the active controller
// reports in DescribeQuorum.
//
// Goroutines and locks: FetchCommitted runs on the broker server's
// handler goroutines. It reads the raft log through raftlog's own lock and
// waits on the applied signal: wakeMu guards appliedSignal and its channel,
// which the loop closes and replaces each time it applies an entry.
// obsMu guards the observer table. Neither nests another lock.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.etcd.io/raft/v3"
)

// maxFetchWait bounds how long a MetadataFetch is held waiting for a new
// entry.
const maxFetchWait = 10 * time.Second

type observerStatus struct {
	directoryID  protocol.UUID
	fetchOffset  int64
	lastFetch    time.Time
	lastCaughtUp time.Time
}

// noteApplied publishes the applied index to waiting fetches (loop).
func (c *Controller) noteApplied(index uint64) {
	c.wakeMu.Lock()
	c.appliedSignal = index
	close(c.appliedWake)
	c.appliedWake = make(chan struct{})
	c.wakeMu.Unlock()
}

func (c *Controller) appliedNow() (uint64, <-chan struct{}) {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	return c.appliedSignal, c.appliedWake
}

// waitApplied waits until the entry at index want is applied, at most
// wait, and returns the applied index.
func (c *Controller) waitApplied(ctx context.Context, want uint64, wait time.Duration) uint64 {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		applied, wake := c.appliedNow()
		if applied >= want {
			return applied
		}
		select {
		case <-wake:
		case <-timer.C:
			return applied
		case <-ctx.Done():
			return applied
		case <-c.done:
			return applied
		}
	}
}

// FetchCommitted answers a broker's MetadataFetch with the entries this
// controller has applied from req.FetchOffset on, a snapshot first when
// they were compacted away. Any controller answers; the active one also
// records the broker as an observer.
func (c *Controller) FetchCommitted(ctx context.Context, req *protocol.MetadataFetchRequest) *protocol.MetadataFetchResponse {
	resp := &protocol.MetadataFetchResponse{Version: req.Version, LeaderID: c.Image().LeaderID}
	if req.ClusterID != c.info.ClusterID {
		resp.ErrorCode = kerr.InconsistentClusterID.Code
		return resp
	}
	if err := c.fatalErr(); err != nil {
		resp.ErrorCode = kerr.NotController.Code
		return resp
	}
	if req.Version >= 1 && req.MaxBytes == 0 {
		// A joining controller's announcement (membership.go).
		c.announcement(ctx, req, resp)
		return resp
	}
	from := uint64(max(req.FetchOffset, 1))
	wait := min(time.Duration(max(req.MaxWaitMs, 0))*time.Millisecond, maxFetchWait)
	applied := c.waitApplied(ctx, from, wait)
	resp.LeaderID = c.Image().LeaderID
	resp.HighWatermark = int64(applied)
	maxBytes := uint64(max(req.MaxBytes, 1))
	for attempt := 0; attempt < 3; attempt++ {
		resp.HasSnapshot, resp.Entries = false, nil
		start := from
		if first, _ := c.rlog.FirstIndex(); start < first {
			snap, err := c.rlog.Snapshot()
			if err != nil {
				resp.ErrorCode = kerr.UnknownServerError.Code
				return resp
			}
			md := snap.GetMetadata()
			resp.HasSnapshot = true
			resp.SnapshotIndex, resp.SnapshotTerm = int64(md.GetIndex()), int64(md.GetTerm())
			resp.SnapshotData = snap.GetData()
			start = md.GetIndex() + 1
		}
		if start <= applied {
			ents, err := c.rlog.Entries(start, applied+1, maxBytes)
			if errors.Is(err, raft.ErrCompacted) {
				continue // a snapshot compacted them meanwhile
			}
			if err != nil {
				resp.ErrorCode = kerr.UnknownServerError.Code
				return resp
			}
			for _, e := range ents {
				resp.Entries = append(resp.Entries, protocol.MetadataEntry{
					Index: int64(e.GetIndex()), Term: int64(e.GetTerm()), Type: int8(e.GetType()), Data: e.GetData()})
			}
		}
		break
	}
	if c.Active() {
		next := from
		if n := len(resp.Entries); n > 0 {
			next = uint64(resp.Entries[n-1].Index) + 1
		} else if resp.HasSnapshot {
			next = uint64(resp.SnapshotIndex) + 1
		}
		c.noteObserver(req.NodeID, req.DirectoryID, int64(next-1), next > applied)
	}
	return resp
}

// noteObserver records a broker's fetch: it has everything up to end, and
// is caught up when that is all the leader has.
func (c *Controller) noteObserver(id int32, dir protocol.UUID, end int64, caughtUp bool) {
	now := c.now()
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	o := c.observers[id]
	o.directoryID, o.fetchOffset, o.lastFetch = dir, end, now
	if caughtUp {
		o.lastCaughtUp = now
	}
	c.observers[id] = o
}

// observerStates lists the observers that fetched within the broker
// session timeout, by id.
func (c *Controller) observerStates() ([]int32, map[int32]observerStatus) {
	c.obsMu.Lock()
	defer c.obsMu.Unlock()
	cutoff := c.now().Add(-c.cfg.BrokerSessionTimeout)
	out := map[int32]observerStatus{}
	for id, o := range c.observers {
		if o.lastFetch.Before(cutoff) {
			delete(c.observers, id)
			continue
		}
		out[id] = o
	}
	ids := make([]int32, 0, len(out))
	for id := range out {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, out
}
