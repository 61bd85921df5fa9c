package replica

import (
	"bytes"
	"slices"
	"testing"
	"time"
)

// A node made leader assigns its epoch at its log end and loses the
// leadership before it appends anything (fault campaign finding #3). The
// next leader never had that epoch and tells it, as a follower, that its
// log diverged at its own log end: the truncation removes no record but
// must drop the epoch, or the follower asks again with the same epoch at
// once, for ever, and never rejoins the ISR.
func TestFollowerDropsAnEpochItLedWithoutAppending(t *testing.T) {
	c := newCluster(t, []int32{1, 2}, replicatedTopic(1), 10*time.Second)
	c.setPartition(led(1, 1, []int32{1, 2}, []int32{1, 2}))
	c.produce(1, -1, batch(t, 3, 1), batch(t, 2, 2))
	waitUntil(t, "node 2 caught up", func() bool { return c.log(2).LogEndOffset() == 5 })
	// Node 2 leads epoch 2 (its epoch cache gets epoch 2 at offset 5) and
	// appends nothing; node 1 takes over in epoch 3 (epoch 3 at 5).
	c.setPartition(led(2, 2, []int32{1, 2}, []int32{1, 2}))
	if e, _ := c.log(2).LatestEpoch(); e != 2 {
		t.Fatalf("node 2's latest epoch %d as leader of epoch 2", e)
	}
	c.setPartition(led(1, 3, []int32{1, 2}, []int32{1}))
	waitUntil(t, "node 2 back in the ISR", func() bool { return slices.Equal(c.isrOn(1), []int32{1, 2}) })
	if res := c.produce(1, -1, batch(t, 2, 3)); res[0].Result.Err != nil {
		t.Fatalf("acks=all with node 2 back in the ISR: %v", res[0].Result.Err)
	}
	waitUntil(t, "node 2 caught up again", func() bool { return c.log(2).LogEndOffset() == 7 })
	if !bytes.Equal(c.logBytes(2), c.logBytes(1)) {
		t.Fatal("node 2's log differs from the leader's")
	}
	if e, end := c.log(2).EndOffsetForEpoch(2); e != 1 || end != 5 {
		t.Fatalf("node 2's EndOffsetForEpoch(2) = (%d, %d), want (1, 5): it appended nothing in epoch 2", e, end)
	}
}
