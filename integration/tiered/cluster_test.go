package tiered

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/tiered"
	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// leaderOf is partition 0's leader and ISR as one of addrs reports them.
func leaderOf(ctx context.Context, addrs []string, topic string) (int32, []int32) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return -1, nil
	}
	defer cl.Close()
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil || len(td[topic].Partitions) == 0 {
		return -1, nil
	}
	p := td[topic].Partitions[0]
	return p.Leader, p.ISR
}

func byID(nodes []*node.Node, id int32) *node.Node {
	for _, n := range nodes {
		if n.ID == id {
			return n
		}
	}
	return nil
}

// The leader of a tiered partition is killed with kill -9 while it copies
// segments, its whole data dir is deleted and it is restarted empty: it
// rebuilds its log from the leader's local log start (with the epochs and
// producer state of the remote segment before it), not from offset 0.
// Then the two other brokers are killed, so it leads alone: every
// acknowledged record is read back through it, the old ones from the
// store.
func TestTieredLeaderWipedLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	remote := filepath.Join(t.TempDir(), "remote")
	leaderWipedLosesNothing(t, nil, []string{"gregor.remote.storage=dir:" + remote}, func() []string {
		dirs, _ := filepath.Glob(filepath.Join(remote, "wiped-0-*"))
		if len(dirs) == 0 {
			return nil
		}
		entries, _ := os.ReadDir(dirs[0])
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return names
	})
}

// The same with the segments in an S3 bucket (SeaweedFS).
func TestTieredS3LeaderWipedLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes")
	}
	w, s3 := s3Store(t, "wiped")
	leaderWipedLosesNothing(t, []string{"AWS_ACCESS_KEY_ID=" + integration.WeedAccessKey, "AWS_SECRET_ACCESS_KEY=" + integration.WeedSecretKey},
		[]string{"gregor.remote.storage=s3://wiped/c", "gregor.remote.storage.s3.endpoint=" + w.S3, "gregor.remote.storage.s3.path.style=true"},
		func() []string {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			var names []string
			for obj := range s3.ListObjects(ctx, "wiped", minio.ListObjectsOptions{Prefix: "c/wiped-0-", Recursive: true}) {
				if obj.Err == nil {
					names = append(names, path.Base(obj.Key))
				}
			}
			return names
		})
}

