package metadata

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/gregorbroker/gregor/metadata/persist"
)

// TestOnePartitionChangeCopiesOnlyWhatItTouches: issue 27 asks that a
// change touching one partition cost O(changed), not O(all). On an image
// of 100,000 partitions (one topic of them, and 100,000 topics of one),
// moving one leader must allocate a few KiB (the paths to the topic and
// the partition in the persistent map and vector), not the megabytes a
// copy of the topic maps or of the partition slice took (18 MB for the one
// topic before the image was persistent), and share everything else: the
// maps and vectors of the two images differ in exactly that topic and
// partition.
func TestOnePartitionChangeCopiesOnlyWhatItTouches(t *testing.T) {
	for _, shape := range []struct{ topics, partitions int }{{1, 100_000}, {100_000, 1}} {
		t.Run(fmt.Sprintf("topics=%d/partitions=%d", shape.topics, shape.partitions), func(t *testing.T) {
			img := benchImage(t, shape.topics, shape.partitions)
			id := benchTopicID(shape.topics / 2)
			part := int32(shape.partitions / 2)
			was := img.TopicByID(id).Partition(part).Leader
			leader := was%3 + 1
			var next *Image
			var err error
			allocated := bytesAllocated(func() {
				next, err = ApplyBatch(img, []Record{&PartitionChangeRecord{PartitionID: part, TopicID: id, Leader: leader}}, img.Offset+1, 1)
			})
			if err != nil {
				t.Fatal(err)
			}
			if allocated > 64<<10 {
				t.Errorf("one partition change allocated %d bytes, want under 64 KiB", allocated)
			}
			var topics []string
			persist.Diff(img.Topics, next.Topics, func(a, b *Topic) bool { return a == b }, func(name string, _ *Topic, _ bool, _ *Topic, _ bool) {
				topics = append(topics, name)
			})
			if len(topics) != 1 || topics[0] != img.TopicByID(id).Name {
				t.Fatalf("topics that differ: %v", topics)
			}
			var parts []int
			persist.DiffVectors(img.TopicByID(id).Partitions, next.TopicByID(id).Partitions,
				func(a, b *Partition) bool { return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch },
				func(i int, _, _ *Partition) { parts = append(parts, i) })
			if len(parts) != 1 || parts[0] != int(part) {
				t.Fatalf("partitions that differ: %v", parts)
			}
			if img.TopicByID(id).Partition(part).Leader != was || next.TopicByID(id).Partition(part).Leader != leader {
				t.Fatalf("leaders %d -> %d, want %d -> %d", img.TopicByID(id).Partition(part).Leader, next.TopicByID(id).Partition(part).Leader, was, leader)
			}
		})
	}
}

func bytesAllocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
