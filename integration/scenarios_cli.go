package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Main classes of the stock tools (kafka-*.sh) in Kafka 4.3.1.
const (
	mainTopics         = "org.apache.kafka.tools.TopicCommand"
	mainProducer       = "org.apache.kafka.tools.ConsoleProducer"
	mainConsumer       = "org.apache.kafka.tools.consumer.ConsoleConsumer"
	mainGroups         = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
	mainConfigs        = "kafka.admin.ConfigCommand"
	mainAPIVersions    = "org.apache.kafka.tools.BrokerApiVersionsCommand"
	mainQuorum         = "org.apache.kafka.tools.MetadataQuorumCommand"
	mainFeatures       = "org.apache.kafka.tools.FeatureCommand"
	mainGetOffsets     = "org.apache.kafka.tools.GetOffsetShell"
	mainDeleteRecords  = "org.apache.kafka.tools.DeleteRecordsCommand"
	mainTransactions   = "org.apache.kafka.tools.TransactionsCommand"
	mainLogDirs        = "org.apache.kafka.tools.LogDirsCommand"
	mainClientMetrics  = "org.apache.kafka.tools.ClientMetricsCommand"
	mainLeaderElection = "org.apache.kafka.tools.LeaderElectionCommand"
	mainDumpLog        = "org.apache.kafka.tools.DumpLogSegments"
	mainPerfProducer   = "org.apache.kafka.tools.ProducerPerformance"
	mainPerfConsumer   = "org.apache.kafka.tools.ConsumerPerformance"
)

func cliScenarios() []Scenario {
	return []Scenario{
		{Name: "cli/topics-create-describe", Doc: "kafka-topics --create (partitions, RF, --config) then --describe shows them", Run: cliTopicsCreateDescribe},
		{Name: "cli/topics-list", Doc: "kafka-topics --list shows a created topic and hides internal ones", Run: cliTopicsList},
		{Name: "cli/topics-alter-partitions", Doc: "kafka-topics --alter --partitions grows a topic; shrinking is refused", Run: cliTopicsAlter},
		{Name: "cli/topics-delete", Doc: "kafka-topics --delete removes a topic from --list", Run: cliTopicsDelete},
		{Name: "cli/console-produce-partition", Doc: "console producer with keys -> console consumer --partition P --offset earliest (assign, no group) per partition, print.key", Run: cliConsolePartition},
		{Name: "cli/console-produce-consume", Doc: "console producer with keys -> console consumer --from-beginning --group --max-messages print.key", Run: cliConsole},
		{Name: "cli/groups-list-describe", Doc: "kafka-consumer-groups --list, --describe --members/--offsets/--state with a live member", Run: cliGroupsDescribe},
		{Name: "cli/groups-reset-offsets", Doc: "kafka-consumer-groups --reset-offsets --to-earliest --execute", Run: cliGroupsReset},
		{Name: "cli/groups-delete-offsets", Doc: "kafka-consumer-groups --delete-offsets", Run: cliGroupsDeleteOffsets},
		{Name: "cli/groups-delete", Doc: "kafka-consumer-groups --delete", Run: cliGroupsDelete},
		{Name: "cli/configs-topic", Doc: "kafka-configs topics --describe --all, --alter --add-config/--delete-config", Run: cliConfigsTopic},
		{Name: "cli/configs-broker", Doc: "kafka-configs brokers --describe --all, --alter a dynamic broker config", Run: cliConfigsBroker},
		{Name: "cli/configs-broker-loggers", Doc: "kafka-configs broker-loggers --describe, --alter --add-config root=WARN and back, refused level and --delete-config root", Run: cliConfigsBrokerLoggers},
		{Name: "cli/configs-group", Doc: "kafka-configs groups --alter --add-config consumer.heartbeat.interval.ms on a group without members, --describe (--all), refused values, --delete-config", Run: cliConfigsGroup},
		{Name: "cli/client-metrics", Doc: "kafka-client-metrics --alter (--metrics, --interval, --match), --list, --describe, refused values with Kafka's errors, --delete", Run: cliClientMetrics},
		{Name: "cli/broker-api-versions", Doc: "kafka-broker-api-versions lists the broker with usable versions of core APIs", Run: cliAPIVersions},
		{Name: "cli/metadata-quorum", Doc: "kafka-metadata-quorum describe --status and --replication", Run: cliQuorum},
		{Name: "cli/features-describe", Doc: "kafka-features describe prints metadata.version and finalized levels", Run: cliFeatures},
		{Name: "cli/get-offsets", Doc: "kafka-get-offsets --time -1, -2, -3 and a timestamp", Run: cliGetOffsets},
		{Name: "cli/delete-records", Doc: "kafka-delete-records moves the low watermark; get-offsets -2 agrees", Run: cliDeleteRecords},
		{Name: "cli/transactions", Doc: "kafka-transactions list, describe, describe-producers after a transactional producer", Run: cliTransactions},
		{Name: "cli/transactions-abort", Doc: "kafka-transactions describe-producers, find-hanging and abort on a transaction its dead producer left open; read_committed sees nothing of it afterwards", Run: cliTransactionsAbort},
		{Name: "cli/log-dirs", Doc: "kafka-log-dirs --describe reports the topic's partitions with sizes", Run: cliLogDirs},
		{Name: "cli/leader-election", Doc: "kafka-leader-election --election-type preferred --all-topic-partitions", Run: cliLeaderElection},
		{Name: "cli/dump-log", Doc: "kafka-dump-log reads the target's own segment files (on-disk format)", Run: cliDumpLog},
	}
}

// createTopic runs kafka-topics --create and checks its confirmation.
func createTopic(ctx context.Context, e *Env, name string, partitions int, configs ...string) error {
	return createTopicReplicas(ctx, e, name, partitions, 1, configs...)
}

// createTopicReplicas is createTopic with replicas replicas.
func createTopicReplicas(ctx context.Context, e *Env, name string, partitions, replicas int, configs ...string) error {
	args := []string{"--create", "--topic", name, "--partitions", strconv.Itoa(partitions), "--replication-factor", strconv.Itoa(replicas)}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	out, err := e.Kafka(ctx, mainTopics, args...)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", name, err)
	}
	if !strings.Contains(out.Stdout, "Created topic "+name+".") {
		return fmt.Errorf("kafka-topics --create printed no confirmation for %s: %s", name, out.Tail())
	}
	return nil
}

// describeTopic runs kafka-topics --describe for one topic.
func describeTopic(ctx context.Context, e *Env, name string) (*topicDescription, error) {
	out, err := e.Kafka(ctx, mainTopics, "--describe", "--topic", name)
	if err != nil {
		return nil, err
	}
	topics, err := parseTopicDescribe(out.Stdout)
	if err != nil {
		return nil, err
	}
	t := topics[name]
	if t == nil {
		return nil, fmt.Errorf("--describe did not list %s: %s", name, out.Tail())
	}
	return t, nil
}

func listTopics(ctx context.Context, e *Env, extra ...string) ([]string, error) {
	out, err := e.Kafka(ctx, mainTopics, append([]string{"--list"}, extra...)...)
	if err != nil {
		return nil, err
	}
	return strings.Fields(out.Stdout), nil
}

// produceKeyed sends key:value lines with the console producer
// (idempotent, acks=all by default) and fails if it reports any error.
func produceKeyed(ctx context.Context, e *Env, topic string, lines []string, extraArgs ...string) error {
	args := append([]string{"--topic", topic, "--reader-property", "parse.key=true", "--reader-property", "key.separator=:"}, extraArgs...)
	out, err := e.KafkaStdin(ctx, strings.Join(lines, "\n")+"\n", mainProducer, args...)
	if err != nil {
		return fmt.Errorf("console producer: %w", err)
	}
	if strings.Contains(out.Stderr, "ERROR") {
		return fmt.Errorf("console producer reported errors: %s", out.Tail())
	}
	return nil
}