// leaderWipedLosesNothing is the test above with the store the overrides
// name, whose partition's object names storeNames lists.
func leaderWipedLosesNothing(t *testing.T, env, store []string, storeNames func() []string) {
	// Each broker's test-hook fault file: a "hold tiered-copy" line in
	// it holds that broker's copies with objects in the store and no
	// COPY_SEGMENT_FINISHED, so that the kill lands in the middle of a
	// copy however slow the machine is.
	faultsDir := t.TempDir()
	faultsFile := func(n *node.Node) string { return filepath.Join(faultsDir, fmt.Sprintf("faults-%d", n.ID)) }
	_, brokers := node.StartSplitWith(t, 1, 3, func(n *node.Node) []string {
		n.Env = append(n.Env, env...)
		n.Env = append(n.Env, "GREGOR_TEST_FAULTS_FILE="+faultsFile(n))
		return nil
	}, append([]string{
		"remote.log.storage.system.enable=true",
		// Kafka's default, which the embedded single-node defaults lower
		// to 1: the metadata must outlive the wiped broker.
		"rlmm.config.remote.log.metadata.topic.replication.factor=3",
		"remote.log.manager.task.interval.ms=300",
		"log.retention.check.interval.ms=500",
		"file.delete.delay.ms=1000",
		"broker.heartbeat.interval.ms=500",
		"broker.session.timeout.ms=3000",
		"replica.lag.time.max.ms=4000",
		"unclean.leader.election.enable=false",
	}, store...)...)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if dir := os.Getenv("GREGOR_FAILED_NODE_LOGS"); dir != "" {
		t.Cleanup(func() {
			if t.Failed() {
				for _, n := range brokers {
					_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-broker-%d.log", t.Name(), n.ID)), []byte(n.AllOutput()), 0o644)
				}
			}
		})
	}
	addrs := node.Addrs(brokers)
	meta := watchRemoteMetadata(ctx, t, addrs)
	uncommitted := func(names []string) []string { return meta.uncommitted(names) }
	cl := node.NewClient(t, addrs, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.DefaultProduceTopic("wiped"))
	adm := kadm.NewClient(cl)
	const topic = "wiped"
	cfg := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr("1000"),
		"segment.bytes":         kadm.StringPtr("1048576"),
		"min.insync.replicas":   kadm.StringPtr("1"),
	}
	if resp, err := adm.CreateTopic(ctx, 1, 3, cfg, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}

	// A producer writes on through everything; acked holds what was
	// acknowledged.
	var mu sync.Mutex
	acked := map[string]bool{}
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; pctx.Err() == nil; i++ {
			v := fmt.Sprintf("%08d-%0990d", i, 0)
			cl.Produce(pctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
				if err == nil {
					mu.Lock()
					acked[string(r.Value)] = true
					mu.Unlock()
				}
			})
			if i%200 == 199 {
				time.Sleep(20 * time.Millisecond)
			}
		}
	}()

	// Kill the leader once it has copied at least two segments: it is
	// then in the middle of copying the next ones as they roll.
	var victim *node.Node
	node.WaitFor(t, 90*time.Second, "two segments copied to the store, as __remote_log_metadata says", func() bool {
		tiered, _, err := tryListOffset(ctx, cl, topic, -5)
		return err == nil && tiered >= 2000 && meta.finished() >= 2
	})
	leader, _ := leaderOf(ctx, addrs, topic)
	victim = byID(brokers, leader)
	clusterID := node.ClusterID(t, victim)
	// Kill it in the middle of a copy: when the store holds a segment's
	// objects that __remote_log_metadata has as COPY_SEGMENT_STARTED and
	// not COPY_SEGMENT_FINISHED. The hold keeps the copy there until the
	// kill.
	if err := os.WriteFile(faultsFile(victim), []byte("hold tiered-copy\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	node.WaitFor(t, 60*time.Second, "a copy held in progress", func() bool {
		return slices.ContainsFunc(uncommitted(storeNames()), func(stem string) bool { return meta.history(stem) == "0" })
	})
	victim.Kill()
	if err := os.Remove(faultsFile(victim)); err != nil {
		t.Fatal(err)
	}
	cut := uncommitted(storeNames())
	node.WipeBroker(t, victim, clusterID)
	t.Logf("killed broker %d, the leader, in the middle of a copy (in the store, not finished in __remote_log_metadata: %v), and deleted its data dir", victim.ID, cut)
	var others []string
	for _, n := range brokers {
		if n != victim {
			others = append(others, n.Addr())
		}
	}
	node.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		l, _ := leaderOf(ctx, others, topic)
		return l >= 0 && l != victim.ID
	})
	time.Sleep(2 * time.Second) // more records and copies under the new leader
	// A copy the watcher saw as unfinished only because it read the
	// topic late is not one the kill cut short.
	cut = slices.DeleteFunc(cut, func(stem string) bool { return strings.Contains(" "+meta.history(stem)+" ", " 1 ") })
	if len(cut) == 0 {
		t.Logf("the kill cut no copy short after all")
	}
	victim.Restart()
	node.WaitFor(t, 90*time.Second, "the wiped broker back in the ISR", func() bool {
		_, isr := leaderOf(ctx, others, topic)
		return slices.Contains(isr, victim.ID)
	})
	if out := victim.Output(); !containsLine(out, "started over there from remote storage") {
		t.Errorf("the wiped broker did not start its log over from remote storage:\n%s", tail(out, 30))
	}
	// The new leader deleted what the cut copy left (and commits its own
	// copies whole), and said so in __remote_log_metadata: the cut copy
	// went from COPY_SEGMENT_STARTED to DELETE_SEGMENT_FINISHED.
	node.WaitFor(t, 30*time.Second, "the cut copy's objects deleted", func() bool {
		left := uncommitted(storeNames())
		for _, c := range cut {
			if slices.Contains(left, c) {
				return false
			}
		}
		return true
	})
	node.WaitFor(t, 30*time.Second, "the cut copy's deletion in __remote_log_metadata", func() bool {
		for _, c := range cut {
			if h := meta.history(c); !strings.HasPrefix(h, "0 ") || !strings.HasSuffix(h, " 3") {
				return false
			}
		}
		return true
	})
	for _, c := range cut {
		t.Logf("segment %s in __remote_log_metadata: states %s", c, meta.history(c))
	}
	stopProducing()
	wg.Wait()
	if err := cl.Flush(ctx); err != nil && ctx.Err() != nil {
		t.Fatal(err)
	}
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	t.Logf("%d records acknowledged", want)

	// The wiped broker leads alone: everything is read through it.
	for _, n := range brokers {
		if n != victim {
			n.Kill()
		}
	}
	node.WaitFor(t, 60*time.Second, "the wiped broker leading", func() bool {
		l, _ := leaderOf(ctx, []string{victim.Addr()}, topic)
		return l == victim.ID
	})
	rcl := node.NewClient(t, []string{victim.Addr()}, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for {
		mu.Lock()
		missing := 0
		for v := range acked {
			if seen[v] == 0 {
				missing++
			}
		}
		mu.Unlock()
		if missing == 0 {
			break
		}
		fs := rcl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d acknowledged records never read back (%d read)", missing, len(seen))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	t.Logf("all %d acknowledged records read back through the wiped broker (%d distinct values read)", want, len(seen))
}

func containsLine(out, s string) bool { return strings.Contains(out, s) }

func splitLines(s string) []string { return strings.Split(s, "\n") }

func tail(s string, n int) string {
	lines := splitLines(s)
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// remoteMetadata follows __remote_log_metadata as a consumer would, and
// keeps each segment's states by its object stem.
type remoteMetadata struct {
	mu     sync.Mutex
	states map[string][]tiered.SegmentState
	stems  map[[16]byte]string
}

// watchRemoteMetadata reads __remote_log_metadata through addrs until ctx
// ends.
func watchRemoteMetadata(ctx context.Context, t *testing.T, addrs []string) *remoteMetadata {
	cl := node.NewClient(t, addrs, kgo.ConsumeTopics(tiered.MetadataTopicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	m := &remoteMetadata{states: map[string][]tiered.SegmentState{}, stems: map[[16]byte]string{}}
	go func() {
		for ctx.Err() == nil {
			cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
				rec, err := tiered.DecodeMetadataRecord(r.Value)
				if err != nil {
					t.Errorf("a record of %s at %d: %v", tiered.MetadataTopicName, r.Offset, err)
					return
				}
				m.mu.Lock()
				defer m.mu.Unlock()
				switch {
				case rec.Segment != nil:
					stem := fmt.Sprintf("%020d-%s", rec.Segment.StartOffset, base64.RawURLEncoding.EncodeToString(rec.Segment.SegmentID[:]))
					m.stems[rec.Segment.SegmentID] = stem
					m.states[stem] = append(m.states[stem], rec.Segment.State)
				case rec.Update != nil:
					if stem, ok := m.stems[rec.Update.SegmentID]; ok {
						m.states[stem] = append(m.states[stem], rec.Update.State)
					}
				}
			})
		}
	}()
	return m
}

// finished counts the segments whose copy finished.
func (m *remoteMetadata) finished() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, states := range m.states {
		if slices.Contains(states, tiered.CopySegmentFinished) {
			n++
		}
	}
	return n
}

// history is a segment's states in the order published, as "0 1".
func (m *remoteMetadata) history(stem string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return strings.Trim(fmt.Sprint(m.states[stem]), "[]")
}

// uncommitted lists the segment stems among a partition's object names
// that have objects (or a temporary file of one) but are not
// COPY_SEGMENT_FINISHED in the metadata: copies in progress, or cut short.
func (m *remoteMetadata) uncommitted(names []string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	seen := map[string]bool{}
	var out []string
	for _, name := range names {
		stem, _, ok := strings.Cut(name, ".")
		if !ok || len(stem) != 20+1+22 || seen[stem] {
			continue
		}
		seen[stem] = true
		if !slices.Contains(m.states[stem], tiered.CopySegmentFinished) {
			out = append(out, stem)
		}
	}
	slices.Sort(out)
	return out
}
