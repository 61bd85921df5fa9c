package integration

// A schema registry that keeps its whole state in a compacted topic of one
// partition, the way Confluent's Schema Registry and Karapace do, written
// for the client/registry-compacted scenario. Karapace itself is not on
// PyPI (only its container image and a source build that needs Go and
// Rust toolchains are published), so the harness cannot install it; this
// client reproduces what those registries ask of the broker:
//
//   - the topic is created with one partition and cleanup.policy=compact
//     only, and its partition count and policy are checked before use;
//   - every change is one keyed JSON record, written by an idempotent
//     producer with acks=all; the record keys are Karapace's canonical
//     ones (keytype SCHEMA, CONFIG, DELETE_SUBJECT), so that each logical
//     key is the same bytes every time and compaction keeps one of each;
//   - hard deletes are tombstones;
//   - nothing is changed in memory by a write: a reader with no group
//     consumes the partition from its log start, applies every record in
//     offset order, and a write returns once the reader has applied the
//     offset the produce request was given (Karapace's offset watcher);
//   - a starting registry is ready once the reader has applied a record at
//     or past the partition's end offset minus one, the end offset taken
//     from ListOffsets (Karapace's readiness rule).
//
// The state is a function of the latest value of each key taken in offset
// order, so a compacted log and the log it was compacted from must give
// the same state; registry_test.go checks that of the state machine, and
// the scenario checks it of the broker.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Key types of the records, as the registries name them.
const (
	regKeySchema        = "SCHEMA"
	regKeyConfig        = "CONFIG"
	regKeyDeleteSubject = "DELETE_SUBJECT"
)

// regKey is a record key. Field order is the canonical key format's, and
// Subject is a pointer because the global config's key has "subject":null.
type regKey struct {
	KeyType string  `json:"keytype"`
	Subject *string `json:"subject"`
	Version int     `json:"version,omitempty"`
	Magic   int     `json:"magic"`
}

func schemaKey(subject string, version int) []byte {
	return mustJSON(regKey{KeyType: regKeySchema, Subject: &subject, Version: version, Magic: 1})
}

// configKey is the key of subject's compatibility config, or of the global
// one when subject is "".
func configKey(subject string) []byte {
	k := regKey{KeyType: regKeyConfig}
	if subject != "" {
		k.Subject = &subject
	}
	return mustJSON(k)
}

func deleteSubjectKey(subject string) []byte {
	return mustJSON(regKey{KeyType: regKeyDeleteSubject, Subject: &subject})
}

type regSchemaValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	ID      int    `json:"id"`
	Schema  string `json:"schema"`
	Deleted bool   `json:"deleted"`
}

type regConfigValue struct {
	CompatibilityLevel string `json:"compatibilityLevel"`
}

type regDeleteSubjectValue struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// regVersion is one version of a subject.
type regVersion struct {
	ID      int    `json:"id"`
	Schema  string `json:"schema"`
	Deleted bool   `json:"deleted,omitempty"`
}

// regState is what the records say. The zero value is an empty registry.
type regState struct {
	Subjects map[string]map[int]regVersion
	Configs  map[string]string // subject's compatibility level; "" is the global one
}

