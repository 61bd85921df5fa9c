package integration

// Tiered storage (KIP-405) with a directory for the remote storage: the
// reference broker runs Kafka's own LocalTieredStorage (a
// RemoteStorageManager for tests, from kafka-storage's test jar), Gregor
// its directory backend, from the same server properties.
//
// The tiered nodes are the scenarios' own (the keys below would change
// every other scenario's broker), started with tieredNodeSpec.

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kgo"
)

func tieredScenarios() []Scenario {
	return []Scenario{
		onTieredNode(Scenario{Name: "cli/tiered-dir-consume", Doc: "on a node with tiered storage in a directory (Kafka's LocalTieredStorage): a topic with remote.storage.enable=true, local.retention.ms=10000 and 1 MiB segments; 3,000 records of 1,000 bytes, one a batch, end up all in the remote directory (retention rolls the active segment too): kafka-get-offsets --time earliest-local 3000, latest-tiered 2999 (nothing before any copy), earliest 0; the first segment file is gone from the local disk; the console consumer reads every record from the beginning, in order; --describe shows remote.storage.enable=true", Timeout: 6 * time.Minute, Run: cliTieredDirConsume}),
		onTieredNode(Scenario{Name: "cli/tiered-remote-log-metadata", Doc: "on a node with tiered storage in a directory: once 3,000 records of a tiered topic are all in the remote storage, kafka-dump-log --remote-log-metadata-decoder decodes __remote_log_metadata-0, each segment txnIdxEmpty=true (Kafka's TopicBasedRemoteLogMetadataManager records) without an error: for the topic's id and name, every segment has a RemoteLogSegmentMetadata with state COPY_SEGMENT_STARTED and later a RemoteLogSegmentMetadataUpdate with COPY_SEGMENT_FINISHED for the same segment id, and the copied segments' offsets run from 0 to 2999 without a gap or an overlap", Timeout: 6 * time.Minute, Run: cliTieredRemoteLogMetadata}),
		onTieredNode(Scenario{Name: "cli/tiered-dir-timestamps", Doc: "on a node with tiered storage in a directory: 3,000 records an hour old, 10 ms apart, all tiered and gone from the local disk; kafka-get-offsets with their timestamps finds their offsets in the remote segments (before the first, between two, a segment's first, the last; nothing after the last), and max-timestamp, which Kafka looks up locally, prints nothing", Timeout: 6 * time.Minute, Run: cliTieredDirTimestamps}),
		{Name: "cli/tiered-s3-consume", OwnNodes: true, Doc: "cli/tiered-dir-consume with the segments in an S3 bucket: SeaweedFS's S3 gateway on loopback, gregor.remote.storage=s3://<bucket>/<prefix> with the gateway as endpoint, path-style; the objects under the prefix hold the records (Gregor only: Kafka 4.3.1 ships no S3 RemoteStorageManager)", Timeout: 6 * time.Minute, Run: cliTieredS3Consume},
		{Name: "cli/tiered-config-errors", Doc: "kafka-topics --create --config remote.storage.enable=true refused where the broker has no tiered storage; on a tiered node of its own, local.retention.ms above retention.ms, local.retention.bytes above retention.bytes and cleanup.policy=compact refused on a tiered topic (not the retentions on a plain one), and kafka-configs turning remote.storage.enable off refused without remote.log.delete.on.disable=true and accepted with it; Kafka's messages", Timeout: 4 * time.Minute, Run: cliTieredConfigErrors},
	}
}

// tieredRemoteDir is where a scenario's tiered node keeps its remote
// storage (rsm.config.dir).
func tieredRemoteDir(e *Env) string { return filepath.Join(e.Dir, "remote-storage") }

