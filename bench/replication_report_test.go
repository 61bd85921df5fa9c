package bench

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEveryWriterKeepsTheOtherSections(t *testing.T) {
	cluster := func(body string) []byte { return []byte(clusterBegin + "\n" + body + "\n" + clusterEnd + "\n") }
	repl := func(body string) []byte { return []byte(replicationBegin + "\n" + body + "\n" + replicationEnd + "\n") }
	doc := []byte("# Benchmark results\n\nsingle v1\n")

	doc = ReplicationSection().Put(doc, repl("repl v1"))
	doc = ClusterSection().Put(doc, cluster("cluster v1"))
	if want := "# Benchmark results\n\nsingle v1\n\n" + string(repl("repl v1")) + "\n" + string(cluster("cluster v1")); string(doc) != want {
		t.Fatalf("both sections added:\n%q\nwant\n%q", doc, want)
	}
	// Each section's writer replaces its own in place.
	doc = ReplicationSection().Put(doc, repl("repl v2"))
	doc = ClusterSection().Put(doc, cluster("cluster v2"))
	for _, gone := range []string{"repl v1", "cluster v1"} {
		if strings.Contains(string(doc), gone) {
			t.Fatalf("%s kept:\n%s", gone, doc)
		}
	}
	if !strings.HasPrefix(string(doc), "# Benchmark results\n\nsingle v1\n\n"+replicationBegin) {
		t.Fatalf("replication section moved:\n%s", doc)
	}

	// The single-node writer keeps both, in the order the file had them.
	doc = KeepSections(doc, []byte("# Benchmark results\n\nsingle v2\n"))
	want := "# Benchmark results\n\nsingle v2\n\n" + string(repl("repl v2")) + "\n" + string(cluster("cluster v2"))
	if string(doc) != want {
		t.Fatalf("kept sections:\n%q\nwant\n%q", doc, want)
	}
	if got := KeepSections(doc, []byte("fresh\n")); strings.Count(string(got), replicationBegin) != 1 || strings.Count(string(got), clusterBegin) != 1 {
		t.Fatalf("markers duplicated:\n%s", got)
	}
	// A replication section alone is kept as well.
	if got := KeepSections(repl("only"), []byte("fresh\n")); string(got) != "fresh\n\n"+string(repl("only")) {
		t.Fatalf("replication section alone: %q", got)
	}
}

func TestFailoverSettingsIn(t *testing.T) {
	got := failoverSettingsIn("node.id=1\n# broker.session.timeout.ms=1\nlog.dirs=/x\n")
	for _, want := range []string{"`broker.session.timeout.ms=9000` (not set: the default)", "`broker.heartbeat.interval.ms=2000` (not set: the default)",
		"`replica.lag.time.max.ms=30000` (not set: the default)"} {
		if !strings.Contains(got, want) {
			t.Fatalf("defaults: %q lacks %q", got, want)
		}
	}
	got = failoverSettingsIn("broker.session.timeout.ms = 3000\nbroker.heartbeat.interval.ms=500\n")
	if !strings.Contains(got, "`broker.session.timeout.ms=3000` (set in the properties; the default is 9000)") ||
		!strings.Contains(got, "`broker.heartbeat.interval.ms=500` (set in the properties; the default is 2000)") ||
		!strings.Contains(got, "`replica.lag.time.max.ms=30000` (not set: the default)") {
		t.Fatalf("overrides: %q", got)
	}
}

func replicationFixture() *ReplicationRun {
	run := &ReplicationRun{Config: ReplicationConfig{Targets: []string{"gregor", "kafka"}, Rounds: 2, Records: 1000, HalfTime: 7 * time.Second,
		E2ERate: 500, E2ETime: 5 * time.Second, LeaderKills: 1, WriteRate: 100, Down: 5 * time.Second, RejoinLimit: 20 * time.Second,
		CatchupBytes: 512 << 20, CatchupRate: 300, CatchupBefore: 4 * time.Second, CatchupLimit: 9 * time.Minute}}
	run.runInfo = newRunInfo()
	run.Properties = "node.id=1\n"
	run.Payload = "10000 distinct payloads, lz4 ratio 1.87:1 over 16 KiB blocks"
	run.DiskFree = "58 GiB"
	run.Details = map[string][]string{"kafka": {"round 1: half-rate latency: a | b"}}
	run.Commands = []string{"produce\n    loadgen produce -records 1000"}
	run.Kills = map[string][]string{"gregor": {"round 1, kill 1: did not rejoin"}, "kafka": {"round 1, kill 1: back"}}
	run.Restarts = map[string]int{"gregor": 2, "kafka": 2}
	run.NotRejoined = map[string]int{"gregor": 2}
	run.Rounds = []Round{
		{Target: "gregor", Round: 1, Figures: map[string]float64{figRProduceRecords: 20000, figRFailAck: 8300}, Errors: []string{"leader kill 1: broker 1 did not rejoin"}},
		{Target: "kafka", Round: 1, Figures: map[string]float64{figRProduceRecords: 10000, figRFailAck: 9000, figRRejoin: 2}},
		{Target: "gregor", Round: 2, Figures: map[string]float64{figRProduceRecords: 22000, figRFailAck: 8100}, Errors: []string{"a|b"}},
		{Target: "kafka", Round: 2, Figures: map[string]float64{figRProduceRecords: 12000, figRFailAck: 9200, figRRejoin: 4}},
	}
	return run
}

