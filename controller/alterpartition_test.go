package controller

import (
	"maps"
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// isrCluster is a controller with brokers 1 to n and topic "t" of one
// partition on three of them.
type isrCluster struct {
	c      *Controller
	epochs map[int32]int64
}

func startISRCluster(t *testing.T, n int32) *isrCluster {
	t.Helper()
	c := startTest(t, vfs.NewMemFS())
	q := &isrCluster{c: c, epochs: map[int32]int64{}}
	for id := int32(1); id <= n; id++ {
		q.epochs[id] = registerBroker(t, c, id)
	}
	if r := createTopic(t, c, "t", 1, 3); r.ErrorCode != 0 {
		t.Fatalf("create: %d", r.ErrorCode)
	}
	return q
}

func (q *isrCluster) partition() metadata.Partition { return q.c.Image().Topics["t"].Partitions[0] }

// alterISR is the leader's v3 request for isr, from the current state.
func (q *isrCluster) alterISR(isr ...int32) *kmsg.AlterPartitionRequest {
	img := q.c.Image()
	p := img.Topics["t"].Partitions[0]
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID = p.Leader
	req.BrokerEpoch = q.epochs[p.Leader]
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = img.Topics["t"].ID
	rp := kmsg.NewAlterPartitionRequestTopicPartition()
	rp.LeaderEpoch = p.LeaderEpoch
	rp.PartitionEpoch = p.PartitionEpoch
	for _, id := range isr {
		m := kmsg.NewAlterPartitionRequestTopicPartitionNewEpochISR()
		m.BrokerID, m.BrokerEpoch = id, q.epochs[id]
		rp.NewEpochISR = append(rp.NewEpochISR, m)
	}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

func onlyPartition(t *testing.T, resp *kmsg.AlterPartitionResponse) kmsg.AlterPartitionResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("response %+v", resp)
	}
	return resp.Topics[0].Partitions[0]
}

func TestAlterPartitionShrinksAndExpands(t *testing.T) {
	q := startISRCluster(t, 3)
	before := q.partition()
	leader := before.Leader
	others := slices.DeleteFunc(slices.Clone(before.Replicas), func(r int32) bool { return r == leader })

	// Shrink to the leader and one follower.
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader, others[0])))
	if rp.ErrorCode != 0 {
		t.Fatalf("shrink: %d", rp.ErrorCode)
	}
	// The answer is the committed state: the image already holds it
	// (invariant 4), with the partition epoch bumped and, at this
	// metadata.version, the leader epoch kept.
	after := q.partition()
	if !slices.Equal(after.ISR, []int32{leader, others[0]}) || after.PartitionEpoch != before.PartitionEpoch+1 || after.LeaderEpoch != before.LeaderEpoch {
		t.Fatalf("after shrink: %+v (before %+v)", after, before)
	}
	if rp.LeaderID != leader || rp.LeaderEpoch != after.LeaderEpoch || rp.PartitionEpoch != after.PartitionEpoch ||
		!slices.Equal(rp.ISR, after.ISR) || rp.LeaderRecoveryState != 0 {
		t.Fatalf("answer %+v, image %+v", rp, after)
	}

	// Expand back (v2: no broker epochs).
	req := q.alterISR(leader, others[0], others[1])
	req.Version = 2
	p := &req.Topics[0].Partitions[0]
	for _, m := range p.NewEpochISR {
		p.NewISR = append(p.NewISR, m.BrokerID)
	}
	p.NewEpochISR = nil
	rp = onlyPartition(t, q.c.AlterPartition(ctxT(t), req))
	if rp.ErrorCode != 0 || len(rp.ISR) != 3 || rp.PartitionEpoch != before.PartitionEpoch+2 {
		t.Fatalf("expand: %+v", rp)
	}

	// The same ISR again changes nothing and answers the current state.
	offset := q.c.Image().Offset
	rp = onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader, others[0], others[1])))
	if rp.ErrorCode != 0 || rp.PartitionEpoch != before.PartitionEpoch+2 || q.c.Image().Offset != offset {
		t.Fatalf("no-op: %+v, offset %d -> %d", rp, offset, q.c.Image().Offset)
	}
}