// tieredNodeSpec is a single node with tiered storage in dir, with the
// same keys for both flavors: Kafka's, which Gregor reads too.
func tieredNodeSpec(ctx context.Context, e *Env, dir string) (NodeSpec, error) {
	jar, err := e.Tools.LocalTieredStorageJar(ctx)
	if err != nil {
		return NodeSpec{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return NodeSpec{}, err
	}
	props := map[string]string{
		// Tiered storage on: the remote log manager runs, and topics may
		// ask for remote.storage.enable=true.
		"remote.log.storage.system.enable": "true",
		// The remote storage: Kafka's directory-backed RSM for tests,
		// loaded from kafka-storage's test jar (Gregor ignores the class
		// path and maps the class to its own directory backend).
		"remote.log.storage.manager.class.name": "org.apache.kafka.server.log.remote.storage.LocalTieredStorage",
		"remote.log.storage.manager.class.path": jar,
		// LocalTieredStorage's STORAGE_DIR_CONFIG ("dir") under the
		// rsm.config. prefix: it keeps its files under
		// <dir>/kafka-tiered-storage/<topic>-<partition>-<topic id>/.
		"rsm.config.dir": dir,
		// The metadata manager (Kafka's default, topic-based one) reaches
		// the broker through this listener. Without it its admin client
		// has no bootstrap servers ("You must set either bootstrap.servers
		// or bootstrap.controllers") and Kafka stops itself ("Stopping the
		// server as it failed to initialize topic-based RLMM resources").
		"remote.log.metadata.manager.listener.name": "PLAINTEXT",
		// __remote_log_metadata has 3 replicas by default, which one node
		// cannot hold (InvalidReplicationFactorException): nothing is
		// tiered, and Kafka stops itself after 2 minutes. Its
		// min.insync.replicas (2 by default) needs no change: Kafka 4
		// counts it against the replicas there are.
		"rlmm.config.remote.log.metadata.topic.replication.factor": "1",
		// One partition for __remote_log_metadata instead of 50, which
		// take seconds to create on one node (speed only).
		"rlmm.config.remote.log.metadata.topic.num.partitions": "1",
		// Copy rolled segments every second, not every 30 s (speed only).
		// The local retention pass runs every second already: the
		// harness's nodes have log.retention.check.interval.ms=1000.
		"remote.log.manager.task.interval.ms": "1000",
	}
	return NodeSpec{Properties: props}, nil
}

// onTieredNode makes s run against a fresh single node with tiered
// storage in tieredRemoteDir, started for it alone, as onOwnNode does.
func onTieredNode(s Scenario) Scenario {
	run := s.Run
	s.OwnNodes = true
	s.Run = func(ctx context.Context, e *Env) error {
		spec, err := tieredNodeSpec(ctx, e, tieredRemoteDir(e))
		if err != nil {
			return err
		}
		n, err := e.StartNode(ctx, spec)
		if err != nil {
			return err
		}
		shared := e.Target
		e.Target = ownNodeTarget{n}
		defer func() { e.Target = shared }()
		return run(ctx, e)
	}
	return s
}

const (
	tieredRecords    = 3000
	tieredValueBytes = 1000
	// tieredStep is the time between two records' timestamps in
	// cli/tiered-dir-timestamps.
	tieredStep = 10 * time.Millisecond
	// tieredBatchBytes is the size of a batch of one such record: 61
	// bytes of batch header, 2 of record length, 7 of record fields.
	tieredBatchBytes = 1070
	// tieredSegmentBytes is Kafka 4's smallest segment.bytes.
	tieredSegmentBytes = 1048576
)

// tieredValue is the value of the i-th record: a 1,000-byte string that
// starts with its number.
func tieredValue(i int) string {
	head := fmt.Sprintf("tiered-%05d-", i)
	return head + strings.Repeat("x", tieredValueBytes-len(head))
}

// produceTiered sends n records of tieredValue, one batch each, without
// compression, so that the segments roll at the same offsets on any
// broker that rolls as Kafka does; ts, when not nil, is each record's
// timestamp.
func produceTiered(ctx context.Context, e *Env, topic string, n int, ts func(i int) time.Time) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return err
	}
	defer cl.Close()
	for i := range n {
		r := kgo.StringRecord(tieredValue(i))
		if ts != nil {
			r.Timestamp = ts(i)
		}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("producing record %d to %s: %w", i, topic, err)
		}
	}
	return nil
}

// getOffset runs kafka-get-offsets --time t for partition 0 of topic and
// returns the offset it prints, or ok false when it prints none.
func getOffset(ctx context.Context, e *Env, topic, t string) (off int64, ok bool, out Output, err error) {
	out, err = e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--partitions", "0", "--time", t)
	if err != nil {
		return 0, false, out, fmt.Errorf("kafka-get-offsets --time %s: %w", t, err)
	}
	offs, err := parseOffsets(out.Stdout)
	if err != nil {
		return 0, false, out, err
	}
	off, ok = offs[0]
	return off, ok, out, nil
}

