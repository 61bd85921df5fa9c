package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// The log cleaner workload: a dirty log of compactRecords records of 1 KiB
// over compactKeys keys is switched to cleanup.policy=compact, and the
// cleaner is timed until the log is down to its live keys, while another
// topic takes acks=all produces at compactRate records/s (loadgen
// compaction).
const (
	compactRecords = 200_000
	compactKeys    = 10_000
	compactRate    = 5000
)

type compactionResult struct {
	DirtyBytes   int64   `json:"dirty_bytes"`
	Seconds      float64 `json:"seconds"`
	MBPerSec     float64 `json:"mb_per_sec"`
	IdleP99Ms    float64 `json:"idle_p99_ms"`
	DuringP99Ms  float64 `json:"during_p99_ms"`
	DuringP999Ms float64 `json:"during_p999_ms"`
	DuringCount  int     `json:"during_count"`
}

func compactionName() string {
	return fmt.Sprintf("log cleaner: %d MB dirty log (%s keys, 1 KiB values) cleaned, MB/s", compactRecords*1024/1_000_000, groupedInt(compactKeys))
}

func compactionP99Name(while bool) string {
	when := "before the cleaner runs"
	if while {
		when = "while the cleaner runs"
	}
	return fmt.Sprintf("produce latency at %d records/s, acks=all, franz-go, %s, p99 (ms)", compactRate, when)
}

func groupedInt(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func (r *runner) compactionWorkload(ctx context.Context, bootstrap string, round int, rd *Round, fail func(string, ...any)) {
	if !r.selected(compactionName()) {
		return
	}
	c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"compaction", "-bootstrap", bootstrap, "-topic", fmt.Sprintf("bench-compact-%d", round),
		"-records", strconv.Itoa(compactRecords), "-keys", strconv.Itoa(compactKeys), "-size", "1024", "-rate", strconv.Itoa(compactRate), "-timeout", "4m"},
		Timeout: 5 * time.Minute})
	r.note(compactionName(), c)
	res, err := runJSON[compactionResult](ctx, c)
	if err != nil {
		fail("%s: %v", compactionName(), oneLine(err.Error()))
		return
	}
	rd.Figures[compactionName()] = res.MBPerSec
	rd.Figures[compactionP99Name(false)] = res.IdleP99Ms
	rd.Figures[compactionP99Name(true)] = res.DuringP99Ms
}
