package controller

// Decisions as functions. Each request the controller decides (handle.go)
// is a function from the latest image (committed plus in flight, at the log
// offset its records will get) and the request to the records that carry
// it out and the answer the requester gets once they are committed, as
// Kafka's control managers return a ControllerResult. A decision reads only
// its env (the controller's configuration, clock and random source), the
// image, the request and the request's context values (the requester's
// principal, its mutation quota): tests call it on an image they build,
// without a quorum. The loop runs one at a time (pipeline.go); a decision
// that returns no records is answered once what was in flight before it is
// committed.
//
// When the records are not committed (this node stopped leading, the
// client's time ran out, the controller stopped), the answer is the
// decision's failed answer with that error for the whole request, as
// Kafka's ControllerApis answers a failed controller future
// (getErrorResponse).

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// env is what the decisions read besides the image and the request. It is
// built once from Config; rng is used by the loop only.
type env struct {
	nodeID            int32
	schema            metadata.ConfigSchema
	supportedFeatures map[string][2]int16
	// defaultPartitions and defaultReplicationFactor are num.partitions
	// and default.replication.factor (CreateTopics' -1).
	defaultPartitions        int32
	defaultReplicationFactor int16
	disableTopicDeletion     bool
	delegationTokens         metadata.DelegationTokenConfig
	now                      func() time.Time
	rng                      *rand.Rand
	logger                   *slog.Logger
}

func newEnv(cfg Config, logger *slog.Logger) *env {
	return &env{
		nodeID:                   cfg.NodeID,
		schema:                   cfg.Schema,
		supportedFeatures:        cfg.SupportedFeatures,
		defaultPartitions:        cfg.DefaultPartitions,
		defaultReplicationFactor: cfg.DefaultReplicationFactor,
		disableTopicDeletion:     cfg.DisableTopicDeletion,
		delegationTokens:         cfg.DelegationTokens,
		now:                      cfg.Now,
		rng:                      rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		logger:                   logger,
	}
}

// decision decides in against img, whose next record gets offset.
type decision[In, Out any] func(e *env, ctx context.Context, img *metadata.Image, offset int64, in In) ([]metadata.Record, Out)

// decide runs d in the loop and answers once its records are committed,
// or with failed's answer for the whole request when they are not.
func decide[In, Out any](c *Controller, ctx context.Context, in In, d decision[In, Out], failed func(in In, e *apiError) Out) Out {
	out, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, Out) {
		return d(c.env, ctx, img, offset, in)
	})
	if err != nil {
		return failed(in, commitError(err))
	}
	if !ok {
		return failed(in, commitError(errStopped))
	}
	return out
}
