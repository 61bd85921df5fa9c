package integration

// Kafka Streams against the target: WordCountDemo from
// kafka-streams-examples with processing.guarantee=exactly_once_v2. Input
// goes in before the app starts and while it runs; a read_committed console
// consumer must then read every word's counts as exactly 1..n, and the
// internal topics Streams creates must carry the configs it asked for. The
// kill -9 variant is a test over the binary, Gregor only
// (integration/streams).

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

func streamsScenarios() []Scenario {
	return []Scenario{{
		Name: "streams/wordcount-eos-v2",
		Doc: "Kafka Streams " + KafkaVersion + " WordCountDemo, exactly_once_v2, 2 threads, input before and while it runs: a read_committed consumer reads each word's counts as exactly 1..n; " +
			"its -repartition (cleanup.policy=delete, retention.ms=-1) and -changelog (cleanup.policy=compact) topics exist as Streams configured them, and the repartition topic is purged",
		Timeout: 8 * time.Minute,
		Run:     func(ctx context.Context, e *Env) error { return streamsWordCountEOS(ctx, e, "classic") },
	}, {
		Name: "streams/wordcount-eos-v2-streams-protocol",
		Doc: "the same WordCountDemo run with group.protocol=streams (KIP-1071): the coordinator takes the topology, creates the -repartition and -changelog topics with the configs Streams asked for, assigns the tasks to both threads; " +
			"every count exact, and the group is listed and described as a streams group",
		Timeout: 8 * time.Minute,
		Run:     func(ctx context.Context, e *Env) error { return streamsWordCountEOS(ctx, e, "streams") },
	}}
}

// streamsWordCountEOS runs WordCountDemo with the given group.protocol.
func streamsWordCountEOS(ctx context.Context, e *Env, protocol string) error {
	const lines = 2000
	input, want := WordCountLines(lines, 9)
	total := 0
	for _, n := range want {
		total += n
	}
	replicas := streamsReplicas(e)
	for _, topic := range []string{WordCountInputTopic, WordCountOutputTopic} {
		if err := recreateTopic(ctx, e, topic, 3, replicas); err != nil {
			return err
		}
	}
	if err := produceLines(ctx, e, WordCountInputTopic, input[:lines/2]); err != nil {
		return err
	}
	app := WordCountApp{Bootstrap: e.Bootstrap(), AppID: e.Name("wordcount"), Dir: filepath.Join(e.Dir, "wordcount"),
		Extra: []string{"group.protocol=" + protocol, fmt.Sprintf("replication.factor=%d", replicas)}}
	proc, err := e.Tools.StartWordCount(ctx, app)
	if err != nil {
		return err
	}
	defer proc.Stop(stopGrace)
	if err := produceLines(ctx, e, WordCountInputTopic, input[lines/2:]); err != nil {
		return err
	}
	got, err := readWordCounts(ctx, e, proc, total, 3*time.Minute)
	if err != nil {
		return err
	}
	if err := CheckWordCounts(got, want); err != nil {
		return err
	}
	internal, err := checkStreamsInternalTopics(ctx, e, app.AppID, 3, replicas)
	if err != nil {
		return err
	}
	if protocol == "streams" {
		described, _, err := checkStreamsGroupTool(ctx, e, e.Bootstrap(), app.AppID, 2, 1)
		if err != nil {
			return err
		}
		internal += "; " + described
	}
	if err := proc.Stop(30 * time.Second); err != nil {
		return fmt.Errorf("stopping WordCountDemo: %w", err)
	}
	if protocol == "streams" {
		cleaned, err := resetAndDeleteStreamsGroup(ctx, e, app.AppID)
		if err != nil {
			return err
		}
		internal += "; " + cleaned
	}
	e.Notef("%d lines, %d words: every count exact; %s", lines, total, internal)
	return nil
}