// waitTiered waits until the whole of topic's partition 0, n records, is
// in the remote storage and gone from the local disk: once its records
// are older than local.retention.ms Kafka rolls the active segment too
// ("Rolling the active segment to make it eligible for deletion"),
// copies it and deletes it, so that the one segment left on disk is the
// new, empty one at n, earliest-local is n and latest-tiered n-1.
func waitTiered(ctx context.Context, e *Env, topic string, n int64) error {
	partDir := filepath.Join(e.Target.LogDir(), topic+"-0")
	var bases []int64
	err := until(ctx, 2*time.Minute, 2*time.Second, func() (bool, error) {
		var err error
		if bases, err = segmentBases(partDir); err != nil {
			return false, err
		}
		if !slices.Equal(bases, []int64{n}) {
			return false, nil
		}
		local, ok, _, err := getOffset(ctx, e, topic, "earliest-local")
		if err != nil || !ok {
			return false, err
		}
		tiered, ok, _, err := getOffset(ctx, e, topic, "latest-tiered")
		if err != nil || !ok {
			return false, err
		}
		return local == n && tiered == n-1, nil
	})
	if err != nil {
		// The offsets are asked for once the disk is as it should be:
		// ask now, for the message.
		answer := func(t string) string {
			off, ok, out, err := getOffset(ctx, e, topic, t)
			switch {
			case err != nil:
				return err.Error()
			case !ok:
				return fmt.Sprintf("nothing (%q)", strings.TrimSpace(out.Stdout+out.Stderr))
			}
			return strconv.FormatInt(off, 10)
		}
		return fmt.Errorf("waiting for every record to be tiered and deleted locally (segments on disk %v, earliest-local %s, latest-tiered %s; want [%d], %d, %d): %w",
			bases, answer("earliest-local"), answer("latest-tiered"), n, n, n-1, err)
	}
	return nil
}

// segmentBases lists the base offsets of the segment files (*.log) in a
// partition directory, in order.
func segmentBases(dir string) ([]int64, error) {
	segs, err := SegmentFiles(dir)
	var bases []int64
	for _, s := range segs {
		bases = append(bases, s.Base)
	}
	return bases, err
}

// remoteHolds checks that the remote storage directory holds at least
// minBytes of files (in any layout), one of which has want in it (a record's value:
// the segments are copied as they are).
func remoteHolds(dir string, minBytes int64, want ...string) error {
	var total int64
	found := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		total += info.Size()
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, w := range want {
			if bytes.Contains(b, []byte(w)) {
				found[w] = true
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("reading the remote storage %s: %w", dir, err)
	}
	if total < minBytes {
		return fmt.Errorf("the remote storage %s holds %d bytes, want at least %d", dir, total, minBytes)
	}
	for _, w := range want {
		if !found[w] {
			return fmt.Errorf("no file of the remote storage %s holds %q", dir, w)
		}
	}
	return nil
}

func cliTieredDirConsume(ctx context.Context, e *Env) error {
	return tieredConsume(ctx, e, func(minBytes int64, want ...string) error {
		return remoteHolds(tieredRemoteDir(e), minBytes, want...)
	})
}

// tieredConsume is cli/tiered-dir-consume on the target's node, whose
// remote storage holds checks with.
func tieredConsume(ctx context.Context, e *Env, holds func(minBytes int64, want ...string) error) error {
	topic := e.Name("tiered")
	if err := createTopic(ctx, e, topic, 1, "remote.storage.enable=true", "local.retention.ms=10000",
		"segment.bytes="+strconv.Itoa(tieredSegmentBytes)); err != nil {
		return err
	}
	// Before anything is tiered: the log starts at 0 on the local disk,
	// and nothing is tiered (the broker answers offset -1, which the tool
	// leaves out: it prints nothing).
	if off, ok, out, err := getOffset(ctx, e, topic, "earliest-local"); err != nil {
		return err
	} else if !ok || off != 0 {
		return fmt.Errorf("an empty topic: --time earliest-local printed %q, want %s:0:0", out.Stdout, topic)
	}
	if _, ok, out, err := getOffset(ctx, e, topic, "latest-tiered"); err != nil {
		return err
	} else if ok || strings.TrimSpace(out.Stdout+out.Stderr) != "" {
		return fmt.Errorf("an empty topic: --time latest-tiered printed %q, want nothing (offset -1)", out.Stdout+out.Stderr)
	}
	if err := produceTiered(ctx, e, topic, tieredRecords, nil); err != nil {
		return err
	}
	// The segments roll at 979, 1958 and 2937 (979 one-record batches of
	// 1,070 bytes fill 1 MiB), and at 3000 when retention rolls the
	// active one.
	if err := waitTiered(ctx, e, topic, tieredRecords); err != nil {
		return err
	}
	partDir := filepath.Join(e.Target.LogDir(), topic+"-0")
	if _, err := os.Stat(filepath.Join(partDir, "00000000000000000000.log")); !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the first segment is still in %s (%v)", partDir, err)
	}
	if err := holds(tieredRecords*tieredBatchBytes, tieredValue(0), tieredValue(tieredRecords-1)); err != nil {
		return err
	}
	for _, c := range []struct {
		time string
		want int64
	}{{"earliest", 0}, {"latest", tieredRecords}, {"-4", tieredRecords}, {"-5", tieredRecords - 1}} {
		off, ok, out, err := getOffset(ctx, e, topic, c.time)
		if err != nil {
			return err
		}
		if !ok || off != c.want {
			return fmt.Errorf("--time %s printed %q, want %s:0:%d", c.time, out.Stdout, topic, c.want)
		}
	}
	out, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--from-beginning", "--max-messages", strconv.Itoa(tieredRecords), "--timeout-ms", "60000")
	if err != nil {
		return fmt.Errorf("console consumer: %w", err)
	}
	lines := strings.Split(strings.TrimRight(out.Stdout, "\n"), "\n")
	if len(lines) != tieredRecords {
		return fmt.Errorf("the console consumer printed %d records, want %d: %s", len(lines), tieredRecords, out.Tail())
	}
	for i, l := range lines {
		if l != tieredValue(i) {
			return fmt.Errorf("record %d is %q, want %q", i, truncate(l, 40), truncate(tieredValue(i), 40))
		}
	}
	t, err := describeTopic(ctx, e, topic)
	if err != nil {
		return err
	}
	if t.Configs["remote.storage.enable"] != "true" {
		return fmt.Errorf("kafka-topics --describe: configs %v, want remote.storage.enable=true", t.Configs)
	}
	return nil
}

