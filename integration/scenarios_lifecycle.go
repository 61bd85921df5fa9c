package integration

// Scenarios of a log's lifecycle: retention deleting old
// segments, compaction keeping the latest value of each key, and
// LogCompactionTester run so that its result depends on the cleaner. The
// targets start with log.retention.check.interval.ms=1000 (it is read-only
// in Kafka; the default five minutes would make these scenarios wait that
// long); the cleaner's keys are set with kafka-configs as cluster defaults
// and removed again, which exercises their dynamic reconfiguration.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func lifecycleScenarios() []Scenario {
	return []Scenario{
		{Name: "cli/retention", Doc: "retention.bytes then retention.ms set with kafka-configs on a topic of 1 MiB segments: get-offsets --time -2 moves, log-dirs size drops, the segment files go", Timeout: 4 * time.Minute, Run: cliRetention},
		{Name: "cli/compaction", Doc: "compacted topic with many versions per key and tombstones (console producer): it shrinks, a consumer from the beginning reads the latest value of each live key and no deleted key, kafka-dump-log shows the cleaned segment", Timeout: 6 * time.Minute, Run: cliCompaction},
		{Name: "verify/log-compaction-cleaned", Doc: "LogCompactionTester with 1 MiB segments and a dedupe buffer smaller than its key set: verified, and at least half the rows gone (so the cleaner ran)", Timeout: 6 * time.Minute, Run: verifyCompactionCleaned},
	}
}

// earliestLatest runs kafka-get-offsets --time -2 and -1 for partition 0.
func earliestLatest(ctx context.Context, e *Env, topic string) (int64, int64, error) {
	var out [2]int64
	for i, t := range []string{"-2", "-1"} {
		res, err := e.Kafka(ctx, mainGetOffsets, "--topic", topic, "--time", t)
		if err != nil {
			return 0, 0, err
		}
		offs, err := parseOffsets(res.Stdout)
		if err != nil {
			return 0, 0, err
		}
		o, ok := offs[0]
		if !ok {
			return 0, 0, fmt.Errorf("get-offsets --time %s printed no offset for %s:0: %s", t, topic, res.Tail())
		}
		out[i] = o
	}
	return out[0], out[1], nil
}

// topicSize is the bytes kafka-log-dirs reports for topic's partitions.
func topicSize(ctx context.Context, e *Env, topic string) (int64, error) {
	out, err := e.Kafka(ctx, mainLogDirs, "--describe", "--topic-list", topic)
	if err != nil {
		return 0, err
	}
	var doc struct {
		Brokers []struct {
			LogDirs []struct {
				Partitions []struct {
					Partition string `json:"partition"`
					Size      int64  `json:"size"`
				} `json:"partitions"`
			} `json:"logDirs"`
		} `json:"brokers"`
	}
	for _, l := range strings.Split(out.Stdout, "\n") {
		if strings.HasPrefix(l, "{") {
			if err := json.Unmarshal([]byte(l), &doc); err != nil {
				return 0, fmt.Errorf("log-dirs JSON: %w", err)
			}
		}
	}
	var size int64
	for _, b := range doc.Brokers {
		for _, d := range b.LogDirs {
			for _, p := range d.Partitions {
				if strings.HasPrefix(p.Partition, topic+"-") {
					size += p.Size
				}
			}
		}
	}
	return size, nil
}

// alterConfig runs kafka-configs --alter on a topic or the cluster
// default broker entity (topic "").
func alterConfig(ctx context.Context, e *Env, topic, op, kv string) error {
	args := []string{"--alter", "--entity-type", "topics", "--entity-name", topic, op, kv}
	if topic == "" {
		args = []string{"--alter", "--entity-type", "brokers", "--entity-default", op, kv}
	}
	_, err := e.Kafka(ctx, mainConfigs, args...)
	return err
}

// until polls check every interval until it reports done or the timeout
// passes; the last error explains a timeout.
func until(ctx context.Context, timeout, interval time.Duration, check func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, err := check()
		if done && err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("not done after %s", timeout)
			}
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