// apply changes the state by one record (value nil for a tombstone).
func (s *regState) apply(key, value []byte) error {
	var k regKey
	if err := json.Unmarshal(key, &k); err != nil {
		return fmt.Errorf("record key %q: %w", key, err)
	}
	if s.Subjects == nil {
		s.Subjects, s.Configs = map[string]map[int]regVersion{}, map[string]string{}
	}
	subject := ""
	if k.Subject != nil {
		subject = *k.Subject
	}
	switch k.KeyType {
	case regKeySchema:
		if value == nil {
			versions := s.Subjects[subject]
			delete(versions, k.Version)
			if len(versions) == 0 {
				delete(s.Subjects, subject)
			}
			return nil
		}
		var v regSchemaValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("SCHEMA value %q: %w", value, err)
		}
		if v.Subject != subject || v.Version != k.Version {
			return fmt.Errorf("SCHEMA value for %s v%d under key %s", v.Subject, v.Version, key)
		}
		if s.Subjects[subject] == nil {
			s.Subjects[subject] = map[int]regVersion{}
		}
		s.Subjects[subject][k.Version] = regVersion{ID: v.ID, Schema: v.Schema, Deleted: v.Deleted}
	case regKeyConfig:
		if value == nil {
			delete(s.Configs, subject)
			return nil
		}
		var v regConfigValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("CONFIG value %q: %w", value, err)
		}
		s.Configs[subject] = v.CompatibilityLevel
	case regKeyDeleteSubject:
		// Its tombstone, written by a hard delete, changes nothing: the
		// versions it soft-deleted are gone by then.
		if value == nil {
			return nil
		}
		var v regDeleteSubjectValue
		if err := json.Unmarshal(value, &v); err != nil {
			return fmt.Errorf("DELETE_SUBJECT value %q: %w", value, err)
		}
		for n, ver := range s.Subjects[v.Subject] {
			if n <= v.Version {
				ver.Deleted = true
				s.Subjects[v.Subject][n] = ver
			}
		}
	default:
		return fmt.Errorf("record key %s: unknown keytype", key)
	}
	return nil
}

// clone is a deep copy.
func (s *regState) clone() regState {
	c := regState{Subjects: map[string]map[int]regVersion{}, Configs: maps.Clone(s.Configs)}
	if c.Configs == nil {
		c.Configs = map[string]string{}
	}
	for subj, vs := range s.Subjects {
		c.Subjects[subj] = maps.Clone(vs)
	}
	return c
}

// regSnapshot is everything the REST API of a registry shows: GET
// /subjects (with and without ?deleted=true), /subjects/S/versions and
// /subjects/S/versions/V, /schemas/ids/ID, /config and /config/S.
type regSnapshot struct {
	GlobalConfig string                `json:"global_config"`
	Subjects     []string              `json:"subjects"`
	AllSubjects  []string              `json:"subjects_with_deleted"`
	Versions     map[string][]int      `json:"versions"`
	AllVersions  map[string][]int      `json:"versions_with_deleted"`
	Schemas      map[string]regVersion `json:"schemas"` // by "subject/version"
	SchemasByID  map[int]string        `json:"schemas_by_id"`
	Configs      map[string]string     `json:"configs"`
	Counts       map[string]int        `json:"counts"`
	// byID is every schema text each id was seen with: two would mean
	// the registry gave one id to two schemas.
	byID map[int]map[string]bool
}

// snapshot is the state as the REST API shows it. An id is served while a
// version (soft-deleted or not) refers to it: what a registry serves for
// the id of a schema whose last version was hard-deleted is not the log's
// to say, since compaction takes those records away.
func (s *regState) snapshot() regSnapshot {
	snap := regSnapshot{
		GlobalConfig: s.Configs[""],
		Subjects:     []string{}, AllSubjects: []string{},
		Versions: map[string][]int{}, AllVersions: map[string][]int{},
		Schemas: map[string]regVersion{}, SchemasByID: map[int]string{},
		Configs: map[string]string{}, Counts: map[string]int{},
		byID: map[int]map[string]bool{},
	}
	if snap.GlobalConfig == "" {
		snap.GlobalConfig = "BACKWARD"
	}
	for subj, level := range s.Configs {
		if subj != "" {
			snap.Configs[subj] = level
		}
	}
	for subj, vs := range s.Subjects {
		var live, all []int
		for n, v := range vs {
			all = append(all, n)
			if !v.Deleted {
				live = append(live, n)
			}
			snap.Schemas[fmt.Sprintf("%s/%d", subj, n)] = v
			snap.SchemasByID[v.ID] = v.Schema
			if snap.byID[v.ID] == nil {
				snap.byID[v.ID] = map[string]bool{}
			}
			snap.byID[v.ID][v.Schema] = true
			snap.Counts["versions"]++
			if v.Deleted {
				snap.Counts["soft_deleted_versions"]++
			}
		}
		sort.Ints(live)
		sort.Ints(all)
		snap.AllSubjects = append(snap.AllSubjects, subj)
		snap.AllVersions[subj] = all
		if len(live) > 0 {
			snap.Subjects = append(snap.Subjects, subj)
			snap.Versions[subj] = live
		}
	}
	sort.Strings(snap.Subjects)
	sort.Strings(snap.AllSubjects)
	snap.Counts["subjects"] = len(snap.Subjects)
	snap.Counts["subjects_with_deleted"] = len(snap.AllSubjects)
	snap.Counts["ids"] = len(snap.SchemasByID)
	return snap
}