// consumeKeyed reads n records with the console consumer and returns
// them as key:value lines.
func consumeKeyed(ctx context.Context, e *Env, topic, group string, n int) ([]string, error) {
	args := []string{"--topic", topic, "--from-beginning", "--max-messages", strconv.Itoa(n), "--timeout-ms", "45000",
		"--formatter-property", "print.key=true", "--formatter-property", "key.separator=:"}
	if group != "" {
		args = append(args, "--group", group)
	}
	out, err := e.Kafka(ctx, mainConsumer, args...)
	if err != nil {
		return nil, fmt.Errorf("console consumer: %w", err)
	}
	if !strings.Contains(out.Stderr, fmt.Sprintf("Processed a total of %d messages", n)) {
		return nil, fmt.Errorf("console consumer did not report %d messages: %s", n, out.Tail())
	}
	var lines []string
	for _, l := range strings.Split(out.Stdout, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	return lines, nil
}

func keyedLines(prefix string, n int) []string {
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("%s-k%d:%s-v%d", prefix, i%7, prefix, i)
	}
	return lines
}

// sameSet reports whether got and want hold the same lines, order aside.
func sameSet(got, want []string) error {
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if slices.Equal(g, w) {
		return nil
	}
	return fmt.Errorf("got %d lines %v, want %d lines %v", len(got), firstN(g, 5), len(want), firstN(w, 5))
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func cliTopicsCreateDescribe(ctx context.Context, e *Env) error {
	topic := e.Name("topics-create")
	if err := createTopic(ctx, e, topic, 3, "retention.ms=123456789", "cleanup.policy=delete", "max.message.bytes=2000000"); err != nil {
		return err
	}
	t, err := describeTopic(ctx, e, topic)
	if err != nil {
		return err
	}
	if t.PartitionCount != 3 || t.ReplicationFactor != 1 || len(t.Partitions) != 3 {
		return fmt.Errorf("describe: PartitionCount %d ReplicationFactor %d lines %d, want 3, 1, 3", t.PartitionCount, t.ReplicationFactor, len(t.Partitions))
	}
	if t.TopicID == "" || t.TopicID == "AAAAAAAAAAAAAAAAAAAAAA" {
		return fmt.Errorf("describe: TopicId %q is not a real topic id", t.TopicID)
	}
	for k, v := range map[string]string{"retention.ms": "123456789", "cleanup.policy": "delete", "max.message.bytes": "2000000"} {
		if t.Configs[k] != v {
			return fmt.Errorf("describe: Configs[%s] = %q, want %q (all: %v)", k, t.Configs[k], v, t.Configs)
		}
	}
	for _, p := range t.Partitions {
		if p.Leader == "" || p.Leader == "-1" || p.Leader == "none" || p.Isr == "" {
			return fmt.Errorf("describe: partition %d has leader %q isr %q", p.Partition, p.Leader, p.Isr)
		}
	}
	// Creating it again must fail with TopicExistsException.
	out, err := e.Kafka(ctx, mainTopics, "--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1")
	if err == nil {
		return fmt.Errorf("second --create of %s succeeded", topic)
	}
	if !strings.Contains(out.Stdout+out.Stderr, "already exists") {
		return fmt.Errorf("second --create failed without 'already exists': %s", out.Tail())
	}
	return nil
}

func cliTopicsList(ctx context.Context, e *Env) error {
	topic := e.Name("topics-list")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	// Make sure __consumer_offsets exists, so that there is an internal
	// topic for --exclude-internal to hide.
	group := e.Name("topics-list-group")
	if _, err := groupWithOffsetsOn(ctx, e, topic, group, 0); err != nil {
		return err
	}
	// On a starved machine the JVM consumer may give up (--timeout-ms)
	// before its FindCoordinator reaches the broker, and then nothing
	// creates the topic: the harness asks FindCoordinator itself until a
	// coordinator is named, which takes the topic to exist.
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	if err := until(ctx, time.Minute, time.Second, func() (bool, error) {
		_, err := groupCoordinator(ctx, cl, group)
		return err == nil, err
	}); err != nil {
		return fmt.Errorf("FindCoordinator for group %s: %w", group, err)
	}
	// The consumer's FindCoordinator has the coordinator's topic created,
	// on Kafka and on Gregor alike, asynchronously: a consumer that gave
	// up after its --timeout-ms (a slow JVM on a busy machine) may be
	// gone before the topic exists, so --list is asked again until it
	// shows it, for as long as a creation may take.
	var names []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if names, err = listTopics(ctx, e); err != nil {
			return err
		}
		if slices.Contains(names, topic) && slices.Contains(names, "__consumer_offsets") {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("--list does not show both %s and __consumer_offsets: %v", topic, firstN(names, 20))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	names, err = listTopics(ctx, e, "--exclude-internal")
	if err != nil {
		return err
	}
	if !slices.Contains(names, topic) {
		return fmt.Errorf("--list --exclude-internal does not show %s: %v", topic, firstN(names, 20))
	}
	for _, n := range names {
		if strings.HasPrefix(n, "__") {
			return fmt.Errorf("--list --exclude-internal shows internal topic %s", n)
		}
	}
	return nil
}

func cliTopicsAlter(ctx context.Context, e *Env) error {
	topic := e.Name("topics-alter")
	if err := createTopic(ctx, e, topic, 2); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainTopics, "--alter", "--topic", topic, "--partitions", "5"); err != nil {
		return fmt.Errorf("--alter --partitions 5: %w", err)
	}
	t, err := describeTopic(ctx, e, topic)
	if err != nil {
		return err
	}
	if t.PartitionCount != 5 || len(t.Partitions) != 5 {
		return fmt.Errorf("after --alter --partitions 5: PartitionCount %d, %d partition lines", t.PartitionCount, len(t.Partitions))
	}
	out, err := e.Kafka(ctx, mainTopics, "--alter", "--topic", topic, "--partitions", "3")
	if err == nil {
		return fmt.Errorf("--alter --partitions 3 (a decrease) succeeded")
	}
	if !strings.Contains(out.Stdout+out.Stderr, "InvalidPartitionsException") {
		return fmt.Errorf("decrease refused without InvalidPartitionsException: %s", out.Tail())
	}
	return nil
}

func cliTopicsDelete(ctx context.Context, e *Env) error {
	topic := e.Name("topics-delete")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if _, err := e.Kafka(ctx, mainTopics, "--delete", "--topic", topic); err != nil {
		return fmt.Errorf("--delete: %w", err)
	}
	// Deletion is asynchronous in Kafka; the topic must be gone shortly.
	deadline := time.Now().Add(30 * time.Second)
	for {
		names, err := listTopics(ctx, e)
		if err != nil {
			return err
		}
		if !slices.Contains(names, topic) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still listed 30 s after --delete", topic)
		}
		time.Sleep(time.Second)
	}
	out, err := e.Kafka(ctx, mainTopics, "--delete", "--topic", topic)
	if err == nil {
		return fmt.Errorf("--delete of a deleted topic succeeded")
	}
	if !strings.Contains(out.Stdout+out.Stderr, "does not exist") {
		return fmt.Errorf("--delete of a missing topic failed without 'does not exist': %s", out.Tail())
	}
	return nil
}

