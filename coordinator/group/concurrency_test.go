package group

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicClient is a minimal eager consumer: join, (lead and) sync,
// heartbeat until told to rejoin.
type classicClient struct {
	h       *harness
	group   string
	id      string
	unknown *atomic.Int64 // UNKNOWN_MEMBER_ID answers seen by members that never left
}

func roundRobin(members []string, partitions int32) map[string][]byte {
	sort.Strings(members)
	per := map[string][]int32{}
	for p := int32(0); p < partitions; p++ {
		m := members[int(p)%len(members)]
		per[m] = append(per[m], p)
	}
	out := map[string][]byte{}
	for _, m := range members {
		a := kmsg.NewConsumerMemberAssignment()
		a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "wide", Partitions: per[m]}}
		out[m] = a.AppendTo(nil)
	}
	return out
}

func (c *classicClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		jr := c.h.c.JoinGroup(ctx, client, joinReq(c.group, c.id))
		switch jr.ErrorCode {
		case 0:
		case kerr.MemberIDRequired.Code:
			c.id = jr.MemberID
			continue
		case kerr.UnknownMemberID.Code:
			c.unknown.Add(1)
			c.id = ""
			continue
		default:
			continue
		}
		c.id = jr.MemberID
		var assignments map[string][]byte
		if jr.LeaderID == c.id {
			var ids []string
			for _, m := range jr.Members {
				ids = append(ids, m.MemberID)
			}
			assignments = roundRobin(ids, 40)
		}
		sreq := kmsg.NewPtrSyncGroupRequest()
		sreq.Version = 5
		sreq.Group, sreq.MemberID, sreq.Generation = c.group, c.id, jr.Generation
		for id, a := range assignments {
			sreq.GroupAssignment = append(sreq.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: a})
		}
		sr := c.h.c.SyncGroup(ctx, sreq)
		if sr.ErrorCode == kerr.UnknownMemberID.Code {
			c.unknown.Add(1)
			c.id = ""
		}
		if sr.ErrorCode != 0 {
			continue
		}
		for ctx.Err() == nil {
			time.Sleep(time.Millisecond)
			code := c.h.heartbeat(c.group, c.id, jr.Generation)
			if code == kerr.UnknownMemberID.Code {
				c.unknown.Add(1)
				c.id = ""
			}
			if code != 0 {
				break
			}
		}
	}
}

func (c *classicClient) leave() {
	c.h.c.LeaveGroup(context.Background(), &kmsg.LeaveGroupRequest{Version: 5, Group: c.group, Members: []kmsg.LeaveGroupRequestMember{{MemberID: c.id}}})
}

