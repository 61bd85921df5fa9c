package main

import (
	"log/slog"
	"sync/atomic"
	"time"
)

// stepGuard is the clock that decides when data is old enough to delete
// (storage.ManagerOptions.ExpiryNow, group.Config.ExpiryNow for committed
// offsets' offsets.retention.minutes): it reads now, but never runs ahead
// of now as read at start-up plus the time the monotonic clock has counted
// since. A forward step of the wall clock (a wrong NTP answer, a mistyped
// date, a VM restored from an old snapshot) would otherwise make every
// segment look old at once: retention.ms would delete acknowledged records
// on every replica (followers follow the leader's log start), and
// producer.id.expiration.ms would forget the producers whose retries
// idempotence must recognise, and a group empty for a moment would lose
// its committed offsets. Apache Kafka deletes on such a step.
//
// What it costs: a legitimate forward correction after start-up, and the
// time a machine spends suspended (which the monotonic clock does not
// count), delay those deletions until the next restart, by as much; a
// backward step is followed at once (it only delays them). The first time
// the wall clock runs more than a minute ahead of the guard it says so.
func stepGuard(now func() time.Time, log *slog.Logger) func() time.Time {
	start, mono := now(), time.Now()
	var warned atomic.Bool
	return func() time.Time {
		t := now()
		limit := start.Add(time.Since(mono))
		// Wall clocks compared: t and limit both carry monotonic
		// readings, which a wall step does not move.
		ahead := time.Duration(t.UnixNano() - limit.UnixNano())
		if ahead <= 0 {
			return t
		}
		if ahead > time.Minute && !warned.Swap(true) {
			log.Warn("the wall clock stepped forward since start-up; retention, producer expiry and the cleaner's horizons follow the clock of start-up plus the time elapsed since, until the next restart",
				"ahead", ahead.Round(time.Second))
		}
		return limit.Round(0)
	}
}
