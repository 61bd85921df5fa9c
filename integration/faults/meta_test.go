package faults

import (
	"context"
	"testing"
	"time"
)

func (b *builder) create(seq int64, topic string, outcome Type) {
	b.add(Op{Process: "meta", Type: Invoke, F: Create, Seq: seq, Value: topic})
	b.add(Op{Process: "meta", Type: outcome, F: Create, Seq: seq, Value: topic})
}

func (b *builder) alter(seq int64, topic, value string, outcome Type) {
	b.add(Op{Process: "meta", Type: Invoke, F: Alter, Seq: seq, Key: topic, Value: value})
	b.add(Op{Process: "meta", Type: outcome, F: Alter, Seq: seq, Key: topic, Value: value})
}

func (b *builder) view(broker int32, configs map[string]string) {
	b.add(Op{Process: "final", Type: OK, F: BrokerView, Partition: broker, Configs: configs})
}

func (b *builder) image(node int32, offset int64, digest string) {
	b.add(Op{Process: "final", Type: OK, F: Image, Partition: node, Offset: offset, Value: digest})
}

// healthyMeta: m-0 and m-2 created, m-1 refused, m-3's creation unknown
// (and it happened); m-0's retention acked at 10 then set to 11 with an
// unknown outcome (11 is there); m-2's last acked is 20; every broker
// agrees, every node at one image.
func healthyMeta() *builder {
	b := &builder{}
	b.create(0, "m-0", OK)
	b.create(1, "m-1", Fail)
	b.create(2, "m-2", OK)
	b.alter(3, "m-0", "10", OK)
	b.alter(4, "m-2", "19", Info)
	b.alter(5, "m-2", "20", OK)
	b.alter(6, "m-0", "11", Info)
	b.create(7, "m-3", Info)
	view := map[string]string{"m-0": "11", "m-2": "20", "m-3": ""}
	for id := int32(1); id <= 3; id++ {
		b.view(id, view)
		b.image(id, 40, "abc")
	}
	return b
}

func TestCheckMetaHealthyHistory(t *testing.T) {
	s := CheckMeta(healthyMeta().ops)
	if len(s.Violations) != 0 {
		t.Fatalf("violations in a healthy history:\n%s", s)
	}
	if s.Requests != 8 || s.Acked != 4 || s.Failed != 1 || s.Indeterminate != 3 || s.Brokers != 3 || s.Images != 3 {
		t.Errorf("counts: %+v", s)
	}
	t.Log(s)
}

// TestCheckMetaFindsEachViolation breaks the healthy history in one way
// per case and wants exactly that kind reported.
func TestCheckMetaFindsEachViolation(t *testing.T) {
	// setView replaces every broker's view (so that they still agree).
	setView := func(b *builder, v map[string]string) {
		for i := range b.ops {
			if b.ops[i].F == BrokerView {
				b.ops[i].Configs = v
			}
		}
	}
	cases := []struct {
		name  string
		kind  Kind
		build func() *builder
	}{
		{"an acknowledged topic missing everywhere", MetaLost, func() *builder {
			b := healthyMeta()
			setView(b, map[string]string{"m-0": "11", "m-3": ""})
			return b
		}},
		{"an acknowledged config change rolled back", MetaLost, func() *builder {
			b := healthyMeta()
			setView(b, map[string]string{"m-0": "11", "m-2": "19", "m-3": ""})
			return b
		}},
		{"no broker view", MetaLost, func() *builder {
			b := &builder{}
			b.create(0, "m-0", OK)
			return b
		}},
		{"a refused creation that happened", Unexpected, func() *builder {
			b := healthyMeta()
			setView(b, map[string]string{"m-0": "11", "m-1": "", "m-2": "20", "m-3": ""})
			return b
		}},
		{"one broker lost a topic", MetaBrokersDisagree, func() *builder {
			b := healthyMeta()
			b.ops[len(b.ops)-2].Configs = map[string]string{"m-0": "11", "m-2": "20"} // broker 3, m-3 (unknown) gone
			return b
		}},
		{"two digests at one offset", MetaDiverged, func() *builder {
			b := healthyMeta()
			b.ops[len(b.ops)-1].Value = "abd"
			return b
		}},
		{"images at different offsets", MetaDiverged, func() *builder {
			b := healthyMeta()
			b.ops[len(b.ops)-1].Offset = 39
			return b
		}},
		{"a node without an image", MetaDiverged, func() *builder {
			b := healthyMeta()
			b.ops[len(b.ops)-1].Type, b.ops[len(b.ops)-1].Error = Fail, "connection refused"
			return b
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := CheckMeta(c.build().ops)
			wantOnly(t, c.kind, s.Violations, s.String())
		})
	}
}

// At the deadline the answers recorded are the last round's the deadline
// did not cut short: a round whose requests the deadline failed says
// nothing of the nodes (#4 of TRACK-RECORD reported every node silent).
func TestUntilAgreedKeepsTheLastRoundTheDeadlineDidNotCut(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	rounds := 0
	got := untilAgreed(ctx, time.Millisecond, func() ([]Op, bool) {
		rounds++
		if rounds == 3 {
			cancel() // the deadline, in the middle of the round
			return []Op{{Partition: 1, Type: Fail, Error: "context deadline exceeded"}}, false
		}
		return []Op{{Partition: 1, Type: OK, Offset: int64(rounds)}}, false
	})
	if len(got) != 1 || got[0].Type != OK || got[0].Offset != 2 {
		t.Fatalf("recorded %+v, want round 2's answer", got)
	}
	agreed := untilAgreed(context.Background(), time.Millisecond, func() ([]Op, bool) {
		return []Op{{Partition: 1, Type: OK, Offset: 7}}, true
	})
	if len(agreed) != 1 || agreed[0].Offset != 7 {
		t.Fatalf("recorded %+v, want the agreeing round", agreed)
	}
}