// resetAndDeleteStreamsGroup is what an operator does with a stopped
// application's group: once its members have left (Empty), reset the
// input offsets to the earliest with kafka-streams-groups --reset-offsets,
// then --delete the group with its internal topics.
func resetAndDeleteStreamsGroup(ctx context.Context, e *Env, group string) (string, error) {
	err := until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		out, err := e.Kafka(ctx, mainStreamsGroups, "--describe", "--group", group, "--state")
		if err != nil {
			return false, err
		}
		if !strings.Contains(out.Stdout, "Empty") {
			return false, fmt.Errorf("the stopped app's group is not Empty: %q", out.Stdout)
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	out, err := e.Kafka(ctx, mainStreamsGroups, "--reset-offsets", "--group", group, "--all-input-topics", "--to-earliest", "--execute")
	if err != nil {
		return "", err
	}
	// GROUP TOPIC PARTITION NEW-OFFSET, one row per input partition.
	reset := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.Stdout), "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] == "GROUP" {
			continue
		}
		if f[0] != group || f[1] != WordCountInputTopic || f[3] != "0" {
			return "", fmt.Errorf("kafka-streams-groups --reset-offsets row %q: want %s %s <partition> 0", l, group, WordCountInputTopic)
		}
		reset[f[2]] = true
	}
	// The group committed an offset for each input partition that held
	// records (the console producer's sticky partitioner may leave one
	// empty, and nothing is committed for that); those are what the tool
	// resets.
	ends, err := e.Kafka(ctx, mainGetOffsets, "--topic", WordCountInputTopic, "--time", "-1")
	if err != nil {
		return "", err
	}
	latest, err := parseOffsets(ends.Stdout)
	if err != nil {
		return "", err
	}
	want := map[string]bool{}
	for p, end := range latest {
		if end > 0 {
			want[strconv.Itoa(p)] = true
		}
	}
	if len(want) == 0 || !maps.Equal(reset, want) {
		return "", fmt.Errorf("kafka-streams-groups --reset-offsets reset input partitions %v, want those holding records %v: %q", slices.Sorted(maps.Keys(reset)), slices.Sorted(maps.Keys(want)), out.Stdout)
	}
	out, err = e.Kafka(ctx, mainStreamsGroups, "--delete", "--group", group, "--delete-all-internal-topics")
	if err != nil {
		return "", err
	}
	for _, want := range []string{
		fmt.Sprintf("Deletion of requested streams groups ('%s') was successful.", group),
		fmt.Sprintf("Deletion of associated internal topics of the streams groups ('%s') was successful.", group),
	} {
		if !strings.Contains(out.Stdout, want) {
			return "", fmt.Errorf("kafka-streams-groups --delete printed %q, want %q", out.Stdout, want)
		}
	}
	out, err = e.Kafka(ctx, mainStreamsGroups, "--list")
	if err != nil {
		return "", err
	}
	if slices.Contains(strings.Fields(out.Stdout), group) {
		return "", fmt.Errorf("kafka-streams-groups --list still lists the deleted group %s", group)
	}
	err = until(ctx, 30*time.Second, time.Second, func() (bool, error) {
		topics, err := listTopics(ctx, e)
		if err != nil {
			return false, err
		}
		for _, t := range topics {
			if strings.HasPrefix(t, group+"-") {
				return false, fmt.Errorf("internal topic %s left after kafka-streams-groups --delete --delete-all-internal-topics", t)
			}
		}
		return true, nil
	})
	if err != nil {
		return "", err
	}
	return "kafka-streams-groups: input offsets reset to 0, group and internal topics deleted", nil
}

// mainStreamsGroups is kafka-streams-groups.sh.
const mainStreamsGroups = "org.apache.kafka.tools.streams.StreamsGroupCommand"

