package controller

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/metrics"
	"github.com/gregorbroker/gregor/vfs"
	"go.etcd.io/raft/v3"
)

// scrapeSamples writes r and reads back each sample's value by its name
// and labels as written (name{label="value"}).
func scrapeSamples(t *testing.T, r *metrics.Registry) map[string]float64 {
	t.Helper()
	var b bytes.Buffer
	if err := r.Write(&b, false); err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func TestRaftMetricsFollowTheQuorum(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	r := metrics.NewRegistry()
	c.RegisterMetrics(r)
	registerBroker(t, c, 1)
	createTopic(t, c, "raft-metered", 3, 1)

	got := scrapeSamples(t, r)
	for name, want := range map[string]float64{
		`kafka_server_raft_metrics_current_state{state="leader"}`: 1,
		"kafka_server_raft_metrics_current_leader":                1,
		"kafka_server_raft_metrics_current_vote":                  1,
		"kafka_server_raft_metrics_number_of_voters":              1,
		"kafka_server_raft_metrics_number_of_observers":           0,
		"kafka_server_raft_metrics_fetch_records_rate":            0,
	} {
		if v, ok := got[name]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
		}
	}
	if e := got["kafka_server_raft_metrics_current_epoch"]; e < 1 {
		t.Errorf("current epoch %v, want at least 1", e)
	}
	// Everything the single voter wrote is committed.
	hw, leo := got["kafka_server_raft_metrics_high_watermark"], got["kafka_server_raft_metrics_log_end_offset"]
	if hw < 3 || hw != leo {
		t.Errorf("high watermark %v, log end offset %v: want equal and past the broker and the topic", hw, leo)
	}
	if img := c.Image(); float64(img.Offset) > hw {
		t.Errorf("high watermark %v behind the applied image's offset %d", hw, img.Offset)
	}
	// The registration and the topic's records were appended a moment ago
	// and committed: a rate over at least one 30 s window.
	if rate := got["kafka_server_raft_metrics_append_records_rate"]; rate <= 0 {
		t.Errorf("append records rate %v, want > 0", rate)
	}
	avg, maxLatency := got["kafka_server_raft_metrics_commit_latency_avg"], got["kafka_server_raft_metrics_commit_latency_max"]
	if math.IsNaN(avg) || avg < 0 || maxLatency < avg {
		t.Errorf("commit latency avg %v max %v", avg, maxLatency)
	}
	if idle := got["kafka_server_raft_metrics_poll_idle_ratio_avg"]; idle < 0 || idle > 1 {
		t.Errorf("poll idle ratio %v, want within [0, 1]", idle)
	}
}

func TestRaftStateNames(t *testing.T) {
	for _, c := range []struct {
		st    raft.StateType
		lead  uint64
		voter bool
		want  string
	}{
		{raft.StateLeader, 2, true, "leader"},
		{raft.StateCandidate, raft.None, true, "candidate"},
		{raft.StatePreCandidate, raft.None, true, "prospective"},
		{raft.StateFollower, 2, true, "follower"},
		{raft.StateFollower, raft.None, true, "unattached"},
		{raft.StateFollower, 2, false, "observer"},
	} {
		if got := raftStateName(c.st, c.lead, c.voter); got != c.want {
			t.Errorf("raftStateName(%v, %d, %v) = %s, want %s", c.st, c.lead, c.voter, got, c.want)
		}
	}
}
