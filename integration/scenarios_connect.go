package integration

// Kafka Connect against the target: a distributed Connect cluster of two
// workers with exactly-once source support (KIP-618) copies a file through
// a topic into another file with the FileStream connectors, through a
// connector restart, a worker's kill -9 and a broker's kill -9. The
// broker's side of Connect is all here: the compacted internal topics it
// creates, the group its workers rebalance in, the transactions that hold
// a source's records and offsets together, the zombie fencing
// (FenceProducers) before a source task starts, read_committed fetches.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func connectScenarios() []Scenario {
	return []Scenario{{
		Name: "connect/distributed-eos",
		Doc: "Kafka Connect " + KafkaVersion + ", two distributed workers with exactly.once.source.support=enabled (KIP-618): FileStreamSource (exactly.once.support=required) → a topic → FileStreamSink; " +
			"the config, offsets and status topics are created compacted with 1, 25 and 5 partitions; both connectors RUNNING, and again after a REST restart with includeTasks=true; " +
			"with lines appended all along, kill -9 of the worker running the source task (the other takes every connector and task over; restarted, it gets some back) and kill -9 of the broker, restarted " +
			"(on a cluster target, of the data partition's leader; on a single-node target the scenario's own node): a read_committed consumer reads every line exactly once, in order; the sink file holds every line (at least once, first appearances in order); " +
			"the offsets topic's committed positions never go back and end at the file's size, as GET /connectors/<name>/offsets says; the config topic holds each connector's config, task config and task count commit once",
		Timeout: 10 * time.Minute,
		Run:     connectDistributedEOS,
	}, {
		Name: "connect/standalone",
		Doc: "Kafka Connect " + KafkaVersion + ", a standalone worker (offsets in a local file; no exactly-once source support, which only distributed workers have): FileStreamSource → a topic → FileStreamSink, " +
			"kill -9 of the worker while lines are appended, restarted: the topic and the sink file hold every line, at least once, first appearances in order; GET /connectors/<name>/offsets ends at the file's size",
		Timeout: 6 * time.Minute,
		Run:     connectStandalone,
	}}
}

// Connect's timings for the scenario: how long a worker may take to come
// up (a JVM on a loaded two-core machine), and to take a dead worker's
// work over (session.timeout.ms plus scheduled.rebalance.max.delay.ms and
// a rebalance).
const (
	connectWorkerWait = 3 * time.Minute
	connectTakeover   = 2 * time.Minute
	// connectRebalanceDelay is scheduled.rebalance.max.delay.ms: how long
	// the leader keeps a departed worker's connectors and tasks unassigned
	// in case it comes back. Its default, 5 minutes, would leave the
	// source stopped for longer than the scenario runs.
	connectRebalanceDelay = 5 * time.Second
	connectInitialLines   = 5000
	// connectSinkSessionTimeout is the sink consumers' session.timeout.ms:
	// a killed worker's sink consumer stays in its group that long, and
	// the task started in its place joins only then. The default, 45 s,
	// would be most of a scenario's length.
	connectSinkSessionTimeout = "10000"
	// connectTransactionInterval is the source's transaction.boundary.interval.ms.
	connectTransactionInterval = 3 * time.Second
	// While the workers and the broker are killed the input grows at 500
	// lines a second, a write every 100 ms.
	connectAppendLines    = 50
	connectAppendInterval = 100 * time.Millisecond
)

