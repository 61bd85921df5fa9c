package integration

// Share groups (KIP-932) with the stock tools: kafka-console-share-consumer
// and kafka-share-groups.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	mainSharePerf        = "org.apache.kafka.tools.ShareConsumerPerformance"
	mainShareConsumer    = "org.apache.kafka.tools.consumer.ConsoleShareConsumer"
	mainShareGroups      = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
	mainVerShareConsumer = "org.apache.kafka.tools.VerifiableShareConsumer"
)

func shareScenarios() []Scenario {
	return []Scenario{
		{Name: "cli/share-groups-offsets", Doc: "kafka-share-groups --describe (start offset and lag after a console share consumer read everything), --reset-offsets --to-earliest --execute (the records are delivered again), --delete-offsets, --delete", Run: cliShareGroupsOffsets},
		{Name: "verify/share-consumer", Doc: "VerifiableProducer (idempotent, acks=-1) then VerifiableShareConsumer (sync acknowledgements, earliest) reads every acknowledged record exactly once and acknowledges them all", Run: verifyShareConsumer("sync")},
		{Name: "verify/share-consumer-async", Doc: "as verify/share-consumer with --acknowledgement-mode async (commitAsync after each poll, results through the acknowledgement commit callback)", Run: verifyShareConsumer("async")},
		{Name: "verify/share-consumer-auto", Doc: "as verify/share-consumer with --acknowledgement-mode auto (acknowledgements piggy-backed on the next poll, no commit call)", Run: verifyShareConsumer("auto")},
		{Name: "cli/share-perf-test", Doc: "kafka-share-consumer-perf-test with two share consumers reads all of 20,000 records kafka-producer-perf-test wrote to 4 partitions", Run: cliSharePerfTest},
		{Name: "client/confluent-kafka-python-share", Doc: "confluent-kafka 2.16 (librdkafka's share consumer, a preview there): two ShareConsumers in explicit acknowledgement mode share a partition's 200 records; the released ones come back with delivery count 2, the rejected and accepted ones never, and commit_sync succeeds", Timeout: 4 * time.Minute, Run: clientConfluentShare},
		{Name: "cli/share-consumer-killed", Doc: "a console share consumer killed with kill -9 while it holds records (acquired, not yet acknowledged): a second one in the group gets every record the first did not finish, so between them all 400 are delivered, and only the killed one's last unacknowledged polls twice", Timeout: 4 * time.Minute, Run: cliShareConsumerKilled},
		{Name: "cli/share-console-release", Doc: "kafka-console-share-consumer --release (explicit acknowledgement) on ten records: each is delivered share.delivery.count.limit (5) times, then archived: a second consumer gets nothing and kafka-share-groups --describe --offsets shows lag 0", Timeout: 4 * time.Minute, Run: cliShareConsoleRelease},
		{Name: "cli/dump-log-share-state", Doc: "after a console share consumer read 20 records, kafka-dump-log --share-group-state-decoder decodes the __share_group_state segments: the group's ShareSnapshot or ShareUpdate records for the partition, with Kafka's field names", Timeout: 4 * time.Minute, Run: cliDumpLogShareState},
		{Name: "cli/share-console-consumers", Doc: "two kafka-console-share-consumer in one share group read one partition at once and share its 400 records, each record once; kafka-share-groups --list and --describe --members show the group and both members", Run: cliShareConsoleConsumers},
	}
}

// shareValues are the lines of a console share consumer's log that are
// records of the scenario (the log holds its stderr too).
func shareValues(path, prefix string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}

