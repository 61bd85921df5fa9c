package controller

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// startELRISRCluster is a controller with ELR on, brokers 1 to n that
// support it, and topic "t" of one partition on three of them with
// min.insync.replicas 3.
func startELRISRCluster(t *testing.T, n int32) *isrCluster {
	t.Helper()
	c := startELRTest(t)
	q := &isrCluster{c: c, epochs: map[int32]int64{}}
	for id := int32(1); id <= n; id++ {
		q.epochs[id] = registerELRBroker(t, c, id)
	}
	if r := createTopic(t, c, "t", 1, 3); r.ErrorCode != 0 {
		t.Fatalf("create: %d", r.ErrorCode)
	}
	if r := setConfig(t, c, kmsg.ConfigResourceTypeTopic, "t", minInSyncReplicasConfig, opSet, strPtr("3")); r.ErrorCode != 0 {
		t.Fatalf("min.insync.replicas: %d", r.ErrorCode)
	}
	return q
}

func (q *isrCluster) fence(t *testing.T, id int32) {
	t.Helper()
	if r := heartbeat(t, q.c, id, q.epochs[id], func(h *kmsg.BrokerHeartbeatRequest) { h.WantFence = true }); r.ErrorCode != 0 || !r.IsFenced {
		t.Fatalf("fence %d: %+v", id, r)
	}
}

func (q *isrCluster) unfence(t *testing.T, id int32) {
	t.Helper()
	if r := heartbeat(t, q.c, id, q.epochs[id]); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("unfence %d: %+v", id, r)
	}
}

// TestAlterPartitionShrinkBelowMinISRFillsTheELR: the ISR a leader commits
// through AlterPartition keeps the ELR as fencing does (KIP-966): members
// that leave an ISR below min.insync.replicas join the ELR, and the ISR
// growing back empties it. When the ISR then empties, an ELR member that
// returns leads.
func TestAlterPartitionShrinkBelowMinISRFillsTheELR(t *testing.T) {
	q := startELRISRCluster(t, 3)
	before := q.partition()
	leader := before.Leader
	others := withoutInt32(slices.Clone(before.Replicas), leader)
	slices.Sort(others)

	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader)))
	if rp.ErrorCode != 0 || !slices.Equal(rp.ISR, []int32{leader}) {
		t.Fatalf("shrink: %+v", rp)
	}
	wantPartition(t, "shrink to the leader", q.partition(), leader, []int32{leader}, others, nil)
	if p := q.partition(); p.LeaderEpoch != before.LeaderEpoch || p.PartitionEpoch != before.PartitionEpoch+1 {
		t.Fatalf("epochs after the shrink: %+v (before %+v)", p, before)
	}
	rp = onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader, others[0])))
	if rp.ErrorCode != 0 {
		t.Fatalf("expand by one: %+v", rp)
	}
	wantPartition(t, "one back", q.partition(), leader, []int32{leader, others[0]}, others[1:], nil)
	rp = onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader, others[0], others[1])))
	if rp.ErrorCode != 0 {
		t.Fatalf("expand to all: %+v", rp)
	}
	wantPartition(t, "at min.insync.replicas", q.partition(), leader, []int32{leader, others[0], others[1]}, nil, nil)

	// Shrink again, then lose every broker: the ISR empties, the ELR holds
	// all three, and the last leader is remembered.
	if rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(leader))); rp.ErrorCode != 0 {
		t.Fatalf("shrink again: %+v", rp)
	}
	q.fence(t, others[1])
	wantPartition(t, "an ELR member fenced", q.partition(), leader, []int32{leader}, others, nil)
	q.fence(t, others[0])
	q.fence(t, leader)
	all := slices.Sorted(slices.Values(before.Replicas))
	wantPartition(t, "all fenced", q.partition(), -1, []int32{}, all, []int32{leader})
	// The first ELR member back leads: it is known to hold everything
	// committed, so this is a clean election.
	q.unfence(t, others[1])
	p := q.partition()
	wantPartition(t, "ELR member back", p, others[1], []int32{others[1]}, []int32{min(leader, others[0]), max(leader, others[0])}, nil)
	if p.LeaderRecoveryState != metadata.LeaderRecovered {
		t.Fatalf("an ELR election is clean: %+v", p)
	}
}

