package integration

// The Kafka Streams applications of integration/clients/java-streams
// (StreamsApps.java) as a target's client: how one is started, the input
// the scenarios give it (written with franz-go, each record to a partition
// and with an event time of the scenario's choosing), the read_committed
// reader of what it wrote, its interactive-query endpoint, and the check of
// its output against a model's (integration/streamsapps_model.go).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// mainStreamsApps is the one class of integration/clients/java-streams.
const mainStreamsApps = "StreamsApps"

// StreamsApp is one instance (process) of StreamsApps.
type StreamsApp struct {
	Topology  string // join, window, fkjoin or sums
	Bootstrap string
	AppID     string
	// Dir holds the properties file, the log (app.log), state.dir,
	// java.io.tmpdir and the interactive-query address file.
	Dir string
	// Props are the rest of the properties (app.* keys and StreamsConfig);
	// they win over the defaults of properties.
	Props map[string]string
}

// LogPath is where the app's output goes.
func (a StreamsApp) LogPath() string { return filepath.Join(a.Dir, "app.log") }

// addressFile is where a sums app writes its interactive-query address.
func (a StreamsApp) addressFile() string { return filepath.Join(a.Dir, "iq-address") }

// properties: a short commit interval, so that the read_committed output
// trails the input by little, and no record cache, so that every update
// of a table or aggregate is forwarded (the models expect each one).
func (a StreamsApp) properties() string {
	p := map[string]string{
		"application.id":                a.AppID,
		"bootstrap.servers":             a.Bootstrap,
		"processing.guarantee":          "exactly_once_v2",
		"group.protocol":                "classic",
		"commit.interval.ms":            "200",
		"statestore.cache.max.bytes":    "0",
		"num.stream.threads":            "1",
		"repartition.purge.interval.ms": "1000",
		"state.dir":                     filepath.Join(a.Dir, "state"),
		"app.address.file":              a.addressFile(),
	}
	maps.Copy(p, a.Props)
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(p)) {
		fmt.Fprintf(&b, "%s=%s\n", k, p[k])
	}
	return b.String()
}

// StartStreamsApp compiles StreamsApps if needed and starts one instance
// in the background; the caller stops it with Proc.Stop (SIGTERM closes
// KafkaStreams) or kills it.
func (t *Tools) StartStreamsApp(ctx context.Context, app StreamsApp) (*Proc, error) {
	classes, err := t.JavaPrograms(ctx, SetStreams, "java-streams")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(app.Dir, 0o755); err != nil {
		return nil, err
	}
	props := filepath.Join(app.Dir, "app.properties")
	if err := os.WriteFile(props, []byte(app.properties()), 0o644); err != nil {
		return nil, err
	}
	logCfg, err := t.Log4jConfig(true)
	if err != nil {
		return nil, err
	}
	c, err := t.javaCmdLogging(ctx, SetStreams, classes, logCfg, mainStreamsApps, app.Topology, props)
	if err != nil {
		return nil, err
	}
	c.Args = append([]string{"-Djava.io.tmpdir=" + app.Dir}, c.Args...)
	c.Dir = app.Dir
	return Start(c, app.LogPath())
}

// streamsApps is the scenario's running instances, for failing fast with
// the log of one that died.
type streamsApps []*Proc

// alive reports an instance that exited, with its log's end.
func (as streamsApps) alive() error {
	for i, p := range as {
		if p == nil {
			continue
		}
		if exited, err := p.Exited(); exited {
			return fmt.Errorf("Streams app instance %d exited (%v): %s", i, err, p.LogTail(12))
		}
	}
	return nil
}

// inputRecord is one record the scenario writes. A nil Value is a
// tombstone.
type inputRecord struct {
	Topic     string
	Partition int32
	Key       string
	Value     *string
	Time      time.Time
}

// str is a value of an inputRecord.
func str(s string) *string { return &s }

// streamsClient is a franz-go client to the target that writes each record
// to the partition the scenario chose (the models must know which keys
// share a task).
func streamsClient(bootstrap string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
}

