package controller

// Replica placement in the manner of Kafka's StripedReplicaPlacer, for a
// cluster without racks (rack awareness comes later): brokers in
// controlled shutdown are not used; the first replica of every partition is
// an unfenced broker; further replicas come from the unfenced brokers and
// then the fenced ones. Each partition starts one broker further along a
// randomly rotated list, so leaders and replicas spread evenly; after every
// unfenced broker has led once the lists are reshuffled so that the same
// pattern does not repeat.

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
)

type stripedPlacer struct {
	unfenced []int32
	fenced   []int32
	rng      *rand.Rand
}

func newStripedPlacer(img *Image, rng *rand.Rand) *stripedPlacer {
	p := &stripedPlacer{rng: rng}
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		b := img.Brokers[id]
		switch {
		case b.InControlledShutdown:
		case b.Fenced:
			p.fenced = append(p.fenced, id)
		default:
			p.unfenced = append(p.unfenced, id)
		}
	}
	return p
}

// rotation walks one broker list: each partition ("epoch") starts one
// position further on.
type rotation struct {
	brokers []int32
	offset  int
	index   int
	epoch   int
}

func newRotation(brokers []int32, rng *rand.Rand) *rotation {
	r := &rotation{brokers: slices.Clone(brokers)}
	if len(r.brokers) > 0 {
		r.offset = rng.IntN(len(r.brokers))
	}
	return r
}

func (r *rotation) next(epoch int) (int32, bool) {
	if len(r.brokers) == 0 {
		return 0, false
	}
	if r.epoch != epoch {
		r.epoch = epoch
		r.index = 0
		r.offset = (r.offset + 1) % len(r.brokers)
	}
	if r.index >= len(r.brokers) {
		return 0, false
	}
	b := r.brokers[(r.index+r.offset)%len(r.brokers)]
	r.index++
	return b, true
}

func (r *rotation) shuffle(rng *rand.Rand) {
	rng.Shuffle(len(r.brokers), func(i, j int) { r.brokers[i], r.brokers[j] = r.brokers[j], r.brokers[i] })
}

// placementError carries Kafka's InvalidReplicationFactorException message
// verbatim (a sentence, so it does not follow Go's error string style).
type placementError string

func (e placementError) Error() string { return string(e) }

func (p *stripedPlacer) check(rf int) error {
	if rf <= 0 {
		return placementError(fmt.Sprintf("Invalid replication factor %d: the replication factor must be positive.", rf))
	}
	if len(p.unfenced) == 0 {
		return placementError("All brokers are currently fenced.")
	}
	if total := len(p.unfenced) + len(p.fenced); rf > total {
		return placementError(fmt.Sprintf("The target replication factor of %d cannot be reached because only %d broker(s) are registered.", rf, total))
	}
	return nil
}

// place assigns replicas to numPartitions new partitions.
func (p *stripedPlacer) place(numPartitions, rf int) ([][]int32, error) {
	return p.placeFrom(0, numPartitions, rf)
}

// placeFrom is place for partitions numbered from start (the numbering
// does not change the result; it is kept for symmetry with Kafka's
// PlacementSpec).
func (p *stripedPlacer) placeFrom(_ int, numPartitions, rf int) ([][]int32, error) {
	if err := p.check(rf); err != nil {
		return nil, err
	}
	unfenced := newRotation(p.unfenced, p.rng)
	fenced := newRotation(p.fenced, p.rng)
	out := make([][]int32, 0, numPartitions)
	epoch := 0
	for range numPartitions {
		if epoch == len(p.unfenced) && len(p.unfenced) > 1 {
			unfenced.shuffle(p.rng)
			fenced.shuffle(p.rng)
			epoch = 0
		}
		replicas := make([]int32, 0, rf)
		first, _ := unfenced.next(epoch)
		replicas = append(replicas, first)
		for len(replicas) < rf {
			b, ok := unfenced.next(epoch)
			if !ok {
				b, ok = fenced.next(epoch)
			}
			if !ok {
				// check() guarantees enough brokers.
				return nil, fmt.Errorf("ran out of brokers placing %d replicas", rf)
			}
			replicas = append(replicas, b)
		}
		epoch++
		out = append(out, replicas)
	}
	return out, nil
}
