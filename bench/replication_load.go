package bench

// The replication benchmark's throughput workloads (1, 6 and 64
// partitions, acks=1 and acks=all), the brokers' CPU over them, a follower's
// CPU per GB it replicated, and produce latency at half the measured
// acks=all maximum.

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// gb is the unit of the CPU-per-GB figures, as in the single-node
// benchmark: 10^9 bytes of payload.
const gb = 1e9

// brokerCPU reads every broker's CPU seconds (utime+stime); a broker whose
// process is not there is left out.
func (rr *replRound) brokerCPU() map[int]float64 {
	out := map[int]float64{}
	for _, id := range rr.brokerIDs() {
		if v, err := cpuSeconds(rr.c.Node(id).Pid()); err == nil {
			out[id] = v
		}
	}
	return out
}

// cpuSpent is each broker's CPU seconds from before to after; false when
// a broker is missing from either reading (it was restarted or died).
func cpuSpent(before, after map[int]float64, ids []int) (map[int]float64, bool) {
	out := map[int]float64{}
	for _, id := range ids {
		b, ok1 := before[id]
		a, ok2 := after[id]
		if !ok1 || !ok2 || a < b {
			return nil, false
		}
		out[id] = a - b
	}
	return out, true
}

// fmtCPU lists each broker's CPU seconds, "broker 1 3.10 s, broker 2 ...".
func fmtCPU(spent map[int]float64, ids []int, label func(id int) string) string {
	var parts []string
	for _, id := range ids {
		l := fmt.Sprintf("broker %d", id)
		if label != nil {
			if s := label(id); s != "" {
				l += " (" + s + ")"
			}
		}
		parts = append(parts, fmt.Sprintf("%s %.2f s", l, spent[id]))
	}
	return strings.Join(parts, ", ")
}

// produceRun has bench/loadgen produce Records records to topic, which
// exists, bootstrapped at addr, and returns what it measured. name is the
// workload's name in the report's command lines.
func (rr *replRound) produceRun(ctx context.Context, name, addr, topic string, partitions, records int, acks string, limit time.Duration) (throughputResult, error) {
	c := integration.Cmd{Name: rr.loadgen, Args: []string{"produce", "-bootstrap", addr, "-topic", topic,
		"-partitions", strconv.Itoa(partitions), "-records", strconv.Itoa(records), "-acks", acks,
		"-payloads", rr.payloadFile, "-timeout", limit.String()}, Timeout: limit + time.Minute}
	rr.commands.note(name, c)
	return runJSON[throughputResult](ctx, c)
}

// throughputs runs every throughput workload, each on a replicated topic
// created beforehand (loadgen's own CreateTopics then finds it), and
// keeps the three brokers' CPU over the acks=all ones.
func (rr *replRound) throughputs(ctx context.Context) {
	ids := rr.brokerIDs()
	for _, parts := range replThroughputPartitions {
		for _, acks := range replThroughputAcks {
			name := replProduceName(acks, parts)
			topic := fmt.Sprintf("bench-repl-produce-%d-p%d-acks%s", rr.rd.Round, parts, acks)
			if err := rr.createReplicated(ctx, topic, parts); err != nil {
				rr.fail("%s: %v", name, err)
				continue
			}
			before := rr.brokerCPU()
			res, err := rr.produceRun(ctx, name, rr.firstAddr(), topic, parts, rr.cfg.Records, acks, 10*time.Minute)
			after := rr.brokerCPU()
			if err != nil {
				rr.fail("%s: %v", name, oneLine(err.Error()))
				continue
			}
			rr.rd.Figures[name+" records/s"] = res.RecordsPerSec
			rr.rd.Figures[name+" MB/s"] = res.MBPerSec
			if parts == replPartitions && acks == "all" {
				rr.maxAll = res.RecordsPerSec
			}
			if acks != "all" {
				continue
			}
			spent, ok := cpuSpent(before, after, ids)
			if !ok || res.Bytes <= 0 {
				rr.fail("%s: no CPU reading of every broker, or no payload bytes reported", name)
				continue
			}
			var total float64
			for _, v := range spent {
				total += v
			}
			rr.rd.Figures[cpuAllFigure(parts)] = total / (float64(res.Bytes) / gb)
			rr.detail("%s: %.1f MiB of payload in %.2f s; CPU while loadgen ran: %s", name, float64(res.Bytes)/(1<<20), res.Seconds, fmtCPU(spent, ids, nil))
		}
	}
}

// assignedTo is a replicated topic of partitions partitions whose every
// partition has leader first in its replica list (so the controller makes
// it the leader) and the followers after it, alternating their order.
func assignedTo(topic string, partitions int, leader int, followers []int) kmsg.CreateTopicsRequestTopic {
	t := replicatedTopic(topic, partitions)
	t.NumPartitions, t.ReplicationFactor = -1, -1
	for p := range partitions {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition = int32(p)
		a.Replicas = []int32{int32(leader)}
		for i := range followers {
			a.Replicas = append(a.Replicas, int32(followers[(i+p)%len(followers)]))
		}
		t.ReplicaAssignment = append(t.ReplicaAssignment, a)
	}
	return t
}

