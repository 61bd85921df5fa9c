package broker

import (
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// slowFirstImage delays the first image it hands a subscriber, as a broker
// whose logs take long to open (recovery after a crash) holds up the
// replica manager's start, and records whether any image it delivers
// after that shows broker 1 fenced.
type slowFirstImage struct {
	MetadataView
	delay time.Duration

	mu          sync.Mutex
	fencedAfter bool
}

func (s *slowFirstImage) Subscribe(fn func(prev, next *metadata.Image)) (cancel func()) {
	first := true
	return s.MetadataView.Subscribe(func(prev, next *metadata.Image) {
		if first {
			first = false
			time.Sleep(s.delay)
		} else if b := next.Brokers[1]; b != nil && b.Fenced {
			s.mu.Lock()
			s.fencedAfter = true
			s.mu.Unlock()
		}
		fn(prev, next)
	})
}

// A broker keeps its lease while it starts: opening its logs may take
// longer than broker.session.timeout.ms, and the controller must not fence
// it meanwhile (the heartbeats run from the registration on, as Kafka's
// lifecycle manager's do).
func TestBrokerKeepsItsLeaseWhileStarting(t *testing.T) {
	var slow *slowFirstImage
	n := startTestNodeWithOptions(t, map[string]string{
		"broker.session.timeout.ms":    "400",
		"broker.heartbeat.interval.ms": "50",
	}, nil, nil, nil, func(o *Options) {
		slow = &slowFirstImage{MetadataView: o.Metadata, delay: 1500 * time.Millisecond}
		o.Metadata = slow
	})
	if b := n.ctrl.Image().Brokers[1]; b == nil || b.Fenced {
		t.Fatalf("broker 1 after start-up: %+v, want registered and unfenced", b)
	}
	slow.mu.Lock()
	defer slow.mu.Unlock()
	if slow.fencedAfter {
		t.Fatal("the controller fenced the broker while it was starting: its heartbeats stopped")
	}
}
