package controller

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// testEnv is a decisions' env as a single controller with the default
// configuration has it, with a fixed clock and random source.
func testEnv() *env {
	return &env{
		nodeID:                   1,
		supportedFeatures:        map[string][2]int16{metadata.MetadataVersionFeature: {7, metadata.LatestMetadataVersion}},
		defaultPartitions:        1,
		defaultReplicationFactor: 1,
		now:                      func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		rng:                      rand.New(rand.NewPCG(1, 2)),
		logger:                   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// imageOf is an image with recs applied, as the controller's replay
// builds it.
func imageOf(t testing.TB, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	img, err := metadata.ApplyBatch(metadata.EmptyImage("test-cluster"), recs, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// decideOn runs a decision on img with the next offset after it, as the
// loop does, and applies its records (failing the test if replay refuses
// them): the image the answer rests on once they are committed.
func decideOn[In, Out any](t testing.TB, e *env, img *metadata.Image, d decision[In, Out], in In) ([]metadata.Record, Out, *metadata.Image) {
	t.Helper()
	offset := img.Offset + 1
	recs, out := d(e, context.Background(), img, offset, in)
	next := img
	if len(recs) > 0 {
		var err error
		if next, err = metadata.ApplyBatch(img, recs, offset, img.Epoch); err != nil {
			t.Fatalf("the decision's records do not replay: %v", err)
		}
	}
	return recs, out, next
}