func cliShareConsoleConsumers(ctx context.Context, e *Env) error {
	topic, group := e.Name("share-console"), e.Name("share-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	var logs []string
	for _, name := range []string{"one", "two"} {
		logPath := filepath.Join(e.Dir, "share-consumer-"+name+".log")
		c, err := e.javaCmd(ctx, SetKafka, mainShareConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", topic,
			"--group", group, "--timeout-ms", "120000", "--consumer-property", "client.id=share-"+name, "--consumer-property", "max.poll.records=10")
		if err != nil {
			return err
		}
		p, err := Start(c, logPath)
		if err != nil {
			return err
		}
		defer p.Stop(5 * time.Second)
		logs = append(logs, logPath)
	}
	// Both members in the group before a record is produced, so that
	// both get some.
	var members []map[string]string
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := e.Kafka(ctx, mainShareGroups, "--describe", "--group", group, "--members")
		if err == nil {
			members = parseColumns(out.Stdout, "GROUP")
			if len(members) == 2 && members[0]["#PARTITIONS"] == "1" && members[1]["#PARTITIONS"] == "1" {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("--describe --members never showed both console share consumers with the partition: %s", out.Tail())
		}
		time.Sleep(time.Second)
	}
	ids := map[string]bool{members[0]["CLIENT-ID"]: true, members[1]["CLIENT-ID"]: true}
	if !ids["share-one"] || !ids["share-two"] {
		return fmt.Errorf("--members rows %v, want the clients share-one and share-two", members)
	}
	out, err := e.Kafka(ctx, mainShareGroups, "--list")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, group) {
		return fmt.Errorf("--list does not show %s: %s", group, out.Tail())
	}

	// 400 records in batches of ten (a share consumer acquires whole
	// batches), 100 ms apart: over 4 s, so that on a loaded machine both
	// consumers poll while records come.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	const total = 400
	for i := 0; i < total; i += 10 {
		var rs []*kgo.Record
		for j := i; j < i+10; j++ {
			rs = append(rs, kgo.StringRecord(fmt.Sprintf("share-record-%03d", j)))
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("producing: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var got [2][]string
	deadline = time.Now().Add(60 * time.Second)
	for {
		got[0], got[1] = shareValues(logs[0], "share-record-"), shareValues(logs[1], "share-record-")
		if len(got[0])+len(got[1]) >= total || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	seen := map[string]int{}
	for _, vs := range got {
		for _, v := range vs {
			seen[v]++
		}
	}
	for v, n := range seen {
		if n > 1 {
			return fmt.Errorf("%s was delivered %d times", v, n)
		}
	}
	if len(seen) != total {
		return fmt.Errorf("the two consumers printed %d distinct records of %d (%d and %d)", len(seen), total, len(got[0]), len(got[1]))
	}
	if len(got[0]) == 0 || len(got[1]) == 0 {
		return fmt.Errorf("one consumer got every record (%d and %d): the partition was not shared", len(got[0]), len(got[1]))
	}
	e.Notef("share-one printed %d, share-two %d", len(got[0]), len(got[1]))
	return nil
}

// shareConsumeAll runs one console share consumer until it has printed n
// records, and returns them.
func shareConsumeAll(ctx context.Context, e *Env, topic, group string, n int) ([]string, error) {
	out, err := e.Java(ctx, 2*time.Minute, SetKafka, mainShareConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", topic,
		"--group", group, "--max-messages", fmt.Sprint(n), "--timeout-ms", "60000")
	if err != nil {
		return nil, err
	}
	var got []string
	for _, line := range strings.Split(out.Stdout, "\n") {
		if strings.HasPrefix(line, "share-record-") {
			got = append(got, strings.TrimSpace(line))
		}
	}
	if len(got) != n {
		return got, fmt.Errorf("the console share consumer printed %d records, want %d: %s", len(got), n, out.Tail())
	}
	return got, nil
}

// waitShareLagZero waits up to 30 s for kafka-share-groups --describe to
// show lag 0 for the topic's partition 0, and returns that row. (The start
// offset itself may trail by the last acknowledgement, as Kafka writes it;
// the lag counts what is delivered for good past it.)
func waitShareLagZero(ctx context.Context, e *Env, group, topic, when string) (map[string]string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		row, err := shareOffsetsRow(ctx, e, group, topic)
		if err == nil && row["LAG"] == "0" {
			return row, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("kafka-share-groups --describe %s: %v %v, want lag 0", when, row, err)
		}
		time.Sleep(time.Second)
	}
}

// shareOffsetsRow is the --describe row of a topic's partition 0.
func shareOffsetsRow(ctx context.Context, e *Env, group, topic string) (map[string]string, error) {
	out, err := e.Kafka(ctx, mainShareGroups, "--describe", "--group", group)
	if err != nil {
		return nil, err
	}
	for _, row := range parseColumns(out.Stdout, "GROUP") {
		if row["TOPIC"] == topic && row["PARTITION"] == "0" {
			return row, nil
		}
	}
	return nil, fmt.Errorf("--describe shows no row for %s-0: %s", topic, out.Tail())
}

func cliShareGroupsOffsets(ctx context.Context, e *Env) error {
	topic, group := e.Name("share-offsets"), e.Name("share-offsets-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	const total = 30
	if err := produceValues(ctx, e, topic, "share-record-", total, total); err != nil {
		return err
	}
	if _, err := shareConsumeAll(ctx, e, topic, group, total); err != nil {
		return err
	}
	// Everything acknowledged: no lag.
	if _, err := waitShareLagZero(ctx, e, group, topic, "after everything was read"); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainShareGroups, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
	if err != nil {
		return err
	}
	reset := parseColumns(out.Stdout, "GROUP")
	if len(reset) != 1 || reset[0]["NEW-OFFSET"] != "0" {
		return fmt.Errorf("--reset-offsets --to-earliest printed %v, want partition 0 at 0: %s", reset, out.Tail())
	}
	row, err := shareOffsetsRow(ctx, e, group, topic)
	if err != nil {
		return err
	}
	if row["START-OFFSET"] != "0" || row["LAG"] != fmt.Sprint(total) {
		return fmt.Errorf("--describe after the reset: %v, want start 0 and lag %d", row, total)
	}
	// The reset records are delivered again.
	if _, err := shareConsumeAll(ctx, e, topic, group, total); err != nil {
		return fmt.Errorf("after the reset: %w", err)
	}
	out, err = e.Kafka(ctx, mainShareGroups, "--delete-offsets", "--group", group, "--topic", topic)
	if err != nil {
		return err
	}
	if rows := parseColumns(out.Stdout, "TOPIC"); len(rows) != 1 || rows[0]["STATUS"] != "Successful" {
		return fmt.Errorf("--delete-offsets printed %v: %s", rows, out.Tail())
	}
	out, err = e.Kafka(ctx, mainShareGroups, "--delete", "--group", group)
	if err != nil {
		return err
	}
	if want := "Deletion of requested share groups ('" + group + "') was successful."; !strings.Contains(out.Stdout, want) {
		return fmt.Errorf("--delete printed %q, want %q", out.Tail(), want)
	}
	out, err = e.Kafka(ctx, mainShareGroups, "--list")
	if err != nil {
		return err
	}
	if strings.Contains(out.Stdout, group) {
		return fmt.Errorf("--list still shows %s after --delete", group)
	}
	return nil
}

// verifyShareConsumer is the verify/share-consumer scenario with
// VerifiableShareConsumer's --acknowledgement-mode mode (auto, sync or
// async).
func verifyShareConsumer(mode string) func(ctx context.Context, e *Env) error {
	return func(ctx context.Context, e *Env) error { return verifyShareConsumerMode(ctx, e, mode) }
}

func verifyShareConsumerMode(ctx context.Context, e *Env, mode string) error {
	const n = 2000
	topic := e.Name("verifiable-share")
	if err := createTopic(ctx, e, topic, 3); err != nil {
		return err
	}
	acked, err := verifiableProduce(ctx, e, SetKafka, topic, n)
	if err != nil {
		return err
	}
	// The consumer exits after n records; with records missing the step
	// timeout ends it and the check says which.
	cout, cerr := e.Java(ctx, 2*time.Minute, SetKafka, mainVerShareConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", topic,
		"--group-id", e.Name("verifiable-share-group"), "--max-messages", fmt.Sprint(n), "--offset-reset-strategy", "earliest",
		"--acknowledgement-mode", mode, "--verbose")
	cev, err := ParseVerifiable(cout.Stdout)
	if err != nil {
		return err
	}
	if err := validateDelivery(acked, consumedValues(cev), true); err != nil {
		if cerr != nil {
			return fmt.Errorf("%w (share consumer: %v)", err, cerr)
		}
		return err
	}
	acknowledged := 0
	for _, ev := range cev {
		if ev.Name != "offsets_acknowledged" {
			continue
		}
		if ev.Success != nil && !*ev.Success {
			return fmt.Errorf("an acknowledgement failed: %s", ev.Error)
		}
		for _, p := range ev.Partitions {
			acknowledged += int(p.Count)
		}
	}
	if acknowledged != n {
		return fmt.Errorf("VerifiableShareConsumer acknowledged %d records, want %d", acknowledged, n)
	}
	return nil
}

func cliSharePerfTest(ctx context.Context, e *Env) error {
	const n = 20000
	topic, group := e.Name("share-perf"), e.Name("share-perf-group")
	if err := createTopic(ctx, e, topic, 4); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainPerfProducer, "--topic", topic, "--num-records", fmt.Sprint(n), "--record-size", "100", "--throughput", "-1")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, fmt.Sprintf("%d records sent", n)) {
		return fmt.Errorf("producer-perf-test did not send %d records: %s", n, out.Tail())
	}
	out, err = e.Kafka(ctx, mainSharePerf, "--topic", topic, "--group", group, "--num-records", fmt.Sprint(n), "--threads", "2", "--timeout", "30000")
	if err != nil {
		return err
	}
	// One header line and one line of figures; the message count is the
	// column data.consumed.in.nMsg.
	var header, figures []string
	for _, line := range strings.Split(out.Stdout, "\n") {
		fields := strings.Split(strings.TrimSpace(line), ", ")
		switch {
		case len(fields) < 4:
		case header == nil && strings.Contains(line, "nMsg"):
			header = fields
		case header != nil && figures == nil:
			figures = fields
		}
	}
	for i, h := range header {
		if strings.TrimSpace(h) == "data.consumed.in.nMsg" && i < len(figures) {
			if got := strings.TrimSpace(figures[i]); got != fmt.Sprint(n) {
				return fmt.Errorf("share-consumer-perf-test consumed %s records, want %d: %s", got, n, out.Tail())
			}
			e.Notef("%s", strings.Join(figures, ", "))
			return nil
		}
	}
	return fmt.Errorf("share-consumer-perf-test printed no data.consumed.in.nMsg: %s", out.Tail())
}

func clientConfluentShare(ctx context.Context, e *Env) error {
	topic, group := e.Name("confluent-share"), e.Name("confluent-share-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	out, err := runPython(ctx, e, "confluent_share_check.py", topic, group, clientRecords)
	if err != nil {
		return err
	}
	var line string
	for _, l := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			line = l
		}
	}
	var r struct {
		Produced, Accepted, Released, Rejected, Redelivered int
		ByMember                                            []int `json:"by_member"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return fmt.Errorf("the share check printed no JSON report (%v): %s", err, out.Tail())
	}
	tenth := clientRecords / 10
	if r.Produced != clientRecords || r.Accepted != clientRecords-tenth || r.Released != tenth || r.Rejected != tenth || r.Redelivered != tenth {
		return fmt.Errorf("share check report %+v: want %d produced, %d accepted, %d released, rejected and redelivered", r, clientRecords, clientRecords-tenth, tenth)
	}
	e.Notef("accepted %d (deliveries by member %v), released %d and redelivered, rejected %d", r.Accepted, r.ByMember, r.Released, r.Rejected)
	return nil
}

func cliShareConsumerKilled(ctx context.Context, e *Env) error {
	topic, group := e.Name("share-killed"), e.Name("share-killed-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest,share.record.lock.duration.ms=15000"); err != nil {
		return err
	}
	const total = 400
	if err := produceValues(ctx, e, topic, "killed-record-", total, 10); err != nil {
		return err
	}
	consumer := func(name string) (*Proc, string, error) {
		logPath := filepath.Join(e.Dir, "share-consumer-"+name+".log")
		c, err := e.javaCmd(ctx, SetKafka, mainShareConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", topic,
			"--group", group, "--timeout-ms", "120000", "--consumer-property", "client.id=share-"+name, "--consumer-property", "max.poll.records=10")
		if err != nil {
			return nil, "", err
		}
		p, err := Start(c, logPath)
		return p, logPath, err
	}
	// The first takes some records, ten a poll, each poll acknowledging
	// the one before: at any moment it holds its last poll's records.
	first, firstLog, err := consumer("first")
	if err != nil {
		return err
	}
	defer first.Stop(5 * time.Second)
	deadline := time.Now().Add(90 * time.Second)
	for len(shareValues(firstLog, "killed-record-")) < 50 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("the first console share consumer printed %d records in 90 s: %s", len(shareValues(firstLog, "killed-record-")), first.LogTail(5))
		}
		time.Sleep(100 * time.Millisecond)
	}
	first.Kill()
	<-first.Done()
	byFirst := shareValues(firstLog, "killed-record-")
	second, secondLog, err := consumer("second")
	if err != nil {
		return err
	}
	defer second.Stop(5 * time.Second)
	seen := map[string]int{}
	deadline = time.Now().Add(90 * time.Second)
	for {
		clear(seen)
		for _, v := range byFirst {
			seen[v]++
		}
		for _, v := range shareValues(secondLog, "killed-record-") {
			seen[v]++
		}
		if len(seen) == total || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if len(seen) != total {
		return fmt.Errorf("after the kill, %d of %d records were delivered (the first printed %d); the second's log: %s", len(seen), total, len(byFirst), second.LogTail(5))
	}
	twice := 0
	for _, n := range seen {
		twice += n - 1
	}
	// What the killed one held unacknowledged comes again: its last
	// polls (it may have printed a poll and fetched the next), never
	// more.
	if twice > 30 {
		return fmt.Errorf("%d records delivered twice after the kill, more than the killed consumer's last polls", twice)
	}
	e.Notef("the killed consumer printed %d records; %d were delivered again to the second", len(byFirst), twice)
	return nil
}

func cliShareConsoleRelease(ctx context.Context, e *Env) error {
	topic, group := e.Name("share-release"), e.Name("share-release-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	const total, limit = 10, 5
	if err := produceValues(ctx, e, topic, "release-record-", total, total); err != nil {
		return err
	}
	// Every delivery released: each record comes back until its fifth,
	// after which it is archived; the consumer stops at 50 messages.
	out, err := e.Kafka(ctx, mainShareConsumer, "--topic", topic, "--group", group,
		"--release", "--max-messages", fmt.Sprint(total*limit), "--timeout-ms", "60000")
	if err != nil {
		return err
	}
	counts := map[string]int{}
	for _, line := range strings.Split(out.Stdout, "\n") {
		if v := strings.TrimSpace(line); strings.HasPrefix(v, "release-record-") {
			counts[v]++
		}
	}
	for i := range total {
		if v := fmt.Sprintf("release-record-%03d", i); counts[v] != limit {
			return fmt.Errorf("%s delivered %d times, want %d (share.delivery.count.limit): %v", v, counts[v], limit, counts)
		}
	}
	// Archived for good: nothing comes to another consumer.
	// (It exits when nothing came for 10 s, with an error status on
	// some versions: only what it printed matters.)
	out, _ = e.Kafka(ctx, mainShareConsumer, "--topic", topic, "--group", group, "--timeout-ms", "10000")
	if strings.Contains(out.Stdout, "release-record-") {
		return fmt.Errorf("a record came again after its last delivery: %s", out.Tail())
	}
	row, err := waitShareLagZero(ctx, e, group, topic, "after the last delivery")
	if err != nil {
		return err
	}
	e.Notef("each of %d records delivered %d times, then archived; start offset %s, lag 0", total, limit, row["START-OFFSET"])
	return nil
}

func cliDumpLogShareState(ctx context.Context, e *Env) error {
	if !e.logDirsVisible() {
		return Skipf("the target's log.dirs is not visible to the harness")
	}
	topic, group := e.Name("share-dump"), e.Name("share-dump-group")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "groups", "--entity-name", group,
		"--alter", "--add-config", "share.auto.offset.reset=earliest"); err != nil {
		return err
	}
	const total = 20
	if err := produceValues(ctx, e, topic, "share-record-", total, total); err != nil {
		return err
	}
	if _, err := shareConsumeAll(ctx, e, topic, group, total); err != nil {
		return err
	}
	// Every replica of a state partition holds the same records: one
	// copy of each partition's segments, from whichever broker has it.
	seen := map[string]bool{}
	var logs []string
	for _, b := range e.Target.Topology().Brokers {
		dirs, _ := filepath.Glob(filepath.Join(b.LogDir, "__share_group_state-*"))
		for _, d := range dirs {
			if seen[filepath.Base(d)] {
				continue
			}
			seen[filepath.Base(d)] = true
			files, err := segmentFiles(d)
			if err != nil {
				return err
			}
			logs = append(logs, files[".log"]...)
		}
	}
	if len(logs) == 0 {
		return fmt.Errorf("no __share_group_state segments under the brokers' log dirs")
	}
	out, err := e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--files", strings.Join(logs, ","), "--share-group-state-decoder")
	if err != nil {
		return err
	}
	// A decoded record names the group in its key, and its value the
	// share partition's start offset and state batches.
	var found string
	for _, line := range strings.Split(out.Stdout, "\n") {
		if strings.Contains(line, `"groupId":"`+group+`"`) && strings.Contains(line, `"startOffset"`) {
			found = line
			break
		}
	}
	if found == "" {
		return fmt.Errorf("kafka-dump-log --share-group-state-decoder shows no record of group %s with a startOffset: %s", group, out.Tail())
	}
	if !strings.Contains(found, `"stateBatches"`) || !strings.Contains(found, `"leaderEpoch"`) {
		return fmt.Errorf("a decoded share state record lacks stateBatches or leaderEpoch: %s", found)
	}
	e.Notef("%d segments decoded; e.g. %s", len(logs), truncate(found, 200))
	return nil
}

// produceValues writes n records to topic, valued prefix and their index
// (as %03d), in batches of batch records (one produce each, so one log
// batch each).
func produceValues(ctx context.Context, e *Env, topic, prefix string, n, batch int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := 0; i < n; i += batch {
		var rs []*kgo.Record
		for j := i; j < min(i+batch, n); j++ {
			rs = append(rs, kgo.StringRecord(fmt.Sprintf("%s%03d", prefix, j)))
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return fmt.Errorf("producing to %s: %w", topic, err)
		}
	}
	return nil
}
