package runtime

import (
	"slices"
	"testing"
)

func TestShardsFollowPrepareLoadUnload(t *testing.T) {
	type shard struct{ name string }
	var s Shards[*shard]
	if _, ok := s.Get(0); ok {
		t.Fatal("an empty map has a shard")
	}
	preparing := &shard{"preparing"}
	s.AddIfAbsent(3, func() *shard { return preparing })
	s.AddIfAbsent(3, func() *shard { t.Fatal("a second Prepare made a shard"); return nil })
	if got, _ := s.Get(3); got != preparing {
		t.Fatalf("after Prepare: %v", got)
	}
	loaded := &shard{"loaded"}
	if old, ok := s.Replace(3, loaded); !ok || old != preparing {
		t.Fatalf("Load replaced %v %v", old, ok)
	}
	s.RemoveIf(3, preparing)
	if got, _ := s.Get(3); got != loaded {
		t.Fatalf("a stale RemoveIf took the loaded shard out: %v", got)
	}
	other := &shard{"other"}
	s.Replace(1, other)
	if got := s.All(); !slices.Equal(got, []*shard{other, loaded}) {
		t.Fatalf("All: %v", got)
	}
	s.RemoveIf(3, loaded)
	if got, ok := s.Remove(1); !ok || got != other {
		t.Fatalf("Remove: %v %v", got, ok)
	}
	if got := s.All(); len(got) != 0 {
		t.Fatalf("left: %v", got)
	}
}