// produceInput writes recs in order and waits for every acknowledgement;
// with one idempotent producer the order within each partition is theirs.
func produceInput(ctx context.Context, cl *kgo.Client, recs []inputRecord) error {
	rs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		rs[i] = &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: []byte(r.Key), Timestamp: r.Time}
		if r.Value != nil {
			rs[i].Value = []byte(*r.Value)
		}
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		return fmt.Errorf("producing %d input records: %w", len(recs), err)
	}
	return nil
}

// createTopics creates each topic with its partition count and replicas
// replicas (-1: the target's default).
func createTopics(ctx context.Context, cl *kgo.Client, partitions map[string]int32, replicas int16) error {
	adm := kadm.NewClient(cl)
	for _, topic := range slices.Sorted(maps.Keys(partitions)) {
		res, err := adm.CreateTopic(ctx, partitions[topic], replicas, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err != nil {
			return fmt.Errorf("creating %s: %w", topic, err)
		}
	}
	return nil
}

// outputRecord is one record of an app's output; Value is nil for a
// tombstone.
type outputRecord struct {
	Partition int32
	Key       string
	Value     *string
}

// endMarkerKey keys the records the scenario itself writes to every output
// partition once the app has caught up: a read_committed reader that has
// read the marker of each partition has read everything the app committed
// before it.
const endMarkerKey = "\x00end-of-output"

// outputReader reads an output topic with read_committed from the start,
// keeping what it read across calls.
type outputReader struct {
	cl         *kgo.Client
	bootstrap  string
	topic      string
	partitions int32
	got        []outputRecord
	markers    map[string]map[int32]bool // marker value -> partitions it was read from
}

func newOutputReader(bootstrap, topic string, partitions int32) (*outputReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &outputReader{cl: cl, bootstrap: bootstrap, topic: topic, partitions: partitions, markers: map[string]map[int32]bool{}}, nil
}

func (r *outputReader) Close() { r.cl.Close() }

// poll reads what one fetch round brings, for at most a second.
func (r *outputReader) poll(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	fs := r.cl.PollFetches(pctx)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var errs []error
	fs.EachError(func(t string, p int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("reading %s-%d: %w", t, p, err))
		}
	})
	fs.EachRecord(func(rec *kgo.Record) {
		if string(rec.Key) == endMarkerKey {
			m := r.markers[string(rec.Value)]
			if m == nil {
				m = map[int32]bool{}
				r.markers[string(rec.Value)] = m
			}
			m[rec.Partition] = true
			return
		}
		o := outputRecord{Partition: rec.Partition, Key: string(rec.Key)}
		if rec.Value != nil {
			o.Value = str(string(rec.Value))
		}
		r.got = append(r.got, o)
	})
	return errors.Join(errs...)
}

// waitCount reads until the output holds as many records (markers aside)
// as want, failing after wait or when an app instance dies; the failure
// says where what was read departs from want.
func (r *outputReader) waitCount(ctx context.Context, apps streamsApps, want updates, wait time.Duration) error {
	n := want.count()
	deadline := time.Now().Add(wait)
	for len(r.got) < n {
		if err := apps.alive(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s a read_committed consumer of %s has %d of the %d records the model expects so far (%v); app log: %s",
				wait, r.topic, len(r.got), n, checkUpdates(r.got, want, true), lastAppLog(apps))
		}
		if err := r.poll(ctx); err != nil {
			return err
		}
	}
	return nil
}

// finish writes an end marker to every partition of the output (the
// caller has seen the app catch up with its input) and reads until each
// is in: the records read then are everything committed before.
func (r *outputReader) finish(ctx context.Context, e *Env, apps streamsApps, wait time.Duration) ([]outputRecord, error) {
	marker := e.Name("end")
	cl, err := streamsClient(r.bootstrap)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var recs []inputRecord
	for p := range r.partitions {
		recs = append(recs, inputRecord{Topic: r.topic, Partition: p, Key: endMarkerKey, Value: str(marker), Time: time.Now()})
	}
	if err := produceInput(ctx, cl, recs); err != nil {
		return nil, fmt.Errorf("end markers: %w", err)
	}
	deadline := time.Now().Add(wait)
	for len(r.markers[marker]) < int(r.partitions) {
		if err := apps.alive(); err != nil {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("after %s a read_committed consumer has read the end marker of %d of %s's %d partitions: a transaction of the app stays open; app log: %s",
				wait, len(r.markers[marker]), r.topic, r.partitions, lastAppLog(apps))
		}
		if err := r.poll(ctx); err != nil {
			return nil, err
		}
	}
	return r.got, nil
}

