package controller

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/vfs"
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

func (q *isrCluster) partition() metadata.Partition {
	return *q.c.Image().Topic("t").Partitions.At(0)
}

// alterISR is the leader's v3 request for isr, from the current state.
func (q *isrCluster) alterISR(isr ...int32) *kmsg.AlterPartitionRequest {
	img := q.c.Image()
	p := *img.Topic("t").Partitions.At(0)
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	req.BrokerID = p.Leader
	req.BrokerEpoch = q.epochs[p.Leader]
	rt := kmsg.NewAlterPartitionRequestTopic()
	rt.TopicID = img.Topic("t").ID
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
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: img.Topic("t").ID, Leader: metadata.NoLeaderChange, ISR: []int32{p.Leader}, LeaderRecoveryState: &recovering}}, nil
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