// checkStreamsGroupTool checks what kafka-streams-groups.sh says of the
// running app's group: listed; Stable at one group and assignment epoch
// with members members of the streams protocol, at that epoch, in
// processes processes (each KafkaStreams instance is one process, each of
// its threads one member). It returns a summary and the members' rows.
func checkStreamsGroupTool(ctx context.Context, e *Env, bootstrap, group string, members, processes int) (string, []string, error) {
	out, err := e.KafkaOn(ctx, bootstrap, "", mainStreamsGroups, "--list")
	if err != nil {
		return "", nil, err
	}
	if !slices.Contains(strings.Fields(out.Stdout), group) {
		return "", nil, fmt.Errorf("kafka-streams-groups --list does not list %s: %s", group, out.Tail())
	}
	var state []string
	err = until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		out, err = e.KafkaOn(ctx, bootstrap, "", mainStreamsGroups, "--describe", "--group", group, "--state", "--verbose")
		if err != nil {
			return false, err
		}
		lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "GROUP") {
			return false, fmt.Errorf("kafka-streams-groups --describe --state printed %q", out.Stdout)
		}
		// GROUP COORDINATOR (ID) STATE GROUP-EPOCH TARGET-ASSIGNMENT-EPOCH #MEMBERS
		state = strings.Fields(lines[1])
		if len(state) != 7 {
			return false, fmt.Errorf("kafka-streams-groups --describe --state row %q", lines[1])
		}
		if state[3] != "Stable" || state[4] != state[5] || state[6] != strconv.Itoa(members) {
			return false, fmt.Errorf("group %s is %s at epoch %s, assignment epoch %s, with %s members; want Stable, equal epochs, %d members", group, state[3], state[4], state[5], state[6], members)
		}
		return true, nil
	})
	if err != nil {
		return "", nil, err
	}
	out, err = e.KafkaOn(ctx, bootstrap, "", mainStreamsGroups, "--describe", "--group", group, "--members", "--verbose")
	if err != nil {
		return "", nil, err
	}
	lines := strings.Split(strings.TrimSpace(out.Stdout), "\n")
	header := strings.Fields(lines[0])
	want := []string{"GROUP", "TARGET-ASSIGNMENT-EPOCH", "TOPOLOGY-EPOCH", "MEMBER", "MEMBER-PROTOCOL", "MEMBER-EPOCH", "PROCESS", "CLIENT-ID", "ASSIGNMENTS"}
	if !slices.Equal(header, want) || len(lines) != members+1 {
		return "", nil, fmt.Errorf("kafka-streams-groups --describe --members --verbose printed %q, want the columns %v and %d members", out.Stdout, want, members)
	}
	seen := map[string]bool{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 9 || f[4] != "streams" || f[1] != state[5] || f[5] != state[5] {
			return "", nil, fmt.Errorf("member row %q: want the streams protocol at the target assignment epoch %s", l, state[5])
		}
		seen[f[6]] = true
	}
	if len(seen) != processes {
		return "", nil, fmt.Errorf("the %d members name %d processes, want %d: %q", members, len(seen), processes, out.Stdout)
	}
	return fmt.Sprintf("kafka-streams-groups: Stable at epoch %s, %d streams members", state[4], members), lines[1:], nil
}

// streamsReplicas is the replication factor of the Streams scenarios'
// topics, their inputs and outputs and the app's internal topics
// (replication.factor): as many as the target has brokers, up to 3, so
// that on a cluster target the apps run as production apps do, on topics
// that survive a broker.
func streamsReplicas(e *Env) int {
	return max(1, min(3, len(e.Target.Topology().Brokers)))
}

// recreateTopic deletes topic if a former run left it and creates it
// afresh; the deletion may take a moment to finish, so the create is
// retried for a while.
func recreateTopic(ctx context.Context, e *Env, topic string, partitions, replicas int) error {
	if _, err := e.Kafka(ctx, mainTopics, "--delete", "--topic", topic, "--if-exists"); err != nil {
		return fmt.Errorf("removing a leftover %s: %w", topic, err)
	}
	return until(ctx, 30*time.Second, time.Second, func() (bool, error) {
		err := createTopicReplicas(ctx, e, topic, partitions, replicas)
		return err == nil, err
	})
}

// produceLines sends unkeyed lines with the console producer.
func produceLines(ctx context.Context, e *Env, topic string, lines []string) error {
	out, err := e.KafkaStdin(ctx, strings.Join(lines, "\n")+"\n", mainProducer, "--topic", topic)
	if err != nil {
		return fmt.Errorf("console producer: %w", err)
	}
	if strings.Contains(out.Stderr, "ERROR") {
		return fmt.Errorf("console producer reported errors: %s", out.Tail())
	}
	return nil
}

// readWordCounts reads the output topic from the start with a
// read_committed console consumer until it holds total records (the app
// commits every second, so that takes a few rounds), then once more with
// room for one record too many, so that a double count written after the
// first total records is seen too.
func readWordCounts(ctx context.Context, e *Env, app *Proc, total int, wait time.Duration) ([]WordCount, error) {
	deadline := time.Now().Add(wait)
	for {
		got, err := consumeWordCounts(ctx, e, total, 20*time.Second)
		if err != nil {
			return nil, err
		}
		if len(got) >= total {
			break
		}
		if exited, werr := app.Exited(); exited {
			return nil, fmt.Errorf("WordCountDemo exited (%v) with %d of %d updates committed: %s", werr, len(got), total, app.LogTail(8))
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after %s a read_committed consumer reads %d of %d word count updates; app log: %s", wait, len(got), total, app.LogTail(8))
		}
	}
	return consumeWordCounts(ctx, e, total+1, 10*time.Second)
}

