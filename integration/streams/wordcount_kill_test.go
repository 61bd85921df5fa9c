// Package streams runs Kafka Streams against the built gregor binary where
// the compatibility harness cannot: across a kill -9 of the broker. The
// harness's streams/wordcount-eos-v2 scenario covers the same app
// on a broker that stays up, on both targets.
package streams

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
)

// WordCountDemo with exactly_once_v2 runs while the broker is killed with
// SIGKILL twice, each time once the app has committed some output and has
// a transaction open, and restarted on the same data dir. The first time
// the app lives on: its producer goes on with the open transaction. The
// second time the app is killed too (the machine lost power) and started
// again on its state dir: its open transactions are aborted when its new
// producers take over their transactional ids, Streams finds its stores
// uncheckpointed and restores them from the changelogs. Input goes in
// before, between and after the kills. A read_committed consumer must then
// read every word's counts as exactly 1..n: nothing an aborted transaction
// wrote (output, changelog and repartition records, offsets) may count,
// and nothing may be lost. The output and repartition topics must hold
// records of aborted transactions, or the run did not test that: up to
// three more outages with the app killed are tried for one.
//
// It runs with both group protocols: classic, and streams (KIP-1071),
// where the coordinator holds the topology and the tasks across the
// broker's kills; WORDCOUNT_KILL_PROTOCOL=classic|streams runs one.
func TestWordCountExactlyOnceAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Kafka Streams for minutes")
	}
	for _, tool := range []string{"java", "mvn"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not found: Kafka Streams needs a JDK and Maven", tool)
		}
	}
	protocols := []string{"classic", "streams"}
	if p := os.Getenv("WORDCOUNT_KILL_PROTOCOL"); p != "" {
		if !slices.Contains(protocols, p) {
			t.Fatalf("WORDCOUNT_KILL_PROTOCOL=%s: want classic or streams", p)
		}
		protocols = []string{p}
	}
	for _, protocol := range protocols {
		t.Run(protocol, func(t *testing.T) { wordCountAcrossKill9(t, protocol) })
	}
}

