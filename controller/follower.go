package controller

// Follower is the metadata image of a broker-only node: it follows the
// committed metadata log without voting, as KRaft's observers do, by
// fetching committed entries from the controllers (protocol.MetadataFetch,
// answered by Controller.FetchCommitted) and applying them in order to its
// image. It keeps the log in memory only: a restarted broker fetches the
// latest snapshot and the entries after it again.
//
// Goroutines: the fetch goroutine (run) owns the applied state and is the
// only one that publishes images; subscribers get them on their own
// delivery goroutines (publisher).

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	pb "go.etcd.io/raft/v3/raftpb"
)

// FollowerConfig configures a Follower.
type FollowerConfig struct {
	ClusterID string
	NodeID    int32
	// Fetch sends a MetadataFetch to a controller (the active one when
	// known) and returns its answer.
	Fetch   func(ctx context.Context, req *protocol.MetadataFetchRequest) (*protocol.MetadataFetchResponse, error)
	Logger  *slog.Logger
	MaxWait time.Duration // how long a fetch waits for news (default 500 ms)
}

// Follower implements the broker's metadata view on a broker-only node.
type Follower struct {
	publisher
	cfg    FollowerConfig
	log    *slog.Logger
	cancel context.CancelFunc
	done   chan struct{}

	// run-owned
	img      *metadata.Image
	next     uint64 // the next raft index to fetch
	leaderID int32
}

// StartFollower fetches until this node has everything that was committed
// when it asked (so that the broker starts from current metadata, as a
// Kafka broker waits to catch up), then follows in the background.
func StartFollower(ctx context.Context, cfg FollowerConfig) (*Follower, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = 500 * time.Millisecond
	}
	f := &Follower{cfg: cfg, log: cfg.Logger.With("component", "metadata-follower", "node", cfg.NodeID),
		done: make(chan struct{}), img: metadata.EmptyImage(cfg.ClusterID), next: 1, leaderID: -1}
	f.publish(f.img)
	backoff := 100 * time.Millisecond
	for {
		caughtUp, err := f.fetchOnce(ctx, 0)
		if err == nil && caughtUp && f.img.Features[metadata.MetadataVersionFeature] != 0 {
			break
		}
		if err != nil {
			f.log.Info("waiting for the metadata quorum", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("catching up with the metadata log: %w", ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	f.log.Info("caught up with the metadata log", "offset", f.img.Offset)
	runCtx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(runCtx)
	return f, nil
}

func (f *Follower) run(ctx context.Context) {
	defer close(f.done)
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if _, err := f.fetchOnce(ctx, f.cfg.MaxWait); err != nil {
			if ctx.Err() != nil {
				return
			}
			f.log.Debug("metadata fetch failed", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 2*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
	}
}

// fetchOnce asks for the entries from f.next on and applies them; it
// reports whether this node then has everything the controller had.
func (f *Follower) fetchOnce(ctx context.Context, wait time.Duration) (bool, error) {
	req := &protocol.MetadataFetchRequest{ClusterID: f.cfg.ClusterID, NodeID: f.cfg.NodeID,
		FetchOffset: int64(f.next), MaxBytes: 8 << 20, MaxWaitMs: int32(wait / time.Millisecond)}
	fctx, cancel := context.WithTimeout(ctx, wait+10*time.Second)
	resp, err := f.cfg.Fetch(fctx, req)
	cancel()
	if err != nil {
		return false, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, fmt.Errorf("metadata fetch: %w", err)
	}
	img := f.img
	if resp.HasSnapshot && uint64(resp.SnapshotIndex) >= f.next {
		recs, err := metadata.DecodeRecords(resp.SnapshotData)
		if err != nil {
			return false, fmt.Errorf("decoding the metadata snapshot at %d: %w", resp.SnapshotIndex, err)
		}
		if img, err = metadata.ApplyBatch(metadata.EmptyImage(f.cfg.ClusterID), recs, resp.SnapshotIndex, resp.SnapshotTerm); err != nil {
			return false, fmt.Errorf("loading the metadata snapshot at %d: %w", resp.SnapshotIndex, err)
		}
		f.next = uint64(resp.SnapshotIndex) + 1
		f.log.Info("loaded a metadata snapshot", "offset", resp.SnapshotIndex, "bytes", len(resp.SnapshotData))
	}
	for _, e := range resp.Entries {
		if uint64(e.Index) != f.next {
			if uint64(e.Index) < f.next {
				continue
			}
			return false, fmt.Errorf("metadata fetch: entry %d where %d was next", e.Index, f.next)
		}
		if pb.EntryType(e.Type) == pb.EntryNormal && len(e.Data) > 0 {
			recs, err := metadata.DecodeRecords(e.Data)
			if err != nil {
				// A record this node cannot read stops it, as on a
				// controller: skipping it would serve a wrong image.
				return false, fmt.Errorf("metadata log entry at offset %d: %w", e.Index, err)
			}
			if img, err = metadata.ApplyBatch(img, recs, e.Index, e.Term); err != nil {
				return false, err
			}
		}
		f.next++
	}
	if img != f.img || resp.LeaderID != f.leaderID {
		if resp.LeaderID != img.LeaderID {
			cp := *img
			cp.LeaderID = resp.LeaderID
			img = &cp
		}
		f.img, f.leaderID = img, resp.LeaderID
		f.publish(img)
	}
	return f.next > uint64(resp.HighWatermark), nil
}

// Close stops following; the last image stays readable.
func (f *Follower) Close() {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	f.closeSubscriptions()
}