// conflicts names the ids that more than one schema text claims: a
// registry must never give one id to two schemas.
func (s regSnapshot) conflicts() []int {
	var ids []int
	for id, texts := range s.byID {
		if len(texts) > 1 {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// text is the snapshot as indented JSON (maps sorted by key), for
// comparing and for the first differing line in a failure.
func (s regSnapshot) text() string {
	b, err := json.MarshalIndent(s, "", " ")
	if err != nil {
		panic(err)
	}
	return string(b)
}

// firstDifference is "" when a and b are the same, else the first line
// where they differ, with its line number.
func firstDifference(a, b string) string {
	if a == b {
		return ""
	}
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: %q vs %q", i+1, strings.TrimSpace(x), strings.TrimSpace(y))
		}
	}
	return "differ in line endings"
}

// regRecord is a record the registry wrote, at the offset it was given.
type regRecord struct {
	Offset int64
	Key    []byte
	Value  []byte // nil for a tombstone
}

// schemaRegistry is one running registry process: a producer, a reader,
// and the state the reader built.
type schemaRegistry struct {
	topic  string
	writer *kgo.Client
	reader *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	state   regState
	applied int64         // offset of the last record applied
	changed chan struct{} // closed and replaced whenever applied moves
	readErr error         // why the reader stopped, if it did
	read    int           // records applied since start
	nextID  int           // one past the highest schema id this process has seen

	// Written is every record this process produced, in offset order.
	Written []regRecord
	// StartOffset and EndOffset are the partition's when it started;
	// ReadAtStart the records it read up to EndOffset.
	StartOffset, EndOffset int64
	ReadAtStart            int
	ReadyIn                time.Duration
}

// regWait bounds a registry's wait for its reader.
const regWait = 30 * time.Second

// openSchemaRegistry starts a registry on topic: it creates the topic if
// missing, checks it, and returns once the reader has caught up with the
// partition's end offset.
func openSchemaRegistry(ctx context.Context, bootstrap, topic string) (*schemaRegistry, error) {
	start := time.Now()
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...)
	admCl, err := kgo.NewClient(seeds)
	if err != nil {
		return nil, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	policy := "compact"
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &policy}, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return nil, fmt.Errorf("creating %s: %w", topic, err)
	}
	if err := checkRegistryTopic(ctx, adm, topic); err != nil {
		return nil, err
	}
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("log start offset of %s: %w", topic, err)
	}
	so, ok := starts.Lookup(topic, 0)
	if !ok || so.Err != nil {
		return nil, fmt.Errorf("log start offset of %s-0: %v", topic, so.Err)
	}
	r := &schemaRegistry{topic: topic, applied: so.Offset - 1, changed: make(chan struct{}), done: make(chan struct{}), nextID: 1, StartOffset: so.Offset}
	r.writer, err = kgo.NewClient(seeds, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, err
	}
	// Karapace's reader waits at most 50 ms for data, so that a write
	// comes back to its writer quickly.
	r.reader, err = kgo.NewClient(seeds, kgo.FetchMaxWait(50*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		r.writer.Close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	go r.readLoop(rctx)

	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		if eo, ok := ends.Lookup(topic, 0); !ok || eo.Err != nil {
			err = fmt.Errorf("no end offset for %s-0: %v", topic, eo.Err)
		} else {
			r.EndOffset = eo.Offset
		}
	}
	if err == nil {
		err = r.waitApplied(ctx, r.EndOffset-1)
	}
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("registry not ready (log start %d, end offset %d): %w", r.StartOffset, r.EndOffset, err)
	}
	r.mu.Lock()
	r.ReadAtStart = r.read
	r.mu.Unlock()
	r.ReadyIn = time.Since(start)
	return r, nil
}

