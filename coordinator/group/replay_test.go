package group

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dumpState renders the persisted part of the coordinator's state
// canonically: what a replay of the log must rebuild. Classic groups in a
// rebalance are left out: the rebalance is volatile (in Kafka too), and a
// replay shows the group's last stored generation instead.
func dumpState(c *Coordinator, skip map[string]bool) string {
	var b strings.Builder
	shards := c.activeShards()
	for _, s := range shards {
		s.mu.Lock()
		fmt.Fprintf(&b, "partition %d\n", s.partition)
		for _, id := range sortedKeys(s.offsets) {
			o := s.offsets[id]
			for _, t := range sortedKeys(o.topics) {
				for _, p := range sortedPartitions(o.topics[t]) {
					e := o.topics[t][p]
					fmt.Fprintf(&b, " offset %s %s-%d = %d epoch %d meta %q at %d expire %d record %d\n", id, t, p, e.offset, e.leaderEpoch, e.metadata, e.commitTimestamp, e.expireTimestamp, e.recordOffset)
				}
			}
		}
		pids := make([]int64, 0, len(s.pending))
		for pid := range s.pending {
			pids = append(pids, pid)
		}
		sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
		for _, pid := range pids {
			for _, id := range sortedKeys(s.pending[pid]) {
				o := s.pending[pid][id]
				for _, t := range sortedKeys(o.topics) {
					for _, p := range sortedPartitions(o.topics[t]) {
						e := o.topics[t][p]
						fmt.Fprintf(&b, " pending %d %s %s-%d = %d record %d\n", pid, id, t, p, e.offset, e.recordOffset)
					}
				}
			}
		}
		for _, id := range sortedKeys(s.openTxns) {
			fmt.Fprintf(&b, " open %s %v\n", id, len(s.openTxns[id]))
		}
		for _, id := range sortedKeys(s.classic) {
			g := s.classic[id]
			if skip[id] {
				continue
			}
			if g.state != classicStable && g.state != classicEmpty {
				fmt.Fprintf(&b, " classic %s (rebalancing)\n", id)
				continue
			}
			fmt.Fprintf(&b, " classic %s %s gen %d type %q protocol %q leader %q\n", id, g.state, g.generation, g.protocolType, g.protocol, g.leader)
			ids := append([]string(nil), g.order...)
			sort.Strings(ids)
			for _, mid := range ids {
				m := g.members[mid]
				fmt.Fprintf(&b, "  member %s instance %v session %d rebalance %d meta %x assignment %x\n", m.id, derefStr(m.instanceID), m.sessionTimeout, m.rebalanceTimeout, m.metadataFor(g.protocol), m.assignment)
			}
		}
		for _, id := range sortedKeys(s.consumer) {
			g := s.consumer[id]
			fmt.Fprintf(&b, " consumer %s epoch %d assignment epoch %d state %s\n", id, g.epoch, g.assignmentEpoch, g.stateName())
			for _, mid := range sortedKeys(g.members) {
				m := g.members[mid]
				fmt.Fprintf(&b, "  member %s epoch %d prev %d state %d meta %+v/%v/%v/%v assigned %v pending %v target %v\n", mid, m.epoch, m.prevEpoch, m.state,
					m.meta.SubscribedTopicNames, derefStr(m.meta.SubscribedTopicRegex), derefStr(m.meta.InstanceID), m.meta.RebalanceTimeoutMs,
					toTopicPartitions(m.assigned), toTopicPartitions(m.pendingRevocation), toTopicPartitions(g.target[mid]))
			}
			for _, mid := range sortedKeys(g.target) {
				if g.members[mid] == nil {
					fmt.Fprintf(&b, "  orphan target %s %v\n", mid, toTopicPartitions(g.target[mid]))
				}
			}
			for _, re := range sortedKeys(g.regexes) {
				fmt.Fprintf(&b, "  regex %s -> %v\n", re, g.regexes[re].Topics)
			}
			owners := make([]string, 0, len(g.owners))
			for tp, m := range g.owners {
				owners = append(owners, fmt.Sprintf("%x-%d:%s", tp.topic, tp.partition, m))
			}
			sort.Strings(owners)
			fmt.Fprintf(&b, "  owners %v\n", owners)
		}
		s.mu.Unlock()
	}
	return b.String()
}

func derefStr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// TestReplayRebuildsSameState runs random operations of every kind and
// checks that replaying the log into a fresh coordinator gives the same
// state.
func TestReplayRebuildsSameState(t *testing.T) {
	for seed := int64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replayProperty(t, seed) })
	}
}