// cliTieredDirTimestamps looks up timestamps that only the remote
// segments hold: every record is an hour old when it is written, so that
// local retention takes each segment as soon as it is copied, and the
// records are tieredStep apart, so that each timestamp names one offset.
func cliTieredDirTimestamps(ctx context.Context, e *Env) error {
	topic := e.Name("tiered-ts")
	if err := createTopic(ctx, e, topic, 1, "remote.storage.enable=true", "local.retention.ms=10000",
		"segment.bytes="+strconv.Itoa(tieredSegmentBytes)); err != nil {
		return err
	}
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	ts := func(i int) time.Time { return base.Add(time.Duration(i) * tieredStep) }
	if err := produceTiered(ctx, e, topic, tieredRecords, ts); err != nil {
		return err
	}
	// The local log holds no record from here on.
	if err := waitTiered(ctx, e, topic, tieredRecords); err != nil {
		return err
	}
	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	for _, c := range []struct {
		time string
		want int64 // -1: the tool prints nothing
	}{
		{ms(base.Add(-time.Minute)), 0},                // before the first record
		{ms(ts(500).Add(-tieredStep / 2)), 500},        // between two records of the first segment
		{ms(ts(1958)), 1958},                           // the first record of the third segment
		{ms(ts(tieredRecords - 1)), tieredRecords - 1}, // the last record, in the last segment
		{ms(ts(tieredRecords)), -1},                    // after the last record
		// Kafka 4.3.1 looks max-timestamp up in the local log only,
		// which holds no record now: offset -1, nothing printed.
		{"max-timestamp", -1},
	} {
		off, ok, out, err := getOffset(ctx, e, topic, c.time)
		if err != nil {
			return err
		}
		if c.want < 0 && (ok || strings.TrimSpace(out.Stdout+out.Stderr) != "") {
			return fmt.Errorf("--time %s printed %q, want nothing", c.time, out.Stdout+out.Stderr)
		}
		if c.want >= 0 && (!ok || off != c.want) {
			return fmt.Errorf("--time %s printed %q, want %s:0:%d", c.time, out.Stdout+out.Stderr, topic, c.want)
		}
	}
	return nil
}