func cliConsole(ctx context.Context, e *Env) error {
	topic := e.Name("console")
	if err := createTopic(ctx, e, topic, 3); err != nil {
		return err
	}
	lines := keyedLines("c", 20)
	if err := produceKeyed(ctx, e, topic, lines); err != nil {
		return err
	}
	group := e.Name("console-group")
	got, err := consumeKeyed(ctx, e, topic, group, len(lines))
	if err != nil {
		return err
	}
	if err := sameSet(got, lines); err != nil {
		return fmt.Errorf("consumed records differ: %w", err)
	}
	// Keys decide partitions: a key's records keep their order.
	perKey := map[string][]string{}
	for _, l := range got {
		k, v, _ := strings.Cut(l, ":")
		perKey[k] = append(perKey[k], v)
	}
	for k, vs := range perKey {
		for i := 1; i < len(vs); i++ {
			a, _ := strconv.Atoi(strings.TrimPrefix(vs[i-1], "c-v"))
			b, _ := strconv.Atoi(strings.TrimPrefix(vs[i], "c-v"))
			if a > b {
				return fmt.Errorf("key %s: values out of order: %v", k, vs)
			}
		}
	}
	// The group committed: a second run in the same group sees nothing new.
	out, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--group", group, "--max-messages", "1", "--timeout-ms", "5000")
	if err == nil && strings.TrimSpace(out.Stdout) != "" {
		return fmt.Errorf("same group re-read committed records: %q", truncate(out.Stdout, 200))
	}
	if !strings.Contains(out.Stderr, "Processed a total of 0 messages") {
		return fmt.Errorf("re-read in the committed group: want 'Processed a total of 0 messages', got: %s", out.Tail())
	}
	return nil
}

// cliConsolePartition reads each partition with --partition (assign():
// no group APIs at all) and checks that together they hold exactly what
// was produced, each partition in produce order.
func cliConsolePartition(ctx context.Context, e *Env) error {
	topic := e.Name("console-part")
	if err := createTopic(ctx, e, topic, 3); err != nil {
		return err
	}
	lines := keyedLines("p", 30)
	if err := produceKeyed(ctx, e, topic, lines); err != nil {
		return err
	}
	var all []string
	for p := 0; p < 3; p++ {
		out, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--partition", strconv.Itoa(p), "--offset", "earliest",
			"--timeout-ms", "5000", "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:")
		// The consumer ends with a TimeoutException once the partition
		// is drained; the count it prints is what matters.
		if err != nil && !strings.Contains(out.Stderr, "Processed a total of") {
			return fmt.Errorf("console consumer --partition %d: %w", p, err)
		}
		var got []string
		for _, l := range strings.Split(out.Stdout, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				got = append(got, l)
			}
		}
		if !strings.Contains(out.Stderr, fmt.Sprintf("Processed a total of %d messages", len(got))) {
			return fmt.Errorf("--partition %d printed %d records but reported otherwise: %s", p, len(got), out.Tail())
		}
		last := -1
		for _, l := range got {
			_, v, _ := strings.Cut(l, ":")
			n, _ := strconv.Atoi(strings.TrimPrefix(v, "p-v"))
			if n < last {
				return fmt.Errorf("--partition %d: records out of produce order: %v", p, got)
			}
			last = n
		}
		all = append(all, got...)
	}
	if err := sameSet(all, lines); err != nil {
		return fmt.Errorf("the partitions together differ from what was produced: %w", err)
	}
	return nil
}

// groupWithOffsets creates a topic with records and a consumer group that
// has consumed and committed all of them, then left (state Empty).
func groupWithOffsets(ctx context.Context, e *Env, prefix string, partitions, records int) (topic, group string, err error) {
	topic, group = e.Name(prefix), e.Name(prefix+"-group")
	if err := createTopic(ctx, e, topic, partitions); err != nil {
		return "", "", err
	}
	if err := produceKeyed(ctx, e, topic, keyedLines(prefix, records)); err != nil {
		return "", "", err
	}
	if _, err := groupWithOffsetsOn(ctx, e, topic, group, records); err != nil {
		return "", "", err
	}
	return topic, group, nil
}

// groupWithOffsetsOn consumes n records of topic in group (n may be 0:
// the consumer then waits briefly and commits nothing, which still makes
// the coordinator create __consumer_offsets).
func groupWithOffsetsOn(ctx context.Context, e *Env, topic, group string, n int) ([]string, error) {
	if n > 0 {
		return consumeKeyed(ctx, e, topic, group, n)
	}
	_, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--group", group, "--max-messages", "1", "--timeout-ms", "3000")
	var exit *ExitError
	if err != nil && !errors.As(err, &exit) {
		return nil, err
	}
	return nil, nil
}

// describeGroupOffsets returns partition -> CURRENT-OFFSET ("-" if none).
func describeGroupOffsets(ctx context.Context, e *Env, group, topic string) (map[string]map[string]string, string, error) {
	out, err := e.Kafka(ctx, mainGroups, "--describe", "--group", group, "--offsets")
	if err != nil {
		return nil, "", err
	}
	res := map[string]map[string]string{}
	for _, row := range parseColumns(out.Stdout, "GROUP") {
		if row["TOPIC"] == topic {
			res[row["PARTITION"]] = row
		}
	}
	return res, out.Stdout + out.Stderr, nil
}

func cliGroupsDescribe(ctx context.Context, e *Env) error {
	topic, group, err := groupWithOffsets(ctx, e, "groups-describe", 2, 10)
	if err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainGroups, "--list")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(out.Stdout), group) {
		return fmt.Errorf("--list does not show %s: %s", group, truncate(out.Stdout, 300))
	}
	offsets, raw, err := describeGroupOffsets(ctx, e, group, topic)
	if err != nil {
		return err
	}
	total := 0
	for p, row := range offsets {
		cur, err1 := strconv.Atoi(row["CURRENT-OFFSET"])
		end, err2 := strconv.Atoi(row["LOG-END-OFFSET"])
		if err1 != nil || err2 != nil || cur != end || row["LAG"] != "0" {
			return fmt.Errorf("--offsets partition %s: current %q end %q lag %q, want a committed offset at the end", p, row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
		}
		total += cur
	}
	if len(offsets) != 2 || total != 10 {
		return fmt.Errorf("--offsets: %d partitions summing to %d, want 2 summing to 10: %s", len(offsets), total, truncate(raw, 400))
	}

	// A live member: a console consumer that waits in the group.
	logPath := filepath.Join(e.Dir, "member.log")
	c, err := e.javaCmd(ctx, SetKafka, mainConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", topic, "--group", group, "--timeout-ms", "120000")
	if err != nil {
		return err
	}
	member, err := Start(c, logPath)
	if err != nil {
		return err
	}
	defer member.Stop(5 * time.Second)
	var members []map[string]string
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := e.Kafka(ctx, mainGroups, "--describe", "--group", group, "--members")
		if err == nil {
			members = parseColumns(out.Stdout, "GROUP")
			// While the group rebalances the member is listed with
			// no partitions yet; wait for its assignment.
			if len(members) == 1 && members[0]["#PARTITIONS"] == "2" {
				break
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("--members never showed the running consumer with its 2 partitions: %s (member log: %s)", out.Tail(), member.LogTail(3))
		}
		time.Sleep(time.Second)
	}
	if members[0]["#PARTITIONS"] != "2" || !strings.HasPrefix(members[0]["CLIENT-ID"], "console-consumer") {
		return fmt.Errorf("--members row %v, want 2 partitions and a console-consumer client id", members[0])
	}
	out, err = e.Kafka(ctx, mainGroups, "--describe", "--group", group, "--state")
	if err != nil {
		return err
	}
	states := parseColumns(out.Stdout, "GROUP")
	if len(states) != 1 || states[0]["STATE"] != "Stable" || states[0]["#MEMBERS"] != "1" || states[0]["ASSIGNMENT-STRATEGY"] == "-" {
		return fmt.Errorf("--state with one live member: %v, want Stable, 1 member and a strategy", states)
	}
	return nil
}

func cliGroupsReset(ctx context.Context, e *Env) error {
	topic, group, err := groupWithOffsets(ctx, e, "groups-reset", 2, 10)
	if err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainGroups, "--reset-offsets", "--group", group, "--topic", topic, "--to-earliest", "--execute")
	if err != nil {
		return err
	}
	rows := parseColumns(out.Stdout, "GROUP")
	if len(rows) != 2 {
		return fmt.Errorf("--reset-offsets printed %d rows, want 2: %s", len(rows), out.Tail())
	}
	for _, r := range rows {
		if r["NEW-OFFSET"] != "0" {
			return fmt.Errorf("--reset-offsets row %v, want NEW-OFFSET 0", r)
		}
	}
	offsets, raw, err := describeGroupOffsets(ctx, e, group, topic)
	if err != nil {
		return err
	}
	for p, row := range offsets {
		if row["CURRENT-OFFSET"] != "0" || row["LAG"] == "0" && row["LOG-END-OFFSET"] != "0" {
			return fmt.Errorf("after reset, partition %s: %v", p, row)
		}
	}
	if len(offsets) != 2 {
		return fmt.Errorf("after reset: %s", truncate(raw, 400))
	}
	// Consuming in the group now re-reads everything.
	if _, err := consumeKeyed(ctx, e, topic, group, 10); err != nil {
		return fmt.Errorf("re-consuming after reset: %w", err)
	}
	return nil
}

