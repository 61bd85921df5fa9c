package group

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func benchHarness(b *testing.B) *harness { return newHarness(b, nil) }

// BenchmarkOffsetCommit measures commits through the coordinator with an
// in-memory log (the coordinator's own cost: validation, record encoding,
// batch building, apply).
func BenchmarkOffsetCommit(b *testing.B) {
	h := benchHarness(b)
	req := commitReq("bench", -1, "", "foo", map[int32]int64{0: 1, 1: 2, 2: 3}, "")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req.Topics[0].Partitions[0].Offset = int64(i)
		if r := h.c.OffsetCommit(ctx, req); r.Topics[0].Partitions[0].ErrorCode != 0 {
			b.Fatal(r.Topics[0].Partitions[0].ErrorCode)
		}
	}
}

// BenchmarkClassicThirtyMembersStable is the time for 30 classic members
// to form a stable group (initial rebalance delay 0).
func BenchmarkClassicThirtyMembersStable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		h := benchHarness(b)
		group := fmt.Sprint("g", i)
		var wg sync.WaitGroup
		ids := make([]string, 30)
		for m := range ids {
			r := h.c.JoinGroup(context.Background(), client, joinReq(group, ""))
			ids[m] = r.MemberID
		}
		joins := make([]*kmsg.JoinGroupResponse, 30)
		for m := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				joins[m] = h.c.JoinGroup(context.Background(), client, joinReq(group, ids[m]))
			}()
		}
		wg.Wait()
		for m := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				req := kmsg.NewPtrSyncGroupRequest()
				req.Version, req.Group, req.MemberID, req.Generation = 5, group, ids[m], joins[m].Generation
				if joins[m].LeaderID == ids[m] {
					for _, id := range ids {
						req.GroupAssignment = append(req.GroupAssignment, kmsg.SyncGroupRequestGroupAssignment{MemberID: id, MemberAssignment: []byte{}})
					}
				}
				h.c.SyncGroup(context.Background(), req)
			}()
		}
		wg.Wait()
	}
}

// BenchmarkConsumerThirtyMembersStable is the time for 30 KIP-848 members
// to reach a stable, fully reconciled group.
func BenchmarkConsumerThirtyMembersStable(b *testing.B) {
	for i := 0; i < b.N; i++ {
		h := benchHarness(b)
		h.topics.add("wide", 60)
		group := fmt.Sprint("g", i)
		ms := make([]*kipMember, 30)
		for m := range ms {
			ms[m] = newKip(group, fmt.Sprint("m", m), "wide")
		}
		for round := 0; ; round++ {
			for _, m := range ms {
				h.hb(m, true)
			}
			if d := h.describeConsumer(group); d.State == "Stable" {
				break
			}
			if round > 100 {
				b.Fatal("never stable")
			}
		}
	}
}
