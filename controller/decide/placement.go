package decide

// Replica placement in the manner of Kafka's StripedReplicaPlacer.
//
// Brokers in controlled shutdown are not used. Brokers are grouped by rack
// (brokers without a rack form one group of their own, ordered first); each
// rack keeps a list of its unfenced brokers and one of its fenced brokers.
// The first replica of every partition is an unfenced broker; the others
// are taken one per rack, walking the racks round from where the first one
// was found, unfenced brokers of a rack before its fenced ones, so that the
// replicas of a partition land on as many racks as there are. Each
// partition starts one rack further on, and each rack's lists one broker
// further on, from randomly chosen starting points, so leaders and
// replicas spread evenly. After as many partitions as there are unfenced
// brokers, the racks and lists are reshuffled so that the same pattern does
// not repeat. With a single rack this is plain striping over the brokers.
//
// The random choices draw on the deciding env's source (env.go), which
// only the loop uses: a decision that places replicas is still a function
// of its env, the image and the request.

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
)

// usableBroker is a broker placement may use.
type usableBroker struct {
	id     int32
	rack   rackName
	fenced bool
}

// rackName is a broker's rack; brokers that name none share the unset one.
type rackName struct {
	set  bool
	name string
}

func compareRackNames(a, b rackName) int {
	if a.set != b.set {
		if !a.set {
			return -1
		}
		return 1
	}
	return cmp.Compare(a.name, b.name)
}

type stripedPlacer struct {
	brokers     []usableBroker
	numUnfenced int
	rng         *rand.Rand
}

func newStripedPlacer(img *metadata.Image, rng *rand.Rand) *stripedPlacer {
	p := &stripedPlacer{rng: rng}
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		b := img.Brokers[id]
		if b.InControlledShutdown {
			continue
		}
		u := usableBroker{id: id, fenced: b.Fenced}
		if b.Rack != nil {
			u.rack = rackName{set: true, name: *b.Rack}
		}
		if !b.Fenced {
			p.numUnfenced++
		}
		p.brokers = append(p.brokers, u)
	}
	return p
}

// brokerList walks one list of brokers: each partition ("epoch") starts one
// position further on, and a partition takes each broker at most once.
type brokerList struct {
	brokers []int32
	offset  int
	index   int
	epoch   int
}

func (l *brokerList) initialize(rng *rand.Rand) {
	slices.Sort(l.brokers)
	if len(l.brokers) > 0 {
		l.offset = rng.IntN(len(l.brokers))
	}
}

func (l *brokerList) shuffle(rng *rand.Rand) {
	rng.Shuffle(len(l.brokers), func(i, j int) { l.brokers[i], l.brokers[j] = l.brokers[j], l.brokers[i] })
}

// next is the list's next broker for the partition numbered epoch, or -1
// when the list has none left for it.
func (l *brokerList) next(epoch int) int32 {
	if len(l.brokers) == 0 {
		return -1
	}
	if l.epoch != epoch {
		l.epoch = epoch
		l.index = 0
		l.offset = (l.offset + 1) % len(l.brokers)
	}
	if l.index >= len(l.brokers) {
		return -1
	}
	b := l.brokers[(l.index+l.offset)%len(l.brokers)]
	l.index++
	return b
}

type rack struct {
	unfenced brokerList
	fenced   brokerList
}

// next prefers the rack's unfenced brokers to its fenced ones.
func (r *rack) next(epoch int) int32 {
	if b := r.unfenced.next(epoch); b >= 0 {
		return b
	}
	return r.fenced.next(epoch)
}

// rackList is the state of one placement (one topic, or one
// CreatePartitions of a topic), as Kafka builds a RackList per placement.
type rackList struct {
	rng         *rand.Rand
	names       []rackName
	racks       map[rackName]*rack
	numUnfenced int
	epoch       int
	offset      int
}

func newRackList(brokers []usableBroker, numUnfenced int, rng *rand.Rand) *rackList {
	l := &rackList{rng: rng, racks: map[rackName]*rack{}, numUnfenced: numUnfenced}
	for _, b := range brokers {
		r := l.racks[b.rack]
		if r == nil {
			r = &rack{}
			l.racks[b.rack] = r
			l.names = append(l.names, b.rack)
		}
		if b.fenced {
			r.fenced.brokers = append(r.fenced.brokers, b.id)
		} else {
			r.unfenced.brokers = append(r.unfenced.brokers, b.id)
		}
	}
	slices.SortFunc(l.names, compareRackNames)
	for _, name := range l.names {
		r := l.racks[name]
		r.unfenced.initialize(rng)
		r.fenced.initialize(rng)
	}
	if len(l.names) > 0 {
		l.offset = rng.IntN(len(l.names))
	}
	return l
}

func (l *rackList) shuffle() {
	l.rng.Shuffle(len(l.names), func(i, j int) { l.names[i], l.names[j] = l.names[j], l.names[i] })
	for _, name := range l.names {
		r := l.racks[name]
		r.unfenced.shuffle(l.rng)
		r.fenced.shuffle(l.rng)
	}
}

// place picks the replicas of one partition; the caller has checked that
// there are rf usable brokers and at least one unfenced one.
func (l *rackList) place(rf int) []int32 {
	// A single unfenced broker never starts a new round: it would lead
	// every partition of every round anyway.
	if l.epoch == l.numUnfenced && l.numUnfenced > 1 {
		l.shuffle()
		l.epoch = 0
	}
	if l.offset == len(l.names) {
		l.offset = 0
	}
	replicas := make([]int32, 0, rf)
	// The leader: the first unfenced broker from the starting rack on.
	first := l.offset
	for {
		if b := l.racks[l.names[first]].unfenced.next(l.epoch); b >= 0 {
			replicas = append(replicas, b)
			break
		}
		first = (first + 1) % len(l.names)
	}
	// The followers: one per rack, round from the starting rack, skipping
	// the leader's rack on the first pass.
	at := l.offset
	for len(replicas) < rf {
		b := int32(-1)
		for b < 0 {
			if at == first {
				first = -1
			} else {
				b = l.racks[l.names[at]].next(l.epoch)
			}
			at = (at + 1) % len(l.names)
		}
		replicas = append(replicas, b)
	}
	l.epoch++
	l.offset++
	return replicas
}

// placementError carries Kafka's InvalidReplicationFactorException message
// verbatim (a sentence, so it does not follow Go's error string style).
type placementError string

func (e placementError) Error() string { return string(e) }

func (p *stripedPlacer) check(rf int) error {
	if rf <= 0 {
		return placementError(fmt.Sprintf("Invalid replication factor %d: the replication factor must be positive.", rf))
	}
	if p.numUnfenced == 0 {
		return placementError("All brokers are currently fenced.")
	}
	if total := len(p.brokers); rf > total {
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
	racks := newRackList(p.brokers, p.numUnfenced, p.rng)
	out := make([][]int32, 0, numPartitions)
	for range numPartitions {
		out = append(out, racks.place(rf))
	}
	return out, nil
}