// lastAppLog is the end of the first live instance's log, or of the first.
func lastAppLog(apps streamsApps) string {
	for _, p := range apps {
		if p != nil {
			if exited, _ := p.Exited(); !exited {
				return p.LogTail(6)
			}
		}
	}
	if len(apps) > 0 && apps[0] != nil {
		return apps[0].LogTail(6)
	}
	return ""
}

// waitCaughtUp waits until the group has committed, for every partition
// of the topics (the app's external inputs), the end offset: the app has
// processed all of its input, and with exactly_once_v2 committed what it
// wrote for it in the same transactions.
func waitCaughtUp(ctx context.Context, cl *kgo.Client, apps streamsApps, group string, topics []string, wait time.Duration) error {
	adm := kadm.NewClient(cl)
	var behind []string
	err := until(ctx, wait, 250*time.Millisecond, func() (bool, error) {
		if err := apps.alive(); err != nil {
			return false, err
		}
		ends, err := adm.ListEndOffsets(ctx, topics...)
		if err != nil {
			return false, nil
		}
		// Pending transactional offsets (the app's open transaction) are
		// answered with a retriable error: not caught up yet.
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false, nil
		}
		behind = behind[:0]
		ends.Each(func(o kadm.ListedOffset) {
			c, ok := committed.Lookup(o.Topic, o.Partition)
			at := int64(0)
			if ok && c.Err == nil {
				at = c.At
			}
			if o.Err != nil || at < o.Offset {
				behind = append(behind, fmt.Sprintf("%s-%d at %d of %d", o.Topic, o.Partition, at, o.Offset))
			}
		})
		return len(behind) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the app did not catch up with its input within %s (%v): %s; app log: %s", wait, err, strings.Join(behind, ", "), lastAppLog(apps))
	}
	return nil
}