// checkRegistryTopic refuses a topic a registry cannot keep its state in,
// as the registries do: more than one partition would lose the order of
// the writes, and a policy other than compact would lose old schemas.
func checkRegistryTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	details, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing %s: %w", topic, err)
	}
	d, ok := details[topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("describing %s: %v", topic, d.Err)
	}
	if len(d.Partitions) != 1 {
		return fmt.Errorf("%s has %d partitions, a registry needs exactly 1", topic, len(d.Partitions))
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return fmt.Errorf("describing the configs of %s: %w", topic, err)
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return fmt.Errorf("configs of %s: %v %v", topic, err, rc.Err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.MaybeValue() != "compact" {
			return fmt.Errorf("%s has cleanup.policy=%s, a registry needs compact", topic, c.MaybeValue())
		}
	}
	return nil
}

// readLoop applies every record of the partition in offset order until
// the registry closes or a fetch fails for good.
func (r *schemaRegistry) readLoop(ctx context.Context) {
	defer close(r.done)
	for {
		fetches := r.reader.PollFetches(ctx)
		if ctx.Err() != nil || fetches.IsClientClosed() {
			return
		}
		var failed error
		fetches.EachError(func(t string, p int32, err error) {
			failed = errors.Join(failed, fmt.Errorf("fetching %s-%d: %w", t, p, err))
		})
		r.mu.Lock()
		fetches.EachRecord(func(rec *kgo.Record) {
			if failed != nil {
				return
			}
			if rec.Offset <= r.applied {
				failed = fmt.Errorf("record at offset %d after offset %d was applied", rec.Offset, r.applied)
				return
			}
			if err := r.state.apply(rec.Key, rec.Value); err != nil {
				failed = fmt.Errorf("offset %d: %w", rec.Offset, err)
				return
			}
			if rec.Value != nil {
				var v regSchemaValue
				if json.Unmarshal(rec.Value, &v) == nil && v.ID >= r.nextID {
					r.nextID = v.ID + 1
				}
			}
			r.applied = rec.Offset
			r.read++
		})
		r.readErr = failed
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		if failed != nil {
			return
		}
	}
}

// waitApplied returns once the reader has applied offset, or a record
// past it.
func (r *schemaRegistry) waitApplied(ctx context.Context, offset int64) error {
	deadline := time.NewTimer(regWait)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		applied, err, changed := r.applied, r.readErr, r.changed
		r.mu.Unlock()
		if applied >= offset {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reader stopped at offset %d before %d: %w", applied, offset, err)
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("reader still at offset %d after %s, waiting for %d", applied, regWait, offset)
		}
	}
}

// write produces one record and waits until the reader has applied it.
func (r *schemaRegistry) write(ctx context.Context, key, value []byte) error {
	rec := &kgo.Record{Key: key, Value: value, Partition: 0}
	if err := r.writer.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return fmt.Errorf("producing %s: %w", key, err)
	}
	r.Written = append(r.Written, regRecord{Offset: rec.Offset, Key: key, Value: value})
	return r.waitApplied(ctx, rec.Offset)
}

// Close stops the reader and both clients.
func (r *schemaRegistry) Close() {
	r.cancel()
	r.reader.Close()
	<-r.done
	r.writer.Close()
}

// Snapshot is the state as the REST API would show it now.
func (r *schemaRegistry) Snapshot() regSnapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.snapshot()
}

func (r *schemaRegistry) stateCopy() regState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.state.clone()
}