func cliGroupsDeleteOffsets(ctx context.Context, e *Env) error {
	topic, group, err := groupWithOffsets(ctx, e, "groups-deloff", 2, 6)
	if err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainGroups, "--delete-offsets", "--group", group, "--topic", topic)
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Request succeeded for deleting offsets from group "+group) {
		return fmt.Errorf("--delete-offsets: %s", out.Tail())
	}
	rows := parseColumns(out.Stdout, "TOPIC")
	if len(rows) != 2 {
		return fmt.Errorf("--delete-offsets printed %d partition rows, want 2: %s", len(rows), out.Tail())
	}
	for _, r := range rows {
		if r["STATUS"] != "Successful" {
			return fmt.Errorf("--delete-offsets row %v", r)
		}
	}
	offsets, _, err := describeGroupOffsets(ctx, e, group, topic)
	if err == nil {
		for p, row := range offsets {
			if row["CURRENT-OFFSET"] != "-" {
				return fmt.Errorf("after --delete-offsets partition %s still has offset %s", p, row["CURRENT-OFFSET"])
			}
		}
	}
	return nil
}

func cliGroupsDelete(ctx context.Context, e *Env) error {
	_, group, err := groupWithOffsets(ctx, e, "groups-delete", 1, 3)
	if err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainGroups, "--delete", "--group", group)
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Deletion of requested consumer groups ('"+group+"') was successful.") {
		return fmt.Errorf("--delete: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainGroups, "--list")
	if err != nil {
		return err
	}
	if slices.Contains(strings.Fields(out.Stdout), group) {
		return fmt.Errorf("deleted group %s is still listed", group)
	}
	out, err = e.Kafka(ctx, mainGroups, "--delete", "--group", group)
	if err == nil && !strings.Contains(out.Stdout+out.Stderr, "does not exist") {
		return fmt.Errorf("deleting a missing group: %s", out.Tail())
	}
	return nil
}