// cliTieredRemoteLogMetadata reads the target's __remote_log_metadata
// with Kafka's own decoder (DumpLogSegments --remote-log-metadata-decoder,
// which deserializes each value as TopicBasedRemoteLogMetadataManager
// does): every segment of a topic tiered whole must have been announced
// (COPY_SEGMENT_STARTED, txnIdxEmpty=true since the topic has no
// transactions) and then finished (COPY_SEGMENT_FINISHED), and the
// finished segments must hold the topic's offsets exactly once.
func cliTieredRemoteLogMetadata(ctx context.Context, e *Env) error {
	if !e.logDirsVisible() {
		return Skipf("the target's log.dirs is not visible to the harness")
	}
	topic := e.Name("tiered-rlmm")
	if err := createTopic(ctx, e, topic, 1, "remote.storage.enable=true", "local.retention.ms=10000",
		"segment.bytes="+strconv.Itoa(tieredSegmentBytes)); err != nil {
		return err
	}
	if err := produceTiered(ctx, e, topic, tieredRecords, nil); err != nil {
		return err
	}
	// Kafka moves latest-tiered only once a segment's
	// COPY_SEGMENT_FINISHED is in __remote_log_metadata.
	if err := waitTiered(ctx, e, topic, tieredRecords); err != nil {
		return err
	}
	t, err := describeTopic(ctx, e, topic)
	if err != nil {
		return err
	}
	// tieredNodeSpec gives __remote_log_metadata one partition.
	dir := filepath.Join(e.Target.LogDir(), "__remote_log_metadata-0")
	files, err := segmentFiles(dir)
	if err != nil {
		return err
	}
	logs := files[".log"]
	if len(logs) == 0 {
		return fmt.Errorf("no segment of __remote_log_metadata-0 in %s", dir)
	}
	out, err := e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--remote-log-metadata-decoder", "--files", strings.Join(logs, ","))
	if err != nil {
		return err
	}
	if strings.Contains(out.Stderr, "Exception") {
		return fmt.Errorf("kafka-dump-log --remote-log-metadata-decoder reported: %s", out.Tail())
	}
	recs, err := parseRemoteLogMetadata(out.Stdout)
	if err != nil {
		return fmt.Errorf("kafka-dump-log --remote-log-metadata-decoder: %w", err)
	}
	var started []remoteLogMetadata // in the order of the log
	finished := map[string]bool{}
	for _, r := range recs {
		if r.Topic != topic {
			continue
		}
		if r.TopicID != t.TopicID || r.Partition != 0 {
			return fmt.Errorf("__remote_log_metadata offset %d is for %s:%s-%d, want %s:%s-0: %s", r.Offset, r.TopicID, r.Topic, r.Partition, t.TopicID, topic, r.Payload)
		}
		isStarted := slices.ContainsFunc(started, func(s remoteLogMetadata) bool { return s.SegmentID == r.SegmentID })
		switch {
		case r.Kind == "RemoteLogSegmentMetadata" && r.State == "COPY_SEGMENT_STARTED" && !isStarted:
			// No transaction wrote to the topic: no segment has a
			// transaction index for a reader to fetch.
			if !strings.Contains(r.Payload, "txnIdxEmpty=true") {
				return fmt.Errorf("__remote_log_metadata offset %d: segment %s of a topic without transactions is not txnIdxEmpty=true: %s", r.Offset, r.SegmentID, r.Payload)
			}
			started = append(started, r)
		case r.Kind == "RemoteLogSegmentMetadataUpdate" && r.State == "COPY_SEGMENT_FINISHED" && isStarted && !finished[r.SegmentID]:
			finished[r.SegmentID] = true
		default:
			// Nothing is deleted, and a segment is copied once.
			return fmt.Errorf("__remote_log_metadata offset %d: a %s in state %s for segment %s (started before: %v, finished before: %v), want a RemoteLogSegmentMetadata in COPY_SEGMENT_STARTED for a new segment or a RemoteLogSegmentMetadataUpdate in COPY_SEGMENT_FINISHED for a started one: %s",
				r.Offset, r.Kind, r.State, r.SegmentID, isStarted, finished[r.SegmentID], r.Payload)
		}
	}
	if len(started) == 0 {
		return fmt.Errorf("kafka-dump-log --remote-log-metadata-decoder shows no segment of %s in %d records: %s", topic, len(recs), out.Tail())
	}
	slices.SortFunc(started, func(a, b remoteLogMetadata) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	var spans []string
	next := int64(0)
	for _, s := range started {
		if !finished[s.SegmentID] {
			return fmt.Errorf("segment %s (offsets %d-%d) of %s has COPY_SEGMENT_STARTED (at offset %d of __remote_log_metadata) and no COPY_SEGMENT_FINISHED", s.SegmentID, s.StartOffset, s.EndOffset, topic, s.Offset)
		}
		if s.StartOffset != next || s.EndOffset < s.StartOffset {
			return fmt.Errorf("the copied segments of %s hold offsets %s then %d-%d, want the next to start at %d", topic, strings.Join(spans, ", "), s.StartOffset, s.EndOffset, next)
		}
		spans = append(spans, fmt.Sprintf("%d-%d", s.StartOffset, s.EndOffset))
		next = s.EndOffset + 1
	}
	if next != tieredRecords {
		return fmt.Errorf("the copied segments of %s hold offsets %s, want up to %d", topic, strings.Join(spans, ", "), tieredRecords-1)
	}
	e.Notef("%d segments copied, offsets %s", len(started), strings.Join(spans, ", "))
	return nil
}

// remoteLogMetadata is one record of __remote_log_metadata as
// kafka-dump-log --remote-log-metadata-decoder prints it: the payload is
// the toString of Kafka's RemoteLogSegmentMetadata,
// RemoteLogSegmentMetadataUpdate or RemotePartitionDeleteMetadata.
type remoteLogMetadata struct {
	Offset                 int64  // in __remote_log_metadata
	Kind                   string // the class: RemoteLogSegmentMetadata, ...
	TopicID, Topic         string
	Partition              int
	SegmentID              string // not in a RemotePartitionDeleteMetadata
	StartOffset, EndOffset int64  // in a RemoteLogSegmentMetadata only
	State                  string
	Payload                string
}

var (
	// TopicIdPartition's toString: "<topic id>:<topic>-<partition>".
	rlmTopicIDPartition = regexp.MustCompile(`[tT]opic(?:Id)?Partition=([A-Za-z0-9_-]+):(.+?)-([0-9]+)[,}]`)
	rlmSegmentID        = regexp.MustCompile(`, id=([A-Za-z0-9_-]+)\}`)
	rlmStartOffset      = regexp.MustCompile(`[{ ]startOffset=([0-9]+),`)
	rlmEndOffset        = regexp.MustCompile(` endOffset=([0-9]+),`)
	rlmState            = regexp.MustCompile(` state=([A-Z_]+)[,}]`)
)

// parseRemoteLogMetadata parses DumpLogSegments --remote-log-metadata-decoder
// output: a "| offset: N ... payload: <record>" line per record. A payload
// the decoder could not read ("Error at offset N, skipping. ...") is an
// error.
func parseRemoteLogMetadata(out string) ([]remoteLogMetadata, error) {
	var recs []remoteLogMetadata
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "| offset: ") {
			continue
		}
		i := strings.Index(line, " payload: ")
		if i < 0 {
			return nil, fmt.Errorf("a record without a payload: %q", line)
		}
		off, err := strconv.ParseInt(spacedPairs(strings.TrimPrefix(line[:i], "| "))["offset"], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("offset in %q", line)
		}
		r := remoteLogMetadata{Offset: off, Payload: line[i+len(" payload: "):]}
		kind, _, ok := strings.Cut(r.Payload, "{")
		switch kind {
		case "RemoteLogSegmentMetadata", "RemoteLogSegmentMetadataUpdate", "RemotePartitionDeleteMetadata":
		default:
			ok = false
		}
		if !ok {
			return nil, fmt.Errorf("offset %d is no remote log metadata record: %q", off, r.Payload)
		}
		r.Kind = kind
		m := rlmTopicIDPartition.FindStringSubmatch(r.Payload)
		s := rlmState.FindStringSubmatch(r.Payload)
		if m == nil || s == nil {
			return nil, fmt.Errorf("offset %d: no topic partition or state in %q", off, r.Payload)
		}
		r.TopicID, r.Topic, r.State = m[1], m[2], s[1]
		r.Partition, _ = strconv.Atoi(m[3])
		if kind != "RemotePartitionDeleteMetadata" {
			id := rlmSegmentID.FindStringSubmatch(r.Payload)
			if id == nil {
				return nil, fmt.Errorf("offset %d: no segment id in %q", off, r.Payload)
			}
			r.SegmentID = id[1]
		}
		if kind == "RemoteLogSegmentMetadata" {
			so, eo := rlmStartOffset.FindStringSubmatch(r.Payload), rlmEndOffset.FindStringSubmatch(r.Payload)
			if so == nil || eo == nil {
				return nil, fmt.Errorf("offset %d: no startOffset or endOffset in %q", off, r.Payload)
			}
			r.StartOffset, _ = strconv.ParseInt(so[1], 10, 64)
			r.EndOffset, _ = strconv.ParseInt(eo[1], 10, 64)
		}
		recs = append(recs, r)
	}
	return recs, nil
}