// followerCPU runs the acks=all, 6-partition throughput workload once more
// on a topic whose every partition is led by the active controller, so
// that the two other brokers only follow it: their CPU over the run, per
// GB of payload each replicated (all of it), is the follower's cost, and
// the leader's per GB produced is the leader's.
func (rr *replRound) followerCPU(ctx context.Context) {
	const name = "produce 1 KiB lz4 acks=all, 6 partitions RF 3, every partition led by the active controller, franz-go"
	ids := rr.brokerIDs()
	controller, _, _, _, err := rr.quorumLeader(ctx, ids[0])
	if err != nil {
		rr.fail("follower CPU: finding the active controller: %v", err)
		return
	}
	leader := int(controller)
	var followers []int
	for _, id := range ids {
		if id != leader {
			followers = append(followers, id)
		}
	}
	topic := fmt.Sprintf("bench-repl-follow-%d", rr.rd.Round)
	if err := rr.createReady(ctx, assignedTo(topic, replPartitions, leader, followers)); err != nil {
		rr.fail("follower CPU: %v", err)
		return
	}
	resp, err := rr.metadata(ctx, leader, topic)
	if err != nil {
		rr.fail("follower CPU: %v", err)
		return
	}
	for p := range replPartitions {
		if l := leaderOf(resp, topic, int32(p)); l != int32(leader) {
			rr.fail("follower CPU: partition %d of %s is led by %d, not by broker %d as assigned", p, topic, l, leader)
			return
		}
	}
	before := rr.brokerCPU()
	res, err := rr.produceRun(ctx, name, rr.c.Node(leader).Addr(), topic, replPartitions, rr.cfg.Records, "all", 10*time.Minute)
	after := rr.brokerCPU()
	if err != nil {
		rr.fail("follower CPU: %v", oneLine(err.Error()))
		return
	}
	spent, ok := cpuSpent(before, after, ids)
	if !ok || res.Bytes <= 0 {
		rr.fail("follower CPU: no CPU reading of every broker, or no payload bytes reported")
		return
	}
	gbs := float64(res.Bytes) / gb
	var follow float64
	for _, f := range followers {
		follow += spent[f]
	}
	rr.rd.Figures[figRCPUFollower] = follow / float64(len(followers)) / gbs
	rr.rd.Figures[figRCPULeader] = spent[leader] / gbs
	rr.detail("every partition led by broker %d (the active controller): %.0f records/s, %.1f MiB/s, %.1f MiB of payload in %.2f s; CPU while loadgen ran: %s",
		leader, res.RecordsPerSec, res.MBPerSec, float64(res.Bytes)/(1<<20), res.Seconds, fmtCPU(spent, ids, func(id int) string {
			if id == leader {
				return "leader"
			}
			return "follower"
		}))
}

// halfRateLatency runs loadgen produce-latency (open loop, acks=all,
// linger 0) for HalfTime at half the round's acks=all 6-partition
// records/s, on a fresh replicated topic, and keeps the send-to-ack
// latency quantiles.
func (rr *replRound) halfRateLatency(ctx context.Context) {
	if rr.maxAll <= 0 {
		rr.fail("half-rate latency: no acks=all 6-partition throughput this round to take half of")
		return
	}
	rate := max(1, int(math.Round(rr.maxAll/2)))
	topic := fmt.Sprintf("bench-repl-half-%d", rr.rd.Round)
	if err := rr.createReplicated(ctx, topic, replPartitions); err != nil {
		rr.fail("half-rate latency: %v", err)
		return
	}
	c := integration.Cmd{Name: rr.loadgen, Args: []string{"produce-latency", "-bootstrap", rr.firstAddr(), "-topic", topic,
		"-partitions", strconv.Itoa(replPartitions), "-rate", strconv.Itoa(rate), "-duration", rr.cfg.HalfTime.String(),
		"-payloads", rr.payloadFile, "-create=false", "-timeout", (rr.cfg.HalfTime + 2*time.Minute).String()},
		Timeout: rr.cfg.HalfTime + 3*time.Minute}
	rr.commands.note(figRHalf, c)
	lat, err := runJSON[latencyResult](ctx, c)
	if err != nil {
		rr.fail("half-rate latency: %v", oneLine(err.Error()))
		return
	}
	rr.rd.Figures[figRHalf+": records/s asked"] = float64(rate)
	if lat.SentSeconds > 0 {
		rr.rd.Figures[figRHalf+": records/s sent"] = float64(lat.Records) / lat.SentSeconds
	}
	for i, v := range []float64{lat.P50Ms, lat.P99Ms, lat.P999Ms} {
		rr.rd.Figures[figRHalf+" (ms) "+latencyQuantiles[i]] = v
	}
	kept := "kept"
	if want := rr.cfg.HalfTime.Seconds(); lat.SentSeconds > want*1.1+0.5 {
		kept = fmt.Sprintf("**not kept**: sending took %.1f s, not %.0f s", lat.SentSeconds, want)
	}
	rr.detail("half-rate latency: %s records/s asked (half of %.0f) for %s: %d records acknowledged, sent in %.1f s (rate %s), max %.1f ms",
		thousands(rate), rr.maxAll, rr.cfg.HalfTime, lat.Records, lat.SentSeconds, kept, lat.MaxMs)
}

// diskFree is the free space of the file system dir is on, "" when it
// cannot be read.
func diskFree(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return ""
	}
	return fmtSize(int64(st.Bavail) * int64(st.Bsize))
}

// fmtSize writes a byte count in the largest binary unit it has at least
// one of: "10 GiB", "512 MiB", "1.5 GiB".
func fmtSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, i := float64(n), 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f %s", v, units[i])
	}
	return fmt.Sprintf("%.1f %s", v, units[i])
}

// ParseSize reads a byte count: a number with an optional unit, B, KiB,
// MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000),
// in any case, as "10GiB", "512 MiB" or "1e9".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' && r != 'e' && r != 'E' && r != '+' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(t[:i]), strings.TrimSpace(t[i:])
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("size %q: not a number of bytes", s)
	}
	mult := map[string]float64{"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
		"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)", s, unit)
	}
	return int64(v * mult), nil
}
