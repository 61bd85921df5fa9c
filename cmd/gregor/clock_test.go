package main

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// A forward step of the wall clock does not move the expiry clock ahead; a
// backward one moves it back.
func TestStepGuardHoldsForwardStepsBack(t *testing.T) {
	var offset atomic.Int64
	wall := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	guard := stepGuard(wall, slog.New(slog.NewTextHandler(io.Discard, nil)))
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Fatalf("%s: the guard reads %s, want about %s (%s apart)", what, got, want, d)
		}
	}
	near("no step", guard(), time.Now())
	offset.Store(int64(192 * time.Hour))
	near("eight days forward", guard(), time.Now())
	offset.Store(int64(-time.Hour))
	near("an hour back", guard(), time.Now().Add(-time.Hour))
	offset.Store(0)
	near("back to the real clock", guard(), time.Now())
}