// row is the table row of figure in doc, "" if there is none.
func row(doc, figure string) string {
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "| "+figure+" |") {
			return l
		}
	}
	return ""
}

func TestRenderReplication(t *testing.T) {
	run := replicationFixture()
	doc := string(RenderReplication(run, Machine{Cores: 2, CPUModel: "cpu", MemGiB: 1, Kernel: "k"}, "abc123", "go run ./bench/cmd/clusterbench -replication -rounds 2"))
	if !strings.HasPrefix(doc, replicationBegin+"\n") || !strings.HasSuffix(doc, replicationEnd+"\n") {
		t.Fatalf("markers:\n%s", doc)
	}
	for _, want := range []string{
		"`go run ./bench/cmd/clusterbench -replication -rounds 2`",
		"**A trial, not the full benchmark:** 2 round(s).",
		"`broker.session.timeout.ms=9000` (not set: the default)",
		"- round 1, kill 1: did not rejoin",
		"### Replication failures (gregor)",
		"- round 2: a\\|b",
		"loadgen produce -records 1000",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	checks := map[string]string{
		figRProduceRecords: "| " + figRProduceRecords + " | 21000 | 11000 | 1.91 | 20000, 22000 | 10000, 12000 |",
		figRFailAck:        "| " + figRFailAck + " | 8200 | 9100 | 0.90 | 8300, 8100 | 9000, 9200 |",
		// Gregor's broker never rejoined: the cell says so, not "failed".
		figRRejoin:                             "| " + figRRejoin + " | did not rejoin: 2 of 2 restarts, limit 20s | 3 | – |  | 2, 4 |",
		e2eFigure(run.Config.E2ERate) + " p50": "| " + e2eFigure(500) + " p50 | failed | failed | – |  |  |",
	}
	for fig, want := range checks {
		if got := row(doc, fig); got != want {
			t.Errorf("row %q:\n got %s\nwant %s", fig, got, want)
		}
	}

	// A target that rejoined in some rounds only: the median of those,
	// with the count of the others beside it.
	run.Rounds[0].Figures[figRRejoin] = 7
	run.NotRejoined["gregor"] = 1
	doc = string(RenderReplication(run, Machine{}, "abc", "cmd"))
	if got, want := row(doc, figRRejoin), "| "+figRRejoin+" | 7 (did not rejoin: 1 of 2 restarts, limit 20s) | 3 | 2.33 | 7 | 2, 4 |"; got != want {
		t.Errorf("partly rejoined:\n got %s\nwant %s", got, want)
	}

	// One target alone: the other column is "not run".
	run.Config.Targets = []string{"kafka"}
	doc = string(RenderReplication(run, Machine{}, "abc", "cmd"))
	if got := row(doc, figRRejoin); !strings.Contains(got, "| not run | 3 |") {
		t.Errorf("gregor not run: %s", got)
	}
}

func TestRenderReplicationNewFigures(t *testing.T) {
	run := replicationFixture()
	half := figRHalf + " (ms) p99.9"
	catch := catchRejoinFigure(run.Config.CatchupBytes)
	during := catchLatencyFigure(300, catchDuring) + " p99"
	cpu64 := cpuAllFigure(64)
	acks1 := replProduceName("1", 64) + " MB/s"
	set := func(i int, vs map[string]float64) {
		for k, v := range vs {
			run.Rounds[i].Figures[k] = v
		}
	}
	set(0, map[string]float64{half: 12, catch: 30, during: 9, cpu64: 40, acks1: 200, figRCPUFollower: 4, figRHalf + ": records/s asked": 50000})
	set(1, map[string]float64{half: 40, catch: 90, during: 30, cpu64: 80, acks1: 50, figRCPUFollower: 10, figRHalf + ": records/s asked": 15000})
	set(2, map[string]float64{half: 14, catch: 34, during: 11, cpu64: 44, acks1: 220, figRCPUFollower: 6, figRHalf + ": records/s asked": 52000})
	set(3, map[string]float64{half: 44, catch: 110, during: 34, cpu64: 84, acks1: 70, figRCPUFollower: 12, figRHalf + ": records/s asked": 17000})
	doc := string(RenderReplication(run, Machine{Cores: 2}, "abc", "go run ./bench/cmd/clusterbench -replication -catchup-bytes 512MiB"))

	checks := map[string]string{
		half:                                     "| " + half + " | 13.0 | 42.0 | 0.31 | 12.0, 14.0 | 40.0, 44.0 |",
		catch:                                    "| catch-up: restart of a broker 512 MiB of payload behind to its return to the ISR of every partition it holds (s) | 32.0 | 100.0 | 0.32 | 30.0, 34.0 | 90.0, 110.0 |",
		during:                                   "| catch-up: produce latency of the 300 records/s acks=all load, during the catch-up (restart to return) (ms) p99 | 10.0 | 32.0 | 0.31 | 9, 11.0 | 30.0, 34.0 |",
		cpu64:                                    "| CPU of the three brokers per GB of payload produced, acks=all, 64 partitions RF 3 (CPU s/GB) | 42.0 | 82.0 | 0.51 | 40.0, 44.0 | 80.0, 84.0 |",
		acks1:                                    "| produce 1 KiB lz4 acks=1, 64 partitions RF 3, franz-go MB/s | 210.0 | 60.0 | 3.50 | 200.0, 220.0 | 50.0, 70.0 |",
		figRCPUFollower:                          "| " + figRCPUFollower + " | 5 | 11.0 | 0.45 | 4, 6 | 10.0, 12.0 |",
		figRHalf + ": records/s asked":           "| " + figRHalf + ": records/s asked | 51000 | 16000 | 3.19 | 50000, 52000 | 15000, 17000 |",
		replProduceName("all", 1) + " records/s": "| produce 1 KiB lz4 acks=all, 1 partition RF 3, franz-go records/s | failed | failed | – |  |  |",
	}
	for fig, want := range checks {
		if got := row(doc, fig); got != want {
			t.Errorf("row %q:\n got %s\nwant %s", fig, got, want)
		}
	}
	for _, want := range []string{
		"- disk: 58 GiB free at the start",
		"writes a backlog of **512 MiB of payload** (524,288 records of the payload above)",
		"loads the two leaders at 300 records/s; 4s later the broker is restarted",
		"about 1/1.87 of the payload's size",
		"Limit 9m0s for the backlog's writing",
		"for 7s to a fresh 6-partition topic",
		"### Per-round details (kafka)\n\n- round 1: half-rate latency: a \\| b\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if strings.Contains(doc, "Per-round details (gregor)") {
		t.Error("a details heading for a target without details")
	}

	// Every figure is a row, in order: the throughput matrix first (the
	// existing 6-partition acks=all rows among them), the catch-up last.
	figs := replicationFigures(run.Config)
	if len(figs) != 12+3+2+2+3+3+4+3+6 {
		t.Errorf("%d figures", len(figs))
	}
	last := -1
	for _, f := range figs {
		i := strings.Index(doc, "| "+f+" |")
		if i < 0 || i < last {
			t.Errorf("figure %q missing or out of order", f)
		}
		last = i
	}
	if figs[6] != figRProduceRecords || figs[7] != figRProduceMB {
		t.Errorf("the 6-partition acks=all rows are named %q, %q", figs[6], figs[7])
	}

	// No catch-up: no catch-up rows, and the report says it did not run.
	run.Config.CatchupBytes = 0
	doc = string(RenderReplication(run, Machine{}, "abc", "cmd"))
	if strings.Contains(doc, "| catch-up") || !strings.Contains(doc, "- catch-up: not run (`-catchup-bytes 0`)") {
		t.Errorf("catch-up off:\n%s", doc)
	}
	if n := len(replicationFigures(run.Config)); n != len(figs)-9 {
		t.Errorf("%d figures without the catch-up", n)
	}
}

func TestSizes(t *testing.T) {
	for in, want := range map[string]int64{"10GiB": 10 << 30, "512 MiB": 512 << 20, "1e9": 1e9, "2GB": 2e9, "1.5gib": 3 << 29, "0": 0, "4096": 4096, "8 KiB": 8192} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "ten", "5 XB", "-1GiB", "GiB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q): no error", bad)
		}
	}
	for n, want := range map[int64]string{10 << 30: "10 GiB", 512 << 20: "512 MiB", 3 << 29: "1.5 GiB", 100: "100 B"} {
		if got := fmtSize(n); got != want {
			t.Errorf("fmtSize(%d) = %q, want %q", n, got, want)
		}
	}
	if got := catchupRecords(512 << 20); got != 524288 {
		t.Errorf("records of 512 MiB: %d", got)
	}
	if got := lz4RatioOf("x, lz4 ratio 1.87:1 over 16 KiB blocks"); got != "1.87" {
		t.Errorf("lz4 ratio: %q", got)
	}
}

