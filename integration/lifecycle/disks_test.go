package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/internal/await"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The disk tests make a log dir's disk fail or fill under the running
// binary through its test hook (cmd/gregor/testfaults.go): without root a
// disk can be made neither to fail nor to fill.

// faultNode starts a node over dirs under a temp root with the fault hook
// on; setFaults writes the hook's file (lines "io <dir>", "full <dir>").
func faultNode(t *testing.T, ndirs int, overrides ...string) (n *node.Node, dirs []string, setFaults func(lines ...string)) {
	t.Helper()
	root := t.TempDir()
	for i := range ndirs {
		dirs = append(dirs, filepath.Join(root, fmt.Sprintf("d%d", i)))
	}
	faults := filepath.Join(root, "faults")
	// The node reads the file every 50 ms and logs each change it reads
	// (cmd/gregor/testfaults.go); a missing file reads as no faults.
	const faultsSet = "TEST HOOK: storage faults set"
	written := ""
	setFaults = func(lines ...string) {
		t.Helper()
		data := strings.Join(lines, "\n")
		before := strings.Count(n.Output(), faultsSet)
		tmp := faults + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, faults); err != nil {
			t.Fatal(err)
		}
		if data == written {
			return // no change for the node to read
		}
		written = data
		await.Until(t, 10*time.Second, fmt.Sprintf("the node to read the fault file %q", data), func() error {
			select {
			case <-n.Exited():
				return nil // it reads the file when it starts again
			default:
			}
			if c := strings.Count(n.Output(), faultsSet); c <= before {
				return fmt.Errorf("%d %q lines in its output, as before the write", c, faultsSet)
			}
			return nil
		})
	}
	n = node.StartEnv(t, []string{"GREGOR_TEST_FAULTS_FILE=" + faults},
		append([]string{"log.dirs=" + strings.Join(dirs, ",")}, overrides...)...)
	return n, dirs, setFaults
}

// produceTo sends one record to partition p and returns the error, with
// a single retry so that a refusal surfaces as the broker's error.
func produceTo(ctx context.Context, t *testing.T, n *node.Node, topic string, p int32, value string) error {
	t.Helper()
	cl := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(1),
		kgo.RecordDeliveryTimeout(10*time.Second), kgo.ProducerBatchCompression(kgo.NoCompression()))
	defer cl.Close()
	return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte(value)}).FirstErr()
}

// partitionDirs maps each partition of topic to the log dir holding it.
func partitionDirs(t *testing.T, dirs []string, topic string, partitions int32) map[int32]string {
	t.Helper()
	out := map[int32]string{}
	for p := range partitions {
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, fmt.Sprintf("%s-%d", topic, p))); err == nil {
				out[p] = d
			}
		}
		if out[p] == "" {
			t.Fatalf("partition %d of %s is in no log dir", p, topic)
		}
	}
	return out
}

// rawErrors asks the node for partition p of topic with ListOffsets and
// Fetch and returns their partition error codes.
func rawErrors(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, topicID [16]byte, p int32) (listOffsets, fetch int16) {
	t.Helper()
	lreq := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp = p, -1
	lt.Partitions = append(lt.Partitions, lp)
	lreq.Topics = append(lreq.Topics, lt)
	lresp, err := lreq.RequestWith(ctx, cl)
	if err != nil || len(lresp.Topics) != 1 || len(lresp.Topics[0].Partitions) != 1 {
		t.Fatalf("ListOffsets: %v %+v", err, lresp)
	}
	freq := kmsg.NewPtrFetchRequest()
	freq.MaxWaitMillis, freq.MaxBytes = 10, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = topic, topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.PartitionMaxBytes, fp.CurrentLeaderEpoch = p, 1<<20, -1
	ft.Partitions = append(ft.Partitions, fp)
	freq.Topics = append(freq.Topics, ft)
	fresp, err := freq.RequestWith(ctx, cl)
	if err != nil || len(fresp.Topics) != 1 || len(fresp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch: %v %+v", err, fresp)
	}
	return lresp.Topics[0].Partitions[0].ErrorCode, fresp.Topics[0].Partitions[0].ErrorCode
}

