package faults

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/integration"
)

func TestNewPlanReplaysFromTheSeed(t *testing.T) {
	layouts := []integration.ClusterLayout{integration.Combined3, integration.Split3x3}
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 40; seed++ {
		for i := range 5 {
			a, b := NewPlan(seed, i, layouts), NewPlan(seed, i, layouts)
			if a.Name() != b.Name() || a.Hold != b.Hold || a.RunSeed != b.RunSeed {
				t.Fatalf("seed %d schedule %d drew %s (%s, %d) then %s (%s, %d)", seed, i, a.Name(), a.Hold, a.RunSeed, b.Name(), b.Hold, b.RunSeed)
			}
			if a.Hold < 5e9 || a.Hold > 15e9 {
				t.Errorf("%s: hold %s outside 5-15 s", a.Name(), a.Hold)
			}
			kinds := map[string]int{}
			for _, n := range a.Nemeses {
				seen[n.name] = true
				for kind, list := range map[string][]nemesisKind{"process": processNemeses, "network": networkNemeses, "environment": environmentNemeses} {
					if slices.ContainsFunc(list, func(k nemesisKind) bool { return k.name == n.name }) {
						kinds[kind]++
					}
				}
				if n.pause && a.Hold < pauseHold {
					t.Errorf("%s: a pause held %s, less than %s", a.Name(), a.Hold, pauseHold)
				}
			}
			if kinds["environment"] > 0 && kinds["process"] > 0 {
				t.Errorf("%s: an environment nemesis beside a process one", a.Name())
			}
			seen[string(a.Layout)] = true
			seen["combined:"+map[bool]string{true: "yes", false: "no"}[len(a.Nemeses) > 1]] = true
		}
	}
	for _, n := range slices.Concat(processNemeses, networkNemeses, environmentNemeses) {
		if !seen[n.name] {
			t.Errorf("200 plans never drew %s", n.name)
		}
	}
	for _, want := range []string{string(integration.Combined3), string(integration.Split3x3), "combined:yes", "combined:no"} {
		if !seen[want] {
			t.Errorf("200 plans never drew %s", want)
		}
	}
}

// The environment nemeses came later, from draws of their own: the seeds
// already recorded (make test's, TRACK-RECORD's) still draw the layout,
// process and network nemeses, hold and run seed they drew before.
func TestNewPlanKeepsTheDrawsOfRecordedSeeds(t *testing.T) {
	all := []integration.ClusterLayout{integration.Combined3, integration.Combined5, integration.Split3x3}
	for _, tc := range []struct {
		seed    uint64
		i       int
		layouts []integration.ClusterLayout
		name    string
		runSeed uint64
	}{
		{12698874545172988931, 0, []integration.ClusterLayout{integration.Combined3}, "s00-combined3-split-majority", 3025409985485751062},
		{7623529080245183986, 1, all, "s01-combined5-isolate-random+kill-controller-reassigning", 16463206979458761151},
	} {
		p := NewPlan(tc.seed, tc.i, tc.layouts)
		var old []string
		for _, n := range p.Nemeses {
			if !slices.ContainsFunc(environmentNemeses, func(k nemesisKind) bool { return k.name == n.name }) {
				old = append(old, n.name)
			}
		}
		got := fmt.Sprintf("s%02d-%s-%s", p.Index, p.Layout, strings.Join(old, "+"))
		if got != tc.name || p.RunSeed != tc.runSeed {
			t.Errorf("seed %d schedule %d: %s (run seed %d), want %s (run seed %d)", tc.seed, tc.i, got, p.RunSeed, tc.name, tc.runSeed)
		}
	}
}

// cutOf is the set of dropped links.
func cutOf(links []Link) map[Link]bool {
	m := map[Link]bool{}
	for _, l := range links {
		m[l] = true
	}
	return m
}

// components are the groups of nodes that reach each other both ways.
func components(ids []int, cut map[Link]bool) [][]int {
	var out [][]int
	done := map[int]bool{}
	for _, a := range ids {
		if done[a] {
			continue
		}
		group := []int{a}
		done[a] = true
		for _, b := range ids {
			if !done[b] && !cut[Link{a, b}] && !cut[Link{b, a}] {
				group = append(group, b)
				done[b] = true
			}
		}
		out = append(out, group)
	}
	return out
}

func TestShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, ids := range [][]int{{1, 2, 3}, {1, 2, 3, 4, 5}, {101, 102, 103, 1, 2, 3}} {
		for range 20 {
			links, what := IsolateOne(rng, ids)
			cut := cutOf(links)
			if len(links) != 2*(len(ids)-1) || len(components(ids, cut)) != 2 {
				t.Errorf("%v IsolateOne (%s): %v", ids, what, links)
			}

			links, what = MajoritySplit(rng, ids)
			cut = cutOf(links)
			groups := components(ids, cut)
			if len(groups) != 2 || 2*min(len(groups[0]), len(groups[1])) >= len(ids) {
				t.Errorf("%v MajoritySplit (%s): groups %v", ids, what, groups)
			}

			links, what = Bridge(rng, ids)
			cut = cutOf(links)
			bridges := 0
			for _, a := range ids {
				reachesAll := true
				for _, b := range ids {
					if cut[Link{a, b}] || cut[Link{b, a}] {
						reachesAll = false
					}
				}
				if reachesAll {
					bridges++
				}
			}
			if bridges != 1 || len(links) == 0 {
				t.Errorf("%v Bridge (%s): %d nodes reach all, links %v", ids, what, bridges, links)
			}

			links, what = OneWay(rng, ids)
			if len(links) != len(ids)-1 {
				t.Errorf("%v OneWay (%s): %v", ids, what, links)
			}
			cut = cutOf(links)
			for _, l := range links {
				if cut[Link{l.To, l.From}] {
					t.Errorf("%v OneWay (%s): both ways between %d and %d", ids, what, l.From, l.To)
				}
			}
		}
	}
	a, _ := Bridge(rand.New(rand.NewPCG(1, 2)), []int{1, 2, 3})
	b, _ := Bridge(rand.New(rand.NewPCG(1, 2)), []int{1, 2, 3})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("one seed, two bridges: %v and %v", a, b)
	}
}
