package integration

// client/registry-compacted: a schema registry (registry.go) keeps its
// state in `_schemas` and must read back exactly that state when it
// restarts: after the cleaner compacted the topic, after the broker was
// killed, and after the registry stayed away long enough for a broker to
// roll and clean an idle segment (Kafka does neither: its last record,
// here a tombstone, stays in the active segment). It runs on a node of
// its own so that the cleaner backs off for only 200 ms between runs
// (log.cleaner.backoff.ms is 15 s by default) and the broker can be
// killed.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func registryScenarios() []Scenario {
	return []Scenario{{
		Name: "client/registry-compacted",
		Doc: "a schema registry in the manner of Karapace's and Confluent's (state in `_schemas`, 1 partition, compacted; idempotent acks=all writes it reads back; " +
			"tombstones for hard deletes; ready once it has read the record at end offset - 1) writes ~400 versions in 36 subjects with configs, soft and hard deletes; " +
			"it reads back exactly its state when restarted after the cleaner removed every superseded record and expired tombstone, after kill -9 of the broker, and after idling with a tombstone last",
		Timeout:  5 * time.Minute,
		OwnNodes: true,
		Run:      clientRegistryCompacted,
	}}
}

const (
	registryTopic    = "_schemas"
	registrySubjects = 36
	registryRounds   = 12
	registryFamilies = 12 // subjects i, i+12, i+24 register the same schemas, so share ids
	// A round of the workload starts registryRoundPace after the one
	// before, longer than segment.ms: the rounds land in segments of
	// their own, as the writes of a registry in use spread over time,
	// so that the cleaner has many segments to clean and merge.
	registrySegmentMs = "200"
	registryRoundPace = 300 * time.Millisecond
	// registryIdle is how long the registry stays away before restart 4.
	registryIdle = 6 * time.Second
)

var registryLevels = []string{"BACKWARD", "FORWARD", "FULL", "NONE"}

func registrySubject(i int) string { return fmt.Sprintf("gregor-compat-%02d-value", i) }