// waitClassicConverged waits for a Stable generation with n members whose
// assignments cover the 40 partitions exactly once.
func waitClassicConverged(t *testing.T, h *harness, group string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	var last string
	for time.Now().Before(deadline) {
		d := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{group}}).Groups[0]
		last = fmt.Sprintf("state %s, %d members", d.State, len(d.Members))
		if d.State == "Stable" && len(d.Members) == n {
			owned := map[int32]string{}
			ok := true
			for _, m := range d.Members {
				var a kmsg.ConsumerMemberAssignment
				if err := a.ReadFrom(m.MemberAssignment); err != nil {
					t.Fatalf("member %s assignment: %v", m.MemberID, err)
				}
				for _, tp := range a.Topics {
					for _, p := range tp.Partitions {
						if o, dup := owned[p]; dup {
							t.Fatalf("partition %d owned by %s and %s", p, o, m.MemberID)
						}
						owned[p] = m.MemberID
					}
				}
			}
			if ok && len(owned) == 40 {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("group never converged to %d members: %s", n, last)
}

func TestClassicTwentyMembersConverge(t *testing.T) {
	h := newHarness(t, nil)
	h.topics.add("wide", 40)
	const g = "twenty"
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var unknown atomic.Int64
	clients := make([]*classicClient, 20)
	cancels := make([]context.CancelFunc, 20)
	done := make([]chan struct{}, 20)
	var wg sync.WaitGroup
	for i := range clients {
		clients[i] = &classicClient{h: h, group: g, unknown: &unknown}
		cctx, ccancel := context.WithCancel(ctx)
		cancels[i], done[i] = ccancel, make(chan struct{})
		wg.Add(1)
		go func() { defer wg.Done(); defer close(done[i]); clients[i].run(cctx) }()
	}
	waitClassicConverged(t, h, g, 20)
	if n := unknown.Load(); n != 0 {
		t.Fatalf("%d UNKNOWN_MEMBER_ID answers while members only joined", n)
	}
	// Half leave concurrently; the rest converge.
	var leavers sync.WaitGroup
	for i := 0; i < 10; i++ {
		leavers.Add(1)
		go func() {
			defer leavers.Done()
			cancels[i]()
			<-done[i]
			clients[i].leave()
		}()
	}
	leavers.Wait()
	waitClassicConverged(t, h, g, 10)
	cancel()
	h.c.Unload(h.c.PartitionFor(g)) // releases parked joins
	wg.Wait()
}

// kipClient is a KIP-848 member that heartbeats in a loop and checks, in
// a registry shared by all members, that it never takes a partition
// another member still holds.
type kipClient struct {
	m        *kipMember
	registry *ownership
}

type ownership struct {
	mu     sync.Mutex
	owner  map[topicPartition]string
	errors []string
}

func (o *ownership) adopt(id string, before, after map[[16]byte][]int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for t, ps := range before {
		for _, p := range ps {
			if o.owner[topicPartition{t, p}] == id {
				delete(o.owner, topicPartition{t, p})
			}
		}
	}
	for t, ps := range after {
		for _, p := range ps {
			tp := topicPartition{t, p}
			if other, ok := o.owner[tp]; ok && other != id {
				o.errors = append(o.errors, fmt.Sprintf("%s took partition %d while %s held it", id, p, other))
			}
			o.owner[tp] = id
		}
	}
}

func (k *kipClient) step(h *harness) int16 {
	before := k.m.owned
	r := h.c.ConsumerGroupHeartbeat(context.Background(), client, k.m.request(rand.Intn(4) == 0))
	switch r.ErrorCode {
	case 0:
	case kerr.FencedMemberEpoch.Code, kerr.UnknownMemberID.Code:
		k.registry.adopt(k.m.id, before, nil)
		k.m.owned, k.m.epoch = nil, 0
		return r.ErrorCode
	default:
		return r.ErrorCode
	}
	k.m.epoch = r.MemberEpoch
	if r.Assignment != nil {
		after := map[[16]byte][]int32{}
		for _, t := range r.Assignment.Topics {
			after[t.TopicID] = t.Partitions
		}
		k.registry.adopt(k.m.id, before, after)
		k.m.owned = after
	}
	return 0
}

func TestConsumerProtocolTwentyMembersConverge(t *testing.T) {
	h := newHarness(t, nil)
	wide := h.topics.add("wide", 40)
	const g = "twenty-kip"
	reg := &ownership{owner: map[topicPartition]string{}}
	clients := make([]*kipClient, 20)
	for i := range clients {
		clients[i] = &kipClient{m: newKip(g, fmt.Sprintf("m%02d", i), "wide"), registry: reg}
	}
	var stop atomic.Bool
	var wg sync.WaitGroup
	quit := make([]chan struct{}, len(clients))
	done := make([]chan struct{}, len(clients))
	var unknown atomic.Int64
	for i := range clients {
		quit[i], done[i] = make(chan struct{}), make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[i])
			for n := 0; !stop.Load(); n++ {
				select {
				case <-quit[i]:
					return
				default:
				}
				if code := clients[i].step(h); code == kerr.UnknownMemberID.Code {
					unknown.Add(1)
				}
				time.Sleep(time.Duration(rand.Intn(2)) * time.Millisecond)
			}
		}()
	}
	waitKip := func(n int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			d := h.describeConsumer(g)
			if d.State == "Stable" && len(d.Members) == n {
				total := 0
				for _, m := range d.Members {
					for _, tp := range m.Assignment.TopicPartitions {
						total += len(tp.Partitions)
					}
				}
				if total == 40 {
					return
				}
			}
			time.Sleep(5 * time.Millisecond)
		}
		d := h.describeConsumer(g)
		t.Fatalf("never converged to %d members: state %s, %d members", n, d.State, len(d.Members))
	}
	waitKip(20)
	// Half leave concurrently.
	var leavers sync.WaitGroup
	for i := 0; i < 10; i++ {
		leavers.Add(1)
		go func() {
			defer leavers.Done()
			close(quit[i])
			<-done[i]
			// A leaving member revokes everything, then leaves.
			reg.adopt(clients[i].m.id, clients[i].m.owned, nil)
			req := clients[i].m.request(false)
			req.MemberEpoch = -1
			h.c.ConsumerGroupHeartbeat(context.Background(), client, req)
		}()
	}
	leavers.Wait()
	waitKip(10)
	stop.Store(true)
	wg.Wait()
	reg.mu.Lock()
	defer reg.mu.Unlock()
	for _, e := range reg.errors {
		t.Error(e)
	}
	if n := unknown.Load(); n != 0 {
		t.Errorf("%d UNKNOWN_MEMBER_ID answers to live members", n)
	}
	_ = wide
}