func cliRetention(ctx context.Context, e *Env) error {
	topic := e.Name("retention")
	if err := createTopic(ctx, e, topic, 1, "segment.bytes=1048576", "file.delete.delay.ms=1000"); err != nil {
		return err
	}
	const records = 600
	out, err := e.Kafka(ctx, mainPerfProducer, "--topic", topic, "--num-records", strconv.Itoa(records), "--record-size", "10000",
		"--throughput", "-1", "--producer-props", "acks=all", "linger.ms=0")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, fmt.Sprintf("%d records sent", records)) {
		return fmt.Errorf("producer-perf-test: %s", out.Tail())
	}
	if first, last, err := earliestLatest(ctx, e, topic); err != nil || first != 0 || last != records {
		return fmt.Errorf("before retention: earliest %d latest %d (%v), want 0 and %d", first, last, err, records)
	}
	full, err := topicSize(ctx, e, topic)
	if err != nil {
		return err
	}
	if full < 5<<20 {
		return fmt.Errorf("log-dirs reports %d bytes after 6 MB were written", full)
	}

	// retention.bytes keeps the newest segments that hold at least 2 MiB.
	if err := alterConfig(ctx, e, topic, "--add-config", "retention.bytes=2097152"); err != nil {
		return err
	}
	var bySize int64
	err = until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		first, _, err := earliestLatest(ctx, e, topic)
		if err != nil || first == 0 {
			return false, err
		}
		size, err := topicSize(ctx, e, topic)
		if err != nil {
			return false, err
		}
		if size >= full || size < 2<<20 {
			return false, fmt.Errorf("earliest offset %d but log-dirs size %d (was %d; retention.bytes 2097152)", first, size, full)
		}
		bySize = first
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("retention.bytes=2097152: %w", err)
	}

	// retention.ms=1000 expires every record: the log start reaches the end.
	if err := alterConfig(ctx, e, topic, "--add-config", "retention.ms=1000"); err != nil {
		return err
	}
	err = until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		first, last, err := earliestLatest(ctx, e, topic)
		if err != nil {
			return false, err
		}
		if first != last || last != records {
			return false, fmt.Errorf("earliest %d latest %d, want both %d", first, last, records)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("retention.ms=1000 (after retention.bytes moved the start to %d): %w", bySize, err)
	}
	if size, err := topicSize(ctx, e, topic); err != nil || size != 0 {
		return fmt.Errorf("log-dirs size %d (%v) once every record expired, want 0", size, err)
	}
	// The files go: first renamed .deleted, removed after file.delete.delay.ms.
	if e.logDirsVisible() {
		logDir, err := e.partitionLogDir(ctx, topic, 0)
		if err != nil {
			return err
		}
		dir := filepath.Join(logDir, topic+"-0")
		err = until(ctx, 30*time.Second, 500*time.Millisecond, func() (bool, error) {
			ents, err := os.ReadDir(dir)
			if err != nil {
				return false, err
			}
			var logs []string
			for _, ent := range ents {
				if n := ent.Name(); strings.HasSuffix(n, ".log") || strings.HasSuffix(n, ".deleted") {
					logs = append(logs, n)
				}
			}
			want := fmt.Sprintf("%020d.log", records)
			if len(logs) != 1 || logs[0] != want {
				return false, fmt.Errorf("segment files %v, want only %s", logs, want)
			}
			return true, nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func cliCompaction(ctx context.Context, e *Env) error {
	topic := e.Name("compaction")
	if err := createTopic(ctx, e, topic, 1, "cleanup.policy=compact", "segment.bytes=1048576", "segment.ms=3000",
		"min.cleanable.dirty.ratio=0.01", "delete.retention.ms=3000"); err != nil {
		return err
	}
	if err := alterConfig(ctx, e, "", "--add-config", "log.cleaner.backoff.ms=500"); err != nil {
		return err
	}
	defer func() {
		_ = alterConfig(context.WithoutCancel(ctx), e, "", "--delete-config", "log.cleaner.backoff.ms")
	}()

	const keys, versions = 50, 60
	rng := rand.New(rand.NewPCG(1, 2))
	filler := func() string {
		b := make([]byte, 2000)
		for i := range b {
			b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)]
		}
		return string(b)
	}
	latest := map[string]string{} // "" for a deleted key
	var lines []string
	for v := range versions {
		for k := range keys {
			key := fmt.Sprintf("key%02d", k)
			value := fmt.Sprintf("v%02d-%s", v, filler())
			if v == versions-1 && k%5 == 0 {
				value = "NULL"
			}
			lines = append(lines, key+":"+value)
			latest[key] = strings.TrimPrefix(value, "NULL")
		}
	}
	if err := produceKeyed(ctx, e, topic, lines, "--reader-property", "null.marker=NULL"); err != nil {
		return err
	}
	// The cleaner may be at work already: compare with what was sent.
	written := int64(0)
	for _, l := range lines {
		written += int64(len(l))
	}
	fillers := 0
	var problem error
	err := until(ctx, 240*time.Second, time.Second, func() (bool, error) {
		// A record now and then keeps the log dirty, as a live topic
		// is: the cleaning that drops the tombstones comes after their
		// delete horizon, and Kafka cleans a log only when it is dirty.
		fillers++
		if err := produceKeyed(ctx, e, topic, []string{fmt.Sprintf("filler:%d", fillers)}); err != nil {
			return false, err
		}
		out, err := e.Kafka(ctx, mainConsumer, "--topic", topic, "--from-beginning", "--timeout-ms", "5000",
			"--formatter-property", "print.key=true", "--formatter-property", "key.separator=:")
		if err != nil && !strings.Contains(out.Stderr, "Processed a total of") {
			return false, err
		}
		seen := map[string][]string{}
		for _, l := range strings.Split(out.Stdout, "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), ":"); ok && k != "filler" {
				seen[k] = append(seen[k], v)
			}
		}
		for k, want := range latest {
			got := seen[k]
			switch {
			case want == "" && len(got) > 0:
				problem = fmt.Errorf("deleted key %s still read (%d records, last %.8s)", k, len(got), got[len(got)-1])
				return false, nil
			case want != "" && (len(got) != 1 || got[0] != want):
				problem = fmt.Errorf("key %s read %d times, want its latest value once", k, len(got))
				return false, nil
			}
		}
		if len(seen) != keys-keys/5 {
			problem = fmt.Errorf("%d keys read, want %d", len(seen), keys-keys/5)
			return false, nil
		}
		size, err := topicSize(ctx, e, topic)
		if err != nil {
			return false, err
		}
		if size > written/5 {
			problem = fmt.Errorf("%d bytes on disk of %d written", size, written)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for compaction: %w (last check: %v)", err, problem)
	}
	// The first segment, as kafka-dump-log reads it: cleaned batches keep
	// their offsets (gaps where records went), one record per key.
	if !e.logDirsVisible() {
		return nil
	}
	logDir, err := e.partitionLogDir(ctx, topic, 0)
	if err != nil {
		return err
	}
	first := filepath.Join(logDir, topic+"-0", fmt.Sprintf("%020d.log", 0))
	out, err := e.Java(ctx, 2*time.Minute, SetKafka, mainDumpLog, "--files", first, "--print-data-log", "--deep-iteration")
	if err != nil {
		return err
	}
	batches, err := parseDumpLog(out.Stdout)
	if err != nil {
		return err
	}
	dumped := map[string]int{}
	records, gaps := 0, 0
	prev := int64(-1)
	for _, b := range batches {
		if !b.Valid {
			return fmt.Errorf("cleaned batch at %d is not valid", b.BaseOffset)
		}
		for _, r := range b.Records {
			dumped[r.Key]++
			records++
			if r.Offset != prev+1 {
				gaps++
			}
			prev = r.Offset
		}
	}
	for k, n := range dumped {
		if n > 1 && k != "filler" {
			return fmt.Errorf("kafka-dump-log of %s shows key %s %d times after cleaning", filepath.Base(first), k, n)
		}
	}
	if records == 0 || gaps == 0 || records >= keys*versions/10 {
		return fmt.Errorf("kafka-dump-log of %s: %d records, %d offset gaps; a cleaned segment has few records and gaps", filepath.Base(first), records, gaps)
	}
	return nil
}

var compactionReduction = regexp.MustCompile(`(\d+) rows of data produced, (\d+) rows of data consumed \(([\d.]+)% reduction\)`)

func verifyCompactionCleaned(ctx context.Context, e *Env) error {
	// LogCompactionTester creates its topics with cleanup.policy=compact
	// only, so the cluster defaults make its segments small and its logs
	// due for cleaning at once; a dedupe buffer of 1.05 MB (Kafka wants
	// more than 1 MiB per thread) maps about 41000 keys (24-byte slots
	// at load factor 0.9), fewer than the 80000 of the run, so the
	// cleaner needs several rounds.
	settings := []string{"log.segment.bytes=1048576", "log.cleaner.min.cleanable.ratio=0.01", "log.cleaner.backoff.ms=500", "log.cleaner.dedupe.buffer.size=1100000"}
	for _, kv := range settings {
		if err := alterConfig(ctx, e, "", "--add-config", kv); err != nil {
			return err
		}
	}
	defer func() {
		for _, kv := range settings {
			k, _, _ := strings.Cut(kv, "=")
			_ = alterConfig(context.WithoutCancel(ctx), e, "", "--delete-config", k)
		}
	}()
	out, err := e.Java(ctx, 5*time.Minute, SetKafka, mainCompaction, "--bootstrap-server", e.Bootstrap(),
		"--messages", "400000", "--duplicates", "5", "--percent-deletes", "10", "--sleep", "30", "--topics", "1")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Data verification is completed") || !strings.Contains(out.Stdout, " 0 mismatches") {
		return fmt.Errorf("LogCompactionTester: %s", out.Tail())
	}
	m := compactionReduction.FindStringSubmatch(out.Stdout)
	if m == nil {
		return fmt.Errorf("LogCompactionTester printed no reduction: %s", out.Tail())
	}
	reduction, _ := strconv.ParseFloat(m[3], 64)
	e.Notef("%s rows produced, %s consumed (%.1f%% reduction)", m[1], m[2], reduction)
	if reduction < 50 {
		return fmt.Errorf("only %.1f%% of the rows were cleaned away (%s produced, %s consumed): the cleaner did not get through the log", reduction, m[1], m[2])
	}
	return nil
}
