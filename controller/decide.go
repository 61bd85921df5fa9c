package controller

// Running decisions (controller/decide). A decision is a function of its
// env, the latest image (committed plus in flight, at the log offset its
// records will get) and the request; the loop runs one at a time
// (pipeline.go), and a decision that returns no records is answered once
// what was in flight before it is committed.
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

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// newEnv is the decisions' env of a controller with cfg, with a random
// source of its own.
func newEnv(cfg Config, logger *slog.Logger) *decide.Env {
	return &decide.Env{
		NodeID:                   cfg.NodeID,
		Schema:                   cfg.Schema,
		SupportedFeatures:        cfg.SupportedFeatures,
		DefaultPartitions:        cfg.DefaultPartitions,
		DefaultReplicationFactor: cfg.DefaultReplicationFactor,
		DisableTopicDeletion:     cfg.DisableTopicDeletion,
		DelegationTokens:         cfg.DelegationTokens,
		Now:                      cfg.Now,
		Rand:                     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		Logger:                   logger,
	}
}

// decision decides in against img, whose next record gets offset.
type decision[In, Out any] func(e *decide.Env, ctx context.Context, img *metadata.Image, offset int64, in In) ([]metadata.Record, Out)

// runDecision runs d in the loop and answers once its records are
// committed, or with failed's answer for the whole request when they are
// not.
func runDecision[In, Out any](c *Controller, ctx context.Context, in In, d decision[In, Out], failed func(in In, e *decide.Error) Out) Out {
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

// commitError is the per-item error for an operation whose records were
// not committed.
func commitError(err error) *decide.Error {
	return decide.NewError(kerr.TypedErrorForCode(errorCode(err)), "%s", err.Error())
}