func TestAlterPartitionRefusals(t *testing.T) {
	q := startISRCluster(t, 3)
	p := q.partition()
	leader := p.Leader
	follower := p.Replicas[0]
	if follower == leader {
		follower = p.Replicas[1]
	}
	full := slices.Clone(p.ISR)
	for _, tc := range []struct {
		name   string
		mutate func(*kmsg.AlterPartitionRequest)
		code   int16
	}{
		{"unknown topic id", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].TopicID = [16]byte{9} }, kerr.UnknownTopicID.Code},
		{"unknown partition", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].Partition = 5 }, kerr.UnknownTopicOrPartition.Code},
		{"newer leader epoch", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].LeaderEpoch++ }, kerr.NotController.Code},
		{"newer partition epoch", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].PartitionEpoch++ }, kerr.NotController.Code},
		{"older leader epoch", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].LeaderEpoch-- }, kerr.FencedLeaderEpoch.Code},
		{"not the leader", func(r *kmsg.AlterPartitionRequest) { r.BrokerID, r.BrokerEpoch = follower, q.epochs[follower] }, kerr.InvalidRequest.Code},
		{"older partition epoch", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].PartitionEpoch-- }, kerr.InvalidUpdateVersion.Code},
		{"not a replica", func(r *kmsg.AlterPartitionRequest) {
			r.Topics[0].Partitions[0].NewEpochISR = append(r.Topics[0].Partitions[0].NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: 7, BrokerEpoch: -1})
		}, kerr.InvalidRequest.Code},
		{"duplicate member", func(r *kmsg.AlterPartitionRequest) {
			isr := &r.Topics[0].Partitions[0].NewEpochISR
			*isr = append(*isr, (*isr)[0])
		}, kerr.InvalidRequest.Code},
		{"without the leader", func(r *kmsg.AlterPartitionRequest) {
			isr := &r.Topics[0].Partitions[0].NewEpochISR
			*isr = slices.DeleteFunc(*isr, func(m kmsg.AlterPartitionRequestTopicPartitionNewEpochISR) bool { return m.BrokerID == leader })
		}, kerr.InvalidRequest.Code},
		{"recovering with followers", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].LeaderRecoveryState = 1 }, kerr.InvalidRequest.Code},
		{"unknown recovery state", func(r *kmsg.AlterPartitionRequest) { r.Topics[0].Partitions[0].LeaderRecoveryState = 3 }, kerr.InvalidRequest.Code},
		{"stale member epoch", func(r *kmsg.AlterPartitionRequest) {
			for i, m := range r.Topics[0].Partitions[0].NewEpochISR {
				if m.BrokerID == follower {
					r.Topics[0].Partitions[0].NewEpochISR[i].BrokerEpoch = m.BrokerEpoch + 100
				}
			}
		}, kerr.IneligibleReplica.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := q.alterISR(full...)
			tc.mutate(req)
			rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), req))
			if rp.ErrorCode != tc.code {
				t.Fatalf("error %d, want %d", rp.ErrorCode, tc.code)
			}
			if rp.LeaderID != 0 || rp.ISR != nil || rp.PartitionEpoch != 0 {
				t.Fatalf("an error answer carries no state: %+v", rp)
			}
		})
	}
	// RECOVERED never goes back to RECOVERING, even alone in the ISR.
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), func() *kmsg.AlterPartitionRequest {
		r := q.alterISR(leader)
		r.Topics[0].Partitions[0].LeaderRecoveryState = 1
		return r
	}()))
	if rp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("recovered to recovering: %d", rp.ErrorCode)
	}
	if got := q.partition(); got.PartitionEpoch != p.PartitionEpoch || !slices.Equal(got.ISR, full) {
		t.Fatalf("a refused change changed the partition: %+v", got)
	}

	// A stale broker epoch refuses the whole request.
	req := q.alterISR(full...)
	req.BrokerEpoch++
	if resp := q.c.AlterPartition(ctxT(t), req); resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("stale broker epoch: %+v", resp)
	}
	req.Version = 1
	if resp := q.c.AlterPartition(ctxT(t), req); resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v1: %+v", resp)
	}
}

func TestAlterPartitionIneligibleFencedReplica(t *testing.T) {
	q := startISRCluster(t, 3)
	p := q.partition()
	var fenced int32 = -1
	for _, r := range p.Replicas {
		if r != p.Leader {
			fenced = r
			break
		}
	}
	// The follower asks to be fenced: it leaves the ISR.
	hb := heartbeat(t, q.c, fenced, q.epochs[fenced], func(h *kmsg.BrokerHeartbeatRequest) { h.WantFence = true })
	if !hb.IsFenced {
		t.Fatalf("heartbeat %+v", hb)
	}
	if p = q.partition(); containsInt32(p.ISR, fenced) {
		t.Fatalf("fenced broker still in the ISR: %+v", p)
	}
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(append(slices.Clone(p.ISR), fenced)...)))
	if rp.ErrorCode != kerr.IneligibleReplica.Code {
		t.Fatalf("fenced member: %d", rp.ErrorCode)
	}
}