func cliConfigsTopic(ctx context.Context, e *Env) error {
	topic := e.Name("configs-topic")
	if err := createTopic(ctx, e, topic, 1, "retention.ms=86400000"); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--describe", "--all")
	if err != nil {
		return err
	}
	all := parseConfigs(out.Stdout)
	if len(all) < 20 {
		return fmt.Errorf("--describe --all returned %d configs, want every topic config: %s", len(all), out.Tail())
	}
	for _, k := range []string{"cleanup.policy", "segment.bytes", "max.message.bytes", "min.insync.replicas", "compression.type"} {
		if _, ok := all[k]; !ok {
			return fmt.Errorf("--describe --all lacks %s", k)
		}
	}
	if r := all["retention.ms"]; r.Value != "86400000" || !strings.Contains(r.Synonyms, "DYNAMIC_TOPIC_CONFIG:retention.ms=86400000") {
		return fmt.Errorf("retention.ms = %+v, want 86400000 from DYNAMIC_TOPIC_CONFIG", r)
	}
	if c := all["compression.type"]; c.Value != "producer" || !strings.Contains(c.Synonyms, "DEFAULT_CONFIG:compression.type=producer") {
		return fmt.Errorf("compression.type = %+v, want producer with a DEFAULT_CONFIG synonym", c)
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--alter",
		"--add-config", "retention.ms=999999,max.message.bytes=2000000", "--delete-config", "retention.ms")
	if err == nil {
		return fmt.Errorf("--alter adding and deleting the same key succeeded")
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config", "retention.ms=999999,max.message.bytes=2000000")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Completed updating config for topic "+topic+".") {
		return fmt.Errorf("--alter: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--describe")
	if err != nil {
		return err
	}
	dyn := parseConfigs(out.Stdout)
	if dyn["retention.ms"].Value != "999999" || dyn["max.message.bytes"].Value != "2000000" {
		return fmt.Errorf("after --alter the dynamic configs are %v", dyn)
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--delete-config", "retention.ms"); err != nil {
		return err
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--describe")
	if err != nil {
		return err
	}
	if _, still := parseConfigs(out.Stdout)["retention.ms"]; still {
		return fmt.Errorf("retention.ms still dynamic after --delete-config: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--alter", "--add-config", "retention.ms=not-a-number")
	if err == nil {
		return fmt.Errorf("--alter retention.ms=not-a-number succeeded")
	}
	return nil
}

func cliConfigsBroker(ctx context.Context, e *Env) error {
	out, err := e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--describe", "--all")
	if err != nil {
		return err
	}
	all := parseConfigs(out.Stdout)
	if len(all) < 100 {
		return fmt.Errorf("broker --describe --all returned %d configs, want every broker config: %s", len(all), out.Tail())
	}
	for k, want := range map[string]string{"num.partitions": "1", "log.segment.bytes": "1073741824", "message.max.bytes": "1048588", "auto.create.topics.enable": "true"} {
		if all[k].Value != want {
			return fmt.Errorf("broker config %s = %q, want the Kafka default %q", k, all[k].Value, want)
		}
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "message.max.bytes=1048600"); err != nil {
		return err
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--describe")
	if err != nil {
		return err
	}
	if m := parseConfigs(out.Stdout)["message.max.bytes"]; m.Value != "1048600" || !strings.Contains(m.Synonyms, "DYNAMIC_BROKER_CONFIG:message.max.bytes=1048600") {
		return fmt.Errorf("after --alter, message.max.bytes = %+v", m)
	}
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--delete-config", "message.max.bytes"); err != nil {
		return err
	}
	out, err = e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--describe")
	if err != nil {
		return err
	}
	if _, still := parseConfigs(out.Stdout)["message.max.bytes"]; still {
		return fmt.Errorf("message.max.bytes still dynamic after --delete-config: %s", out.Tail())
	}
	// A static-only config cannot be changed at run time.
	if _, err := e.Kafka(ctx, mainConfigs, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config", "log.dirs=/nonexistent"); err == nil {
		return fmt.Errorf("--alter of read-only log.dirs succeeded")
	}
	return nil
}

// cliConfigsBrokerLoggers changes broker 1's root logger level at run time
// with the stock tool (KIP-412): root is the one logger Gregor and Kafka
// share (Kafka's others are its classes, Gregor's its components). The
// level the broker started with is put back at the end.
func cliConfigsBrokerLoggers(ctx context.Context, e *Env) error {
	loggers := func(args ...string) (Output, error) {
		return e.Kafka(ctx, mainConfigs, append([]string{"--entity-type", "broker-loggers", "--entity-name", "1"}, args...)...)
	}
	describe := func() (map[string]configEntry, error) {
		out, err := loggers("--describe")
		if err != nil {
			return nil, err
		}
		if !strings.Contains(out.Stdout, "Dynamic configs for broker-logger 1 are:") {
			return nil, fmt.Errorf("--describe: %s", out.Tail())
		}
		return parseConfigs(out.Stdout), nil
	}
	all, err := describe()
	if err != nil {
		return err
	}
	root, ok := all["root"]
	if !ok || root.Value == "" {
		return fmt.Errorf("--describe lists no root logger: %v", all)
	}
	for name, c := range all {
		if c.Sensitive || c.Synonyms != "{}" {
			return fmt.Errorf("logger %s described as %+v, want sensitive=false synonyms={}", name, c)
		}
	}
	alter := func(args ...string) error {
		out, err := loggers(append([]string{"--alter"}, args...)...)
		if err != nil {
			return err
		}
		if !strings.Contains(out.Stdout, "Completed updating config for broker-logger 1.") {
			return fmt.Errorf("--alter %s: %s", strings.Join(args, " "), out.Tail())
		}
		return nil
	}
	restore := func() error { return alter("--add-config", "root="+root.Value) }
	if err := alter("--add-config", "root=WARN"); err != nil {
		return err
	}
	if all, err = describe(); err != nil {
		return err
	}
	if all["root"].Value != "WARN" {
		_ = restore()
		return fmt.Errorf("root is %q after --add-config root=WARN", all["root"].Value)
	}
	// Refused: a level Kafka does not know (its names are upper-case), and
	// root's removal.
	refusals := []struct {
		args []string
		want string
	}{
		{[]string{"--add-config", "root=debug"}, "Cannot set the log level of root to debug as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"},
		{[]string{"--delete-config", "root"}, "Removing the log level of the root logger is not allowed"},
	}
	for _, r := range refusals {
		out, err := loggers(append([]string{"--alter"}, r.args...)...)
		if err == nil || !strings.Contains(out.Stdout+out.Stderr, r.want) {
			_ = restore()
			return fmt.Errorf("--alter %s: want it refused with %q, got %v: %s", strings.Join(r.args, " "), r.want, err, out.Tail())
		}
	}
	if err := restore(); err != nil {
		return err
	}
	if all, err = describe(); err != nil {
		return err
	}
	if all["root"].Value != root.Value {
		return fmt.Errorf("root is %q after it was set back to %q", all["root"].Value, root.Value)
	}
	return nil
}

// cliConfigsGroup alters and describes a group's dynamic configs (KIP-848's
// GroupConfig) with the stock tool. The group has no members: the tool
// finds it through ListConfigResources.
func cliConfigsGroup(ctx context.Context, e *Env) error {
	group := e.Name("configs-group")
	groupArgs := func(args ...string) []string {
		return append([]string{"--entity-type", "groups", "--entity-name", group}, args...)
	}
	out, err := e.Kafka(ctx, mainConfigs, groupArgs("--alter", "--add-config", "consumer.heartbeat.interval.ms=6000")...)
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Completed updating config for group "+group+".") {
		return fmt.Errorf("--alter: %s", out.Tail())
	}
	// Describe reads the broker's metadata, which follows the commit.
	describeUntil := func(what, text string) (Output, error) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			out, err := e.Kafka(ctx, mainConfigs, groupArgs("--describe")...)
			if err != nil || strings.Contains(out.Stdout, text) {
				return out, err
			}
			if time.Now().After(deadline) {
				return out, fmt.Errorf("--describe %s: %s", what, strings.TrimSpace(out.Stdout))
			}
			time.Sleep(time.Second)
		}
	}
	if out, err = describeUntil("does not find the group", "Dynamic configs for group "+group+" are:"); err != nil {
		return err
	}
	dyn := parseConfigs(out.Stdout)
	hb := dyn["consumer.heartbeat.interval.ms"]
	if len(dyn) != 1 || hb.Value != "6000" || hb.Sensitive ||
		hb.Synonyms != "{DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=6000, DEFAULT_CONFIG:group.consumer.heartbeat.interval.ms=5000}" {
		return fmt.Errorf("--describe after --alter: %v", dyn)
	}
	out, err = e.Kafka(ctx, mainConfigs, groupArgs("--describe", "--all")...)
	if err != nil {
		return err
	}
	all := parseConfigs(out.Stdout)
	if len(all) != 17 {
		return fmt.Errorf("--describe --all lists %d group configs, want Kafka 4.3's 17: %s", len(all), strings.TrimSpace(out.Stdout))
	}
	want := map[string]configEntry{
		"consumer.heartbeat.interval.ms": hb,
		"consumer.session.timeout.ms":    {Value: "45000", Synonyms: "{DEFAULT_CONFIG:group.consumer.session.timeout.ms=45000}"},
		"share.isolation.level":          {Value: "read_uncommitted", Synonyms: "{DEFAULT_CONFIG:share.isolation.level=read_uncommitted}"},
		"streams.num.standby.replicas":   {Value: "0", Synonyms: "{DEFAULT_CONFIG:group.streams.num.standby.replicas=0}"},
	}
	for k, w := range want {
		if all[k] != w {
			return fmt.Errorf("--describe --all: %s = %+v, want %+v", k, all[k], w)
		}
	}
	for value, why := range map[string]string{
		"consumer.heartbeat.interval.ms=20000": "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
		"consumer.heartbeat.interval.ms=often": "Invalid value often for configuration consumer.heartbeat.interval.ms: Not a number of type INT",
		"no.such.key=1":                        "Unknown group config name: no.such.key",
	} {
		out, err = e.Kafka(ctx, mainConfigs, groupArgs("--alter", "--add-config", value)...)
		if err == nil {
			return fmt.Errorf("--alter --add-config %s succeeded", value)
		}
		if !strings.Contains(out.Stderr+out.Stdout, "InvalidConfigurationException: "+why) {
			return fmt.Errorf("--alter --add-config %s: want %q, got %s", value, why, out.Tail())
		}
	}
	if _, err := e.Kafka(ctx, mainConfigs, groupArgs("--alter", "--delete-config", "consumer.heartbeat.interval.ms")...); err != nil {
		return err
	}
	_, err = describeUntil("after --delete-config", "The group '"+group+"' doesn't exist and doesn't have dynamic config.")
	return err
}

// cliClientMetrics: a KIP-714 telemetry subscription through its tool
// (CLIENT_METRICS configs: IncrementalAlterConfigs, ListConfigResources,
// DescribeConfigs).
func cliClientMetrics(ctx context.Context, e *Env) error {
	name := e.Name("client-metrics")
	out, err := e.Kafka(ctx, mainClientMetrics, "--alter", "--name", name, "--metrics", "org.apache.kafka.producer.,org.apache.kafka.consumer.",
		"--interval", "1000", "--match", "client_software_name=apache-kafka-java,client_id=perf-.*")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Altered client metrics config for "+name+".") {
		return fmt.Errorf("--alter: %s", out.Tail())
	}
	want := "Client metrics configs for " + name + " are:\n  interval.ms=1000\n  match=client_software_name=apache-kafka-java,client_id=perf-.*\n" +
		"  metrics=org.apache.kafka.producer.,org.apache.kafka.consumer.\n"
	deadline := time.Now().Add(30 * time.Second)
	for {
		if out, err = e.Kafka(ctx, mainClientMetrics, "--describe", "--name", name); err != nil {
			return err
		}
		if out.Stdout == want {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("--describe: %q, want %q", out.Stdout, want)
		}
		time.Sleep(time.Second)
	}
	if out, err = e.Kafka(ctx, mainClientMetrics, "--list"); err != nil || !slices.Contains(strings.Split(out.Stdout, "\n"), name) {
		return fmt.Errorf("--list: %v %s", err, out.Tail())
	}
	for _, tc := range []struct{ args, why string }{
		{"--interval 5", "InvalidRequestException: Invalid value 5 for interval.ms, interval must be between 100 and 3600000 (1 hour)"},
		{"--match client_rack=a", "InvalidConfigurationException: Illegal client matching pattern: client_rack=a"},
	} {
		out, err = e.Kafka(ctx, mainClientMetrics, append([]string{"--alter", "--name", name}, strings.Fields(tc.args)...)...)
		if err == nil {
			return fmt.Errorf("--alter %s succeeded", tc.args)
		}
		if !strings.Contains(out.Stderr+out.Stdout, tc.why) {
			return fmt.Errorf("--alter %s: want %q, got %s", tc.args, tc.why, out.Tail())
		}
	}
	if out, err = e.Kafka(ctx, mainClientMetrics, "--delete", "--name", name); err != nil || !strings.Contains(out.Stdout, "Deleted client metrics config for "+name+".") {
		return fmt.Errorf("--delete: %v %s", err, out.Tail())
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		if out, err = e.Kafka(ctx, mainClientMetrics, "--list"); err != nil {
			return err
		}
		if !slices.Contains(strings.Split(out.Stdout, "\n"), name) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("--list after --delete: %s", out.Stdout)
		}
		time.Sleep(time.Second)
	}
}