func connectDistributedEOS(ctx context.Context, e *Env) error {
	base := e.Name("connect")
	data := base + "-data"
	broker, restore, err := brokerToKill(ctx, e, "the data partition's leader", func(ctx context.Context) (int, error) { return leaderOf(ctx, e, data) })
	if err != nil {
		return err
	}
	defer restore()
	replicas := broker.replicas

	internal := map[string]int{base + "-configs": 1, base + "-offsets": 25, base + "-status": 5}
	if _, err := e.Kafka(ctx, mainTopics, "--create", "--topic", data, "--partitions", "1", "--replication-factor", strconv.Itoa(replicas)); err != nil {
		return fmt.Errorf("creating the data topic: %w", err)
	}
	dir := filepath.Join(e.Dir, "connect")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	host, err := ClaimLoopback()
	if err != nil {
		return err
	}
	defer host.Release()
	workers := distributedWorkers(2, dir, host, e.Bootstrap(), base, replicas)
	defer stopConnectWorkers(workers)
	if err := startConnectWorkers(ctx, e, workers); err != nil {
		return err
	}
	if err := checkConnectInternalTopics(ctx, e, internal, replicas); err != nil {
		return err
	}

	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.txt")
	input, err := newLineAppender(in)
	if err != nil {
		return err
	}
	defer input.Stop()
	if err := input.Append(connectInitialLines); err != nil {
		return err
	}
	const source, sink = "file-source", "file-sink"
	sourceConfig := fileSourceConfig(in, data)
	// Creation fails unless the connector and the worker both support
	// exactly-once delivery.
	sourceConfig["exactly.once.support"] = "required"
	// A transaction spans the polls of 3 s rather than one poll (a few
	// milliseconds a second with this input): a kill then most likely
	// aborts one that holds records, which read_committed consumers must
	// not see.
	sourceConfig["transaction.boundary"] = "interval"
	sourceConfig["transaction.boundary.interval.ms"] = strconv.FormatInt(connectTransactionInterval.Milliseconds(), 10)
	if err := workers[0].CreateConnector(ctx, source, sourceConfig); err != nil {
		return err
	}
	if err := workers[1].CreateConnector(ctx, sink, fileSinkConfig(data, out)); err != nil {
		return err
	}
	for _, name := range []string{source, sink} {
		if _, err := waitConnectorRunning(ctx, workers[0], name, "", connectTakeover); err != nil {
			return err
		}
	}
	if err := waitCopied(ctx, workers[0], source, in, out, connectInitialLines, 2*time.Minute); err != nil {
		return fmt.Errorf("copying the first %d lines: %w", connectInitialLines, err)
	}

	restarted, err := workers[1].RestartConnector(ctx, source)
	if err != nil {
		return err
	}
	if restarted.Connector.State != "RESTARTING" || len(restarted.Tasks) != 1 || restarted.Tasks[0].State != "RESTARTING" {
		return fmt.Errorf("POST /connectors/%s/restart?includeTasks=true answered %s, want the connector and its task RESTARTING", source, restarted)
	}
	if _, err := waitConnectorRunning(ctx, workers[0], source, "", connectTakeover); err != nil {
		return fmt.Errorf("after the REST restart: %w", err)
	}

	input.Start(connectAppendLines, connectAppendInterval)
	before, err := workers[0].FilePosition(ctx, source, in)
	if err != nil {
		return err
	}
	// Killed while it copies appended lines, the source task most likely
	// has a transaction open.
	if err := waitPosition(ctx, workers[0], source, in, before+1000*connectLineBytes, time.Minute); err != nil {
		return fmt.Errorf("copying appended lines: %w", err)
	}
	moved, err := killSourceWorker(ctx, e, workers, source, sink, in, data)
	if err != nil {
		return err
	}

	linesAtKill := input.Written()
	if err := broker.kill(ctx); err != nil {
		return fmt.Errorf("killing %s: %w", broker.describe, err)
	}
	// The outage lasts while 1,000 lines are appended (two seconds), and
	// then as long as the broker takes to come back.
	if err := until(ctx, 30*time.Second, 100*time.Millisecond, func() (bool, error) {
		return input.Written() >= linesAtKill+1000, nil
	}); err != nil {
		return fmt.Errorf("appending while %s is down: %w", broker.describe, err)
	}
	if err := broker.restart(ctx); err != nil {
		return fmt.Errorf("restarting %s: %w", broker.describe, err)
	}
	atRestart := int64(input.Written()) * connectLineBytes
	if err := waitPosition(ctx, workers[0], source, in, atRestart, 3*time.Minute); err != nil {
		return fmt.Errorf("after %s's restart, copying the lines appended while it was down: %w", broker.describe, err)
	}
	lines, err := input.Stop()
	if err != nil {
		return err
	}
	for _, name := range []string{source, sink} {
		if _, err := waitConnectorRunning(ctx, workers[0], name, "", connectTakeover); err != nil {
			return fmt.Errorf("after %s's restart: %w", broker.describe, err)
		}
	}
	if err := waitCopied(ctx, workers[0], source, in, out, lines, 3*time.Minute); err != nil {
		return fmt.Errorf("copying all %d lines: %w", lines, err)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	next, repeated, err := scanSinkFile(string(b))
	if err != nil {
		return err
	}
	if next != lines {
		return fmt.Errorf("the sink file holds the first %d lines, want %d", next, lines)
	}
	want := int64(lines) * connectLineBytes
	if pos, err := workers[0].FilePosition(ctx, source, in); err != nil || pos != want {
		return fmt.Errorf("GET /connectors/%s/offsets gives position %d (%v), want %d, the input's size", source, pos, err, want)
	}
	// The reads below wait mostly for their idle timeouts: side by side.
	var aborted int
	var configs string
	checks := []func() error{
		func() error { return checkDataTopic(ctx, e, data, lines) },
		func() (err error) { aborted, err = countAborted(ctx, e, data, lines); return err },
		func() error { return checkSourceOffsets(ctx, e, base+"-offsets", source, in, want) },
		func() (err error) {
			configs, err = checkConfigTopic(ctx, e, base+"-configs", []string{source, sink})
			return err
		},
	}
	errs := make([]error, len(checks))
	var wg sync.WaitGroup
	for i, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = check()
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, w := range workers {
		if err := w.Stop(); err != nil {
			return fmt.Errorf("stopping %s: %w", w.Name, err)
		}
	}
	e.Notef("%d lines, every one read once read_committed (%d records of aborted transactions hidden); %s; %s killed and restarted; the sink wrote %d lines again; config topic: %s; FETCH_SESSION_TOPIC_ID_ERROR in the workers' logs: %d",
		lines, aborted, moved, broker.describe, repeated, configs, countInLogs(workers, "FETCH_SESSION_TOPIC_ID_ERROR"))
	return nil
}

// distributedWorkerProperties is a distributed worker's config. The sink's
// consumer reads read_committed: with the default, read_uncommitted, it
// would copy the records of source transactions that a kill aborted.
func distributedWorkerProperties(bootstrap, base string, replicas int, listener string) [][2]string {
	rf := strconv.Itoa(replicas)
	return [][2]string{
		{"bootstrap.servers", bootstrap},
		{"group.id", base},
		{"key.converter", connectJSONConverter},
		{"value.converter", connectJSONConverter},
		{"config.storage.topic", base + "-configs"},
		{"offset.storage.topic", base + "-offsets"},
		{"status.storage.topic", base + "-status"},
		{"config.storage.replication.factor", rf},
		{"offset.storage.replication.factor", rf},
		{"status.storage.replication.factor", rf},
		{"offset.flush.interval.ms", "1000"},
		{"scheduled.rebalance.max.delay.ms", strconv.FormatInt(connectRebalanceDelay.Milliseconds(), 10)},
		{"listeners", "HTTP://" + listener},
		{"exactly.once.source.support", "enabled"},
		{"consumer.isolation.level", "read_committed"},
		{"consumer.session.timeout.ms", connectSinkSessionTimeout},
	}
}

// startConnectWorkers starts the workers side by side: each spends most
// of its start-up in its own JVM.
// distributedWorkers are n distributed workers of group base on the
// target at bootstrap, their REST listeners on host's extra ports.
func distributedWorkers(n int, dir string, host *Loopback, bootstrap, base string, replicas int) []*ConnectWorker {
	workers := make([]*ConnectWorker, n)
	for i := range workers {
		addr := host.Addr(FirstExtraPort + i)
		workers[i] = &ConnectWorker{Name: fmt.Sprintf("worker-%d", i+1), Dir: dir, Addr: addr,
			Main: mainConnectDistributed, Properties: distributedWorkerProperties(bootstrap, base, replicas, addr)}
	}
	return workers
}

func stopConnectWorkers(workers []*ConnectWorker) {
	for _, w := range workers {
		_ = w.Stop()
	}
}

func startConnectWorkers(ctx context.Context, e *Env, workers []*ConnectWorker) error {
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = e.Tools.StartConnectWorker(ctx, w, connectWorkerWait)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// checkConnectInternalTopics checks the topics the workers created as
// Connect asks for them: compacted, with the partition counts of the
// worker config's defaults (the config topic must have exactly one).
func checkConnectInternalTopics(ctx context.Context, e *Env, partitions map[string]int, replicas int) error {
	for _, topic := range slices.Sorted(maps.Keys(partitions)) {
		d, err := describeTopic(ctx, e, topic)
		if err != nil {
			return fmt.Errorf("Connect's internal topic: %w", err)
		}
		if d.PartitionCount != partitions[topic] || d.ReplicationFactor != replicas {
			return fmt.Errorf("%s has %d partitions and replication factor %d, want %d and %d", topic, d.PartitionCount, d.ReplicationFactor, partitions[topic], replicas)
		}
		out, err := e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--describe")
		if err != nil {
			return err
		}
		if got := parseConfigs(out.Stdout)["cleanup.policy"]; got.Value != "compact" {
			return fmt.Errorf("%s has cleanup.policy=%q, want compact as Connect created it: %s", topic, got.Value, out.Tail())
		}
	}
	return nil
}

// waitConnectorRunning waits until the connector and its one task run
// (on worker, unless ""), as w reports. A FAILED state ends the wait:
// Connect does not leave it by itself.
func waitConnectorRunning(ctx context.Context, w *ConnectWorker, name, worker string, wait time.Duration) (connectorStatus, error) {
	var st connectorStatus
	err := until(ctx, wait, 500*time.Millisecond, func() (bool, error) {
		if err := w.Exited(); err != nil {
			return false, err
		}
		var err error
		if st, err = w.Status(ctx, name); err != nil {
			return false, err
		}
		if st.failed() {
			return false, fmt.Errorf("connector %s", st)
		}
		if st.running(1, worker) && (worker == "" || st.Connector.WorkerID == worker) {
			return true, nil
		}
		where := ""
		if worker != "" {
			where = " on " + worker
		}
		return false, fmt.Errorf("connector %s, after %s, want it and its task RUNNING%s", st, wait, where)
	})
	if err != nil && strings.Contains(err.Error(), " FAILED ") {
		return st, fmt.Errorf("%w; %s's log: %s", err, w.Name, w.proc.LogTail(4))
	}
	return st, err
}

// waitPosition waits until the source connector's committed position in
// file is at least want.
func waitPosition(ctx context.Context, w *ConnectWorker, name, file string, want int64, wait time.Duration) error {
	return until(ctx, wait, 500*time.Millisecond, func() (bool, error) {
		if err := w.Exited(); err != nil {
			return false, err
		}
		pos, err := w.FilePosition(ctx, name, file)
		if err != nil {
			return false, err
		}
		if pos >= want {
			return true, nil
		}
		st, _ := w.Status(ctx, name)
		return false, fmt.Errorf("after %s %s's committed position in %s is %d, want %d (line %d of %d); %s",
			wait, name, filepath.Base(file), pos, want, pos/connectLineBytes, want/connectLineBytes, st)
	})
}

// waitCopied waits until the source has committed the first lines lines of
// in and the sink has written them all to out.
func waitCopied(ctx context.Context, w *ConnectWorker, source, in, out string, lines int, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	if err := waitPosition(ctx, w, source, in, int64(lines)*connectLineBytes, wait); err != nil {
		return err
	}
	return until(ctx, time.Until(deadline), 500*time.Millisecond, func() (bool, error) {
		b, err := os.ReadFile(out)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, err
		}
		next, _, err := scanSinkFile(string(b))
		if err != nil {
			return false, err
		}
		if next >= lines {
			return true, nil
		}
		return false, fmt.Errorf("the sink file holds the first %d lines, want %d", next, lines)
	})
}

// killSourceWorker kill -9s the worker that runs the source task, waits
// until the other runs both connectors and their tasks and the source has
// gone on copying, restarts the killed worker and waits until it runs
// some of them again. It returns what moved where, for the note.
func killSourceWorker(ctx context.Context, e *Env, workers []*ConnectWorker, source, sink, in, data string) (string, error) {
	st, err := workers[0].Status(ctx, source)
	if err != nil {
		return "", err
	}
	victim := slices.IndexFunc(workers, func(w *ConnectWorker) bool { return w.Addr == st.Tasks[0].WorkerID })
	if victim < 0 {
		return "", fmt.Errorf("the source task runs on %s, none of the workers", st.Tasks[0].WorkerID)
	}
	killed, survivor := workers[victim], workers[1-victim]
	atKill, err := survivor.FilePosition(ctx, source, in)
	if err != nil {
		return "", err
	}
	open, err := waitOpenTransaction(ctx, e, data, connectTransactionInterval+time.Minute)
	if err != nil {
		return "", err
	}
	killed.Kill()
	for _, name := range []string{source, sink} {
		if _, err := waitConnectorRunning(ctx, survivor, name, survivor.Addr, connectTakeover); err != nil {
			return "", fmt.Errorf("after kill -9 of %s, which ran the source task: %w", killed.Name, err)
		}
	}
	if err := waitPosition(ctx, survivor, source, in, atKill+1000*connectLineBytes, time.Minute); err != nil {
		return "", fmt.Errorf("the source task on %s after kill -9 of %s: %w", survivor.Name, killed.Name, err)
	}
	if err := killed.Restart(ctx, connectWorkerWait); err != nil {
		return "", err
	}
	// The leader gives the returning worker a share of the connectors and
	// tasks (incremental cooperative rebalancing: revoked from the
	// survivor in one round, assigned in the next).
	var shares []string
	err = until(ctx, connectTakeover, 500*time.Millisecond, func() (bool, error) {
		shares = shares[:0]
		for _, name := range []string{source, sink} {
			st, err := survivor.Status(ctx, name)
			if err != nil {
				return false, err
			}
			if st.Connector.WorkerID == killed.Addr {
				shares = append(shares, name)
			}
			for _, t := range st.Tasks {
				if t.WorkerID == killed.Addr && t.State == "RUNNING" {
					shares = append(shares, fmt.Sprintf("%s task %d", name, t.ID))
				}
			}
		}
		if len(shares) > 0 {
			return true, nil
		}
		return false, fmt.Errorf("%s, restarted, runs none of the connectors and tasks after %s", killed.Name, connectTakeover)
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("kill -9 of %s (the source task's) with %d records of its transaction in the log: %s took every connector and task over; restarted, %s got %s back",
		killed.Name, open, survivor.Name, killed.Name, strings.Join(shares, ", ")), nil
}

// waitOpenTransaction waits until topic's partition 0 holds records of a
// transaction still open: its high watermark is above its last stable
// offset. It returns how many offsets lie between them.
func waitOpenTransaction(ctx context.Context, e *Env, topic string, wait time.Duration) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var open int64
	err = until(ctx, wait, 20*time.Millisecond, func() (bool, error) {
		end, err := adm.ListEndOffsets(ctx, topic)
		if err != nil {
			return false, err
		}
		stable, err := adm.ListCommittedOffsets(ctx, topic)
		if err != nil {
			return false, err
		}
		hw, ok1 := end.Lookup(topic, 0)
		lso, ok2 := stable.Lookup(topic, 0)
		if !ok1 || !ok2 || hw.Err != nil || lso.Err != nil {
			return false, fmt.Errorf("listing %s-0's offsets: %v %v", topic, hw.Err, lso.Err)
		}
		open = hw.Offset - lso.Offset
		if open > 0 {
			return true, nil
		}
		return false, fmt.Errorf("%s-0's last stable offset stayed at its high watermark, %d, for %s: no transaction with records open", topic, hw.Offset, wait)
	})
	return open, err
}

// leaderOf is the id of the leader of topic's partition 0.
func leaderOf(ctx context.Context, e *Env, topic string) (int, error) {
	d, err := describeTopic(ctx, e, topic)
	if err != nil {
		return 0, err
	}
	if len(d.Partitions) == 0 {
		return 0, fmt.Errorf("kafka-topics --describe lists no partition of %s", topic)
	}
	id, err := strconv.Atoi(d.Partitions[0].Leader)
	if err != nil {
		return 0, fmt.Errorf("%s-0 has leader %q: %w", topic, d.Partitions[0].Leader, err)
	}
	return id, nil
}

// consumeAll runs the console consumer over topic from the beginning,
// stopping after max records or idle without one; it exits non-zero on
// the idle timeout, which is no failure here.
func consumeAll(ctx context.Context, e *Env, topic string, max int, idle time.Duration, extra ...string) (string, error) {
	args := append([]string{"--topic", topic, "--from-beginning", "--max-messages", strconv.Itoa(max),
		"--timeout-ms", strconv.FormatInt(idle.Milliseconds(), 10)}, extra...)
	out, err := e.Kafka(ctx, mainConsumer, args...)
	var exit *ExitError
	if err != nil && !(errors.As(err, &exit) && exit.Output.ExitCode > 0 && strings.Contains(out.Stderr, "Processed a total of")) {
		return "", fmt.Errorf("console consumer of %s: %w", topic, err)
	}
	return out.Stdout, nil
}

// checkDataTopic reads the source's topic read_committed, with room for
// one record too many, and wants every line once, in order.
func checkDataTopic(ctx context.Context, e *Env, topic string, lines int) error {
	got, err := consumeLines(ctx, e, topic, lines+1, "read_committed")
	if err != nil {
		return err
	}
	if err := checkExactLines(got, lines); err != nil {
		return fmt.Errorf("the data topic read read_committed: %w", err)
	}
	return nil
}

// countAborted reads the source's topic read_uncommitted: every line is
// there, and the records beyond them are those of the transactions the
// kills aborted, which read_committed must not show. It returns how many
// there are.
func countAborted(ctx context.Context, e *Env, topic string, lines int) (int, error) {
	got, err := consumeLines(ctx, e, topic, 10*lines, "read_uncommitted")
	if err != nil {
		return 0, err
	}
	seen := make(map[string]bool, len(got))
	for _, l := range got {
		seen[l] = true
	}
	for i := range lines {
		if !seen[connectLine(i)] {
			return 0, fmt.Errorf("the data topic read read_uncommitted lacks %s (%d records read)", connectLine(i), len(got))
		}
	}
	return len(got) - lines, nil
}

// consumeLines reads topic's values from the beginning with isolation.
func consumeLines(ctx context.Context, e *Env, topic string, max int, isolation string) ([]string, error) {
	out, err := consumeAll(ctx, e, topic, max, 10*time.Second, "--isolation-level", isolation)
	if err != nil || out == "" {
		return nil, err
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n"), nil
}

// checkSourceOffsets reads the offsets topic read_committed (the source
// task writes its offsets in its transactions) and wants the source's
// committed positions never to go back, and the last to be want, the
// whole input file: a position that goes back is an aborted transaction's
// offset shown to the consumer; a last one short of the end, a lost
// commit.
func checkSourceOffsets(ctx context.Context, e *Env, topic, connector, file string, want int64) error {
	out, err := consumeAll(ctx, e, topic, 1_000_000, 10*time.Second, "--isolation-level", "read_committed",
		"--formatter-property", "print.key=true")
	if err != nil {
		return err
	}
	recs, err := parseKeyedRecords(out)
	if err != nil {
		return err
	}
	pos, err := filePositions(recs, connector, file)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("the offsets topic %s holds no offset of %s for %s (%d records)", topic, connector, file, len(recs))
	}
	for i := 1; i < len(pos); i++ {
		if pos[i] < pos[i-1] {
			return fmt.Errorf("the offsets topic's committed positions of %s go back from %d to %d (record %d of %d for the file)", connector, pos[i-1], pos[i], i+1, len(pos))
		}
	}
	if last := pos[len(pos)-1]; last != want {
		return fmt.Errorf("the offsets topic's last committed position of %s is %d, want %d (the input's size), which the REST API reported", connector, last, want)
	}
	return nil
}

// checkConfigTopic reads the config topic and wants, for each connector,
// its config (connector-<name>), its one task's config (task-<name>-0) and
// the commit of its task count (commit-<name>) exactly once: none of them
// changed in the run, and Connect writes a task config again only when it
// changes. Records of other kinds (session keys, the source's task count
// for fencing, the restart request) are counted for the note.
func checkConfigTopic(ctx context.Context, e *Env, topic string, connectors []string) (string, error) {
	out, err := consumeAll(ctx, e, topic, 10_000, 10*time.Second, "--isolation-level", "read_committed",
		"--formatter-property", "print.key=true")
	if err != nil {
		return "", err
	}
	recs, err := parseKeyedRecords(out)
	if err != nil {
		return "", err
	}
	counts := map[string]int{}
	for _, r := range recs {
		counts[r.Key]++
	}
	var wrong []string
	for _, c := range connectors {
		for _, key := range []string{"connector-" + c, "task-" + c + "-0", "commit-" + c} {
			if counts[key] != 1 {
				wrong = append(wrong, fmt.Sprintf("%s ×%d", key, counts[key]))
			}
			delete(counts, key)
		}
	}
	if len(wrong) > 0 {
		return "", fmt.Errorf("the config topic %s holds %s, want each once (%d records)", topic, strings.Join(wrong, ", "), len(recs))
	}
	var others []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		others = append(others, fmt.Sprintf("%s ×%d", k, counts[k]))
	}
	return fmt.Sprintf("%d records, each connector's config, task config and commit once; also %s", len(recs), strings.Join(others, ", ")), nil
}

// countInLogs counts the occurrences of s in the workers' logs.
func countInLogs(workers []*ConnectWorker, s string) int {
	n := 0
	for _, w := range workers {
		if b, err := os.ReadFile(w.LogPath()); err == nil {
			n += bytes.Count(b, []byte(s))
		}
	}
	return n
}

func connectStandalone(ctx context.Context, e *Env) error {
	data := e.Name("connect-standalone")
	replicas := min(3, len(e.Target.Topology().Brokers))
	if _, err := e.Kafka(ctx, mainTopics, "--create", "--topic", data, "--partitions", "1", "--replication-factor", strconv.Itoa(replicas)); err != nil {
		return fmt.Errorf("creating the data topic: %w", err)
	}
	dir := filepath.Join(e.Dir, "connect")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	in, out := filepath.Join(dir, "in.txt"), filepath.Join(dir, "out.txt")
	input, err := newLineAppender(in)
	if err != nil {
		return err
	}
	defer input.Stop()
	if err := input.Append(connectInitialLines); err != nil {
		return err
	}
	const source, sink = "file-source", "file-sink"
	connectors := map[string]map[string]string{source: fileSourceConfig(in, data), sink: fileSinkConfig(data, out)}
	var files []string
	for _, name := range []string{source, sink} {
		props := [][2]string{{"name", name}}
		for _, k := range slices.Sorted(maps.Keys(connectors[name])) {
			props = append(props, [2]string{k, connectors[name][k]})
		}
		f := filepath.Join(dir, name+".properties")
		if err := WriteProperties(f, props); err != nil {
			return err
		}
		files = append(files, f)
	}
	host, err := ClaimLoopback()
	if err != nil {
		return err
	}
	defer host.Release()
	w := &ConnectWorker{Name: "standalone", Dir: dir, Addr: host.Addr(FirstExtraPort), Main: mainConnectStandalone, Args: files,
		Properties: [][2]string{
			{"bootstrap.servers", e.Bootstrap()},
			{"key.converter", connectJSONConverter},
			{"value.converter", connectJSONConverter},
			{"offset.storage.file.filename", filepath.Join(dir, "offsets.dat")},
			{"offset.flush.interval.ms", "1000"},
			{"listeners", "HTTP://" + host.Addr(FirstExtraPort)},
			{"consumer.session.timeout.ms", connectSinkSessionTimeout},
		}}
	defer w.Stop()
	if err := e.Tools.StartConnectWorker(ctx, w, connectWorkerWait); err != nil {
		return err
	}
	for _, name := range []string{source, sink} {
		if _, err := waitConnectorRunning(ctx, w, name, "", connectTakeover); err != nil {
			return err
		}
	}
	if err := waitCopied(ctx, w, source, in, out, connectInitialLines, 2*time.Minute); err != nil {
		return fmt.Errorf("copying the first %d lines: %w", connectInitialLines, err)
	}

	input.Start(connectAppendLines, connectAppendInterval)
	before, err := w.FilePosition(ctx, source, in)
	if err != nil {
		return err
	}
	if err := waitPosition(ctx, w, source, in, before+1000*connectLineBytes, time.Minute); err != nil {
		return fmt.Errorf("copying appended lines: %w", err)
	}
	w.Kill()
	atKill := input.Written()
	if err := w.Restart(ctx, connectWorkerWait); err != nil {
		return err
	}
	if err := waitPosition(ctx, w, source, in, int64(atKill+1000)*connectLineBytes, 2*time.Minute); err != nil {
		return fmt.Errorf("after the worker's restart: %w", err)
	}
	lines, err := input.Stop()
	if err != nil {
		return err
	}
	for _, name := range []string{source, sink} {
		if _, err := waitConnectorRunning(ctx, w, name, "", connectTakeover); err != nil {
			return fmt.Errorf("after the worker's restart: %w", err)
		}
	}
	if err := waitCopied(ctx, w, source, in, out, lines, 3*time.Minute); err != nil {
		return fmt.Errorf("copying all %d lines: %w", lines, err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return err
	}
	next, sinkRepeated, err := scanSinkFile(string(b))
	if err != nil {
		return err
	}
	if next != lines {
		return fmt.Errorf("the sink file holds the first %d lines, want %d", next, lines)
	}
	if pos, err := w.FilePosition(ctx, source, in); err != nil || pos != int64(lines)*connectLineBytes {
		return fmt.Errorf("GET /connectors/%s/offsets gives position %d (%v), want %d, the input's size", source, pos, err, int64(lines)*connectLineBytes)
	}
	got, err := consumeLines(ctx, e, data, 10*lines, "read_uncommitted")
	if err != nil {
		return err
	}
	next, topicRepeated, err := scanCopies(got, "the data topic")
	if err != nil {
		return err
	}
	if next != lines {
		return fmt.Errorf("the data topic holds the first %d lines, want %d (%d records)", next, lines, len(got))
	}
	if err := w.Stop(); err != nil {
		return fmt.Errorf("stopping the worker: %w", err)
	}
	e.Notef("%d lines; kill -9 of the worker at line %d, restarted: the topic holds %d lines again, the sink file %d", lines, atKill, topicRepeated, sinkRepeated)
	return nil
}

// fileSourceConfig is a FileStream source connector copying the lines of
// file to topic as strings; fileSinkConfig the sink writing topic's
// records to file.
func fileSourceConfig(file, topic string) map[string]string {
	return map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector", "tasks.max": "1",
		"file": file, "topic": topic, "key.converter": connectStringConverter, "value.converter": connectStringConverter,
	}
}

func fileSinkConfig(topic, file string) map[string]string {
	return map[string]string{
		"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector", "tasks.max": "1",
		"topics": topic, "file": file, "key.converter": connectStringConverter, "value.converter": connectStringConverter,
	}
}
