package lifecycle

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration/node"
)

// acked is what the producer was told: offset → record.
type acked map[int64]*kgo.Record

func produceAcked(ctx context.Context, t *testing.T, cl *kgo.Client, got acked, recs []*kgo.Record) {
	t.Helper()
	res := cl.ProduceSync(ctx, recs...)
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		got[r.Record.Offset] = r.Record
	}
}

// readFromStart reads partition 0 of topic from its log start to end.
func readFromStart(ctx context.Context, t *testing.T, n *node.Node, topic string, end int64) []*kgo.Record {
	t.Helper()
	c := n.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	defer c.Close()
	var out []*kgo.Record
	for {
		if len(out) > 0 && out[len(out)-1].Offset >= end-1 {
			return out
		}
		fetches := c.PollFetches(ctx)
		if err := fetches.Err(); err != nil {
			t.Fatalf("reading %s: %v", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
}

func startEnd(ctx context.Context, t *testing.T, adm *kadm.Client, topic string) (int64, int64) {
	t.Helper()
	s, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	e, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	so, _ := s.Lookup(topic, 0)
	eo, _ := e.Lookup(topic, 0)
	return so.Offset, eo.Offset
}

// Kill -9 while the (throttled) cleaner is rewriting a compacted topic,
// round after round (min.compaction.lag.ms holds the cleaning back until
// the round's records are written, and the kill comes once its .cleaned
// segment appears): after each restart every record read is one the
// producer was acknowledged at that offset, and every key's latest
// acknowledged value is there.
func TestKillDuringCleaningKeepsEveryLatestValue(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 rounds")
	}
	n := node.Start(t, "log.cleaner.backoff.ms=50", "log.cleaner.io.max.bytes.per.second=2000000", "log.retention.check.interval.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic, keys = "killclean", 300
	cl := n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	for k, v := range map[string]string{"cleanup.policy": "compact", "segment.bytes": "1048576", "segment.ms": "500", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000", "min.compaction.lag.ms": "1500"} {
		configs[k] = &v
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	rng := rand.New(rand.NewPCG(8, 8))
	got := acked{}
	version := 0
	midCleaning := 0
	const rounds = 4
	for round := range rounds {
		for range 8 {
			var recs []*kgo.Record
			for k := range keys {
				value := bytes.Repeat([]byte{byte('a' + version%26)}, 2000)
				value = fmt.Appendf(value, "-%d-%d", k, version)
				if rng.IntN(20) == 0 {
					value = nil // a tombstone now and then
				}
				recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "key-%d", k), Value: value})
			}
			produceAcked(ctx, t, cl, got, recs)
			version++
		}
		// Kill as soon as a cleaning is writing its segment, or a little
		// later, somewhere in its swap.
		dir := filepath.Join(n.Dir, topic+"-0")
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if debris(t, dir, ".cleaned", ".swap") > 0 {
				break
			}
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond) // the random kill point, not a wait
		cl.Close()
		n.Kill()
		if debris(t, dir, ".cleaned", ".swap") > 0 {
			midCleaning++
		}
		n.Restart()
		cl = n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(2*time.Millisecond), kgo.ProducerBatchCompression(kgo.NoCompression()))
		adm = kadm.NewClient(cl)

		start, end := startEnd(ctx, t, adm, topic)
		if start != 0 || end != int64(len(got)) {
			t.Fatalf("round %d: log start %d end %d after kill -9, want 0 and %d", round, start, end, len(got))
		}
		latest := map[string]int64{}
		for off, r := range got {
			if cur, ok := latest[string(r.Key)]; !ok || off > cur {
				latest[string(r.Key)] = off
			}
		}
		read := readFromStart(ctx, t, n, topic, end)
		seen := map[int64]bool{}
		for _, r := range read {
			want, ok := got[r.Offset]
			if !ok || !bytes.Equal(want.Key, r.Key) || !bytes.Equal(want.Value, r.Value) {
				t.Fatalf("round %d: read %s=%.20q at offset %d, which was not acknowledged there", round, r.Key, r.Value, r.Offset)
			}
			seen[r.Offset] = true
		}
		missing := 0
		for key, off := range latest {
			// A tombstone may have gone after delete.retention.ms.
			if !seen[off] && got[off].Value != nil {
				missing++
				t.Errorf("round %d: the latest value of %s (offset %d) is gone", round, key, off)
			}
		}
		if missing > 0 {
			t.FailNow()
		}
		t.Logf("round %d: %d records read of %d written", round, len(read), len(got))
	}
	t.Logf("%d of %d kills came while a cleaned segment was being written or swapped", midCleaning, rounds)
	if midCleaning == 0 {
		t.Fatal("no kill came during a cleaning: the test did not test what it says")
	}
}

// debris counts the files in dir with any of the suffixes.
func debris(t *testing.T, dir string, suffixes ...string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		for _, s := range suffixes {
			if strings.HasSuffix(e.Name(), s) {
				n++
			}
		}
	}
	return n
}

// Kill -9 around retention.bytes passes, round after round: after each
// restart the log runs contiguously from its start to the acknowledged
// end with the acknowledged records, and keeps at least retention.bytes.
func TestKillDuringRetentionKeepsWhatThePolicyKeeps(t *testing.T) {
	if testing.Short() {
		t.Skip("kill -9 rounds")
	}
	n := node.Start(t, "log.retention.check.interval.ms=100")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	const topic = "killretain"
	cl := n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	for k, v := range map[string]string{"segment.bytes": "1048576", "retention.bytes": "2097152", "file.delete.delay.ms": "300"} {
		configs[k] = &v
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	got := acked{}
	midDeletion := 0
	for round := range 8 {
		for range 30 {
			value := fmt.Appendf(bytes.Repeat([]byte{'r'}, 100_000), "-%d", len(got))
			produceAcked(ctx, t, cl, got, []*kgo.Record{{Value: value}})
		}
		// A kill at a random moment of the deletions (the point of the
		// test), not a wait for anything.
		time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		cl.Close()
		n.Kill()
		if debris(t, filepath.Join(n.Dir, topic+"-0"), ".deleted") > 0 {
			midDeletion++
		}
		n.Restart()
		cl = n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
		adm = kadm.NewClient(cl)
		start, end := startEnd(ctx, t, adm, topic)
		if end != int64(len(got)) {
			t.Fatalf("round %d: log end %d after kill -9, want %d", round, end, len(got))
		}
		// 2 MiB of 100 kB records: the newest 20 are always kept.
		if start > end-20 {
			t.Fatalf("round %d: log start %d of %d: retention deleted records retention.bytes keeps", round, start, end)
		}
		read := readFromStart(ctx, t, n, topic, end)
		if len(read) != int(end-start) || read[0].Offset != start {
			t.Fatalf("round %d: read %d records from %d, want %d from %d", round, len(read), read[0].Offset, end-start, start)
		}
		for _, r := range read {
			if want := got[r.Offset]; !bytes.Equal(want.Value, r.Value) {
				t.Fatalf("round %d: offset %d holds another record than the one acknowledged", round, r.Offset)
			}
		}
		t.Logf("round %d: log [%d, %d)", round, start, end)
	}
	t.Logf("%d of 8 kills came with deleted segments not yet removed", midDeletion)
}
