package main

import (
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/broker"
	"github.com/gregorbroker/gregor/metadata"
)

type fixedImage struct{ img *metadata.Image }

func (f fixedImage) Image() *metadata.Image { return f.img }
func (f fixedImage) Subscribe(func(prev, next *metadata.Image)) func() {
	return func() {}
}

func TestBrokerReadyFollowsItsRegistration(t *testing.T) {
	view := func(b *metadata.Broker) *broker.MetadataView {
		img := &metadata.Image{Brokers: map[int32]*metadata.Broker{}}
		if b != nil {
			img.Brokers[b.ID] = b
		}
		var v broker.MetadataView = fixedImage{img}
		return &v
	}
	for _, c := range []struct {
		name  string
		view  *broker.MetadataView
		ready bool
		why   string
	}{
		{"no metadata yet", nil, false, "not following"},
		{"not registered", view(nil), false, "not registered"},
		{"fenced", view(&metadata.Broker{ID: 1, Fenced: true}), false, "fenced"},
		{"controlled shutdown", view(&metadata.Broker{ID: 1, InControlledShutdown: true}), false, "controlled shutdown"},
		{"unfenced", view(&metadata.Broker{ID: 1}), true, ""},
	} {
		ready, why := brokerReady(c.view, 1)
		if ready != c.ready || !strings.Contains(why, c.why) {
			t.Errorf("%s: ready %v (%q), want %v (%q)", c.name, ready, why, c.ready, c.why)
		}
	}
}
