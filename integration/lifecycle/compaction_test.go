package lifecycle

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/gregorbroker/gregor/integration/node"
)

// A compacted topic written with many versions of each key and some
// tombstones shrinks on disk, a consumer from the beginning reads exactly
// the latest value of each live key at its original offset, and once
// delete.retention.ms has passed the deleted keys are gone too.
func TestCompactionKeepsTheLatestValueOfEachKey(t *testing.T) {
	n := node.Start(t, "log.cleaner.backoff.ms=200", "log.retention.check.interval.ms=300")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const topic = "compacted"
	cl := n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.ZstdCompression()), kgo.ProducerLinger(5*time.Millisecond))
	adm := kadm.NewClient(cl)
	configs := map[string]*string{}
	for k, v := range map[string]string{
		"cleanup.policy":            "compact",
		"segment.bytes":             "1048576",
		"segment.ms":                "1000",
		"min.cleanable.dirty.ratio": "0.01",
		"delete.retention.ms":       "3000",
	} {
		configs[k] = &v
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, configs, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	const keys, versions = 200, 40
	value := func(k, v int) []byte {
		// Compresses little, so that the log is several segments.
		b := []byte(fmt.Sprintf("key-%03d@%02d:", k, v))
		for len(b) < 600 {
			b = fmt.Appendf(b, "%x", (k*7919+v*104729+len(b))*2654435761)
		}
		return b
	}
	type kept struct {
		offset int64
		value  string
	}
	latest := map[string]kept{}
	for v := range versions {
		var recs []*kgo.Record
		for k := range keys {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("key-%03d", k)), Value: value(k, v)})
		}
		if v == versions-1 {
			// The last round deletes every fourth key.
			for k := 0; k < keys; k += 4 {
				recs[k].Value = nil
			}
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			latest[string(r.Record.Key)] = kept{r.Record.Offset, string(r.Record.Value)}
		}
	}
	end := int64(keys * versions)
	size := func() int64 {
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		dirs.Each(func(d kadm.DescribedLogDir) {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == topic {
					total += p.Size
				}
			})
		})
		return total
	}
	// The cleaner may be at work already: compare with what was sent.
	var written int64
	for k := range keys {
		for v := range versions {
			written += int64(len(value(k, v)))
		}
	}
	// Read the whole partition from the start.
	readAll := func() map[string][]kept {
		c := n.Client(kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
		defer c.Close()
		got := map[string][]kept{}
		for {
			fetches := c.PollFetches(ctx)
			if err := fetches.Err(); err != nil {
				t.Fatal(err)
			}
			last := int64(-1)
			fetches.EachRecord(func(r *kgo.Record) {
				got[string(r.Key)] = append(got[string(r.Key)], kept{r.Offset, string(r.Value)})
				last = r.Offset
			})
			if last >= end-1 {
				return got
			}
		}
	}
	// Until the tombstones' delete horizon the deleted keys read as
	// tombstones; then they are gone. Wait for the cleaner to get there.
	// A record now and then keeps the topic written to, as a live one
	// is: as in Kafka, segment.ms rolls the active segment (which the
	// cleaner never cleans, and which holds the last round) only when a
	// record is appended.
	deadline := time.Now().Add(60 * time.Second)
	var got map[string][]kept
	for fillers := 0; ; fillers++ {
		res := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("filler"), Value: fmt.Appendf(nil, "%d", fillers)})
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		end = res[0].Record.Offset + 1
		got = readAll()
		delete(got, "filler")
		if len(got) == keys-keys/4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("60s on, %d keys read (of %d, %d deleted), %d of %d bytes left", len(got), keys, keys/4, size(), written)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for k, w := range latest {
		vs := got[k]
		if w.value == "" {
			if len(vs) != 0 {
				t.Fatalf("deleted key %s still read: %v", k, vs)
			}
			continue
		}
		if len(vs) != 1 || vs[0] != w {
			t.Fatalf("key %s read as %v, want exactly its latest value at offset %d", k, vs, w.offset)
		}
	}
	if after := size(); after > written/10 {
		t.Fatalf("%d bytes on disk after cleaning, %d written: expected under a tenth", after, written)
	}
	// Offsets are kept: the log start is still 0 and the end unchanged.
	starts, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := starts.Lookup(topic, 0); s.Offset != 0 {
		t.Fatalf("log start %d after cleaning", s.Offset)
	}
	if e, _ := ends.Lookup(topic, 0); e.Offset != end {
		t.Fatalf("log end %d after cleaning, want %d", e.Offset, end)
	}
	// The cleaner keeps its place in cleaner-offset-checkpoint.
	data, err := os.ReadFile(filepath.Join(n.Dir, "cleaner-offset-checkpoint"))
	if err != nil || !strings.Contains(string(data), topic+" 0 ") {
		t.Fatalf("cleaner-offset-checkpoint: %q %v", data, err)
	}
}
