package faults

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/coordinator/runtime"
)

// TestFaultIsolatedLeaderStopsServing: a node cut off from the others
// (clients still reach it) that led a partition and a group's coordinator
// partition must not go on answering for them once the majority has moved
// on, which it can only have done after fencing the node. Asked directly,
// it answers NOT_LEADER_OR_FOLLOWER for a fetch at the new leader's log end
// and for its own log end, and no committed offset and no coordinator of
// its own for the group, so that no client resets its position
// (OFFSET_OUT_OF_RANGE for an offset it has not seen), reads a stale end
// offset, or resumes a group from a stale commit.
//
// The campaign found this (make test's faults-short, seed
// 12698874545172988931, split-majority): a consumer whose metadata came
// from the isolated minority was told OFFSET_OUT_OF_RANGE for committed
// offset 269 of a partition whose stale log there ended at 61, reset to
// the start and committed 59 over the acknowledged 269. Apache Kafka
// answers as the stale leader (COMPAT.md); Gregor's broker keeps a leader
// lease (replica/lease.go).
func TestFaultIsolatedLeaderStopsServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	e := start(t, ctx, true)
	f := e.faults
	oldNode, topicID := partitionZero(ctx, t, f)
	old := int32(oldNode)

	// A group whose coordinator is the same node, with a commit.
	group := groupCoordinatedBy(ctx, t, f, old)
	commit := func(adm *kadm.Client, offset int64) error {
		var os kadm.Offsets
		os.Add(kadm.Offset{Topic: f.Topic, Partition: 0, At: offset, LeaderEpoch: -1})
		resp, err := adm.CommitOffsets(ctx, group, os)
		if err != nil {
			return err
		}
		return resp.Error()
	}
	if err := commit(f.Admin, 1); err != nil {
		t.Fatalf("committing offset 1 for %s: %v", group, err)
	}

	direct, err := kgo.NewClient(kgo.SeedBrokers(f.Cluster.Node(oldNode).Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	majority := majorityProducer(t, f, oldNode, 30*time.Second)
	majorityAdmin := kadm.NewClient(majority)

	if err := f.Net.Isolate(ctx, oldNode); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Net.Heal(context.Background(), oldNode) })
	t.Logf("isolated node %d, the leader of partition 0 and of group %s's coordinator partition", old, group)

	// The majority acknowledges writes to partition 0: it has elected a
	// new leader, so it fenced the isolated node first.
	var end int64
	for i := range 20 {
		r := majority.ProduceSync(ctx, &kgo.Record{Partition: 0, Value: []byte(fmt.Sprintf("majority-%d", i))})
		if err := r.FirstErr(); err != nil {
			t.Fatalf("acks=all write to the majority: %v", err)
		}
		end = r[0].Record.Offset + 1
	}
	// And a commit at the new end, with the group's new coordinator.
	var commitErr error
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		if commitErr = commit(majorityAdmin, end); commitErr == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	if commitErr != nil {
		t.Fatalf("committing offset %d for %s through the majority for a minute: %v", end, group, commitErr)
	}
	t.Logf("the majority acknowledged partition 0 up to %d and the commit of %d", end, end)

	ask := func(what string, req kmsg.Request) kmsg.Response {
		t.Helper()
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		resp, err := direct.SeedBrokers()[0].Request(rctx, req)
		if err != nil {
			t.Fatalf("%s of the isolated node: %v", what, err)
		}
		return resp
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.MaxBytes, fetch.MinBytes = -1, 1<<20, 1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = f.Topic, topicID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.FetchOffset, fp.CurrentLeaderEpoch, fp.LogStartOffset, fp.PartitionMaxBytes = 0, end, -1, -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr := ask("Fetch", fetch).(*kmsg.FetchResponse)
	if code := fr.Topics[0].Partitions[0].ErrorCode; code != kerr.NotLeaderForPartition.Code {
		t.Errorf("Fetch at %d (the majority's log end) from the isolated node: %v, want NOT_LEADER_OR_FOLLOWER (OFFSET_OUT_OF_RANGE makes a consumer reset)", end, kerr.ErrorForCode(code))
	}

	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -1
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = f.Topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -1, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr := ask("ListOffsets", lo).(*kmsg.ListOffsetsResponse)
	if p := lr.Topics[0].Partitions[0]; p.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Errorf("ListOffsets latest from the isolated node: offset %d, %v; want NOT_LEADER_OR_FOLLOWER (the majority's end is %d)", p.Offset, kerr.ErrorForCode(p.ErrorCode), end)
	}

	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey, fc.CoordinatorKeys = group, []string{group}
	fcr := ask("FindCoordinator", fc).(*kmsg.FindCoordinatorResponse)
	node, code := fcr.NodeID, fcr.ErrorCode
	if len(fcr.Coordinators) > 0 {
		node, code = fcr.Coordinators[0].NodeID, fcr.Coordinators[0].ErrorCode
	}
	if code == 0 && node == old {
		t.Errorf("FindCoordinator for %s at the isolated node names itself", group)
	}

	of := kmsg.NewPtrOffsetFetchRequest()
	of.Group = group
	oft := kmsg.NewOffsetFetchRequestTopic()
	oft.Topic, oft.Partitions = f.Topic, []int32{0}
	of.Topics = append(of.Topics, oft)
	ofg := kmsg.NewOffsetFetchRequestGroup()
	ofg.Group = group
	ofgt := kmsg.NewOffsetFetchRequestGroupTopic()
	ofgt.Topic, ofgt.TopicID, ofgt.Partitions = f.Topic, topicID, []int32{0}
	ofg.Topics = append(ofg.Topics, ofgt)
	of.Groups = append(of.Groups, ofg)
	ofr := ask("OffsetFetch", of).(*kmsg.OffsetFetchResponse)
	offset, gcode := int64(-1), ofr.ErrorCode
	if len(ofr.Groups) > 0 {
		g := ofr.Groups[0]
		gcode = g.ErrorCode
		if len(g.Topics) > 0 && len(g.Topics[0].Partitions) > 0 {
			offset = g.Topics[0].Partitions[0].Offset
		}
	} else if len(ofr.Topics) > 0 && len(ofr.Topics[0].Partitions) > 0 {
		offset = ofr.Topics[0].Partitions[0].Offset
	}
	if gcode == 0 {
		t.Errorf("OffsetFetch for %s at the isolated node answered offset %d (the majority committed %d), want NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE", group, offset, end)
	}
	t.Logf("the isolated node answers Fetch %v, ListOffsets %v, FindCoordinator %v (node %d), OffsetFetch %v",
		kerr.ErrorForCode(fr.Topics[0].Partitions[0].ErrorCode), kerr.ErrorForCode(lr.Topics[0].Partitions[0].ErrorCode), kerr.ErrorForCode(code), node, kerr.ErrorForCode(gcode))

	if err := f.Net.Heal(ctx, oldNode); err != nil {
		t.Fatal(err)
	}
	leader := waitAgreedInSync(ctx, t, f)
	t.Logf("healed: partition 0 led by %d with a full ISR, as every broker sees it", leader)
}

// groupCoordinatedBy returns a group id whose __consumer_offsets partition
// node leads (the topic created first if need be).
func groupCoordinatedBy(ctx context.Context, t *testing.T, f *Faults, node int32) string {
	t.Helper()
	const offsetsTopic = "__consumer_offsets"
	deadline := time.Now().Add(time.Minute)
	for {
		// FindCoordinator creates the topic on first use.
		f.Admin.FindGroupCoordinators(ctx, "lease-probe")
		md, err := f.Admin.Metadata(ctx, offsetsTopic)
		if err == nil {
			if td, ok := md.Topics[offsetsTopic]; ok && td.Err == nil && len(td.Partitions) > 0 {
				n := int32(len(td.Partitions))
				for i := range 10000 {
					g := fmt.Sprintf("lease-%d", i)
					if p, ok := td.Partitions[runtime.PartitionFor(g, n)]; ok && p.Leader == node {
						return g
					}
				}
				t.Fatalf("no group id among 10000 maps to a %s partition led by node %d", offsetsTopic, node)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no partitions after a minute: %v", offsetsTopic, err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
