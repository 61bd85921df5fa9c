package bench

// The replication benchmark's catch-up workload: one broker is stopped, a
// backlog of CatchupBytes of payload is written to a replicated topic,
// then a producer loads the leaders at CatchupRate records/s while the
// broker is restarted and catches up, until it is back in every ISR.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// catchUp runs the catch-up workload once, unless CatchupBytes is 0.
func (rr *replRound) catchUp(ctx context.Context) {
	if rr.cfg.CatchupBytes <= 0 {
		return
	}
	if err := rr.catchUpOnce(ctx); err != nil {
		rr.fail("catch-up: %v", err)
	}
}

// latenciesSent is the acknowledgement latency, in ms, of the records
// sent in [from, to).
func latenciesSent(acks []ackRecord, from, to time.Time) []float64 {
	var out []float64
	for _, a := range acks {
		if !a.sent.Before(from) && a.sent.Before(to) {
			out = append(out, ms(a.acked.Sub(a.sent)))
		}
	}
	return out
}

// putLatencies keeps the p50, p99 and p99.9 of vs under name.
func (rr *replRound) putLatencies(name string, vs []float64) {
	if len(vs) == 0 {
		return
	}
	for i, p := range []float64{50, 99, 99.9} {
		rr.rd.Figures[name+" "+latencyQuantiles[i]] = percentile(vs, p)
	}
}

// logBytes is the size of topic's partitions in broker id's log
// directories (DescribeLogDirs to that broker; future replicas left out).
func (rr *replRound) logBytes(ctx context.Context, id int, topic string) (int64, error) {
	req := kmsg.NewPtrDescribeLogDirsRequest()
	dt := kmsg.NewDescribeLogDirsRequestTopic()
	dt.Topic = topic
	for p := range replPartitions {
		dt.Partitions = append(dt.Partitions, int32(p))
	}
	req.Topics = append(req.Topics, dt)
	resp, err := rr.request(ctx, id, req, 10*time.Second)
	if err != nil {
		return 0, fmt.Errorf("DescribeLogDirs to broker %d: %w", id, err)
	}
	r := resp.(*kmsg.DescribeLogDirsResponse)
	if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
		return 0, fmt.Errorf("DescribeLogDirs to broker %d: %w", id, err)
	}
	var n int64
	seen := 0
	for _, d := range r.Dirs {
		if d.ErrorCode != 0 {
			continue
		}
		for _, t := range d.Topics {
			if t.Topic != topic {
				continue
			}
			for _, p := range t.Partitions {
				if !p.IsFuture {
					n += p.Size
					seen++
				}
			}
		}
	}
	if seen != replPartitions {
		return 0, fmt.Errorf("DescribeLogDirs to broker %d: %d of %s's %d partitions listed", id, seen, topic, replPartitions)
	}
	return n, nil
}