func TestCPUAndLatencyReadings(t *testing.T) {
	before := map[int]float64{1: 10, 2: 20, 3: 30}
	after := map[int]float64{1: 12.5, 2: 21, 3: 30.5}
	spent, ok := cpuSpent(before, after, []int{1, 2, 3})
	if !ok || spent[1] != 2.5 || spent[2] != 1 || spent[3] != 0.5 {
		t.Fatalf("spent %v %v", spent, ok)
	}
	if got := fmtCPU(spent, []int{1, 2}, func(id int) string {
		if id == 1 {
			return "leader"
		}
		return ""
	}); got != "broker 1 (leader) 2.50 s, broker 2 1.00 s" {
		t.Errorf("fmtCPU: %q", got)
	}
	// A broker restarted between the readings (its CPU went down) or
	// missing from one: no reading.
	if _, ok := cpuSpent(before, map[int]float64{1: 12, 2: 1, 3: 31}, []int{1, 2, 3}); ok {
		t.Error("a restarted broker's CPU counted")
	}
	if _, ok := cpuSpent(before, map[int]float64{1: 12, 3: 31}, []int{1, 2, 3}); ok {
		t.Error("a missing broker's CPU counted")
	}

	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []ackRecord{
		{sent: at(-1), acked: at(100)}, // before the window
		{sent: at(0), acked: at(5)},
		{sent: at(10), acked: at(12)},
		{sent: at(20), acked: at(50)}, // acknowledged after the window: counted, it was sent in it
		{sent: at(30), acked: at(31)}, // sent at its end: not counted
	}
	if got := latenciesSent(acks, t0, at(30)); !slices.Equal(got, []float64{5, 2, 30}) {
		t.Errorf("latencies: %v", got)
	}

	tp := assignedTo("f", 3, 2, []int{1, 3})
	if tp.NumPartitions != -1 || tp.ReplicationFactor != -1 || len(tp.ReplicaAssignment) != 3 || len(tp.Configs) != 1 {
		t.Fatalf("assigned topic: %+v", tp)
	}
	for p, want := range [][]int32{{2, 1, 3}, {2, 3, 1}, {2, 1, 3}} {
		if a := tp.ReplicaAssignment[p]; a.Partition != int32(p) || !slices.Equal(a.Replicas, want) {
			t.Errorf("partition %d: %v, want %v", p, a.Replicas, want)
		}
	}

	resp := metadataFixture()
	if p := partitionOf(resp, "t", 5); p == nil || p.Leader != 3 || !slices.Equal(p.ISR, []int32{1, 3}) {
		t.Errorf("partition t-5: %+v", p)
	}
	if p := partitionOf(resp, "t", 9); p != nil {
		t.Errorf("partition t-9: %+v", p)
	}
	if cpuAllFigure(6) != "CPU of the three brokers per GB of payload produced, acks=all, 6 partitions RF 3 (CPU s/GB)" {
		t.Errorf("CPU figure: %q", cpuAllFigure(6))
	}
}