// cliTieredConfigErrors checks Kafka 4's rules on the tiered storage
// topic configs, and their messages: on the shared target, which has no
// tiered storage, and on a tiered node of its own.
func cliTieredConfigErrors(ctx context.Context, e *Env) error {
	const off = "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
	if err := topicsRefused(ctx, e, e.Bootstrap(), off, e.Name("tiered-off"), "remote.storage.enable=true"); err != nil {
		return err
	}
	spec, err := tieredNodeSpec(ctx, e, tieredRemoteDir(e))
	if err != nil {
		return err
	}
	n, err := e.StartNode(ctx, spec)
	if err != nil {
		return err
	}
	addr := n.Bootstrap()
	for _, c := range []struct {
		msg     string
		configs []string
	}{
		{"Invalid value 120000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 60000",
			[]string{"remote.storage.enable=true", "retention.ms=60000", "local.retention.ms=120000"}},
		{"Invalid value 2097152 for configuration local.retention.bytes: Value must not be more than retention.bytes property value: 1048576",
			[]string{"remote.storage.enable=true", "retention.bytes=1048576", "local.retention.bytes=2097152"}},
		{"Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.",
			[]string{"remote.storage.enable=true", "cleanup.policy=compact"}},
	} {
		if err := topicsRefused(ctx, e, addr, c.msg, e.Name("tiered-bad"), c.configs...); err != nil {
			return err
		}
	}
	// The local retention is checked against the whole only on a tiered
	// topic.
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, createArgs(e.Name("tiered-plain"), "retention.ms=60000", "local.retention.ms=120000")...); err != nil {
		return fmt.Errorf("creating a topic without remote storage and local.retention.ms above retention.ms: %w", err)
	} else if !strings.Contains(out.Stdout, "Created topic ") {
		return fmt.Errorf("kafka-topics --create printed no confirmation: %s", out.Tail())
	}
	topic := e.Name("tiered-on")
	if out, err := e.KafkaOn(ctx, addr, "", mainTopics, createArgs(topic, "remote.storage.enable=true")...); err != nil {
		return fmt.Errorf("creating a tiered topic: %w", err)
	} else if !strings.Contains(out.Stdout, "Created topic "+topic+".") {
		return fmt.Errorf("kafka-topics --create printed no confirmation: %s", out.Tail())
	}
	// Turning remote storage off needs remote.log.delete.on.disable=true
	// (Kafka 4, KIP-950).
	alter := []string{"--alter", "--entity-type", "topics", "--entity-name", topic, "--add-config"}
	const keep = "It is invalid to disable remote storage without deleting remote data. " +
		"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
		"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`."
	out, err := e.KafkaOn(ctx, addr, "", mainConfigs, append(alter, "remote.storage.enable=false")...)
	if err == nil {
		return fmt.Errorf("kafka-configs --add-config remote.storage.enable=false succeeded on a tiered topic without remote.log.delete.on.disable=true")
	}
	if !strings.Contains(out.Stdout+out.Stderr, "InvalidConfigurationException: "+keep) {
		return fmt.Errorf("kafka-configs --add-config remote.storage.enable=false: want %q: %s", keep, out.Tail())
	}
	out, err = e.KafkaOn(ctx, addr, "", mainConfigs, append(alter, "remote.storage.enable=false,remote.log.delete.on.disable=true")...)
	if err != nil {
		return fmt.Errorf("kafka-configs --add-config remote.storage.enable=false,remote.log.delete.on.disable=true: %w", err)
	}
	if want := "Completed updating config for topic " + topic + "."; !strings.Contains(out.Stdout, want) {
		return fmt.Errorf("kafka-configs --alter printed %q, want %q", out.Stdout, want)
	}
	t, err := describeTopicOn(ctx, e, addr, topic)
	if err != nil {
		return err
	}
	if t.Configs["remote.storage.enable"] != "false" || t.Configs["remote.log.delete.on.disable"] != "true" {
		return fmt.Errorf("kafka-topics --describe after turning remote storage off: configs %v, want remote.storage.enable=false and remote.log.delete.on.disable=true", t.Configs)
	}
	return nil
}