func wordCountAcrossKill9(t *testing.T, protocol string) {
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := integration.NewTools(root)
	// Fetch the jars before anything runs: a first fetch takes a while.
	if _, err := tools.MavenLibs(ctx, integration.SetStreams); err != nil {
		t.Fatal(err)
	}

	// With the streams protocol the broker's streams session timeout (45 s
	// at least by default) decides when a killed instance's members leave,
	// so the node is started with a shorter one.
	var n broker
	switch target := os.Getenv("WORDCOUNT_KILL_TARGET"); target {
	case "", "gregor":
		n = node.Start(t, "group.streams.min.session.timeout.ms=10000", "group.streams.session.timeout.ms=10000")
	case "kafka":
		n = startKafka(ctx, t, tools)
	default:
		t.Fatalf("WORDCOUNT_KILL_TARGET=%s: want gregor or kafka", target)
	}
	adm := kadm.NewClient(n.Client())
	for _, topic := range []string{integration.WordCountInputTopic, integration.WordCountOutputTopic} {
		res, err := adm.CreateTopic(ctx, 3, 1, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			t.Fatalf("creating %s: %v", topic, err)
		}
	}
	outages := []struct{ killApp bool }{{false}, {true}}
	const lines = 4500
	input, want := integration.WordCountLines(lines, 11)
	total := 0
	for _, c := range want {
		total += c
	}
	// A third of the input goes in before the app starts. The rest trickles
	// in while the test waits for a moment to kill (so that the app is
	// always in the middle of a transaction, however fast it is: with all
	// the input in at once it can be idle before the test looks), a
	// sixth right after each restart, and what is left at the end.
	sent := lines / 3
	produce(ctx, t, n, input[:sent])

	app := integration.WordCountApp{Bootstrap: n.Addr(), AppID: "wordcount-kill", Dir: filepath.Join(t.TempDir(), "app"),
		// The killed instance's members leave the group by this timeout,
		// not the default 45 s.
		Extra: []string{"session.timeout.ms=10000", "group.protocol=" + protocol}}
	proc, err := tools.StartWordCount(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = proc.Stop(10 * time.Second) })
	appAlive := func() {
		t.Helper()
		if exited, err := proc.Exited(); exited {
			t.Fatalf("WordCountDemo exited (%v): %s", err, proc.LogTail(10))
		}
	}

	// WordCountDemo's one repartition topic, named after its count store.
	repartition := app.AppID + "-KSTREAM-AGGREGATE-STATE-STORE-0000000003-repartition"
	var stable int64
	// abortedSeen is the most aborted records (or records of transactions
	// a killed app left open, which its successor aborts) a read of the
	// log found before the end: Streams purges its repartition topic
	// (DeleteRecords once its records are processed), so aborted records
	// seen there may be gone by the end.
	abortedSeen := 0
	// The open transaction seen before a kill may commit before the kill
	// lands (or, with the app alive, go on and commit after it), so the
	// planned outages can leave no aborted transaction; then up to
	// extraOutages more, the app killed too, until the log holds one.
	const extraOutages = 3
	planned := len(outages)
	for i := 0; i < planned+extraOutages; i++ {
		extra := i >= planned
		if extra && abortedSeen > 0 {
			break
		}
		killApp := extra || outages[i].killApp
		// Kill only once more output is committed and an open transaction
		// has records in the output or repartition topic, so that the kill
		// lands between commits. An extra outage's input (taken from what
		// the end would send) trickles in from the start: all earlier
		// input may be processed, and its new output committed, only once
		// the restarted app's producers have taken over (aborting what the
		// killed ones left open).
		trickleLines := lines / 12
		var feed *trickle
		if extra {
			trickleLines = lines / 48 // twice: before and after the check
			feed = startTrickle(ctx, n, input, sent, sent+trickleLines)
		}
		var open []string
		was := stable
		waitFor(ctx, t, 2*time.Minute, "newly committed output", func() bool {
			appAlive()
			stable = lastStableOffsets(ctx, t, adm)
			return stable > was
		})
		if extra {
			_, aborted := committedByMarkers(readLog(ctx, t, n, integration.WordCountOutputTopic, repartition))
			abortedSeen = max(abortedSeen, aborted)
			if sent, err = feed.stop(); err != nil {
				t.Fatalf("producing input: %v", err)
			}
			if aborted > 0 {
				break
			}
		}
		feed = startTrickle(ctx, n, input, sent, sent+trickleLines)
		waitFor(ctx, t, time.Minute, "open transaction's records", func() bool {
			appAlive()
			open = openTransactionData(ctx, t, adm, integration.WordCountOutputTopic, repartition)
			return len(open) > 0
		})
		if sent, err = feed.stop(); err != nil {
			t.Fatalf("producing input: %v", err)
		}
		t.Logf("kill -9 %d (the app too: %v) with %d input lines in, the output's last stable offsets at %d (of %d updates and the markers) and open transactions' records in %v",
			i+1, killApp, sent, stable, total, open)
		n.Kill()
		if killApp {
			proc.Kill()
			_ = proc.Stop(0) // closes its log
		}
		n.Restart()
		if killApp {
			// With the app dead nothing purges the repartition topic
			// and nothing commits: what its open transactions wrote
			// is in the log, without a marker (or with an abort
			// marker, if the coordinator's transaction timeout came
			// first), and the restarted app's producers abort it.
			// Once the app is back its purge may delete those records
			// before any later read, so they are counted here.
			_, left := committedByMarkers(readLog(ctx, t, n, integration.WordCountOutputTopic, repartition))
			abortedSeen = max(abortedSeen, left)
			t.Logf("outage %d: %d records of transactions the killed app left open or aborted in the log", i+1, left)
			if proc, err = tools.StartWordCount(ctx, app); err != nil {
				t.Fatal(err)
			}
		}
		if !extra {
			next := sent + lines/6
			produce(ctx, t, n, input[sent:next])
			sent = next
		}
	}
	produce(ctx, t, n, input[sent:])

	var got []integration.WordCount
	waitFor(ctx, t, 3*time.Minute, "every update committed", func() bool {
		appAlive()
		got = readAll(ctx, t, n, kgo.ReadCommitted(), integration.WordCountOutputTopic)
		return len(got) >= total
	})
	// A last read with time for records past the expected total (a double
	// count committed late) to show up. That none does within the window
	// is what is checked, so this is a sleep, not a wait.
	time.Sleep(3 * time.Second)
	got = readAll(ctx, t, n, kgo.ReadCommitted(), integration.WordCountOutputTopic)
	if err := proc.Stop(30 * time.Second); err != nil {
		t.Fatalf("stopping WordCountDemo: %v", err)
	}
	// With the app stopped the output and repartition topics no longer
	// change (the changelog may still be compacted, so it is left out).
	// The records that the markers in them say were aborted are what a
	// read_committed consumer must not see.
	kept, aborted := committedByMarkers(readLog(ctx, t, n, integration.WordCountOutputTopic, repartition))
	if err := integration.CheckWordCounts(got, want); err != nil {
		// Tell a broker that hands aborted records to read_committed
		// consumers from one whose log itself is wrong.
		verdict := "the log filtered by its own markers is wrong too"
		if integration.CheckWordCounts(wordCounts(kept, integration.WordCountOutputTopic), want) == nil {
			verdict = fmt.Sprintf("the log filtered by its own markers (%d aborted records) is right: read_committed fetches return aborted records", aborted)
		}
		t.Fatalf("%v\n%s; %s", err, verdict, appEvents(app.LogPath()))
	}
	if aborted == 0 && abortedSeen == 0 {
		t.Fatalf("no aborted transaction's records in the output and repartition topics: the run tested nothing of aborts; %s", appEvents(app.LogPath()))
	}
	t.Logf("%d lines, %d words: every count exact across the kills; %d records of aborted transactions in the output and repartition topics at the end, %d counted before it (the purge deletes processed repartition records); %s",
		lines, total, aborted, abortedSeen, appEvents(app.LogPath()))
}