// consumeWordCounts runs the console consumer over the whole output topic,
// read_committed, stopping at max records or after idle without one.
func consumeWordCounts(ctx context.Context, e *Env, max int, idle time.Duration) ([]WordCount, error) {
	out, err := e.Kafka(ctx, mainConsumer, "--topic", WordCountOutputTopic, "--from-beginning",
		"--isolation-level", "read_committed", "--max-messages", strconv.Itoa(max), "--timeout-ms", strconv.FormatInt(idle.Milliseconds(), 10),
		"--formatter-property", "print.key=true", "--formatter-property", "key.separator=:",
		"--formatter-property", "value.deserializer=org.apache.kafka.common.serialization.LongDeserializer")
	var exit *ExitError
	if err != nil && !(errors.As(err, &exit) && exit.Output.ExitCode > 0 && strings.Contains(out.Stderr, "Processed a total of")) {
		return nil, fmt.Errorf("console consumer: %w", err)
	}
	var got []WordCount
	for _, l := range strings.Split(out.Stdout, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		w, c, ok := strings.Cut(l, ":")
		n, perr := strconv.ParseInt(c, 10, 64)
		if !ok || perr != nil {
			return nil, fmt.Errorf("console consumer printed %q, want word:count", l)
		}
		got = append(got, WordCount{Word: w, Count: n})
	}
	return got, nil
}

// checkStreamsInternalTopics finds the app's one repartition and one
// changelog topic and checks what Streams asked for when it created them
// (RepartitionTopicConfig, UnwindowedUnversionedChangelogTopicConfig): the
// input's partition count, the replicas of its replication.factor, and
// the configs below; then that the repartition topic is purged (Streams
// deletes records up to what it committed). It returns a summary for the
// report.
func checkStreamsInternalTopics(ctx context.Context, e *Env, appID string, partitions, replicas int) (string, error) {
	topics, err := listTopics(ctx, e)
	if err != nil {
		return "", err
	}
	var repartition, changelog []string
	for _, t := range topics {
		if !strings.HasPrefix(t, appID+"-") {
			continue
		}
		switch {
		case strings.HasSuffix(t, "-repartition"):
			repartition = append(repartition, t)
		case strings.HasSuffix(t, "-changelog"):
			changelog = append(changelog, t)
		}
	}
	if len(repartition) != 1 || len(changelog) != 1 {
		return "", fmt.Errorf("want one %s-…-repartition and one …-changelog topic, found %v and %v", appID, repartition, changelog)
	}
	wantConfigs := map[string]map[string]string{
		repartition[0]: {"cleanup.policy": "delete", "retention.ms": "-1", "segment.bytes": "52428800", "message.timestamp.type": "CreateTime"},
		changelog[0]:   {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"},
	}
	for topic, want := range wantConfigs {
		d, err := describeTopic(ctx, e, topic)
		if err != nil {
			return "", err
		}
		if len(d.Partitions) != partitions {
			return "", fmt.Errorf("%s has %d partitions, want %d (the input's)", topic, len(d.Partitions), partitions)
		}
		if d.ReplicationFactor != replicas {
			return "", fmt.Errorf("%s has replication factor %d, want %d (the app's replication.factor)", topic, d.ReplicationFactor, replicas)
		}
		out, err := e.Kafka(ctx, mainConfigs, "--entity-type", "topics", "--entity-name", topic, "--describe")
		if err != nil {
			return "", err
		}
		got := parseConfigs(out.Stdout)
		for k, v := range want {
			if got[k].Value != v {
				return "", fmt.Errorf("%s: %s is %q, want %q as Streams created it: %s", topic, k, got[k].Value, v, out.Tail())
			}
		}
	}
	purged, err := waitPurged(ctx, e, repartition[0], 60*time.Second)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%s (delete, retention.ms=-1, purged to %v) and %s (compact)", repartition[0], purged, changelog[0]), nil
}

// waitPurged waits until some partition of topic has a log start offset
// above 0 and returns the earliest offsets.
func waitPurged(ctx context.Context, e *Env, topic string, wait time.Duration) (map[int]int64, error) {
	var offs map[int]int64
	err := until(ctx, wait, 2*time.Second, func() (bool, error) {
		out, err := e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--time", "-2")
		if err != nil {
			return false, err
		}
		if offs, err = parseOffsets(out.Stdout); err != nil {
			return false, err
		}
		for _, o := range offs {
			if o > 0 {
				return true, nil
			}
		}
		return false, fmt.Errorf("repartition topic %s not purged after %s (earliest offsets %v): Streams deletes records below what it committed", topic, wait, offs)
	})
	return offs, err
}
