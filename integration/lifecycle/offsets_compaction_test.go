package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
)

// __consumer_offsets is compacted like any compacted topic: a million
// commits to the same 1,000 group-partitions (10 groups × 100 partitions)
// leave it a few MiB, not the hundred written, and the offsets read back
// (before and after a restart, which reloads the groups from the cleaned
// log) are the last ones committed.
func TestConsumerOffsetsStayBoundedUnderCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("a million commits")
	}
	n := node.Start(t, "offsets.topic.num.partitions=1", "offsets.topic.segment.bytes=1048576", "log.cleaner.backoff.ms=200")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := n.Client()
	adm := kadm.NewClient(cl)
	const topic, partitions, groups, rounds = "committed", 100, 10, 1000
	created, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || created.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, created.Err)
	}
	offsetsSize := func() int64 {
		dirs, err := adm.DescribeAllLogDirs(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var size int64
		dirs.Each(func(d kadm.DescribedLogDir) {
			d.Topics.Each(func(p kadm.DescribedLogDirPartition) {
				if p.Topic == "__consumer_offsets" {
					size += p.Size
				}
			})
		})
		return size
	}
	commit := func(group string, round int) {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, created.ID
		for p := range int32(partitions) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.Metadata = p, int64(round), kmsg.StringPtr(fmt.Sprintf("round %d", round))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					t.Fatalf("commit %s round %d partition %d: %v", group, round, rp.Partition, err)
				}
			}
		}
	}
	var peak int64
	written := 0
	started := time.Now()
	for round := range rounds {
		for g := range groups {
			commit(fmt.Sprintf("group-%d", g), round)
			written += partitions
		}
		if round%100 == 99 {
			size := offsetsSize()
			peak = max(peak, size)
			t.Logf("%d commits: __consumer_offsets is %d bytes", written, size)
		}
	}
	t.Logf("%d commits in %s", written, time.Since(started).Round(time.Millisecond))
	// Once the cleaner has caught up, what is left is about the live keys.
	var settled int64
	deadline := time.Now().Add(60 * time.Second)
	for {
		settled = offsetsSize()
		if settled < 2<<20 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("__consumer_offsets: peak %d bytes while committing, %d bytes once cleaned", peak, settled)
	if peak > 16<<20 || settled > 2<<20 {
		t.Fatalf("__consumer_offsets grew to %d bytes (%d once cleaned) for 1,000 live offsets: it is not being compacted", peak, settled)
	}
	check := func(when string) {
		for g := range groups {
			group := fmt.Sprintf("group-%d", g)
			offsets, err := adm.FetchOffsets(ctx, group)
			if err != nil {
				t.Fatalf("%s: fetching %s: %v", when, group, err)
			}
			for p := range int32(partitions) {
				o, ok := offsets.Lookup(topic, p)
				if !ok || o.Err != nil || o.At != rounds-1 || !strings.HasPrefix(o.Metadata, fmt.Sprint("round ", rounds-1)) {
					t.Fatalf("%s: %s %s-%d at %+v, want offset %d", when, group, topic, p, o, rounds-1)
				}
			}
		}
	}
	check("after the commits")
	cl.Close()
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	n.Restart()
	cl = n.Client()
	adm = kadm.NewClient(cl)
	check("after a restart")
}
