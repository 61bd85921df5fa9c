package decide

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
)

func placementImage(racks map[int32]string, fenced ...int32) *metadata.Image {
	img := metadata.EmptyImage("c")
	img.Brokers = map[int32]*metadata.Broker{}
	for id, r := range racks {
		b := &metadata.Broker{ID: id}
		if r != "" {
			rack := r
			b.Rack = &rack
		}
		img.Brokers[id] = b
	}
	for _, id := range fenced {
		img.Brokers[id].Fenced = true
	}
	return img
}

func TestPlacementSpreadsReplicasOverRacks(t *testing.T) {
	racks := map[int32]string{1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
	img := placementImage(racks)
	for seed := range uint64(20) {
		p := newStripedPlacer(img, rand.New(rand.NewPCG(seed, seed)))
		got, err := p.place(60, 3)
		if err != nil {
			t.Fatal(err)
		}
		leaders := map[int32]int{}
		for i, replicas := range got {
			seen := map[string]bool{}
			for _, r := range replicas {
				seen[racks[r]] = true
			}
			if len(replicas) != 3 || len(seen) != 3 {
				t.Fatalf("seed %d partition %d: replicas %v do not span the three racks", seed, i, replicas)
			}
			leaders[replicas[0]]++
		}
		for id := range racks {
			if leaders[id] != 10 {
				t.Fatalf("seed %d: leaders %v, want 10 each", seed, leaders)
			}
		}
	}
}

func TestPlacementUnevenRacks(t *testing.T) {
	racks := map[int32]string{1: "a", 2: "a", 3: "a", 4: "b"}
	p := newStripedPlacer(placementImage(racks), rand.New(rand.NewPCG(1, 2)))
	got, err := p.place(8, 2)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]int{}
	for i, replicas := range got {
		if racks[replicas[0]] == racks[replicas[1]] {
			t.Fatalf("partition %d: %v on one rack", i, replicas)
		}
		leaders[replicas[0]]++
	}
	if leaders[1]+leaders[2]+leaders[3]+leaders[4] != 8 || leaders[4] == 0 {
		t.Fatalf("leaders %v", leaders)
	}
}

func TestPlacementWithoutRacksStripes(t *testing.T) {
	p := newStripedPlacer(placementImage(map[int32]string{1: "", 2: "", 3: ""}), rand.New(rand.NewPCG(3, 4)))
	got, err := p.place(3, 2)
	if err != nil {
		t.Fatal(err)
	}
	leaders := map[int32]bool{}
	for _, replicas := range got {
		if replicas[0] == replicas[1] {
			t.Fatalf("a broker twice: %v", replicas)
		}
		leaders[replicas[0]] = true
	}
	if len(leaders) != 3 {
		t.Fatalf("three partitions on three brokers led by %v", leaders)
	}
}

func TestPlacementFencedAndShuttingDown(t *testing.T) {
	img := placementImage(map[int32]string{1: "a", 2: "b", 3: "c"}, 3)
	img.Brokers[2].InControlledShutdown = true
	p := newStripedPlacer(img, rand.New(rand.NewPCG(5, 6)))
	// Broker 2 is not usable; fenced broker 3 may follow but never lead.
	got, err := p.place(4, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, replicas := range got {
		if replicas[0] != 1 || replicas[1] != 3 {
			t.Fatalf("replicas %v, want [1 3]", replicas)
		}
	}
	for _, tc := range []struct {
		rf   int
		img  *metadata.Image
		want string
	}{
		{0, img, "Invalid replication factor 0: the replication factor must be positive."},
		{3, img, "The target replication factor of 3 cannot be reached because only 2 broker(s) are registered."},
		{1, placementImage(map[int32]string{1: "a"}, 1), "All brokers are currently fenced."},
	} {
		_, err := newStripedPlacer(tc.img, rand.New(rand.NewPCG(7, 8))).place(1, tc.rf)
		if err == nil || err.Error() != tc.want {
			t.Errorf("rf %d: %v, want %q", tc.rf, err, tc.want)
		}
	}
}

// The placement of a decision is a function of its env's random source:
// two decisions of one CreateTopics with equally seeded envs place every
// replica alike, so a decision replays the same in a test.
func TestPlacementOfADecisionFollowsTheEnvsRandomSource(t *testing.T) {
	var recs []metadata.Record
	for id := int32(1); id <= 6; id++ {
		rack := string(rune('a' + id%3))
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, BrokerEpoch: int64(id), Rack: &rack})
	}
	img := imageOf(t, recs...)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("x", 12, 3), topicReq("y", 5, 2)}
	replicasOf := func(e *Env) [][]int32 {
		recs, _, _ := decideOn(t, e, img, (*Env).CreateTopics, req)
		var out [][]int32
		for _, r := range recs {
			if p, ok := r.(*metadata.PartitionRecord); ok {
				out = append(out, p.Replicas)
			}
		}
		return out
	}
	first, second := replicasOf(testEnv()), replicasOf(testEnv())
	if len(first) != 17 || !slices.EqualFunc(first, second, slices.Equal[[]int32]) {
		t.Fatalf("placements differ:\n%v\n%v", first, second)
	}
	other := testEnv()
	other.Rand = rand.New(rand.NewPCG(9, 9))
	if slices.EqualFunc(first, replicasOf(other), slices.Equal[[]int32]) {
		t.Fatal("another random source placed every replica alike")
	}
}