// TestAlterPartitionLeaderRecovery: a leader elected uncleanly is
// RECOVERING; it may only report RECOVERED with itself as the whole ISR,
// and the record that says so is version 1.
func TestAlterPartitionLeaderRecovery(t *testing.T) {
	q := startISRCluster(t, 3)
	p := q.partition()
	recovering := metadata.LeaderRecovering
	if _, err := q.c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: img.Topics["t"].ID, Leader: metadata.NoLeaderChange, ISR: []int32{p.Leader}, LeaderRecoveryState: &recovering}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := q.partition(); got.LeaderRecoveryState != metadata.LeaderRecovering {
		t.Fatalf("not recovering: %+v", got)
	}
	req := q.alterISR(p.ISR...)
	req.Topics[0].Partitions[0].LeaderRecoveryState = 1
	if rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), req)); rp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("recovering with followers: %d", rp.ErrorCode)
	}
	// Still recovering, alone: allowed, nothing changes.
	req = q.alterISR(p.Leader)
	req.Topics[0].Partitions[0].LeaderRecoveryState = 1
	if rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), req)); rp.ErrorCode != 0 || rp.LeaderRecoveryState != 1 {
		t.Fatalf("still recovering: %+v", rp)
	}
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(p.Leader)))
	if rp.ErrorCode != 0 || rp.LeaderRecoveryState != 0 {
		t.Fatalf("recovered: %+v", rp)
	}
	if got := q.partition(); got.LeaderRecoveryState != metadata.LeaderRecovered {
		t.Fatalf("image after recovery: %+v", got)
	}
}

// TestPartitionChangeLeaderEpochBumps: removing replicas always bumps the
// leader epoch; an ISR shrink bumps it only below metadata.version
// 3.6-IV0, as Kafka's PartitionChangeBuilder does.
func TestPartitionChangeLeaderEpochBumps(t *testing.T) {
	img := metadata.EmptyImage("c")
	for id := int32(1); id <= 3; id++ {
		img.Brokers[id] = &metadata.Broker{ID: id}
	}
	topic := &metadata.Topic{Name: "t", Partitions: []metadata.Partition{{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1}}}
	shrink := func(mv int16) *metadata.PartitionChangeRecord {
		img.Features = map[string]int16{metadata.MetadataVersionFeature: mv}
		pc := testEnv().newPartitionChange(img, topic, 0)
		pc.isr = []int32{1, 2}
		return pc.build()
	}
	if rec := shrink(mvNoLeaderEpochBumpOnShrink); rec.Leader != metadata.NoLeaderChange || !slices.Equal(rec.ISR, []int32{1, 2}) {
		t.Fatalf("shrink at 3.6-IV0: %+v", rec)
	}
	if rec := shrink(mvNoLeaderEpochBumpOnShrink - 1); rec.Leader != 1 {
		t.Fatalf("shrink at 3.5-IV2 keeps the leader epoch: %+v", rec)
	}
	img.Features = map[string]int16{metadata.MetadataVersionFeature: mvNoLeaderEpochBumpOnShrink}
	pc := testEnv().newPartitionChange(img, topic, 0)
	pc.replicas, pc.isr = []int32{1, 2}, []int32{1, 2}
	rec := pc.build()
	if rec.Leader != 1 || !slices.Equal(rec.Replicas, []int32{1, 2}) {
		t.Fatalf("removing a replica: %+v", rec)
	}
	if got := metadata.ApplyPartitionChange(topic.Partitions[0], rec); got.LeaderEpoch != 1 || got.Leader != 1 {
		t.Fatalf("replayed: %+v", got)
	}
}

