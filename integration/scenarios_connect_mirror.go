package integration

// MirrorSourceConnector run by a Kafka Connect cluster rather than by
// connect-mirror-maker.sh: two distributed workers on the target with
// exactly-once source support copy a topic from a peer node of the other
// flavor, whose producer writes committed and aborted transactions, and
// the copy must hold each committed record once and no aborted one,
// across a kill -9 of the worker running the task (KIP-618 for
// MirrorMaker 2: the connector supports exactly-once delivery when its
// source consumer reads read_committed).

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	mainMirrorSourceConnector = "org.apache.kafka.connect.mirror.MirrorSourceConnector"
	connectByteArrayConverter = "org.apache.kafka.connect.converters.ByteArrayConverter"
	// mirrorSourcePartitions is the copied topic's partition count.
	mirrorSourcePartitions = 2
	// mirrorSourceTxnRecords is how many records a source transaction
	// writes to each partition; every third transaction is aborted.
	mirrorSourceTxnRecords = 10
)

func connectMirrorScenarios() []Scenario {
	return []Scenario{{
		Name: "connect/mirror-source-eos",
		Doc: "Kafka Connect " + KafkaVersion + ", two distributed workers with exactly.once.source.support=enabled on the target running MirrorSourceConnector (exactly.once.support=required, source.consumer.isolation.level=read_committed, ByteArrayConverter) " +
			"from a node of the other flavor, where a transactional producer writes a 2-partition topic, every third transaction aborted, before and while the connector runs; " +
			"kill -9 of the worker running the task while it copies (the other takes it over; restarted, it rejoins): read_committed on the target, src.<topic> holds every committed record once, " +
			"in order, with its key, value and headers, and no record of an aborted transaction",
		Timeout: 8 * time.Minute,
		Run:     connectMirrorSourceEOS,
	}}
}

func connectMirrorSourceEOS(ctx context.Context, e *Env) error {
	own := FlavorOf(e.Target.Name())
	if own == "" {
		return Skipf("the harness cannot start a peer for the %s target", e.Target.Name())
	}
	peerFlavor := map[string]string{"gregor": "kafka", "kafka": "gregor"}[own]
	peer, err := e.StartNodeOf(ctx, peerFlavor, NodeSpec{})
	if err != nil {
		return fmt.Errorf("starting the %s source node: %w", peerFlavor, err)
	}
	topic := e.Name("mm-source")
	remote := "src." + topic
	base := e.Name("connect-mm")
	replicas := min(3, len(e.Target.Topology().Brokers))

	src, err := newTxnSource(ctx, peer.Bootstrap(), topic, e.Name("mm-source-txn"))
	if err != nil {
		return err
	}
	defer src.close()
	// The first transactions are in before the connector starts: it
	// copies them in a burst from the earliest offset.
	if err := src.write(ctx, 30); err != nil {
		return err
	}

	dir := filepath.Join(e.Dir, "connect")
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
	const name = "mirror-source"
	config := map[string]string{
		"connector.class":                  mainMirrorSourceConnector,
		"tasks.max":                        "1",
		"source.cluster.alias":             "src",
		"target.cluster.alias":             "dst",
		"source.cluster.bootstrap.servers": peer.Bootstrap(),
		"target.cluster.bootstrap.servers": e.Bootstrap(),
		"topics":                           topic,
		"key.converter":                    connectByteArrayConverter,
		"value.converter":                  connectByteArrayConverter,
		"header.converter":                 connectByteArrayConverter,
		"replication.factor":               strconv.Itoa(replicas),
		// The offset syncs live on the source cluster, one node.
		"offset-syncs.topic.replication.factor": "1",
		"sync.topic.acls.enabled":               "false",
		"refresh.topics.interval.seconds":       "2",
		// Creation is refused unless the worker supports exactly-once
		// source delivery and the connector says it can provide it, which
		// MirrorSourceConnector does only with a read_committed source
		// consumer.
		"exactly.once.support":            "required",
		"source.consumer.isolation.level": "read_committed",
	}
	if err := workers[0].CreateConnector(ctx, name, config); err != nil {
		return err
	}
	if _, err := waitConnectorRunning(ctx, workers[0], name, "", connectTakeover); err != nil {
		return err
	}
	dst, err := newCommittedReader(e.Bootstrap(), remote)
	if err != nil {
		return err
	}
	defer dst.close()
	if err := dst.waitFor(ctx, src.committedCounts(), 2*time.Minute); err != nil {
		return fmt.Errorf("copying the first transactions: %w", err)
	}

	// Transactions go on in the background while the worker running the
	// task is killed, so that its own transaction on the target is most
	// likely open then.
	var wg sync.WaitGroup
	var writeErr error
	stop := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if err := src.write(ctx, 1); err != nil {
				writeErr = err
				return
			}
		}
	}()
	stopWriting := func() error {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
		return writeErr
	}
	defer stopWriting()

	moved, err := killMirrorTaskWorker(ctx, workers, name, dst, src)
	if err != nil {
		return err
	}
	time.Sleep(3 * time.Second) // more transactions after the restart
	if err := stopWriting(); err != nil {
		return fmt.Errorf("writing source transactions: %w", err)
	}
	want := src.committedCounts()
	if err := dst.waitFor(ctx, want, 2*time.Minute); err != nil {
		return fmt.Errorf("after the kill: %w", err)
	}
	// Anything more would be a duplicate or an aborted record: give it a
	// few seconds to show up.
	if err := dst.settle(ctx, 5*time.Second); err != nil {
		return err
	}
	if err := src.checkCopy(dst.records); err != nil {
		return err
	}
	ends, err := logEnds(ctx, e.Bootstrap(), remote)
	if err != nil {
		return err
	}
	e.Notef("%d transactions on the %s source (%d aborted), %d committed records copied once each to %s on the target; %s; the target's partitions end at %d offsets in all (the rest are transaction markers and the records of transactions aborted by the kill)",
		src.txns, peerFlavor, src.aborted, sumCounts(want), remote, moved, ends)
	return nil
}