var apiLineRe = regexp.MustCompile(`^\s*(\w+)\((\d+)\): (\d+) to (\d+) \[usable: (\d+)\]`)

func cliAPIVersions(ctx context.Context, e *Env) error {
	out, err := e.Kafka(ctx, mainAPIVersions)
	if err != nil {
		return err
	}
	for _, b := range e.Target.Topology().Brokers {
		if !strings.Contains(out.Stdout, fmt.Sprintf("%s (id: %d rack: null", b.Addr, b.ID)) {
			return fmt.Errorf("broker %s (id %d) not listed: %s", b.Addr, b.ID, truncate(out.Stdout, 300))
		}
	}
	usable := map[string]int{}
	for _, l := range strings.Split(out.Stdout, "\n") {
		if m := apiLineRe.FindStringSubmatch(l); m != nil {
			usable[m[1]] = atoiOr(m[5], -1)
		}
	}
	for _, api := range []string{"Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
		"JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "ApiVersions", "CreateTopics", "DeleteTopics", "InitProducerId"} {
		if _, ok := usable[api]; !ok {
			return fmt.Errorf("%s has no usable version: %s", api, truncate(out.Stdout, 300))
		}
	}
	if usable["ApiVersions"] < 3 {
		return fmt.Errorf("usable ApiVersions is v%d, want >= 3", usable["ApiVersions"])
	}
	return nil
}

func cliQuorum(ctx context.Context, e *Env) error {
	out, err := e.Kafka(ctx, mainQuorum, "describe", "--status")
	if err != nil {
		return err
	}
	status := map[string]string{}
	for _, l := range strings.Split(out.Stdout, "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			status[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	topo := e.Target.Topology()
	voters := map[string]bool{}
	for _, v := range topo.Voters {
		voters[strconv.Itoa(v)] = true
	}
	leader := status["LeaderId"]
	if status["ClusterId"] == "" || !voters[leader] {
		return fmt.Errorf("--status: ClusterId %q LeaderId %q, want a leader among voters %v: %s", status["ClusterId"], leader, topo.Voters, out.Tail())
	}
	if hw, err := strconv.ParseInt(status["HighWatermark"], 10, 64); err != nil || hw <= 0 {
		return fmt.Errorf("--status: HighWatermark %q", status["HighWatermark"])
	}
	for _, v := range topo.Voters {
		if !strings.Contains(status["CurrentVoters"], fmt.Sprintf(`"id": %d,`, v)) {
			return fmt.Errorf("--status: CurrentVoters %q does not include node %d", status["CurrentVoters"], v)
		}
	}
	out, err = e.Kafka(ctx, mainQuorum, "describe", "--replication")
	if err != nil {
		return err
	}
	// One row per voter (the leader with no lag, the others following) and
	// one per broker that is not a voter (an observer).
	want := map[string]string{}
	for _, b := range topo.Brokers {
		want[strconv.Itoa(b.ID)] = "Observer"
	}
	for v := range voters {
		want[v] = "Follower"
	}
	want[leader] = "Leader"
	rows := parseColumns(out.Stdout, "NodeId")
	got := map[string]string{}
	for _, r := range rows {
		got[r["NodeId"]] = r["Status"]
		if r["NodeId"] == leader && r["Lag"] != "0" {
			return fmt.Errorf("--replication: leader %s has lag %q, want 0", leader, r["Lag"])
		}
	}
	if len(rows) != len(want) || fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("--replication: %v, want node statuses %v with leader %s", rows, want, leader)
	}
	return nil
}

func cliFeatures(ctx context.Context, e *Env) error {
	out, err := e.Kafka(ctx, mainFeatures, "describe")
	if err != nil {
		return err
	}
	features := map[string]map[string]string{}
	for _, l := range strings.Split(out.Stdout, "\n") {
		f := spacedPairs(l)
		if f["Feature"] != "" {
			features[f["Feature"]] = f
		}
	}
	mv := features["metadata.version"]
	if mv == nil || !strings.Contains(mv["FinalizedVersionLevel"], "-IV") {
		return fmt.Errorf("metadata.version not described with a release level: %s", truncate(out.Stdout, 400))
	}
	if features["kraft.version"] == nil {
		return fmt.Errorf("kraft.version missing: %s", truncate(out.Stdout, 400))
	}
	return nil
}

func cliGetOffsets(ctx context.Context, e *Env) error {
	topic := e.Name("get-offsets")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if err := produceKeyed(ctx, e, topic, []string{"a:1", "b:2"}); err != nil {
		return err
	}
	// The JVM start-up of the next producer puts a clear gap between the
	// first two records' timestamps and the third's. The sleeps are the
	// subject: they put the timestamp between into that gap, with room
	// for the clocks' granularity, and no state says when that is.
	time.Sleep(1500 * time.Millisecond)
	between := time.Now().UnixMilli()
	time.Sleep(100 * time.Millisecond)
	if err := produceKeyed(ctx, e, topic, []string{"c:3"}); err != nil {
		return err
	}
	for _, c := range []struct {
		time string
		want int64
	}{{"-1", 3}, {"-2", 0}, {"-3", 2}, {strconv.FormatInt(between, 10), 2}, {"0", 0}} {
		out, err := e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--time", c.time)
		if err != nil {
			return err
		}
		offs, err := parseOffsets(out.Stdout)
		if err != nil {
			return err
		}
		if got, ok := offs[0]; !ok || got != c.want {
			return fmt.Errorf("--time %s: got %v, want %s:0:%d", c.time, offs, topic, c.want)
		}
	}
	// A timestamp after every record has no offset: the tool prints nothing.
	out, err := e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--time", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10))
	if err != nil {
		return err
	}
	if strings.TrimSpace(out.Stdout) != "" {
		return fmt.Errorf("--time in the future: got %q, want no offsets", out.Stdout)
	}
	return nil
}