func metadataFixture() *kmsg.MetadataResponse {
	resp := kmsg.NewPtrMetadataResponse()
	add := func(topic string, parts ...kmsg.MetadataResponseTopicPartition) {
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = kmsg.StringPtr(topic)
		mt.Partitions = parts
		resp.Topics = append(resp.Topics, mt)
	}
	part := func(id, leader int32, replicas, isr []int32) kmsg.MetadataResponseTopicPartition {
		p := kmsg.NewMetadataResponseTopicPartition()
		p.Partition, p.Leader, p.Replicas, p.ISR = id, leader, replicas, isr
		return p
	}
	all := []int32{1, 2, 3}
	// t: six partitions, leaders 1 2 3 1 2 3, broker 2 out of partition 5's ISR.
	add("t", part(0, 1, all, all), part(1, 2, all, all), part(2, 3, all, all),
		part(3, 1, all, all), part(4, 2, all, all), part(5, 3, all, []int32{1, 3}))
	// u: broker 2 holds no replica of it.
	add("u", part(0, 1, []int32{1, 3}, []int32{1}))
	return resp
}

func TestMetadataReadings(t *testing.T) {
	resp := metadataFixture()
	if err := fullISR(resp, "t", 6); err == nil || !strings.Contains(err.Error(), "t-5") {
		t.Fatalf("fullISR with partition 5 short: %v", err)
	}
	resp.Topics[0].Partitions[5].ISR = []int32{1, 2, 3}
	if err := fullISR(resp, "t", 6); err != nil {
		t.Fatalf("fullISR: %v", err)
	}
	if err := fullISR(resp, "missing", 6); err == nil {
		t.Fatal("fullISR of an unlisted topic: no error")
	}
	if err := fullISR(resp, "u", 1); err == nil {
		t.Fatal("fullISR of a one-partition, two-replica topic: no error")
	}

	// The active controller (3) is never picked; the others in turn.
	for k, want := range map[int]int32{1: 1, 2: 2, 3: 1} {
		victim, led := pickVictim(resp, "t", 3, k)
		if victim != want {
			t.Errorf("kill %d: victim %d, want %d", k, victim, want)
		}
		if wantLed := []int32{victim - 1, victim + 2}; !slices.Equal(led, wantLed) {
			t.Errorf("kill %d: led %v, want %v", k, led, wantLed)
		}
	}
	if v, _ := pickVictim(resp, "missing", 3, 1); v != -1 {
		t.Errorf("victim of an unlisted topic: %d", v)
	}

	if l := leaderOf(resp, "t", 4); l != 2 {
		t.Errorf("leader of t-4: %d", l)
	}
	if l := leaderOf(resp, "t", 9); l != -1 {
		t.Errorf("leader of t-9: %d", l)
	}

	resp.Topics[0].Partitions[5].ISR = []int32{1, 3}
	if missing, held := outOfISR(resp, 2); missing != 1 || held != 6 {
		t.Errorf("broker 2: out of %d of %d, want 1 of 6", missing, held)
	}
	if missing, held := outOfISR(resp, 3); missing != 1 || held != 7 {
		t.Errorf("broker 3: out of %d of %d, want 1 of 7", missing, held)
	}
}