// txnSource writes numbered records to the source topic in transactions,
// keeping what it committed.
type txnSource struct {
	cl        *kgo.Client
	topic     string
	txns      int
	aborted   int
	seq       int
	committed map[int32][]string // values, per partition, in order
}

func newTxnSource(ctx context.Context, bootstrap, topic, txnID string) (*txnSource, error) {
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...)
	adm, err := kgo.NewClient(seeds)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	res, err := kadm.NewClient(adm).CreateTopic(ctx, mirrorSourcePartitions, 1, nil, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return nil, fmt.Errorf("creating %s on the source: %w", topic, err)
	}
	cl, err := kgo.NewClient(seeds, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return nil, err
	}
	return &txnSource{cl: cl, topic: topic, committed: map[int32][]string{}}, nil
}

func (s *txnSource) close() { s.cl.Close() }

// write runs n transactions of mirrorSourceTxnRecords records per
// partition each, aborting every third.
func (s *txnSource) write(ctx context.Context, n int) error {
	for range n {
		if err := s.cl.BeginTransaction(); err != nil {
			return err
		}
		abort := s.txns%3 == 2
		var recs []*kgo.Record
		for p := range int32(mirrorSourcePartitions) {
			for range mirrorSourceTxnRecords {
				s.seq++
				v := fmt.Sprintf("txn-%05d-rec-%07d", s.txns, s.seq)
				recs = append(recs, &kgo.Record{Partition: p, Key: []byte(fmt.Sprintf("k%d", s.seq%17)), Value: []byte(v),
					Headers: []kgo.RecordHeader{{Key: "txn", Value: []byte(strconv.Itoa(s.txns))}}})
			}
		}
		if err := s.cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("producing transaction %d: %w", s.txns, err)
		}
		commit := kgo.TryCommit
		if abort {
			commit = kgo.TryAbort
		}
		if err := s.cl.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("ending transaction %d: %w", s.txns, err)
		}
		if abort {
			s.aborted++
		} else {
			for _, r := range recs {
				s.committed[r.Partition] = append(s.committed[r.Partition], string(r.Value))
			}
		}
		s.txns++
	}
	return nil
}

func (s *txnSource) committedCounts() map[int32]int {
	out := map[int32]int{}
	for p, vs := range s.committed {
		out[p] = len(vs)
	}
	return out
}

// checkCopy compares the target's records with what was committed: the
// same values in the same order per partition, keys and headers kept.
func (s *txnSource) checkCopy(got map[int32][]*kgo.Record) error {
	for p := range int32(mirrorSourcePartitions) {
		want := s.committed[p]
		recs := got[p]
		for i, r := range recs {
			if i >= len(want) {
				return fmt.Errorf("partition %d: %d records on the target, %d committed on the source; the first extra is %q", p, len(recs), len(want), r.Value)
			}
			if string(r.Value) != want[i] {
				return fmt.Errorf("partition %d record %d on the target is %q, the source committed %q there (a duplicate or an aborted record copied)", p, i, r.Value, want[i])
			}
			if len(r.Key) == 0 || len(r.Headers) != 1 || r.Headers[0].Key != "txn" {
				return fmt.Errorf("partition %d record %d on the target lost its key or header: key %q headers %v", p, i, r.Key, r.Headers)
			}
		}
		if len(recs) != len(want) {
			return fmt.Errorf("partition %d: %d records on the target, %d committed on the source", p, len(recs), len(want))
		}
	}
	return nil
}