func cliDeleteRecords(ctx context.Context, e *Env) error {
	topic := e.Name("delete-records")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if err := produceKeyed(ctx, e, topic, keyedLines("d", 10)); err != nil {
		return err
	}
	spec := fmt.Sprintf(`{"partitions":[{"topic":%q,"partition":0,"offset":4}],"version":1}`, topic)
	path := filepath.Join(e.Dir, "delete.json")
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainDeleteRecords, "--offset-json-file", path)
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "partition: "+topic+"-0\tlow_watermark: 4") {
		return fmt.Errorf("delete-records: want low_watermark 4: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--time", "-2")
	if err != nil {
		return err
	}
	if offs, _ := parseOffsets(out.Stdout); offs[0] != 4 {
		return fmt.Errorf("earliest offset after delete-records is %v, want 4", offs)
	}
	// Deleting beyond the high watermark is refused per partition.
	spec = fmt.Sprintf(`{"partitions":[{"topic":%q,"partition":0,"offset":100}],"version":1}`, topic)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		return err
	}
	out, _ = e.Kafka(ctx, mainDeleteRecords, "--offset-json-file", path)
	if !strings.Contains(out.Stdout+out.Stderr, "OffsetOutOfRange") {
		return fmt.Errorf("delete-records beyond the end: want OffsetOutOfRangeException: %s", out.Tail())
	}
	return nil
}

func cliTransactions(ctx context.Context, e *Env) error {
	topic := e.Name("txn")
	txnID := e.Name("txn-id")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainPerfProducer, "--topic", topic, "--num-records", "200", "--record-size", "100", "--throughput", "-1",
		"--transactional-id", txnID, "--transaction-duration-ms", "100")
	if err != nil {
		return fmt.Errorf("transactional producer-perf-test: %w", err)
	}
	if !strings.Contains(out.Stdout, "200 records sent") {
		return fmt.Errorf("transactional perf test did not send 200 records: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainTransactions, "list")
	if err != nil {
		return err
	}
	var found map[string]string
	for _, r := range parseTabColumns(out.Stdout, "TransactionalId") {
		if r["TransactionalId"] == txnID {
			found = r
		}
	}
	if found == nil || found["TransactionState"] != "CompleteCommit" {
		return fmt.Errorf("list: %s not CompleteCommit: %s", txnID, truncate(out.Stdout, 400))
	}
	out, err = e.Kafka(ctx, mainTransactions, "describe", "--transactional-id", txnID)
	if err != nil {
		return err
	}
	rows := parseTabColumns(out.Stdout, "CoordinatorId")
	if len(rows) != 1 || rows[0]["TransactionState"] != "CompleteCommit" || rows[0]["ProducerId"] != found["ProducerId"] {
		return fmt.Errorf("describe: %v (list said producer id %s)", rows, found["ProducerId"])
	}
	out, err = e.Kafka(ctx, mainTransactions, "describe-producers", "--topic", topic, "--partition", "0")
	if err != nil {
		return err
	}
	prods := parseTabColumns(out.Stdout, "ProducerId")
	if len(prods) != 1 || prods[0]["ProducerId"] != found["ProducerId"] || prods[0]["CurrentTransactionStartOffset"] != "None" {
		return fmt.Errorf("describe-producers: %v, want producer %s with no open transaction: %s", prods, found["ProducerId"], truncate(out.Stdout, 300))
	}
	if _, err := e.Kafka(ctx, mainTransactions, "describe", "--transactional-id", e.Name("no-such-txn")); err == nil {
		return fmt.Errorf("describe of an unknown transactional id succeeded")
	}
	return nil
}

// cliTransactionsAbort: a producer (sarama, from the Go clients program)
// dies with a transaction open on partition 0; describe-producers shows
// its open transaction, find-hanging runs clean (the coordinator knows
// the transaction), abort writes the marker through WriteTxnMarkers, after
// which describe-producers shows no open transaction, a second abort
// finds none, and a read_committed consumer reads nothing of it while a
// read_uncommitted one reads it all.
func cliTransactionsAbort(ctx context.Context, e *Env) error {
	topic := e.Name("txn-abort")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	const open = 20
	if _, err := runGoClient(ctx, e, "sarama-open-transaction", topic, e.Name("dead-producer"), open); err != nil {
		return fmt.Errorf("leaving a transaction open: %w", err)
	}
	openTxn := func() (map[string]string, error) {
		out, err := e.Kafka(ctx, mainTransactions, "describe-producers", "--topic", topic, "--partition", "0")
		if err != nil {
			return nil, err
		}
		prods := parseTabColumns(out.Stdout, "ProducerId")
		if len(prods) != 1 {
			return nil, fmt.Errorf("describe-producers: %d producers: %s", len(prods), truncate(out.Stdout, 300))
		}
		return prods[0], nil
	}
	p, err := openTxn()
	if err != nil {
		return err
	}
	if p["CurrentTransactionStartOffset"] != "0" {
		return fmt.Errorf("describe-producers before the abort: %v, want an open transaction from offset 0", p)
	}
	out, err := e.Kafka(ctx, mainTransactions, "find-hanging", "--topic", topic, "--max-transaction-timeout", "0")
	if err != nil {
		return fmt.Errorf("find-hanging: %w", err)
	}
	if rows := parseTabColumns(out.Stdout, "Topic"); len(rows) != 0 {
		return fmt.Errorf("find-hanging reports %v for a transaction its coordinator knows", rows)
	}
	if _, err := e.Kafka(ctx, mainTransactions, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"); err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	if p, err = openTxn(); err != nil {
		return err
	}
	if p["CurrentTransactionStartOffset"] != "None" {
		return fmt.Errorf("describe-producers after the abort: %v, want no open transaction", p)
	}
	if out, err := e.Kafka(ctx, mainTransactions, "abort", "--topic", topic, "--partition", "0", "--start-offset", "0"); err == nil {
		return fmt.Errorf("a second abort succeeded: %s", out.Tail())
	}
	count := func(isolation string) (int, error) {
		out, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--from-beginning", "--isolation-level", isolation, "--timeout-ms", "5000")
		if err != nil && !strings.Contains(out.Stderr, "Processed a total of") {
			return 0, fmt.Errorf("console consumer (%s): %w", isolation, err)
		}
		n := 0
		for _, l := range strings.Split(out.Stdout, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "open-") {
				n++
			}
		}
		return n, nil
	}
	if n, err := count("read_committed"); err != nil || n != 0 {
		return fmt.Errorf("read_committed after the abort: %d of the aborted records (%v)", n, err)
	}
	if n, err := count("read_uncommitted"); err != nil || n != open {
		return fmt.Errorf("read_uncommitted after the abort: %d records, want %d (%v)", n, open, err)
	}
	return nil
}

// logDirsBroker is one broker in kafka-log-dirs --describe's JSON.
type logDirsBroker struct {
	Broker  int `json:"broker"`
	LogDirs []struct {
		LogDir     string  `json:"logDir"`
		Error      *string `json:"error"`
		Partitions []struct {
			Partition string `json:"partition"`
			Size      int64  `json:"size"`
			OffsetLag int64  `json:"offsetLag"`
		} `json:"partitions"`
	} `json:"logDirs"`
}

func cliLogDirs(ctx context.Context, e *Env) error {
	topic := e.Name("log-dirs")
	if err := createTopic(ctx, e, topic, 2); err != nil {
		return err
	}
	if err := produceKeyed(ctx, e, topic, keyedLines("l", 10)); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainLogDirs, "--describe", "--topic-list", topic)
	if err != nil {
		return err
	}
	var doc struct {
		Brokers []logDirsBroker `json:"brokers"`
	}
	var js string
	for _, l := range strings.Split(out.Stdout, "\n") {
		if strings.HasPrefix(l, "{") {
			js = l
		}
	}
	if err := json.Unmarshal([]byte(js), &doc); err != nil {
		return fmt.Errorf("log-dirs JSON: %w: %s", err, out.Tail())
	}
	brokers := e.Target.Topology().Brokers
	if len(doc.Brokers) != len(brokers) {
		return fmt.Errorf("log-dirs: %d brokers, want %d: %s", len(doc.Brokers), len(brokers), truncate(js, 300))
	}
	var size int64
	parts := 0
	for _, b := range brokers {
		i := slices.IndexFunc(doc.Brokers, func(d logDirsBroker) bool { return d.Broker == b.ID })
		if i < 0 || len(doc.Brokers[i].LogDirs) == 0 {
			return fmt.Errorf("log-dirs: want broker %d with a log dir: %s", b.ID, truncate(js, 300))
		}
		got := doc.Brokers[i]
		for _, d := range got.LogDirs {
			if d.Error != nil {
				return fmt.Errorf("log dir %s has error %s", d.LogDir, *d.Error)
			}
			if b.LogDir != "" && d.LogDir != b.LogDir {
				return fmt.Errorf("broker %d: log dir %q, want %q", b.ID, d.LogDir, b.LogDir)
			}
			for _, p := range d.Partitions {
				if strings.HasPrefix(p.Partition, topic+"-") {
					parts++
					size += p.Size
				}
			}
		}
	}
	if parts != 2 || size == 0 {
		return fmt.Errorf("log-dirs: %d partitions of %s with %d bytes, want 2 with data: %s", parts, topic, size, truncate(js, 300))
	}
	return nil
}