// isrRequestTopic is a v2 AlterPartition topic asking for each partition's
// ISR at its current epochs in img.
func isrRequestTopic(img *metadata.Image, id protocol.UUID, isrs map[int32][]int32) kmsg.AlterPartitionRequestTopic {
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = id
	for _, i := range slices.Sorted(maps.Keys(isrs)) {
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition = i
		if t := img.TopicsByID[id]; t != nil && int(i) < len(t.Partitions) {
			rp.LeaderEpoch, rp.PartitionEpoch = t.Partitions[i].LeaderEpoch, t.Partitions[i].PartitionEpoch
		}
		rp.NewISR = isrs[i]
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

// TestAlterPartitionDecisionWithoutAQuorum: AlterPartition decided on an
// image: an accepted shrink is one record and the answer carries the
// partition as it leaves it; the refusals of one partition leave the
// others alone; completing a reassignment away from the sender answers
// NEW_LEADER_ELECTED; a stale broker epoch or an old version refuses the
// whole request.
func TestAlterPartitionDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	tID, mID := protocol.RandomUUID(), protocol.RandomUUID()
	recs := append(brokersAndTopics(3), topicRecords("t", tID,
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1},
		metadata.PartitionRecord{Replicas: []int32{2, 3, 1}, ISR: []int32{2, 3}, Leader: 2})...)
	// m-0 moves from broker 1 to broker 2; broker 2 has caught up.
	recs = append(recs, topicRecords("m", mID,
		metadata.PartitionRecord{Replicas: []int32{2, 1}, ISR: []int32{1}, Leader: 1, AddingReplicas: []int32{2}, RemovingReplicas: []int32{1}})...)
	img := imageOf(t, recs...)

	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 2
	req.BrokerID, req.BrokerEpoch = 1, img.Brokers[1].Epoch
	req.Topics = []kmsg.AlterPartitionRequestTopic{
		isrRequestTopic(img, tID, map[int32][]int32{0: {1, 2}, 1: {2, 3, 1}, 7: {1}}),
		isrRequestTopic(img, protocol.RandomUUID(), map[int32][]int32{0: {1}}),
		isrRequestTopic(img, mID, map[int32][]int32{0: {1, 2}}),
	}
	recs, resp, next := decideOn(t, e, img, (*env).alterPartition, req)
	if len(recs) != 2 || resp.ErrorCode != 0 || len(resp.Topics) != 3 {
		t.Fatalf("records %v, response %+v", recs, resp)
	}
	shrunk := resp.Topics[0].Partitions[0]
	if shrunk.ErrorCode != 0 || shrunk.LeaderID != 1 || shrunk.LeaderEpoch != 0 || !slices.Equal(shrunk.ISR, []int32{1, 2}) || shrunk.PartitionEpoch != 1 {
		t.Fatalf("t-0: %+v", shrunk)
	}
	if p := next.Topics["t"].Partitions[0]; !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 1 {
		t.Fatalf("t-0 after the shrink: %+v", p)
	}
	for i, code := range []int16{kerr.InvalidRequest.Code, kerr.UnknownTopicOrPartition.Code} {
		if rp := resp.Topics[0].Partitions[i+1]; rp.ErrorCode != code || rp.ISR != nil {
			t.Fatalf("t-%d: %+v, want error %d", rp.Partition, rp, code)
		}
	}
	if rp := resp.Topics[1].Partitions[0]; rp.ErrorCode != kerr.UnknownTopicID.Code {
		t.Fatalf("unknown topic id: %+v", rp)
	}
	if rp := resp.Topics[2].Partitions[0]; rp.ErrorCode != kerr.NewLeaderElected.Code || rp.ISR != nil {
		t.Fatalf("m-0: %+v", rp)
	}
	if p := next.Topics["m"].Partitions[0]; !slices.Equal(p.Replicas, []int32{2}) || !slices.Equal(p.ISR, []int32{2}) || p.Leader != 2 || p.Reassigning() {
		t.Fatalf("m-0 after the move: %+v", p)
	}

	req.BrokerEpoch++
	if recs, resp, _ := decideOn(t, e, next, (*env).alterPartition, req); len(recs) != 0 || resp.ErrorCode != kerr.StaleBrokerEpoch.Code || len(resp.Topics) != 0 {
		t.Fatalf("stale broker epoch: records %v, response %+v", recs, resp)
	}
	req.Version = 1
	if recs, resp, _ := decideOn(t, e, next, (*env).alterPartition, req); len(recs) != 0 || resp.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("v1: records %v, response %+v", recs, resp)
	}

	if failed := alterPartitionFailed(req, commitError(errNotController)); failed.ErrorCode != kerr.NotController.Code || len(failed.Topics) != 0 {
		t.Fatalf("failed commit: %+v", failed)
	}
}
