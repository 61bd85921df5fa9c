package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestConsumerLagMatchesTheConsumerGroupsTool: on two brokers, a group
// consumes a topic whose partitions both lead and commits part of what it
// read; the lag the group's coordinator serves on /metrics, for the
// partitions it leads and for those it asks the other broker about, is
// what the stock kafka-consumer-groups --describe prints (CURRENT-OFFSET,
// LAG), and the other broker serves none of the group's.
func TestConsumerLagMatchesTheConsumerGroupsTool(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes and runs the Java tool")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tool := node.StockTool(ctx, t)
	_, brks := node.StartSplit(t, 1, 2, "offsets.topic.replication.factor=1", "offsets.topic.num.partitions=1")
	addrs := node.Addrs(brks)

	const topic, groupID, partitions, perPartition = "lagged", "lag-group", 4, 10
	cl := node.NewClient(t, addrs, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
	for i := range partitions * perPartition {
		r := kgo.StringRecord("r" + strconv.Itoa(i))
		r.Partition = int32(i % partitions)
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	// The group reads everything and commits, in partition p, the first
	// p+3 records.
	member := node.NewClient(t, addrs, kgo.ConsumerGroup(groupID), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	commit := map[string]map[int32]kgo.EpochOffset{topic: {}}
	for consumed := 0; consumed < partitions*perPartition; {
		fs := member.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d records: %v", consumed, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			consumed++
			if r.Offset+1 == int64(r.Partition)+3 {
				commit[topic][r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
			}
		})
	}
	var commitErr error
	member.CommitOffsetsSync(ctx, commit, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil && commitErr == nil {
					commitErr = err
				}
			}
		}
	})
	if commitErr != nil || len(commit[topic]) != partitions {
		t.Fatalf("committing %v: %v", commit, commitErr)
	}
	member.Close()
	// Both brokers lead partitions of the topic, so the coordinator
	// reads some end offsets itself and asks the other broker for the
	// rest.
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, p := range md.Topics[topic].Partitions {
		leaders[p.Leader] = true
	}
	if len(leaders) != 2 {
		t.Fatalf("the partitions of %s are led by %v, want both brokers", topic, leaders)
	}

	// The tool's table: GROUP TOPIC PARTITION CURRENT-OFFSET
	// LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID.
	out := tool("consumer.group.ConsumerGroupCommand", "--bootstrap-server", addrs[0], "--describe", "--group", groupID)
	toolLag, toolCommitted := map[string]string{}, map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 6 || f[0] != groupID || f[1] != topic {
			continue
		}
		toolCommitted[f[2]], toolLag[f[2]] = f[3], f[5]
	}
	if len(toolLag) != partitions {
		t.Fatalf("kafka-consumer-groups --describe lists %d partitions of %s:\n%s", len(toolLag), topic, out)
	}

	series := func(name, p string) string {
		return fmt.Sprintf(`%s{group=%q,topic=%q,partition=%q}`, name, groupID, topic, p)
	}
	var got []map[string]float64
	node.WaitFor(t, 20*time.Second, "the group's lag on /metrics as the tool prints it", func() bool {
		got = got[:0]
		for _, b := range brks {
			_, text := httpGet(t, b.DebugAddr, "/metrics", "")
			got = append(got, samples(t, text))
		}
		for p, lag := range toolLag {
			seen := 0
			for _, m := range got {
				if v, ok := m[series("gregor_consumergroup_lag", p)]; ok {
					seen++
					if strconv.FormatFloat(v, 'f', -1, 64) != lag ||
						strconv.FormatFloat(m[series("gregor_consumergroup_committed_offset", p)], 'f', -1, 64) != toolCommitted[p] {
						return false
					}
				}
			}
			if seen != 1 {
				return false
			}
		}
		return true
	})
	// The sum per group and topic, from the same node.
	var wantSum float64
	for _, lag := range toolLag {
		v, _ := strconv.ParseFloat(lag, 64)
		wantSum += v
	}
	sumSeries := fmt.Sprintf(`gregor_consumergroup_lag_sum{group=%q,topic=%q}`, groupID, topic)
	reported := 0
	for _, m := range got {
		if v, ok := m[sumSeries]; ok {
			reported++
			if v != wantSum {
				t.Errorf("%s is %v, the tool's lags add up to %v", sumSeries, v, wantSum)
			}
		}
	}
	if reported != 1 {
		t.Errorf("%d brokers report %s, want the coordinator alone", reported, sumSeries)
	}
}