// registrySchema is an Avro record schema of family with fields fields.
func registrySchema(family, fields int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"record","name":"Event%02d","namespace":"io.gregor.compat","fields":[{"name":"id","type":"long"}`, family)
	for f := 1; f < fields; f++ {
		fmt.Fprintf(&b, `,{"name":"field_%02d","type":["null","string"],"default":null}`, f)
	}
	b.WriteString("]}")
	return b.String()
}

func clientRegistryCompacted(ctx context.Context, e *Env) error {
	n, err := e.StartNode(ctx, NodeSpec{Properties: map[string]string{"log.cleaner.backoff.ms": "200"}})
	if err != nil {
		return err
	}
	shared := e.Target
	e.Target = ownNodeTarget{n}
	defer func() { e.Target = shared }()

	var written []regRecord // every record every registry process wrote, in offset order
	expected := func() (regSnapshot, error) {
		st, err := replayState(written)
		return st.snapshot(), err
	}
	// same checks that a registry shows the state the records written so
	// far give.
	same := func(r *schemaRegistry, when string) error {
		want, err := expected()
		if err != nil {
			return err
		}
		got := r.Snapshot()
		if d := firstDifference(want.text(), got.text()); d != "" {
			return fmt.Errorf("%s: the registry's state differs from what its records say (%d versions, %d subjects expected; %d, %d shown): %s",
				when, want.Counts["versions"], want.Counts["subjects_with_deleted"], got.Counts["versions"], got.Counts["subjects_with_deleted"], d)
		}
		if ids := got.conflicts(); len(ids) > 0 {
			return fmt.Errorf("%s: ids %v stand for more than one schema", when, ids)
		}
		return nil
	}

	a, err := openSchemaRegistry(ctx, e.Bootstrap(), registryTopic)
	if err != nil {
		return err
	}
	if a.EndOffset != 0 || a.ReadAtStart != 0 {
		a.Close()
		return fmt.Errorf("a fresh %s has end offset %d and %d records", registryTopic, a.EndOffset, a.ReadAtStart)
	}
	// What an operator does so that the cleaner gets to a registry's
	// topic soon: roll segments by time (segment.bytes cannot go below
	// 1 MiB, more than this registry writes), clean at any dirty ratio,
	// and let tombstones expire one second after their cleaning.
	if err := alterConfig(ctx, e, registryTopic, "--add-config", "segment.ms="+registrySegmentMs+",min.cleanable.dirty.ratio=0.01,delete.retention.ms=1000"); err != nil {
		a.Close()
		return err
	}
	began := time.Now()
	werr := registryWorkload(ctx, a)
	e.Log.Debug("registry workload", "records", len(a.Written), "elapsed", time.Since(began).Round(time.Millisecond), "err", werr)
	written = append(written, a.Written...)
	if werr == nil {
		werr = same(a, "after the workload")
	}
	a.Close()
	if werr != nil {
		return werr
	}
	final, _ := expected()
	if err := checkRegistryWorkload(final); err != nil {
		return err
	}
	// The cleaner may have merged segments already: the count is for
	// whoever reads the log, not a check.
	partDir := filepath.Join(n.LogDir, registryTopic+"-0")
	segs, _ := SegmentFiles(partDir)
	segsWritten := len(segs)

	// Restart 1, while the cleaner may be busy with the topic.
	b, err := openSchemaRegistry(ctx, e.Bootstrap(), registryTopic)
	if err != nil {
		return fmt.Errorf("restart 1: %w", err)
	}
	if err := same(b, "restart 1"); err != nil {
		b.Close()
		return err
	}
	firstRead := b.ReadAtStart
	e.Log.Debug("registry restart 1", "read", firstRead, "ready_in", b.ReadyIn.Round(time.Millisecond))
	began = time.Now()

	// The cleaner must remove every superseded record and, once
	// delete.retention.ms has passed, every tombstone. A live registry's
	// topic is written to now and then (here: the global config, PUT
	// /config), which keeps it dirty and rolls its segments.
	var fatal, pending error
	var retained []regRecord
	var end int64
	churn := 0
	err = until(ctx, 150*time.Second, 500*time.Millisecond, func() (bool, error) {
		churn++
		if err := b.SetConfig(ctx, "", registryLevels[churn%len(registryLevels)]); err != nil {
			fatal = err
			return true, nil
		}
		all := append(slices.Clip(written), b.Written...)
		scan, eo, err := scanRegistryTopic(ctx, e.Bootstrap(), registryTopic)
		if err != nil {
			return false, err
		}
		fatal, pending = checkRegistryCompacted(scan, all, string(configKey("")))
		if fatal != nil {
			return true, nil
		}
		retained, end = scan, eo
		return pending == nil, pending
	})
	written = append(written, b.Written...)
	segs, _ = SegmentFiles(partDir)
	e.Log.Debug("registry compaction", "segments_before", segsWritten, "segments_after", len(segs), "writes_while_waiting", churn, "retained", len(retained), "end", end, "elapsed", time.Since(began).Round(time.Millisecond),
		"fatal", fatal, "pending", pending, "err", err)
	werr = same(b, "before restart 2")
	b.Close()
	switch {
	case fatal != nil:
		return fmt.Errorf("reading %s from the beginning while the cleaner works on it: %w", registryTopic, fatal)
	case err != nil:
		return fmt.Errorf("waiting for the cleaner to compact %s: %w", registryTopic, err)
	case werr != nil:
		return werr
	}

	// Restart 2, on the compacted topic.
	c, err := openSchemaRegistry(ctx, e.Bootstrap(), registryTopic)
	if err != nil {
		return fmt.Errorf("restart 2: %w", err)
	}
	err = same(c, "restart 2, after compaction")
	secondRead := c.ReadAtStart
	e.Log.Debug("registry restart 2", "read", secondRead, "ready_in", c.ReadyIn.Round(time.Millisecond))
	c.Close()
	if err != nil {
		return err
	}
	// Nothing was written after the last scan, and a cleaner only takes
	// records away. (Restart 1 may have read a log the cleaner was done
	// with already: it cleans while the workload writes.)
	if secondRead >= len(a.Written) || secondRead > len(retained) {
		return fmt.Errorf("restart 2 read %d records of the %d the workload wrote (a scan of the compacted topic: %d)", secondRead, len(a.Written), len(retained))
	}

	// Restart 3, after the broker was killed and started again: it
	// recovers the cleaned segments from disk.
	n.Kill()
	if err := n.Restart(ctx); err != nil {
		return fmt.Errorf("restarting the killed broker: %w", err)
	}
	var d *schemaRegistry
	err = until(ctx, 60*time.Second, time.Second, func() (bool, error) {
		var err error
		d, err = openSchemaRegistry(ctx, e.Bootstrap(), registryTopic)
		return err == nil, err
	})
	if err != nil {
		return fmt.Errorf("restart 3, after kill -9 of the broker: %w", err)
	}
	if err := same(d, "restart 3, after kill -9 of the broker"); err != nil {
		d.Close()
		return err
	}
	thirdRead := d.ReadAtStart
	e.Log.Debug("registry restart 3", "read", thirdRead, "ready_in", d.ReadyIn.Round(time.Millisecond))
	// It still works: a new schema gets an id no schema has. Then that
	// subject is hard-deleted, so that the registry's last records are
	// tombstones.
	after := "gregor-compat-after-restart-value"
	before := d.Snapshot()
	id, version, err := d.Register(ctx, after, registrySchema(99, 3))
	if err == nil {
		if _, taken := before.SchemasByID[id]; taken || version != 1 {
			err = fmt.Errorf("a new schema after restart 3 got id %d version %d; id taken before: %v", id, version, taken)
		}
	}
	// More versions, so that what the hard delete supersedes is more
	// than min.cleanable.dirty.ratio of the log: a broker that rolled
	// the idle active segment would have it cleaned.
	for fields := 4; fields < 14 && err == nil; fields++ {
		_, _, err = d.Register(ctx, after, registrySchema(99, fields))
	}
	if err == nil {
		err = d.SetConfig(ctx, after, "NONE")
	}
	if err == nil {
		err = errors.Join(d.DeleteSubject(ctx, after, false), d.DeleteSubject(ctx, after, true))
	}
	written = append(written, d.Written...)
	if err == nil {
		err = same(d, "after registering and hard-deleting a subject on restart 3")
	}
	d.Close()
	if err != nil {
		return err
	}
	tail := written[len(written)-1]

	// Restart 4, after the registry stayed away for a while: in Kafka the
	// last record (a tombstone here) stays in the active segment, which
	// the cleaner never touches, so a starting registry reads the record
	// at end offset - 1 and is ready. The wait is the subject: long
	// enough for an idle segment.ms roll, a cleaning, delete.retention.ms
	// and another cleaning, had the broker any of those to do.
	idle := time.NewTimer(registryIdle)
	select {
	case <-idle.C:
	case <-ctx.Done():
		idle.Stop()
		return ctx.Err()
	}
	f, err := openSchemaRegistry(ctx, e.Bootstrap(), registryTopic)
	if err != nil {
		segs, _ = SegmentFiles(partDir)
		return fmt.Errorf("restart 4, %s after the last write (a tombstone at offset %d): %w (segments by base offset and size: %v)", registryIdle, tail.Offset, err, segs)
	}
	err = same(f, "restart 4")
	fourthRead := f.ReadAtStart
	f.Close()
	if err != nil {
		return err
	}
	e.Notef("%d versions in %d subjects (%d ids, %d soft-deleted), %d records written; restarts read %d, then %d after compaction (end offset %d), %d after kill -9, %d after %s idle; same state each time",
		final.Counts["versions"], final.Counts["subjects_with_deleted"], final.Counts["ids"], final.Counts["soft_deleted_versions"],
		len(a.Written), firstRead, secondRead, end, thirdRead, fourthRead, registryIdle)
	e.Log.Debug("registry", "note", e.note)
	return nil
}

// registryWorkload registers a version in every subject in each of
// registryRounds rounds, and between rounds changes subjects' configs,
// soft-deletes versions, soft-deletes subjects, hard-deletes some of them
// and registers two of those again from version 1.
func registryWorkload(ctx context.Context, r *schemaRegistry) error {
	stopped := map[int]bool{}
	pace := time.NewTicker(registryRoundPace)
	defer pace.Stop()
	for round := range registryRounds {
		if round > 0 {
			select {
			case <-pace.C:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i := range registrySubjects {
			if stopped[i] {
				continue
			}
			if _, _, err := r.Register(ctx, registrySubject(i), registrySchema(i%registryFamilies, round+1)); err != nil {
				return fmt.Errorf("round %d, subject %d: %w", round, i, err)
			}
		}
		if round%3 == 1 {
			for i := round % 4; i < registrySubjects; i += 4 {
				if err := r.SetConfig(ctx, registrySubject(i), registryLevels[(round+i)%len(registryLevels)]); err != nil {
					return err
				}
			}
		}
		if round%4 == 3 {
			for i := 0; i < registrySubjects; i += 5 {
				st := r.Snapshot()
				if vs := st.Versions[registrySubject(i)]; len(vs) > 1 {
					if err := r.DeleteVersion(ctx, registrySubject(i), vs[len(vs)-2]); err != nil {
						return err
					}
				}
			}
		}
		switch round {
		case 5:
			if err := r.SetConfig(ctx, "", "FULL"); err != nil {
				return err
			}
		case 6:
			for i := range 6 {
				if err := r.DeleteSubject(ctx, registrySubject(i), false); err != nil {
					return err
				}
			}
			for i := range 4 {
				if err := r.DeleteSubject(ctx, registrySubject(i), true); err != nil {
					return err
				}
			}
			stopped[2], stopped[3], stopped[5] = true, true, true
		case 9:
			st := r.Snapshot()
			for i := 1; i < registrySubjects; i += 4 {
				if _, ok := st.Configs[registrySubject(i)]; ok {
					if err := r.DeleteConfig(ctx, registrySubject(i)); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// checkRegistryWorkload checks that the workload left what it meant to,
// so that the comparisons have soft and hard deletes to get wrong.
func checkRegistryWorkload(s regSnapshot) error {
	var problems []string
	for _, i := range []int{2, 3} {
		if slices.Contains(s.AllSubjects, registrySubject(i)) {
			problems = append(problems, registrySubject(i)+" was hard-deleted but is listed")
		}
	}
	if !slices.Contains(s.AllSubjects, registrySubject(5)) || slices.Contains(s.Subjects, registrySubject(5)) {
		problems = append(problems, registrySubject(5)+" is not listed only with ?deleted=true")
	}
	for _, i := range []int{0, 1} {
		want := []int{1, 2, 3, 4, 5}
		if i == 0 {
			want = []int{1, 2, 3, 5} // version 4 soft-deleted in round 11
		}
		if got := s.Versions[registrySubject(i)]; !slices.Equal(got, want) {
			problems = append(problems, fmt.Sprintf("%s, hard-deleted and registered again, has versions %v, want %v", registrySubject(i), got, want))
		}
	}
	if got := s.AllVersions[registrySubject(4)]; len(got) != registryRounds {
		problems = append(problems, fmt.Sprintf("%s, soft-deleted and registered again, has versions %v", registrySubject(4), got))
	}
	if s.Counts["versions"] < 350 || s.Counts["ids"] >= s.Counts["versions"]/2 || s.Counts["soft_deleted_versions"] < 25 || len(s.Configs) < 10 || s.GlobalConfig != "FULL" {
		problems = append(problems, fmt.Sprintf("counts %v, %d subject configs, global %s", s.Counts, len(s.Configs), s.GlobalConfig))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the workload did not leave what it should: %s", strings.Join(problems, "; "))
	}
	return nil
}

// scanRegistryTopic reads partition 0 of topic from its log start to the
// end offset it has when the scan starts.
func scanRegistryTopic(ctx context.Context, bootstrap, topic string) ([]regRecord, int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, 0, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, 0, err
	}
	eo, ok := ends.Lookup(topic, 0)
	if !ok || eo.Err != nil {
		return nil, 0, fmt.Errorf("no end offset for %s-0: %v", topic, eo.Err)
	}
	var out []regRecord
	last := int64(-1)
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	// The last record before the end offset is the latest value of its
	// key (the scenario's last write), which compaction keeps.
	for last < eo.Offset-1 {
		fetches := cl.PollFetches(sctx)
		if sctx.Err() != nil {
			return nil, 0, fmt.Errorf("scan of %s reached offset %d of end offset %d in 20s", topic, last, eo.Offset)
		}
		var ferr error
		fetches.EachError(func(_ string, _ int32, err error) { ferr = errors.Join(ferr, err) })
		if ferr != nil {
			return nil, 0, ferr
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			if rec.Offset < eo.Offset {
				out = append(out, regRecord{Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			}
			last = max(last, rec.Offset)
		})
	}
	return out, eo.Offset, nil
}

// checkRegistryCompacted compares a scan of the topic with the records
// written to it. fatal is a record that should not be there or a latest
// value that is missing; pending, what the cleaner has not removed yet: a
// superseded record or a tombstone (for every key but churnKey, which is
// written while the scan waits).
func checkRegistryCompacted(scan, written []regRecord, churnKey string) (fatal, pending error) {
	byOffset := map[int64]regRecord{}
	for _, w := range written {
		byOffset[w.Offset] = w
	}
	latest := latestByKey(written)
	seen := map[string]bool{}
	prev := int64(-1)
	superseded, tombstones := 0, 0
	for _, rec := range scan {
		w, ok := byOffset[rec.Offset]
		switch {
		case rec.Offset <= prev:
			return fmt.Errorf("offset %d read after offset %d", rec.Offset, prev), nil
		case !ok || !sameRecord(rec, w):
			return fmt.Errorf("offset %d holds key %s value %.60q, which was not written there", rec.Offset, rec.Key, rec.Value), nil
		}
		prev = rec.Offset
		k := string(rec.Key)
		if latest[k].Offset == rec.Offset {
			seen[k] = true
		}
		switch {
		case k == churnKey:
		case latest[k].Offset != rec.Offset:
			superseded++
		case rec.Value == nil:
			tombstones++
		}
	}
	for k, w := range latest {
		if w.Value != nil && !seen[k] {
			return fmt.Errorf("key %s: its latest value, at offset %d, is gone", k, w.Offset), nil
		}
	}
	if superseded > 0 || tombstones > 0 {
		return nil, fmt.Errorf("%d records of %d written, %d of them superseded and %d tombstones", len(scan), len(written), superseded, tombstones)
	}
	return nil, nil
}
