package await

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	calls := 0
	Until(t, 5*time.Second, "the third call", func() error {
		calls++
		if calls < 3 {
			return fmt.Errorf("call %d", calls)
		}
		return nil
	})
	if calls != 3 {
		t.Fatalf("check called %d times, want 3", calls)
	}
}

// recorder is a testing.TB that records a Fatalf instead of ending the
// test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

func TestUntilSaysWhatItWaitedForAndWhatItSaw(t *testing.T) {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != r {
				t.Fatalf("recovered %v, want the recorder's Fatalf", p)
			}
		}()
		Until(r, 20*time.Millisecond, "the moon", func() error { return errors.New("only clouds") })
	}()
	if !strings.Contains(r.msg, "the moon") || !strings.Contains(r.msg, "only clouds") {
		t.Fatalf("failure message %q does not name what was awaited and what was seen", r.msg)
	}
}
