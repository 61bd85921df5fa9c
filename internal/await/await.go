// Package await lets a test wait for a condition instead of sleeping: it
// polls until the condition holds or a deadline passes, and a failure says
// what was waited for and what was seen last.
//
// It imports nothing of Gregor's.
package await

import (
	"testing"
	"time"
)

// maxPoll is the longest pause between two checks.
const maxPoll = 50 * time.Millisecond

// Until calls check until it returns nil and returns how long that took.
// A non-nil error says what check saw instead; if wait passes first, t
// fails with what and that last error. The pause between checks starts at
// a millisecond and doubles up to 50 ms, so a condition that holds soon is
// seen soon. Call it from the test's goroutine.
func Until(t testing.TB, wait time.Duration, what string, check func() error) time.Duration {
	t.Helper()
	start := time.Now()
	pause := time.Millisecond
	for {
		err := check()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > wait {
			t.Fatalf("waited %s for %s; last saw: %v", wait, what, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
}