// readLog reads every record of topics, read_uncommitted and with the
// transaction markers, in each partition's offset order.
func readLog(ctx context.Context, t *testing.T, n broker, topics ...string) []*kgo.Record {
	t.Helper()
	cl := n.Client(kgo.ConsumeTopics(topics...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	defer cl.Close()
	return pollUntilIdle(ctx, t, cl)
}

// committedByMarkers applies Kafka's read_committed rule to a log read
// whole: a transactional record counts once a commit marker of its
// producer follows it, and is dropped when an abort marker does (or none
// does). It returns the counted records in (partition, offset) order and
// how many were aborted.
func committedByMarkers(log []*kgo.Record) ([]*kgo.Record, int) {
	type producer struct {
		topic     string
		partition int32
		id        int64
	}
	open := map[producer][]*kgo.Record{}
	var kept []*kgo.Record
	aborted := 0
	for _, r := range log {
		p := producer{r.Topic, r.Partition, r.ProducerID}
		switch {
		case r.Attrs.IsControl():
			// A control record's key is a version and a type: 0 abort, 1 commit.
			if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1 {
				kept = append(kept, open[p]...)
			} else {
				aborted += len(open[p])
			}
			delete(open, p)
		case r.Attrs.IsTransactional():
			open[p] = append(open[p], r)
		default:
			kept = append(kept, r)
		}
	}
	for _, recs := range open {
		aborted += len(recs)
	}
	slices.SortFunc(kept, func(a, b *kgo.Record) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return kept, aborted
}

// appEvents counts what Streams logged about the outages.
func appEvents(logPath string) string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, ev := range []string{"TaskCorruptedException", "TaskMigratedException", "ProducerFencedException", "InvalidProducerEpochException",
		"TimeoutException", "Committing task(s)", "State transition from RUNNING to REBALANCING", "Restoration"} {
		out = append(out, fmt.Sprintf("%q×%d", ev, strings.Count(string(b), ev)))
	}
	return "app log: " + strings.Join(out, " ")
}

// broker is the node the test kills: gregor (integration/node), or with
// WORDCOUNT_KILL_TARGET=kafka Apache Kafka 4.3.1, which proves the test.
type broker interface {
	Addr() string
	Client(opts ...kgo.Opt) *kgo.Client // closed with the test
	Kill()                              // SIGKILL, and wait for the exit
	Restart()                           // on the same data dir and ports
}

// kafkaNode is a single combined Apache Kafka node run by the test.
type kafkaNode struct {
	t    *testing.T
	ctx  context.Context
	cmd  integration.Cmd
	dir  string
	host *integration.Loopback
	proc *integration.Proc
}

func startKafka(ctx context.Context, t *testing.T, tools *integration.Tools) *kafkaNode {
	t.Helper()
	k := &kafkaNode{t: t, ctx: ctx, dir: t.TempDir(), host: node.Host(t)}
	cmd, err := tools.KafkaBrokerCmd(ctx, k.dir, k.host.IP)
	if err != nil {
		t.Fatal(err)
	}
	k.cmd = cmd
	k.Restart()
	t.Cleanup(func() { _ = k.proc.Stop(10 * time.Second) })
	return k
}

func (k *kafkaNode) Addr() string { return k.host.Addr(integration.ClientPort) }

func (k *kafkaNode) Client(opts ...kgo.Opt) *kgo.Client {
	k.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(k.Addr())}, opts...)...)
	if err != nil {
		k.t.Fatal(err)
	}
	k.t.Cleanup(cl.Close)
	return cl
}