// createArgs is kafka-topics --create of a topic of one partition with
// configs.
func createArgs(topic string, configs ...string) []string {
	args := []string{"--create", "--topic", topic, "--partitions", "1", "--replication-factor", "1"}
	for _, c := range configs {
		args = append(args, "--config", c)
	}
	return args
}

// topicsRefused runs kafka-topics --create against addr, which must
// fail with msg as the tool prints it ("Error while executing topic
// command : <msg>").
func topicsRefused(ctx context.Context, e *Env, addr, msg, topic string, configs ...string) error {
	out, err := e.KafkaOn(ctx, addr, "", mainTopics, createArgs(topic, configs...)...)
	if err == nil {
		return fmt.Errorf("kafka-topics --create --config %s succeeded, want it refused with %q", strings.Join(configs, " --config "), msg)
	}
	if !strings.Contains(out.Stdout, "Error while executing topic command : "+msg) ||
		!strings.Contains(out.Stderr, "InvalidConfigurationException: "+msg) {
		return fmt.Errorf("kafka-topics --create --config %s: want %q: %s", strings.Join(configs, " --config "), msg, out.Tail())
	}
	return nil
}

// describeTopicOn is describeTopic against addr.
func describeTopicOn(ctx context.Context, e *Env, addr, name string) (*topicDescription, error) {
	out, err := e.KafkaOn(ctx, addr, "", mainTopics, "--describe", "--topic", name)
	if err != nil {
		return nil, err
	}
	topics, err := parseTopicDescribe(out.Stdout)
	if err != nil {
		return nil, err
	}
	if t := topics[name]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("--describe did not list %s: %s", name, out.Tail())
}