// committedReader reads a topic of the target read_committed from the
// start, keeping what it read.
type committedReader struct {
	cl      *kgo.Client
	topic   string
	records map[int32][]*kgo.Record
}

func newCommittedReader(bootstrap, topic string) (*committedReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &committedReader{cl: cl, topic: topic, records: map[int32][]*kgo.Record{}}, nil
}

func (r *committedReader) close() { r.cl.Close() }

func (r *committedReader) poll(ctx context.Context, wait time.Duration) error {
	pctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	fs := r.cl.PollFetches(pctx)
	for _, fe := range fs.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, kgo.ErrClientClosed) {
			return fmt.Errorf("reading %s: %w", r.topic, fe.Err)
		}
	}
	fs.EachRecord(func(rec *kgo.Record) { r.records[rec.Partition] = append(r.records[rec.Partition], rec) })
	return ctx.Err()
}

// waitFor reads until each partition holds at least want records.
func (r *committedReader) waitFor(ctx context.Context, want map[int32]int, wait time.Duration) error {
	return until(ctx, wait, 0, func() (bool, error) {
		if err := r.poll(ctx, time.Second); err != nil {
			return false, err
		}
		for p, n := range want {
			if len(r.records[p]) < n {
				return false, fmt.Errorf("%s-%d has %d of %d committed records", r.topic, p, len(r.records[p]), n)
			}
		}
		return true, nil
	})
}

// settle goes on reading for d.
func (r *committedReader) settle(ctx context.Context, d time.Duration) error {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if err := r.poll(ctx, time.Until(end)); err != nil {
			return err
		}
	}
	return nil
}

// killMirrorTaskWorker kill -9s the worker running the connector's task
// once the copy has moved on, waits for the other to run it and copy
// more, and restarts the killed worker.
func killMirrorTaskWorker(ctx context.Context, workers []*ConnectWorker, name string, dst *committedReader, src *txnSource) (string, error) {
	st, err := workers[0].Status(ctx, name)
	if err != nil {
		return "", err
	}
	victim := slices.IndexFunc(workers, func(w *ConnectWorker) bool { return len(st.Tasks) == 1 && w.Addr == st.Tasks[0].WorkerID })
	if victim < 0 {
		return "", fmt.Errorf("the task of %s runs on none of the workers: %s", name, st)
	}
	killed, survivor := workers[victim], workers[1-victim]
	if err := dst.waitFor(ctx, map[int32]int{0: len(dst.records[0]) + 5*mirrorSourceTxnRecords}, time.Minute); err != nil {
		return "", fmt.Errorf("copying transactions before the kill: %w", err)
	}
	copied := sumCounts(recordCounts(dst.records))
	killed.Kill()
	if _, err := waitConnectorRunning(ctx, survivor, name, survivor.Addr, connectTakeover); err != nil {
		return "", fmt.Errorf("after kill -9 of %s, which ran the task: %w", killed.Name, err)
	}
	atTakeover := sumCounts(recordCounts(dst.records))
	if err := dst.waitFor(ctx, map[int32]int{0: len(dst.records[0]) + 5*mirrorSourceTxnRecords}, time.Minute); err != nil {
		return "", fmt.Errorf("copying on %s after kill -9 of %s: %w", survivor.Name, killed.Name, err)
	}
	if err := killed.Restart(ctx, connectWorkerWait); err != nil {
		return "", err
	}
	if _, err := waitConnectorRunning(ctx, survivor, name, "", connectTakeover); err != nil {
		return "", fmt.Errorf("after %s's restart: %w", killed.Name, err)
	}
	return fmt.Sprintf("kill -9 of %s (the task's) with %d records copied, %s ran the task from %d; %s restarted", killed.Name, copied, survivor.Name, atTakeover, killed.Name), nil
}

// logEnds sums the end offsets of the target topic's partitions: its
// records, committed or aborted, and the transaction markers.
func logEnds(ctx context.Context, bootstrap, topic string) (int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

func recordCounts(recs map[int32][]*kgo.Record) map[int32]int {
	out := map[int32]int{}
	for p, rs := range recs {
		out[p] = len(rs)
	}
	return out
}

func sumCounts(counts map[int32]int) int {
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}