func replayProperty(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	h := newHarness(t, func(c *Config) {
		c.OffsetsRetentionMinutes = 1
		c.OffsetsRetentionCheckIntervalMs = 5000
	})
	ctx := context.Background()
	groups := []string{"g0", "g1", "g2", "g3", "g4"}
	topics := []string{"foo", "bar", "baz"}
	kips := map[string]*kipMember{}
	classicIDs := map[string]string{}
	pick := func(ss []string) string { return ss[rng.Intn(len(ss))] }
	for op := 0; op < 300; op++ {
		g := pick(groups)
		switch rng.Intn(14) {
		case 0, 1:
			p := int32(rng.Intn(3))
			if rng.Intn(2) == 0 {
				g = "c" + g
			}
			h.c.OffsetCommit(ctx, commitReq(g, -1, "", pick(topics), map[int32]int64{p: rng.Int63n(1000)}, pick([]string{"", "m", "meta"})))
		case 2, 3, 4:
			key := fmt.Sprintf("%s/k%d", g, rng.Intn(4))
			m := kips[key]
			if m == nil {
				m = newKip(g, key, pick(topics))
				if rng.Intn(3) == 0 {
					m.instance = strPtr("inst-" + key)
				}
				if rng.Intn(4) == 0 {
					m.topics, m.regex = nil, strPtr("ba.*")
				}
				if rng.Intn(3) == 0 {
					m.assignor = strPtr(pick([]string{"uniform", "range"}))
				}
				kips[key] = m
			}
			if rng.Intn(6) == 0 {
				m.topics = []string{pick(topics), pick(topics)}
			}
			if r := h.hb(m, rng.Intn(2) == 0); r.ErrorCode != 0 {
				m.epoch, m.owned = 0, nil
			}
		case 5:
			for key, m := range kips {
				if m.group != g || m.epoch <= 0 {
					continue
				}
				req := m.request(false)
				req.MemberEpoch = -1
				if m.instance != nil && rng.Intn(2) == 0 {
					req.MemberEpoch = -2
				}
				h.c.ConsumerGroupHeartbeat(ctx, client, req)
				delete(kips, key)
				break
			}
		case 6:
			if rng.Intn(4) != 0 {
				g = "c" + g // mostly groups no consumer-protocol member touches
			}
			req := joinReq(g, classicIDs[g])
			if rng.Intn(3) == 0 {
				req.InstanceID = strPtr("static-" + g)
			}
			var jr *kmsg.JoinGroupResponse
			if req.InstanceID == nil && req.MemberID == "" {
				first := h.c.JoinGroup(ctx, client, req)
				if first.MemberID == "" {
					continue
				}
				req.MemberID = first.MemberID
			}
			jr = recv(t, async(func() *kmsg.JoinGroupResponse {
				cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
				defer cancel()
				return h.c.JoinGroup(cctx, client, req)
			}))
			if jr.ErrorCode != 0 {
				continue
			}
			classicIDs[g] = jr.MemberID
			cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			sreq := kmsg.NewPtrSyncGroupRequest()
			sreq.Version = 5
			sreq.Group, sreq.MemberID, sreq.Generation = g, jr.MemberID, jr.Generation
			sreq.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: jr.MemberID, MemberAssignment: []byte(fmt.Sprint("a", op))}}
			h.c.SyncGroup(cctx, sreq)
			cancel()
		case 7:
			if rng.Intn(4) != 0 {
				g = "c" + g
			}
			if id := classicIDs[g]; id != "" {
				h.c.LeaveGroup(ctx, &kmsg.LeaveGroupRequest{Version: 5, Group: g, Members: []kmsg.LeaveGroupRequestMember{{MemberID: id}}})
				delete(classicIDs, g)
			}
		case 8:
			h.advance(time.Duration(rng.Intn(30)) * time.Second)
		case 9:
			h.c.DeleteGroups(ctx, &kmsg.DeleteGroupsRequest{Version: 2, Groups: []string{g, "c" + g}})
		case 10:
			h.c.OffsetDelete(ctx, &kmsg.OffsetDeleteRequest{Group: g, Topics: []kmsg.OffsetDeleteRequestTopic{{Topic: pick(topics), Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}})
		case 11:
			name := pick(append(topics, "bax"))
			info, _ := h.topics.TopicByName(name)
			h.topics.add(name, info.Partitions+1)
		case 12:
			if rng.Intn(2) == 0 {
				g = "c" + g
			}
			pid := int64(100 + rng.Intn(3))
			h.c.TxnOffsetCommit(ctx, txnCommitReq(g, pid, -1, "", pick(topics), map[int32]int64{int32(rng.Intn(3)): rng.Int63n(1000)}))
		case 13:
			pid := int64(100 + rng.Intn(3))
			_ = h.c.CompleteTransaction(ctx, h.c.PartitionFor(g), pid, 0, 1, rng.Intn(3) != 0)
		}
	}
	// Let parked requests and timers settle.
	h.c.Tick(ctx)
	rebalancing := map[string]bool{}
	for _, sh := range h.c.activeShards() {
		sh.mu.Lock()
		for id, g := range sh.classic {
			if g.state == classicPreparing || g.state == classicCompleting {
				rebalancing[id] = true
			}
		}
		sh.mu.Unlock()
	}
	live, replayed := dumpState(h.c, rebalancing), dumpState(h.reload(), rebalancing)
	if live != replayed {
		t.Fatalf("replay differs (seed %d)\nlive:\n%s\nreplayed:\n%s", seed, live, replayed)
	}
	if testing.Verbose() || !strings.Contains(live, "consumer ") || !strings.Contains(live, "offset ") {
		t.Logf("seed %d exercised little:\n%s", seed, live)
	}
}
