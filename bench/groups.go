package bench

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// The group workloads: how long a 30-member group takes to
// become stable under each protocol, and acknowledged offset commits per
// second. Both brokers run with the group settings of their usual bench
// configuration (see groupSettings), which the report states.

const (
	groupMembers     = 30 // members and partitions of the group-stable workloads
	commitPartitions = 3  // partitions in every OffsetCommit request
)

// groupSettings is what the report says about the group configuration:
// integration/target.go passes group.initial.rebalance.delay.ms=0 to both
// brokers (Apache's sample server.properties sets it; Kafka's built-in
// default is 3000 ms) and nothing else group-related.
const groupSettings = "group.initial.rebalance.delay.ms=0 on both brokers (the 4.3.1 sample server.properties sets it and integration/target.go passes the same to Gregor; Kafka's built-in default is 3000 ms and applies to the classic protocol only); every other group setting is each broker's default, among them group.consumer.heartbeat.interval.ms=5000, group.consumer.session.timeout.ms=45000, group.consumer.assignors=uniform,range, and on Kafka group.consumer.assignment.interval.ms=1000 and group.coordinator.append.linger.ms=-1 (adaptive)"

type groupProtocol struct {
	name  string // loadgen's -protocol
	label string
}

func groupProtocols() []groupProtocol {
	return []groupProtocol{
		{"classic", "classic protocol, franz-go cooperative-sticky"},
		{"consumer", "consumer protocol (KIP-848), uniform assignor"},
	}
}

func (p groupProtocol) stableFigure() string {
	return fmt.Sprintf("group of %d becomes stable, %s (s)", groupMembers, p.label)
}

func (p groupProtocol) requestsFigure() string {
	if p.name == "classic" {
		return fmt.Sprintf("group of %d becomes stable, %s: JoinGroup+SyncGroup requests", groupMembers, p.label)
	}
	return fmt.Sprintf("group of %d becomes stable, %s: ConsumerGroupHeartbeat requests", groupMembers, p.label)
}

func commitCommitters() []int { return []int{1, 8} }

func commitName(committers int) string {
	if committers == 1 {
		return fmt.Sprintf("offset commits, 1 committer, %d partitions per commit, franz-go", commitPartitions)
	}
	return fmt.Sprintf("offset commits, %d concurrent committers, %d partitions per commit, franz-go", committers, commitPartitions)
}

func commitRateFigure(committers int) string { return commitName(committers) + " commits/s" }

func commitP99Figure(committers int) string { return commitName(committers) + " p99 latency (ms)" }

// groupFigures lists the group workloads' figures in report order.
func groupFigures() []string {
	var names []string
	for _, p := range groupProtocols() {
		names = append(names, p.stableFigure(), p.requestsFigure())
	}
	for _, n := range commitCommitters() {
		names = append(names, commitRateFigure(n), commitP99Figure(n))
	}
	return names
}

type groupStableResult struct {
	Seconds           float64 `json:"seconds"`
	JoinGroupRequests int64   `json:"join_group_requests"`
	SyncGroupRequests int64   `json:"sync_group_requests"`
	HeartbeatRequests int64   `json:"consumer_group_heartbeat_requests"`
}

type commitResult struct {
	Commits       int64   `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	P99Ms         float64 `json:"p99_ms"`
}

// groupWorkloads runs every group workload against bootstrap and records
// its figures in rd.
func (r *runner) groupWorkloads(ctx context.Context, bootstrap string, round int, rd *Round, fail func(string, ...any)) {
	for _, p := range groupProtocols() {
		if !r.selected(p.stableFigure()) {
			continue
		}
		name := fmt.Sprintf("bench-group-%s-%d", p.name, round)
		c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"group-stable", "-bootstrap", bootstrap, "-topic", name, "-group", name,
			"-partitions", strconv.Itoa(groupMembers), "-members", strconv.Itoa(groupMembers), "-protocol", p.name, "-timeout", "2m"},
			Timeout: 3 * time.Minute})
		r.note(fmt.Sprintf("group of %d becomes stable, %s", groupMembers, p.label), c)
		res, err := runJSON[groupStableResult](ctx, c)
		if err != nil {
			fail("%s: %v", p.stableFigure(), oneLine(err.Error()))
			continue
		}
		rd.Figures[p.stableFigure()] = res.Seconds
		if p.name == "classic" {
			rd.Figures[p.requestsFigure()] = float64(res.JoinGroupRequests + res.SyncGroupRequests)
		} else {
			rd.Figures[p.requestsFigure()] = float64(res.HeartbeatRequests)
		}
	}
	for _, n := range commitCommitters() {
		if !r.selected(commitName(n)) {
			continue
		}
		name := fmt.Sprintf("bench-commits-%d-%d", n, round)
		c := r.pinned(integration.Cmd{Name: r.loadgen, Args: []string{"commits", "-bootstrap", bootstrap, "-topic", name, "-group", name,
			"-committers", strconv.Itoa(n), "-partitions-each", strconv.Itoa(commitPartitions), "-duration", r.cfg.CommitTime.String(), "-timeout", "2m"},
			Timeout: r.cfg.CommitTime + 3*time.Minute})
		r.note(commitName(n), c)
		res, err := runJSON[commitResult](ctx, c)
		if err != nil {
			fail("%s: %v", commitName(n), oneLine(err.Error()))
			continue
		}
		rd.Figures[commitRateFigure(n)] = res.CommitsPerSec
		rd.Figures[commitP99Figure(n)] = res.P99Ms
	}
}