// TestSingleBrokerUncleanRestartLeadsAgain: a single broker killed and
// restarted (no PreviousBrokerEpoch) leaves its partitions' ISR and ELR,
// so they have no leader; as in Kafka, the last known leader leads again
// the moment it is unfenced, through an unclean election that marks it
// RECOVERING until its AlterPartition says otherwise.
func TestSingleBrokerUncleanRestartLeadsAgain(t *testing.T) {
	fsys := vfs.NewMemFS()
	formatELRTest(t, fsys)
	c := startTest(t, fsys, withELRSupport)
	registerELRBroker(t, c, 1)
	if r := createTopic(t, c, "t", 2, 1); r.ErrorCode != 0 {
		t.Fatalf("create: %d", r.ErrorCode)
	}
	// kill -9 of the combined node: its controller restarts too.
	c.Close()
	c = startTest(t, fsys, withELRSupport)
	req := registration(1, protocol.RandomUUID())
	req.Features = append(req.Features, kmsg.BrokerRegistrationRequestFeature{Name: metadata.EligibleLeaderReplicasFeature, MinSupportedVersion: 0, MaxSupportedVersion: 1})
	resp := c.RegisterBroker(ctxT(t), req)
	if resp.ErrorCode != 0 {
		t.Fatalf("re-register: %d", resp.ErrorCode)
	}
	for i, p := range c.Image().Topic("t").Partitions.All() {
		wantPartition(t, fmt.Sprintf("partition %d after the restart", i), *p, -1, []int32{}, nil, []int32{1})
	}
	if r := heartbeat(t, c, 1, resp.BrokerEpoch); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("unfence: %+v", r)
	}
	for i, p := range c.Image().Topic("t").Partitions.All() {
		wantPartition(t, fmt.Sprintf("partition %d after unfencing", i), *p, 1, []int32{1}, nil, nil)
		if p.LeaderRecoveryState != metadata.LeaderRecovering || p.LeaderEpoch != 2 {
			t.Fatalf("partition %d: %+v", i, p)
		}
	}
	// The leader reports it has recovered.
	q := &isrCluster{c: c, epochs: map[int32]int64{1: resp.BrokerEpoch}}
	if rp := onlyPartition(t, c.AlterPartition(ctxT(t), q.alterISR(1))); rp.ErrorCode != 0 || rp.LeaderRecoveryState != 0 {
		t.Fatalf("recovered: %+v", rp)
	}
}

// TestFencingDuringAReassignment: fencing a removing replica that leads
// moves leadership to a target replica in the ISR and keeps the
// reassignment going (its new replica has not caught up); the new leader's
// AlterPartition completes it.
func TestFencingDuringAReassignment(t *testing.T) {
	q, before, target := startMoveOffTheLeader(t)
	leader, spare := before.Leader, target[len(target)-1]
	q.fence(t, leader)
	p := q.partition()
	stay := withoutInt32(slices.Clone(before.ISR), leader)
	if p.Leader != target[0] || !slices.Equal(p.ISR, stay) || !p.Reassigning() ||
		!slices.Equal(p.RemovingReplicas, []int32{leader}) || p.LeaderEpoch != before.LeaderEpoch+1 {
		t.Fatalf("after fencing the removing leader: %+v (before %+v)", p, before)
	}
	rp := onlyPartition(t, q.c.AlterPartition(ctxT(t), q.alterISR(append(slices.Clone(p.ISR), spare)...)))
	if rp.ErrorCode != 0 {
		t.Fatalf("completing AlterPartition: %+v", rp)
	}
	p = q.partition()
	if !slices.Equal(p.Replicas, target) || p.Reassigning() || p.Leader != target[0] || !containsAll(p.ISR, target) {
		t.Fatalf("after completion: %+v", p)
	}
}
