package broker

// Departed brokers: the brokers this node has seen stop being live (fenced,
// or their registration gone) within the linger window. Metadata lists
// them for that long after this node applied the change (metadata.go), so
// that a client told of such a broker by another broker whose image still
// lags (its FindCoordinator named it as a coordinator) finds the broker in
// its next Metadata answer: it then fails to dial it and retries, instead
// of giving up on an id it cannot resolve (kgo's "unknown broker", fatal to
// a transactional producer).
//
// Times are this node's monotonic clock at the moment it first saw the
// change: either when the image subscription delivers it, or when a
// Metadata request reads an image newer than the last one observed
// (whichever comes first), so a request that reads a new image before the
// subscription has run still finds the broker listed.
//
// Goroutines and locking: observe runs on the metadata subscription's
// goroutine and on request handlers; lingering runs on request handlers.
// mu guards every field below it and is a leaf lock: nothing else is taken
// while it is held, and images are immutable, so reading them under it is
// safe.

import (
	"reflect"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// defaultFencedBrokerLinger is Kafka's default broker.session.timeout.ms,
// used when Options.FencedBrokerLinger is zero.
const defaultFencedBrokerLinger = 9 * time.Second

type departedBrokers struct {
	linger time.Duration
	now    func() time.Time

	mu sync.Mutex
	// observed is set once an image has been observed; offset is the
	// offset of the last one, brokers its (immutable) broker map.
	observed bool
	offset   int64
	brokers  map[int32]*metadata.Broker
	// gone holds, by id, the last live registration of each broker seen
	// leaving within the window, and when it was seen leaving.
	gone map[int32]departure
}

type departure struct {
	reg *metadata.Broker
	at  time.Time
}

func newDepartedBrokers(linger time.Duration, now func() time.Time) *departedBrokers {
	if linger == 0 {
		linger = defaultFencedBrokerLinger
	}
	if now == nil {
		now = time.Now
	}
	return &departedBrokers{linger: linger, now: now, gone: map[int32]departure{}}
}

// listed reports whether Metadata lists br as a live broker.
func listed(br *metadata.Broker) bool { return br != nil && !br.Fenced }

// observe records the brokers that stopped being live between the last
// image observed and img. An image no newer than the last one is ignored,
// as is the first image (this node cannot tell when what it shows
// happened).
func (d *departedBrokers) observe(img *metadata.Image) {
	if d == nil || img == nil || d.linger < 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.observed && img.Offset <= d.offset {
		return
	}
	first := !d.observed
	prev := d.brokers
	d.observed, d.offset, d.brokers = true, img.Offset, img.Brokers
	now := d.now()
	for id, dep := range d.gone {
		if now.Sub(dep.at) >= d.linger {
			delete(d.gone, id)
		}
	}
	// An image shares its broker map with the previous one unless a
	// broker record changed it.
	if first || reflect.ValueOf(prev).UnsafePointer() == reflect.ValueOf(img.Brokers).UnsafePointer() {
		return
	}
	for id, br := range prev {
		if listed(br) && !listed(img.Brokers[id]) {
			d.gone[id] = departure{reg: br, at: now}
		}
	}
	for id, br := range img.Brokers {
		if listed(br) {
			delete(d.gone, id) // back (re-registered and unfenced)
		}
	}
}

// lingering returns, by id, the registrations of the brokers that img
// does not list but that this node saw leave less than the window ago. The
// map is the caller's.
func (d *departedBrokers) lingering(img *metadata.Image) map[int32]*metadata.Broker {
	out := map[int32]*metadata.Broker{}
	if d == nil || d.linger < 0 {
		return out
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	for id, dep := range d.gone {
		if now.Sub(dep.at) < d.linger && !listed(img.Brokers[id]) {
			out[id] = dep.reg
		}
	}
	return out
}
