package decide

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// TestPeriodicChecksLookOnlyAtWhatChanged: with since (an image with no
// leaderless or imbalanced partition) the checks look only at what differs
// from it, and must answer as a look at every partition does, whatever
// the batch: a leader moved, a topic created or deleted, partitions
// added, a topic recreated under its name.
func TestPeriodicChecksLookOnlyAtWhatChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 27))
	var recs []metadata.Record
	for i := range 40 {
		id := checkTopicID(i)
		recs = append(recs, &metadata.TopicRecord{Name: fmt.Sprintf("t%d", i), TopicID: id})
		for p := range 1 + i%70 {
			recs = append(recs, &metadata.PartitionRecord{PartitionID: int32(p), TopicID: id, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 1})
		}
	}
	base, err := metadata.ApplyBatch(metadata.EmptyImage("c"), recs, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if HasLeaderlessPartition(nil, base) || HasImbalancedPartition(nil, base) {
		t.Fatal("the base image has something to elect")
	}
	next := 1000
	for round := range 2000 {
		var batch []metadata.Record
		touched := map[string]bool{}
		for range 1 + rng.IntN(3) {
			name := fmt.Sprintf("t%d", rng.IntN(40))
			if touched[name] {
				continue
			}
			touched[name] = true
			tp := base.Topic(name)
			switch k := rng.IntN(10); {
			case tp == nil:
				next++
				id := checkTopicID(next)
				batch = append(batch, &metadata.TopicRecord{Name: name, TopicID: id},
					&metadata.PartitionRecord{TopicID: id, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: int32(rng.IntN(3) + 1)})
			case k == 0:
				batch = append(batch, &metadata.RemoveTopicRecord{TopicID: tp.ID})
			case k == 1:
				batch = append(batch, &metadata.PartitionRecord{PartitionID: tp.PartitionCount(), TopicID: tp.ID, Replicas: []int32{2, 3}, ISR: []int32{2, 3}, Leader: int32(rng.IntN(4))})
			case k == 2:
				// Recreated under its name with a new id.
				next++
				id := checkTopicID(next)
				batch = append(batch, &metadata.RemoveTopicRecord{TopicID: tp.ID}, &metadata.TopicRecord{Name: name, TopicID: id},
					&metadata.PartitionRecord{TopicID: id, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: int32(rng.IntN(3) + 1)})
			default:
				id := tp.ID
				leader := int32(rng.IntN(4)) // 0: no such replica (imbalanced); 3 of {1,2,3}: imbalanced
				if rng.IntN(3) == 0 {
					leader = -1
				}
				batch = append(batch, &metadata.PartitionChangeRecord{TopicID: id, PartitionID: int32(rng.IntN(int(tp.PartitionCount()))), Leader: leader})
			}
		}
		img, err := metadata.ApplyBatch(base, batch, base.Offset+1, 1)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		for _, check := range []struct {
			name string
			f    func(since, img *metadata.Image) bool
		}{{"leaderless", HasLeaderlessPartition}, {"imbalanced", HasImbalancedPartition}} {
			if got, want := check.f(base, img), check.f(nil, img); got != want {
				for _, r := range batch {
					t.Logf("%T %+v", r, r)
				}
				t.Fatalf("round %d: %s since the base image %v, looking at every partition %v", round, check.name, got, want)
			}
		}
		// The next round starts from an image with nothing to elect.
		if !HasLeaderlessPartition(nil, img) && !HasImbalancedPartition(nil, img) {
			base = img
		}
	}
}

func checkTopicID(i int) protocol.UUID {
	var id protocol.UUID
	id[14], id[15] = byte(i>>8), byte(i+1)
	return id
}