// Register is POST /subjects/S/versions: the existing id and version when
// a live version of subject has this schema; else a new version, with the
// id the schema already has anywhere in the registry or a new one.
func (r *schemaRegistry) Register(ctx context.Context, subject, schema string) (id, version int, err error) {
	st := r.stateCopy()
	r.mu.Lock()
	id = r.nextID
	r.mu.Unlock()
	latest := 0
	for n, v := range st.Subjects[subject] {
		if !v.Deleted && v.Schema == schema {
			return v.ID, n, nil
		}
		latest = max(latest, n)
	}
	for _, vs := range st.Subjects {
		for _, v := range vs {
			if v.Schema == schema {
				id = v.ID // the same everywhere: ids are only reused this way
			}
		}
	}
	version = latest + 1
	value := mustJSON(regSchemaValue{Subject: subject, Version: version, ID: id, Schema: schema})
	return id, version, r.write(ctx, schemaKey(subject, version), value)
}

// DeleteVersion is DELETE /subjects/S/versions/V: the version stays,
// marked deleted.
func (r *schemaRegistry) DeleteVersion(ctx context.Context, subject string, version int) error {
	st := r.stateCopy()
	v, ok := st.Subjects[subject][version]
	if !ok || v.Deleted {
		return fmt.Errorf("subject %s has no live version %d", subject, version)
	}
	return r.write(ctx, schemaKey(subject, version),
		mustJSON(regSchemaValue{Subject: subject, Version: version, ID: v.ID, Schema: v.Schema, Deleted: true}))
}

// DeleteSubject is DELETE /subjects/S (one DELETE_SUBJECT record marking
// every version up to the latest deleted) or, with permanent, DELETE
// /subjects/S?permanent=true: a tombstone for every version and for the
// subject's config and DELETE_SUBJECT keys, allowed only once every
// version is soft-deleted.
func (r *schemaRegistry) DeleteSubject(ctx context.Context, subject string, permanent bool) error {
	st := r.stateCopy()
	versions := st.Subjects[subject]
	if len(versions) == 0 {
		return fmt.Errorf("subject %s not found", subject)
	}
	if !permanent {
		return r.write(ctx, deleteSubjectKey(subject),
			mustJSON(regDeleteSubjectValue{Subject: subject, Version: slices.Max(slices.Collect(maps.Keys(versions)))}))
	}
	for _, n := range slices.Sorted(maps.Keys(versions)) {
		if !versions[n].Deleted {
			return fmt.Errorf("subject %s version %d is not soft-deleted", subject, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(versions)) {
		if err := r.write(ctx, schemaKey(subject, n), nil); err != nil {
			return err
		}
	}
	if err := r.write(ctx, deleteSubjectKey(subject), nil); err != nil {
		return err
	}
	return r.write(ctx, configKey(subject), nil)
}

// SetConfig is PUT /config/S, or PUT /config when subject is "".
func (r *schemaRegistry) SetConfig(ctx context.Context, subject, level string) error {
	return r.write(ctx, configKey(subject), mustJSON(regConfigValue{CompatibilityLevel: level}))
}

// DeleteConfig is DELETE /config/S.
func (r *schemaRegistry) DeleteConfig(ctx context.Context, subject string) error {
	return r.write(ctx, configKey(subject), nil)
}

// replayState is the state a log of records gives, applied in order.
func replayState(records []regRecord) (regState, error) {
	var st regState
	for _, rec := range records {
		if err := st.apply(rec.Key, rec.Value); err != nil {
			return st, fmt.Errorf("offset %d: %w", rec.Offset, err)
		}
	}
	return st, nil
}

// latestByKey is the last record of each key in records, by key.
func latestByKey(records []regRecord) map[string]regRecord {
	out := map[string]regRecord{}
	for _, rec := range records {
		out[string(rec.Key)] = rec
	}
	return out
}

// compactedLog is what a fully compacted log of records holds once its
// tombstones have expired: the last record of each key with a value, in
// offset order.
func compactedLog(records []regRecord) []regRecord {
	var out []regRecord
	for _, rec := range latestByKey(records) {
		if rec.Value != nil {
			out = append(out, rec)
		}
	}
	slices.SortFunc(out, func(a, b regRecord) int { return cmp.Compare(a.Offset, b.Offset) })
	return out
}

// sameRecord reports whether two records are the same key and value.
func sameRecord(a, b regRecord) bool {
	return bytes.Equal(a.Key, b.Key) && bytes.Equal(a.Value, b.Value) && (a.Value == nil) == (b.Value == nil)
}