// catchUpOnce stops a broker other than the active controller (SIGTERM),
// waits until a survivor's Metadata has it out of the ISR of every
// partition of a fresh replicated topic, writes the backlog there with
// loadgen (acks=all: the two others are the ISR), starts the fixed-rate
// writer on the same topic, lets it run CatchupBefore, restarts the broker
// and waits until the survivor's Metadata of every topic has it in the
// ISR of every partition it holds.
func (rr *replRound) catchUpOnce(ctx context.Context) error {
	topic := fmt.Sprintf("bench-repl-catchup-%d", rr.rd.Round)
	if err := rr.createReplicated(ctx, topic, replPartitions); err != nil {
		return err
	}
	if err := rr.prepareClients(); err != nil {
		return err
	}
	ids := rr.brokerIDs()
	controller, _, _, _, err := rr.quorumLeader(ctx, ids[0])
	if err != nil {
		return fmt.Errorf("finding the active controller: %w", err)
	}
	victim := -1
	var survivors []int
	for _, id := range ids {
		if victim < 0 && id != int(controller) {
			victim = id
			continue
		}
		survivors = append(survivors, id)
	}
	via := survivors[0]
	line := fmt.Sprintf("catch-up: broker %d stopped (the active controller is %d)", victim, controller)
	defer func() { rr.detail("%s", line) }()

	stopAt := time.Now()
	if err := rr.c.StopNode(victim); err != nil {
		return fmt.Errorf("stopping broker %d: %w", victim, err)
	}
	rr.forget(victim)
	line += fmt.Sprintf(" with SIGTERM, exited after %.1f s (it would have had SIGKILL at 10 s)", time.Since(stopAt).Seconds())
	octx, cancel := context.WithTimeout(ctx, time.Minute)
	_, err = pollUntil(octx, func() error {
		resp, err := rr.metadata(octx, via, topic)
		if err != nil {
			return err
		}
		for p := range replPartitions {
			pt := partitionOf(resp, topic, int32(p))
			if pt == nil || pt.Leader < 0 || pt.Leader == int32(victim) || slices.Contains(pt.ISR, int32(victim)) {
				return fmt.Errorf("partition %d not yet led and in sync without broker %d", p, victim)
			}
		}
		return nil
	})
	cancel()
	if err != nil {
		line += "; never out of the ISR"
		return fmt.Errorf("broker %d never out of %s's ISR: %w", victim, topic, err)
	}
	line += fmt.Sprintf(", out of every ISR of %s %.1f s after the signal", topic, time.Since(stopAt).Seconds())

	// The backlog: the payloads are 1 KiB each (writePayloads).
	records := catchupRecords(rr.cfg.CatchupBytes)
	backlog, err := rr.produceRun(ctx, "catch-up backlog: produce 1 KiB lz4 acks=all, 6 partitions RF 3 with one broker stopped, franz-go",
		rr.c.Node(via).Addr(), topic, replPartitions, records, "all", rr.cfg.CatchupLimit)
	if err != nil {
		line += "; the backlog was not written"
		return fmt.Errorf("writing the backlog: %v", oneLine(err.Error()))
	}
	line += fmt.Sprintf("; backlog %d records, %.1f MiB of payload written in %.1f s (%.1f MiB/s)", backlog.Records, float64(backlog.Bytes)/(1<<20), backlog.Seconds, backlog.MBPerSec)

	// The load, before and through the catch-up.
	var seeds []string
	for _, id := range survivors {
		seeds = append(seeds, rr.c.Node(id).Addr())
	}
	w, err := startAckWriter(ctx, seeds, topic, replPartitions, rr.cfg.CatchupRate, rr.payloads)
	if err != nil {
		return err
	}
	writerClosed := false
	closeWriter := func() error {
		if writerClosed {
			return nil
		}
		writerClosed = true
		return w.close(30 * time.Second)
	}
	defer func() { _ = closeWriter() }()
	if err := w.waitEveryPartition(ctx, 30*time.Second); err != nil {
		return err
	}
	warmed := time.Now()
	select {
	case <-time.After(rr.cfg.CatchupBefore):
	case <-ctx.Done():
		return ctx.Err()
	}

	cpuBefore := rr.brokerCPU()
	restartAt := time.Now()
	if err := rr.c.Restart(ctx, victim); err != nil {
		return fmt.Errorf("restarting broker %d: %w", victim, err)
	}
	answeredAt := time.Now()
	rr.forget(victim)
	behind := backlog.Bytes + int64(ackedBytes(w.snapshot(), stopAt, restartAt))
	line += fmt.Sprintf("; %.1f MiB of payload behind at the restart, answering ApiVersions %.2f s after it", float64(behind)/(1<<20), answeredAt.Sub(restartAt).Seconds())
	rr.rd.Figures[figRCatchAnswer] = answeredAt.Sub(restartAt).Seconds()
	logAtAnswer, logErr := rr.logBytes(ctx, victim, topic)

	rctx, rcancel := context.WithTimeout(ctx, rr.cfg.CatchupLimit)
	var missing, held int
	rejoinedAt, rejoinErr := pollUntil(rctx, func() error {
		resp, err := rr.metadata(rctx, via)
		if err != nil {
			return err
		}
		if missing, held = outOfISR(resp, int32(victim)); missing > 0 {
			return fmt.Errorf("out of the ISR of %d of the %d partitions it holds", missing, held)
		}
		return nil
	})
	rcancel()
	if rejoinErr != nil {
		line += fmt.Sprintf("; **did not catch up**: after %s still out of the ISR of %d of the %d partitions it holds", rr.cfg.CatchupLimit, missing, held)
		return fmt.Errorf("broker %d not back in the ISR of %d of %d partitions within %s", victim, missing, held, rr.cfg.CatchupLimit)
	}
	cpuAfter := rr.brokerCPU()
	took := rejoinedAt.Sub(restartAt)
	rr.rd.Figures[catchRejoinFigure(rr.cfg.CatchupBytes)] = took.Seconds()
	line += fmt.Sprintf("; back in the ISR of all %d partitions it holds %.2f s after the restart", held, took.Seconds())
	if logErr == nil {
		var logAtReturn int64
		if logAtReturn, logErr = rr.logBytes(ctx, victim, topic); logErr == nil {
			fetched := logAtReturn - logAtAnswer
			rr.rd.Figures[figRCatchMB] = float64(fetched) / (1 << 20) / rejoinedAt.Sub(answeredAt).Seconds()
			line += fmt.Sprintf("; its log of the topic %.1f MiB at the ApiVersions answer, %.1f MiB at the return", float64(logAtAnswer)/(1<<20), float64(logAtReturn)/(1<<20))
		}
	}
	if logErr != nil {
		rr.fail("catch-up: %v", logErr)
	}
	if spent, ok := cpuSpent(cpuBefore, cpuAfter, survivors); ok {
		line += fmt.Sprintf("; CPU from the restart to the return: broker %d (catching up, from its start) %.2f s, %s", victim, cpuAfter[victim], fmtCPU(spent, survivors, func(int) string { return "leader" }))
	}

	// The load goes on until the return was seen; its records sent in
	// each window are that window's latencies.
	if err := closeWriter(); err != nil {
		return fmt.Errorf("the %d records/s load: %w", rr.cfg.CatchupRate, err)
	}
	acks := w.snapshot()
	before, during := latenciesSent(acks, warmed, restartAt), latenciesSent(acks, restartAt, rejoinedAt)
	rr.putLatencies(catchLatencyFigure(rr.cfg.CatchupRate, catchBefore), before)
	rr.putLatencies(catchLatencyFigure(rr.cfg.CatchupRate, catchDuring), during)
	line += fmt.Sprintf("; the load's records timed: %d before the restart, %d during the catch-up", len(before), len(during))
	return nil
}

// partitionOf is partition's entry in a Metadata answer, nil if none.
func partitionOf(resp *kmsg.MetadataResponse, topic string, partition int32) *kmsg.MetadataResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == partition && t.Partitions[j].ErrorCode == 0 {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}