// A log dir whose disk fails is taken offline alone: its partitions
// answer KAFKA_STORAGE_ERROR to produce, fetch and list offsets,
// DescribeLogDirs reports it with KAFKA_STORAGE_ERROR, and the partitions
// of the other dir keep serving. When the last dir fails the node stops
// with status 1 and says why, as Kafka halts.
func TestFailingLogDirGoesOfflineAlone(t *testing.T) {
	n, dirs, setFaults := faultNode(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(t, n, "disk", 2)
	where := partitionDirs(t, dirs, "disk", 2)
	if where[0] == where[1] {
		t.Fatalf("both partitions in %s", where[0])
	}
	for p := range int32(2) {
		if err := produceTo(ctx, t, n, "disk", p, "before"); err != nil {
			t.Fatalf("produce to %d: %v", p, err)
		}
	}
	bad, good := int32(0), int32(1)
	setFaults("io " + where[bad])

	if err := produceTo(ctx, t, n, "disk", bad, "during"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to the partition of the failing dir: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := produceTo(ctx, t, n, "disk", good, "during"); err != nil {
		t.Fatalf("produce to the partition of the healthy dir: %v", err)
	}
	cl := n.Client()
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, "disk")
	if err != nil {
		t.Fatal(err)
	}
	id := topics["disk"].ID
	if lo, fe := rawErrors(ctx, t, cl, "disk", id, bad); lo != kerr.KafkaStorageError.Code || fe != kerr.KafkaStorageError.Code {
		t.Fatalf("offline partition answers ListOffsets %d, Fetch %d; want %d", lo, fe, kerr.KafkaStorageError.Code)
	}
	if lo, fe := rawErrors(ctx, t, cl, "disk", id, good); lo != 0 || fe != 0 {
		t.Fatalf("online partition answers ListOffsets %d, Fetch %d", lo, fe)
	}
	described, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := described[1]
	if d := ds[where[bad]]; !errors.Is(d.Err, kerr.KafkaStorageError) {
		t.Fatalf("failing dir described as %+v", d)
	}
	if d := ds[where[good]]; d.Err != nil {
		t.Fatalf("healthy dir described as %+v", d)
	} else if _, ok := d.Topics.Lookup("disk", good); !ok {
		t.Fatalf("healthy dir does not list its partition: %+v", d)
	}
	if recs := consumeAll(t, n, "disk", 2); len(recs) < 2 {
		t.Fatalf("consumed %d records from the healthy partition", len(recs))
	}
	// Healing the disk does not bring the dir back (as in Kafka, only a
	// restart does).
	setFaults()
	if err := produceTo(ctx, t, n, "disk", bad, "healed"); !errors.Is(err, kerr.KafkaStorageError) {
		t.Fatalf("produce to the offline dir after the disk healed: %v", err)
	}

	setFaults("io " + where[good])
	produceTo(ctx, t, n, "disk", good, "last")
	select {
	case <-n.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("node still running with every log dir offline:\n%s", n.Output())
	}
	if err := n.ExitErr(); err == nil {
		t.Fatal("node exited with status 0 with every log dir offline")
	}
	if out := n.Output(); !strings.Contains(out, "every log dir is offline") {
		t.Fatalf("no reason given for stopping:\n%s", out)
	}
	// Restarted on a healthy disk, the node serves both partitions and
	// has lost nothing it acknowledged.
	setFaults()
	n.Restart()
	recs := consumeAll(t, n, "disk", 3)
	got := map[string]int{}
	for _, r := range recs {
		got[fmt.Sprintf("%d/%s", r.Partition, r.Value)]++
	}
	if got["0/before"] != 1 || got["1/before"] != 1 || got["1/during"] != 1 || len(recs) != 3 {
		t.Fatalf("after the restart: %v", got)
	}
}

// A full disk refuses appends with KAFKA_STORAGE_ERROR and keeps serving
// reads; once space is freed appends succeed again, and nothing written
// before, during or after is lost or corrupted, across a restart too.
func TestFullDiskRefusesAppendsAndRecovers(t *testing.T) {
	n, dirs, setFaults := faultNode(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(t, n, "full", 1)
	for i := range 10 {
		if err := produceTo(ctx, t, n, "full", 0, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	setFaults("full " + dirs[0])
	for range 3 {
		if err := produceTo(ctx, t, n, "full", 0, "refused"); !errors.Is(err, kerr.KafkaStorageError) {
			t.Fatalf("produce on a full disk: %v, want KAFKA_STORAGE_ERROR", err)
		}
	}
	if recs := consumeAll(t, n, "full", 10); len(recs) != 10 {
		t.Fatalf("consumed %d of 10 records while the disk is full", len(recs))
	}
	adm := kadm.NewClient(n.Client())
	described, err := adm.DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := described[1][dirs[0]]; d.Err != nil || d.UsableBytes != 0 {
		t.Fatalf("full dir described as %+v, want online with 0 usable bytes", d)
	}
	setFaults() // space freed
	for i := range 10 {
		if err := produceTo(ctx, t, n, "full", 0, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatalf("produce once space is free: %v", err)
		}
	}
	check := func(when string) {
		t.Helper()
		recs := consumeAll(t, n, "full", 20)
		var got []string
		for _, r := range recs {
			got = append(got, string(r.Value))
		}
		want := "a0 a1 a2 a3 a4 a5 a6 a7 a8 a9 b0 b1 b2 b3 b4 b5 b6 b7 b8 b9"
		if strings.Join(got, " ") != want {
			t.Fatalf("%s: records %v, want %s", when, got, want)
		}
	}
	check("after the disk was freed")
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	check("after a restart")
}

// With several log.dirs (JBOD) the partitions of a new topic are spread
// over the dirs, the fewest partitions first, and DescribeLogDirs reports
// every dir with the partitions it holds.
func TestLogDirsSpreadPartitions(t *testing.T) {
	n, dirs, _ := faultNode(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createTopic(t, n, "jbod", 6)
	where := partitionDirs(t, dirs, "jbod", 6)
	count := map[string]int{}
	for _, d := range where {
		count[d]++
	}
	for _, d := range dirs {
		if count[d] != 2 {
			t.Fatalf("partitions per dir %v, want 2 in each of %v", count, dirs)
		}
	}
	for p := range int32(6) {
		if err := produceTo(ctx, t, n, "jbod", p, "x"); err != nil {
			t.Fatal(err)
		}
	}
	described, err := kadm.NewClient(n.Client()).DescribeAllLogDirs(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	ds := described[1]
	if len(ds) != 3 {
		t.Fatalf("described %d dirs, want 3: %v", len(ds), ds)
	}
	for p, dir := range where {
		d, ok := ds[dir]
		if !ok || d.Err != nil || d.TotalBytes <= 0 || d.UsableBytes <= 0 {
			t.Fatalf("dir %s described as %+v", dir, d)
		}
		part, ok := d.Topics.Lookup("jbod", p)
		if !ok || part.Size <= 0 {
			t.Fatalf("dir %s does not report partition %d with its size: %+v", dir, p, d.Topics)
		}
	}
	for dir, d := range ds {
		if n := len(d.Topics["jbod"]); n != 2 {
			t.Fatalf("dir %s reports %d partitions of jbod", dir, n)
		}
	}
}

// AlterReplicaLogDirs moves a partition to another log dir while it keeps
// serving; DescribeLogDirs then reports it in its new dir, nothing is
// lost, and a restart finds it there. Unknown dirs and topics get Kafka's
// errors.
func TestAlterReplicaLogDirsMovesAPartition(t *testing.T) {
	n, dirs, _ := faultNode(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	createTopic(t, n, "mv", 1)
	from := partitionDirs(t, dirs, "mv", 1)[0]
	to := dirs[0]
	if from == to {
		to = dirs[1]
	}
	cl := n.Client(kgo.DefaultProduceTopic("mv"), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	value := make([]byte, 1000)
	produce := func(count int) {
		t.Helper()
		for i := range count {
			copy(value, fmt.Sprintf("record %06d", i))
			cl.Produce(ctx, &kgo.Record{Value: append([]byte(nil), value...)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	produce(5000)
	adm := kadm.NewClient(n.Client())
	alter := func(dir, topic string) error {
		t.Helper()
		var req kadm.AlterReplicaLogDirsReq
		req.Add(dir, kadm.TopicsSet{topic: {0: {}}})
		resps, err := adm.AlterBrokerReplicaLogDirs(ctx, 1, req)
		if err != nil {
			t.Fatal(err)
		}
		var perr error
		resps.Each(func(r kadm.AlterReplicaLogDirsResponse) { perr = r.Err })
		return perr
	}
	if err := alter(filepath.Join(t.TempDir(), "nowhere"), "mv"); !errors.Is(err, kerr.LogDirNotFound) {
		t.Fatalf("move to a dir that is not a log dir: %v", err)
	}
	if err := alter(to, "no-such-topic"); !errors.Is(err, kerr.UnknownTopicOrPartition) {
		t.Fatalf("move of an unknown topic: %v", err)
	}
	if err := alter(to, "mv"); err != nil {
		t.Fatalf("move: %v", err)
	}
	produce(100) // appends go on during the move
	deadline := time.Now().Add(30 * time.Second)
	for {
		described, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		p, inTo := described[1][to].Topics.Lookup("mv", 0)
		_, inFrom := described[1][from].Topics.Lookup("mv", 0)
		if inTo && !p.IsFuture && !inFrom {
			if p.Size < 5000*1000 {
				t.Fatalf("moved partition reports %d bytes", p.Size)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("partition not moved to %s: %+v", to, described[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(to, "mv-0")); err != nil {
		t.Fatalf("no partition dir in %s: %v", to, err)
	}
	produce(100)
	check := func(when string) {
		t.Helper()
		recs := consumeAll(t, n, "mv", 5200)
		if len(recs) != 5200 {
			t.Fatalf("%s: consumed %d of 5200 records", when, len(recs))
		}
		for i, r := range recs {
			if r.Offset != int64(i) || len(r.Value) != 1000 {
				t.Fatalf("%s: record %d at offset %d with %d bytes", when, i, r.Offset, len(r.Value))
			}
		}
	}
	check("after the move")
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	check("after a restart")
	if _, err := os.Stat(filepath.Join(from, "mv-0")); err == nil {
		t.Fatalf("the old partition dir in %s came back", from)
	}
}