// checkUpdates compares an app's output with a model's, key by key: with
// exact (exactly_once_v2) each key's updates must be the model's, in order,
// with nothing more or less; otherwise (at_least_once) the model's updates
// must appear in order, with repeats allowed (input processed again after
// a failure writes its results again), ending at the model's last value.
// Output keys the model does not know fail either way.
func checkUpdates(got []outputRecord, want map[string][]*string, exact bool) error {
	seen := map[string][]*string{}
	for _, r := range got {
		seen[r.Key] = append(seen[r.Key], r.Value)
	}
	keys := slices.Sorted(maps.Keys(want))
	for k := range seen {
		if _, ok := want[k]; !ok {
			keys = append(keys, k)
		}
	}
	var problems []string
	for _, k := range keys {
		if p := compareUpdates(seen[k], want[k], exact); p != "" {
			problems = append(problems, fmt.Sprintf("%q: %s", k, p))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	n := len(problems)
	if n > 5 {
		problems = append(problems[:5], fmt.Sprintf("and %d more keys", n-5))
	}
	return fmt.Errorf("output differs from the model's for %d keys (%d records read): %s", n, len(got), strings.Join(problems, "; "))
}

// compareUpdates says how got departs from want, or "".
func compareUpdates(got, want []*string, exact bool) string {
	if exact {
		for i := range max(len(got), len(want)) {
			if i >= len(got) {
				return fmt.Sprintf("%d updates, want %d: missing %s…", len(got), len(want), showValues(want[i:min(len(want), i+3)]))
			}
			if i >= len(want) {
				return fmt.Sprintf("%d updates, want %d: extra %s…", len(got), len(want), showValues(got[i:min(len(got), i+3)]))
			}
			if !sameValue(got[i], want[i]) {
				lo := max(0, i-2)
				return fmt.Sprintf("update %d is %s, want %s (got …%s…, want …%s…)", i+1, showValue(got[i]), showValue(want[i]),
					showValues(got[lo:min(len(got), i+3)]), showValues(want[lo:min(len(want), i+3)]))
			}
		}
		return ""
	}
	j := 0
	for _, v := range got {
		if j < len(want) && sameValue(v, want[j]) {
			j++
		}
	}
	switch {
	case j < len(want):
		return fmt.Sprintf("update %d of the model's, %s, is not in the output after the ones before it (%d updates read)", j+1, showValue(want[j]), len(got))
	case len(want) > 0 && !sameValue(got[len(got)-1], want[len(want)-1]):
		return fmt.Sprintf("last update is %s, want %s", showValue(got[len(got)-1]), showValue(want[len(want)-1]))
	}
	return ""
}

func sameValue(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

func showValue(v *string) string {
	if v == nil {
		return "<tombstone>"
	}
	return fmt.Sprintf("%q", *v)
}

func showValues(vs []*string) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = showValue(v)
	}
	return "[" + strings.Join(s, " ") + "]"
}

// iqClient asks a sums app's interactive-query endpoint.
type iqClient struct {
	addr string // host:port, the app's application.server
	http *http.Client
}

// waitIQAddress waits for the app to write its address and serve.
func waitIQAddress(ctx context.Context, app StreamsApp, proc *Proc, wait time.Duration) (*iqClient, error) {
	var c *iqClient
	err := until(ctx, wait, 250*time.Millisecond, func() (bool, error) {
		if exited, err := proc.Exited(); exited {
			return false, fmt.Errorf("the app exited (%v) before serving interactive queries: %s", err, proc.LogTail(10))
		}
		b, err := os.ReadFile(app.addressFile())
		if err != nil {
			return false, nil
		}
		c = &iqClient{addr: strings.TrimSpace(string(b)), http: &http.Client{Timeout: 10 * time.Second}}
		return true, nil
	})
	return c, err
}

// get returns the body of a 200 answer; a 503 (Streams is rebalancing) is
// errIQUnavailable.
func (c *iqClient) get(ctx context.Context, path string, query url.Values) (string, error) {
	u := url.URL{Scheme: "http", Host: c.addr, Path: path, RawQuery: query.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return string(b), nil
	case http.StatusServiceUnavailable:
		return "", fmt.Errorf("%w: %s", errIQUnavailable, strings.TrimSpace(string(b)))
	}
	return "", fmt.Errorf("GET %s: %s: %s", u.String(), resp.Status, strings.TrimSpace(string(b)))
}

var errIQUnavailable = errors.New("interactive query not answered yet")

// store is the app's local store: active tasks' keys, or with stale the
// standbys' too.
func (c *iqClient) store(ctx context.Context, stale bool) (map[string]string, error) {
	body, err := c.get(ctx, "/store", url.Values{"stale": {fmt.Sprint(stale)}})
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if l == "" {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("/store line %q", l)
		}
		m[k] = v
	}
	return m, nil
}

// owner is the application.server of the instance whose active task
// holds key, by the app's metadata.
func (c *iqClient) owner(ctx context.Context, key string) (string, error) {
	body, err := c.get(ctx, "/owner", url.Values{"key": {key}})
	return strings.TrimSpace(body), err
}

// iqTasks is what /tasks says.
type iqTasks struct {
	State           string
	Active, Standby []string
	RestoredRecords int64
	raw             string
}

func (c *iqClient) tasks(ctx context.Context) (iqTasks, error) {
	body, err := c.get(ctx, "/tasks", nil)
	if err != nil {
		return iqTasks{}, err
	}
	t := iqTasks{raw: strings.TrimSpace(body)}
	for _, l := range strings.Split(t.raw, "\n") {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "state":
			t.State = v
		case "active":
			t.Active = splitNonEmpty(v)
		case "standby":
			t.Standby = splitNonEmpty(v)
		case "restored":
			_, _ = fmt.Sscan(v, &t.RestoredRecords)
		}
	}
	return t, nil
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}
