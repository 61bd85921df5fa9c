package faults

import (
	"context"
	"maps"
	"slices"
	"testing"
)

// A heal whose rules could not be written (its context ended, as when a
// combined nemesis failed at the end of a run) is not taken for done: the
// next change writes that namespace's rules again, even though the
// dropped set already says healed. Before, the node stayed cut off for
// good while the nemesis logged "restored" (campaign seed
// 7623529080245183986, s01: TRACK-RECORD #4).
func TestNetworkRewritesRulesAFailedChangeLeft(t *testing.T) {
	rules := map[int][]int{} // what each namespace's table drops, as written
	var n *Network
	n = &Network{prefix: "10.0.0", ids: []int{1, 2, 3}, dropped: map[Link]bool{}, stale: map[int]bool{},
		applyRules: func(ctx context.Context, id int) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			var to []int
			for _, o := range n.ids {
				if n.dropped[Link{id, o}] {
					to = append(to, o)
				}
			}
			rules[id] = to
			return nil
		}}
	ctx := context.Background()
	if err := n.Isolate(ctx, 2); err != nil {
		t.Fatal(err)
	}
	want := map[int][]int{1: {2}, 2: {1, 3}, 3: {2}}
	if !maps.EqualFunc(rules, want, slices.Equal) {
		t.Fatalf("rules after isolating node 2: %v, want %v", rules, want)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := n.Heal(cancelled, 2); err == nil {
		t.Fatal("a heal with a cancelled context wrote the rules")
	}
	if err := n.HealAll(ctx); err != nil {
		t.Fatal(err)
	}
	want = map[int][]int{1: nil, 2: nil, 3: nil}
	if !maps.EqualFunc(rules, want, slices.Equal) {
		t.Fatalf("rules after the heal that failed and a second one: %v, want nothing dropped anywhere", rules)
	}
	if d := n.Dropped(); len(d) != 0 {
		t.Fatalf("dropped after the heal: %v", d)
	}
}