// cliTieredS3Consume runs cli/tiered-dir-consume on a node of its own whose
// remote storage is a bucket of SeaweedFS's S3 gateway, started for it.
func cliTieredS3Consume(ctx context.Context, e *Env) error {
	if FlavorOf(e.Target.Name()) == "kafka" {
		return Skipf("Kafka %s ships no S3 RemoteStorageManager (only the test jar's LocalTieredStorage), and no S3 plugin is on Maven Central", KafkaVersion)
	}
	host, err := ClaimLoopback()
	if err != nil {
		return err
	}
	defer host.Release()
	w, err := StartWeed(ctx, e.Tools, host.IP, filepath.Join(e.Dir, "weed"))
	if err != nil {
		return err
	}
	defer w.Stop()
	const bucket, prefix = "gregor-tiered", "compat"
	s3, err := minio.New(strings.TrimPrefix(w.S3, "http://"), &minio.Options{BucketLookup: minio.BucketLookupPath,
		Creds: credentials.NewStaticV4(WeedAccessKey, WeedSecretKey, "")})
	if err != nil {
		return err
	}
	if err := s3.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		return fmt.Errorf("making bucket %s: %w", bucket, err)
	}
	n, err := e.StartNode(ctx, NodeSpec{Properties: map[string]string{
		"remote.log.storage.system.enable":    "true",
		"gregor.remote.storage":               "s3://" + bucket + "/" + prefix,
		"gregor.remote.storage.s3.endpoint":   w.S3,
		"gregor.remote.storage.s3.path.style": "true",
		"remote.log.manager.task.interval.ms": "1000",
		// __remote_log_metadata on one node, as tieredNodeSpec has it.
		"rlmm.config.remote.log.metadata.topic.replication.factor": "1",
		"rlmm.config.remote.log.metadata.topic.num.partitions":     "1",
	}, Env: []string{"AWS_ACCESS_KEY_ID=" + WeedAccessKey, "AWS_SECRET_ACCESS_KEY=" + WeedSecretKey}})
	if err != nil {
		return err
	}
	shared := e.Target
	e.Target = ownNodeTarget{n}
	defer func() { e.Target = shared }()
	return tieredConsume(ctx, e, func(minBytes int64, want ...string) error {
		var total int64
		found := map[string]bool{}
		for obj := range s3.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
			if obj.Err != nil {
				return fmt.Errorf("listing the bucket: %w", obj.Err)
			}
			total += obj.Size
			r, err := s3.GetObject(ctx, bucket, obj.Key, minio.GetObjectOptions{})
			if err != nil {
				return err
			}
			b, err := io.ReadAll(r)
			r.Close()
			if err != nil {
				return fmt.Errorf("reading %s: %w", obj.Key, err)
			}
			for _, v := range want {
				if bytes.Contains(b, []byte(v)) {
					found[v] = true
				}
			}
		}
		if total < minBytes {
			return fmt.Errorf("the bucket holds %d bytes under %s/, want at least %d", total, prefix, minBytes)
		}
		for _, v := range want {
			if !found[v] {
				return fmt.Errorf("no object under %s/ holds %q", prefix, truncate(v, 20))
			}
		}
		return nil
	})
}