func TestAckReadings(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	acks := []ackRecord{
		{partition: 0, bytes: 10, sent: at(-5), acked: at(1)},      // sent before the kill
		{partition: 0, bytes: 10, sent: at(2), acked: at(900)},     // after it
		{partition: 0, bytes: 10, sent: at(3), acked: at(850)},     // acknowledged sooner (another batch)
		{partition: 1, bytes: 20, sent: at(4), acked: at(1200)},    // another partition
		{partition: 0, bytes: 10, sent: at(2000), acked: at(2001)}, // later
	}
	if got, ok := firstAckAfter(acks, 0, t0); !ok || !got.Equal(at(850)) {
		t.Errorf("first ack on 0 after the kill: %v %v", got, ok)
	}
	if _, ok := firstAckAfter(acks, 2, t0); ok {
		t.Error("an ack on a partition never written")
	}
	if got, ok := lastFirstAck(acks, []int32{0, 1}, t0); !ok || !got.Equal(at(1200)) {
		t.Errorf("every partition: %v %v", got, ok)
	}
	if _, ok := lastFirstAck(acks, []int32{0, 2}, t0); ok {
		t.Error("every partition, one of them never written: ok")
	}
	if n := ackedBytes(acks, t0, at(1200)); n != 50 {
		t.Errorf("bytes acknowledged in (0, 1200 ms]: %d, want 50", n)
	}
	if n := ackedBytes(acks, at(1), at(1199)); n != 20 {
		t.Errorf("bytes acknowledged in (1, 1199 ms]: %d, want 20", n)
	}
}

func TestReadPayloadLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "payloads.txt")
	if err := os.WriteFile(path, []byte("a\nbb\n\nccc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ps, err := readPayloadLines(path)
	if err != nil || len(ps) != 3 || string(ps[2]) != "ccc" {
		t.Fatalf("got %q, %v", ps, err)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readPayloadLines(path); err == nil {
		t.Fatal("no payloads: no error")
	}
}