func (k *kafkaNode) Kill() {
	k.proc.Kill()
	_ = k.proc.Stop(0) // closes the log
}

func (k *kafkaNode) Restart() {
	k.t.Helper()
	proc, err := integration.Start(k.cmd, filepath.Join(k.dir, "broker.log"))
	if err != nil {
		k.t.Fatal(err)
	}
	k.proc = proc
	ctx, cancel := context.WithTimeout(k.ctx, 90*time.Second)
	defer cancel()
	if err := integration.WaitReady(ctx, k.Addr(), proc.Done()); err != nil {
		k.t.Fatalf("kafka did not become ready: %v: %s", err, proc.LogTail(5))
	}
}

// produce sends lines unkeyed to the input topic, idempotently, and waits
// for every acknowledgement.
func produce(ctx context.Context, t *testing.T, n broker, lines []string) {
	t.Helper()
	cl := n.Client(kgo.DefaultProduceTopic(integration.WordCountInputTopic))
	defer cl.Close()
	recs := make([]*kgo.Record, len(lines))
	for i, l := range lines {
		recs[i] = &kgo.Record{Value: []byte(l)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing input: %v", err)
	}
}

// trickle produces input lines a few at a time in the background, so
// that the app keeps opening transactions while the test watches it.
type trickle struct {
	done chan struct{}
	quit chan struct{}
	sent int
	err  error
}

// startTrickle sends input[from:to] five lines every 100 ms until
// stopped or done.
func startTrickle(ctx context.Context, n broker, input []string, from, to int) *trickle {
	tr := &trickle{done: make(chan struct{}), quit: make(chan struct{}), sent: from}
	go func() {
		defer close(tr.done)
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DefaultProduceTopic(integration.WordCountInputTopic))
		if err != nil {
			tr.err = err
			return
		}
		defer cl.Close()
		for tr.sent < to {
			select {
			case <-tr.quit:
				return
			case <-time.After(100 * time.Millisecond):
			}
			// Each chunk completes before the next look at quit, so sent
			// counts exactly the lines acknowledged.
			end := min(tr.sent+5, to)
			recs := make([]*kgo.Record, 0, end-tr.sent)
			for _, l := range input[tr.sent:end] {
				recs = append(recs, &kgo.Record{Value: []byte(l)})
			}
			if tr.err = cl.ProduceSync(ctx, recs...).FirstErr(); tr.err != nil {
				return
			}
			tr.sent = end
		}
	}()
	return tr
}