func cliLeaderElection(ctx context.Context, e *Env) error {
	topic := e.Name("election")
	if err := createTopic(ctx, e, topic, 2); err != nil {
		return err
	}
	out, err := e.Kafka(ctx, mainLeaderElection, "--election-type", "preferred", "--all-topic-partitions")
	if err != nil {
		return err
	}
	if strings.Contains(out.Stdout+out.Stderr, "Error") || strings.Contains(out.Stdout+out.Stderr, "Exception") {
		return fmt.Errorf("preferred election reported an error: %s", out.Tail())
	}
	out, err = e.Kafka(ctx, mainLeaderElection, "--election-type", "preferred", "--topic", topic, "--partition", "0")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Valid replica already elected for partitions "+topic+"-0") {
		return fmt.Errorf("single-partition preferred election: want 'Valid replica already elected': %s", out.Tail())
	}
	return nil
}

// cliDumpLog points Kafka's own DumpLogSegments at the target's files: a
// topic rolled into several segments by segment.ms, written by idempotent
// console producers, so that there are inactive segments with trimmed
// indexes and producer snapshots as well as the active segment. Every
// segment's batches must decode with the records produced, every index
// must pass --index-sanity-check, the inactive segments' offset and time
// indexes must point at the right batches, and the newest producer
// snapshot must list the producers.
func cliDumpLog(ctx context.Context, e *Env) error {
	if !e.logDirsVisible() {
		return Skipf("the target's log.dirs is not visible to the harness")
	}
	topic := e.Name("dump-log")
	// Each console producer is a new JVM, well over segment.ms apart, so
	// every run after the first rolls a new segment. batch.size=1 makes
	// every record a batch of its own and index.interval.bytes=1 indexes
	// every batch after a segment's first, so the indexes have entries to
	// check.
	if err := createTopic(ctx, e, topic, 1, "segment.ms=100", "index.interval.bytes=1"); err != nil {
		return err
	}
	const runs = 3
	var lines []string
	for i := range runs {
		run := keyedLines(fmt.Sprintf("dump%d", i), 3)
		if err := produceKeyed(ctx, e, topic, run, "--producer-property", "batch.size=1"); err != nil {
			return err
		}
		lines = append(lines, run...)
	}
	logDir, err := e.partitionLogDir(ctx, topic, 0)
	if err != nil {
		return err
	}
	dir := filepath.Join(logDir, topic+"-0")
	files, err := segmentFiles(dir)
	if err != nil {
		return err
	}
	logs := files[".log"]
	if len(logs) < runs {
		return fmt.Errorf("%d segments after %d producer runs with segment.ms=100, want at least %d: %v", len(logs), runs, runs, logs)
	}

	out, err := e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--files", strings.Join(logs, ","), "--print-data-log", "--deep-iteration")
	if err != nil {
		return err
	}
	batches, err := parseDumpLog(out.Stdout)
	if err != nil {
		return err
	}
	var got []string
	next := int64(0)
	for _, b := range batches {
		if !b.Valid || b.Magic != "2" {
			return fmt.Errorf("batch at %d: isvalid %v magic %s", b.BaseOffset, b.Valid, b.Magic)
		}
		if b.BaseOffset != next || b.LastOffset-b.BaseOffset+1 != int64(b.Count) || len(b.Records) != b.Count {
			return fmt.Errorf("batch base %d last %d count %d with %d records, expected base %d", b.BaseOffset, b.LastOffset, b.Count, len(b.Records), next)
		}
		for _, r := range b.Records {
			got = append(got, r.Key+":"+r.Payload)
		}
		next = b.LastOffset + 1
	}
	if !slices.Equal(got, lines) {
		return fmt.Errorf("dumped records %v, want %v", got, lines)
	}
	if strings.Contains(out.Stderr, "Exception") {
		return fmt.Errorf("dump-log reported: %s", out.Tail())
	}

	// The active segment's indexes are preallocated, and the tool reads
	// their zero-filled tail as entries on any broker (Kafka's own active
	// time index fails --index-sanity-check the same way); the rolled
	// segments' indexes are trimmed and must match their logs exactly.
	var rolled, indexes []string
	for _, l := range logs[:len(logs)-1] {
		stem := strings.TrimSuffix(l, ".log")
		rolled = append(rolled, l, stem+".index", stem+".timeindex")
		indexes = append(indexes, stem+".index", stem+".timeindex")
	}
	out, err = e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--index-sanity-check", "--files", strings.Join(indexes, ","))
	if err != nil {
		return err
	}
	for _, f := range indexes {
		name := filepath.Base(f)
		// A segment that got one batch only has no index entries (its
		// first batch is never indexed), which the tool reports as empty.
		if !strings.Contains(out.Stdout, name+" passed sanity check.") && !strings.Contains(out.Stdout, name+" is empty.") {
			return fmt.Errorf("%s did not pass kafka-dump-log --index-sanity-check: %s", name, out.Tail())
		}
	}
	out, err = e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--files", strings.Join(rolled, ","))
	if err != nil {
		return err
	}
	for _, bad := range []string{"Mismatches in", "are not found in", "Exception"} {
		if strings.Contains(out.Stdout+out.Stderr, bad) {
			return fmt.Errorf("kafka-dump-log found index problems in the rolled segments (%q): %s", bad, out.Tail())
		}
	}
	if entries := strings.Count("\n"+out.Stdout, "\noffset: "); entries == 0 {
		return fmt.Errorf("the rolled segments' offset indexes have no entries with index.interval.bytes=1: %s", out.Tail())
	}

	snapshots := files[".snapshot"]
	if len(snapshots) == 0 {
		return fmt.Errorf("no producer snapshot after %d rolls of an idempotent producer's topic", len(logs)-1)
	}
	newest := snapshots[len(snapshots)-1]
	out, err = e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--files", newest)
	if err != nil {
		return err
	}
	producers := strings.Count(out.Stdout, "producerId: ")
	if producers < runs-1 || !strings.Contains(out.Stdout, "lastSequence: 2") {
		return fmt.Errorf("producer snapshot %s lists %d producers (want at least %d, each with lastSequence 2): %s", filepath.Base(newest), producers, runs-1, out.Tail())
	}
	return nil
}

// segmentFiles lists a partition dir's segment files by suffix, each list
// sorted by base offset (the zero-padded names sort that way).
func segmentFiles(dir string) (map[string][]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	out := map[string][]string{}
	for _, ent := range ents {
		ext := filepath.Ext(ent.Name())
		switch ext {
		case ".log", ".index", ".timeindex", ".snapshot":
			out[ext] = append(out[ext], filepath.Join(dir, ent.Name()))
		}
	}
	for _, names := range out {
		slices.Sort(names)
	}
	return out, nil
}