// stop ends the trickle and returns the index of the first line not sent.
func (tr *trickle) stop() (int, error) {
	close(tr.quit)
	<-tr.done
	return tr.sent, tr.err
}

// readAll reads the word counts in topic from the start of each
// partition with isolation.
func readAll(ctx context.Context, t *testing.T, n broker, isolation kgo.IsolationLevel, topic string) []integration.WordCount {
	t.Helper()
	cl := n.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(isolation))
	defer cl.Close()
	return wordCounts(pollUntilIdle(ctx, t, cl), topic)
}

// pollUntilIdle polls cl until two seconds pass without a record.
func pollUntilIdle(ctx context.Context, t *testing.T, cl *kgo.Client) []*kgo.Record {
	t.Helper()
	var got []*kgo.Record
	// The first fetch waits for the connection and metadata too.
	for wait := 10 * time.Second; ; wait = 2 * time.Second {
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatal(ctx.Err())
		}
		if fs.NumRecords() == 0 {
			return got
		}
		var bad error
		fs.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				bad = fmt.Errorf("%s/%d: %w", topic, p, err)
			}
		})
		if bad != nil {
			t.Fatalf("reading: %v", bad)
		}
		got = append(got, fs.Records()...)
	}
}

// wordCounts decodes the records of the output topic among recs: a word
// key and a long value.
func wordCounts(recs []*kgo.Record, topic string) []integration.WordCount {
	var out []integration.WordCount
	for _, r := range recs {
		if r.Topic != topic || r.Attrs.IsControl() {
			continue
		}
		c := int64(-1) // not a long: CheckWordCounts reports it
		if len(r.Value) == 8 {
			c = int64(binary.BigEndian.Uint64(r.Value))
		}
		out = append(out, integration.WordCount{Word: string(r.Key), Count: c})
	}
	return out
}

// lastStableOffsets adds up the output partitions' last stable offsets,
// which grow as the app's transactions commit.
func lastStableOffsets(ctx context.Context, t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	offs, err := adm.ListCommittedOffsets(ctx, integration.WordCountOutputTopic)
	if err != nil {
		t.Fatalf("listing %s's last stable offsets: %v", integration.WordCountOutputTopic, err)
	}
	var sum int64
	offs.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("listing %s/%d's last stable offset: %v", o.Topic, o.Partition, o.Err)
		}
		sum += o.Offset
	})
	return sum
}

// openTransactionData names the partitions of topics that hold records of
// a transaction still open (DescribeProducers' CurrentTxnStartOffset), as
// topic/partition@offset.
func openTransactionData(ctx context.Context, t *testing.T, adm *kadm.Client, topics ...string) []string {
	t.Helper()
	set := kadm.TopicsSet{}
	for _, topic := range topics {
		set[topic] = map[int32]struct{}{}
	}
	described, err := adm.DescribeProducers(ctx, set)
	if err != nil {
		t.Fatalf("DescribeProducers: %v", err)
	}
	var open []string
	for _, p := range described.SortedProducers() {
		if p.CurrentTxnStartOffset >= 0 {
			open = append(open, fmt.Sprintf("%s/%d@%d", p.Topic, p.Partition, p.CurrentTxnStartOffset))
		}
	}
	return open
}

// waitFor polls cond every 200 ms until it holds, failing the test after
// wait.
func waitFor(ctx context.Context, t *testing.T, wait time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, wait)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
