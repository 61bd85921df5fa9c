package group

// The target assignment of a streams group, computed by Kafka 4.3's
// "sticky" task assignor (its only one), and the reconciliation of each
// member towards its target (Kafka's streams CurrentAssignmentBuilder): an
// active task moves only once its previous owner has revoked it, and a
// process never holds a task twice.

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// assignorMember is one member as the assignor sees it: its process and
// its previous target.
type assignorMember struct {
	id, process string
	prev        tasksTuple
}

// assignorSubtopology is one subtopology with its number of tasks.
type assignorSubtopology struct {
	id       string
	numTasks int32
	stateful bool
}

type processState struct {
	id       string
	members  []string // sorted
	counts   map[string]int
	tasks    map[streamsTask]bool
	taskLoad int
	active   map[string][]streamsTask
	standby  map[string][]streamsTask
}

func (p *processState) load() float64 { return float64(p.taskLoad) / float64(len(p.members)) }

func (p *processState) add(member string, t streamsTask, active bool) int {
	p.taskLoad++
	p.tasks[t] = true
	if active {
		p.active[member] = append(p.active[member], t)
	} else {
		p.standby[member] = append(p.standby[member], t)
	}
	p.counts[member]++
	return p.counts[member]
}

// addToLeastLoaded gives t to the process's member with the fewest tasks
// (ties: member id order).
func (p *processState) addToLeastLoaded(t streamsTask, active bool) int {
	best := ""
	for _, m := range p.members {
		if best == "" || p.counts[m] < p.counts[best] {
			best = m
		}
	}
	if best == "" {
		return -1
	}
	return p.add(best, t, active)
}

// stickyAssign is the sticky task assignor. It returns each member's
// active and standby tasks.
func stickyAssign(members []assignorMember, subs []assignorSubtopology, numStandby int) map[string]tasksTuple {
	perMember := func(tasks, members int) int {
		if members == 0 {
			return 0
		}
		return (tasks + members - 1) / members
	}
	totalActive, totalTasks := 0, 0
	for _, s := range subs {
		totalActive += int(s.numTasks)
		totalTasks += int(s.numTasks)
		if s.stateful {
			totalTasks += int(s.numTasks) * numStandby
		}
	}
	activeCap, totalCap := len(members), len(members)
	activePer, totalPer := perMember(totalActive, activeCap), perMember(totalTasks, totalCap)
	procs := map[string]*processState{}
	memberProc := map[string]*processState{}
	prevActive := map[streamsTask]string{}
	prevStandby := map[streamsTask][]string{}
	for _, m := range members {
		p := procs[m.process]
		if p == nil {
			p = &processState{id: m.process, counts: map[string]int{}, tasks: map[streamsTask]bool{},
				active: map[string][]streamsTask{}, standby: map[string][]streamsTask{}}
			procs[m.process] = p
		}
		p.members = append(p.members, m.id)
		p.counts[m.id] = 0
		memberProc[m.id] = p
		for _, sub := range sortedKeys(m.prev.Active) {
			for _, part := range m.prev.Active[sub] {
				prevActive[streamsTask{sub, part}] = m.id
			}
		}
		for _, sub := range sortedKeys(m.prev.Standby) {
			for _, part := range m.prev.Standby[sub] {
				t := streamsTask{sub, part}
				prevStandby[t] = append(prevStandby[t], m.id)
			}
		}
	}
	for _, p := range procs {
		slices.Sort(p.members)
	}
	count := func(m string) int { return memberProc[m].counts[m] }
	updateActive := func(n int) {
		if n == activePer {
			activeCap--
			totalActive -= n
			activePer = perMember(totalActive, activeCap)
		}
	}
	updateTotal := func(n int) {
		if n == totalPer {
			totalCap--
			totalTasks -= n
			totalPer = perMember(totalTasks, totalCap)
		}
	}
	// prevWithLeastLoad is Kafka 4.3's findPrevMemberWithLeastLoad, with
	// its quirk: the answer is refused when the first listed member's
	// process holds the task.
	prevWithLeastLoad := func(list []string, t *streamsTask) string {
		if len(list) == 0 {
			return ""
		}
		cand, first := list[0], memberProc[list[0]]
		candLoad, candCount := first.load(), count(list[0])
		for _, m := range list[1:] {
			ps := memberProc[m]
			if ps.load() < candLoad && (t == nil || !ps.tasks[*t]) && count(m) < candCount {
				cand, candLoad, candCount = m, ps.load(), count(m)
			}
		}
		if t == nil || !first.tasks[*t] {
			return cand
		}
		return ""
	}
	procOrder := slices.Sorted(maps.Keys(procs))
	leastLoaded := func(skip func(*processState) bool) *processState {
		var best *processState
		for _, id := range procOrder {
			p := procs[id]
			if skip != nil && skip(p) {
				continue
			}
			if best == nil || p.load() < best.load() {
				best = p
			}
		}
		return best
	}

	// Active tasks.
	var tasks []streamsTask
	for _, s := range subs {
		for p := int32(0); p < s.numTasks; p++ {
			tasks = append(tasks, streamsTask{s.id, p})
		}
	}
	slices.SortStableFunc(tasks, func(a, b streamsTask) int {
		return cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.sub, b.sub))
	})
	var rest []streamsTask
	for _, t := range tasks {
		if m, ok := prevActive[t]; ok && memberProc[m] != nil && count(m) < activePer {
			n := memberProc[m].add(m, t, true)
			updateActive(n)
			updateTotal(n)
			continue
		}
		rest = append(rest, t)
	}
	tasks, rest = rest, nil
	for _, t := range tasks {
		if m := prevWithLeastLoad(prevStandby[t], nil); m != "" && count(m) < activePer {
			n := memberProc[m].add(m, t, true)
			updateActive(n)
			updateTotal(n)
			continue
		}
		rest = append(rest, t)
	}
	slices.SortStableFunc(rest, func(a, b streamsTask) int {
		return cmp.Or(cmp.Compare(a.sub, b.sub), cmp.Compare(a.p, b.p))
	})
	for _, t := range rest {
		p := leastLoaded(nil)
		if p == nil {
			break
		}
		n := p.addToLeastLoaded(t, true)
		updateActive(n)
		updateTotal(n)
	}

	// Standby tasks.
	if numStandby > 0 {
		var stateful []streamsTask
		for _, s := range subs {
			if s.stateful {
				for p := int32(0); p < s.numTasks; p++ {
					stateful = append(stateful, streamsTask{s.id, p})
				}
			}
		}
		slices.SortStableFunc(stateful, func(a, b streamsTask) int {
			return -cmp.Or(cmp.Compare(a.p, b.p), cmp.Compare(a.sub, b.sub))
		})
		type deferred struct {
			t       streamsTask
			replica int
		}
		var later []deferred
		for _, t := range stateful {
			for i := 0; i < numStandby; i++ {
				if a, ok := prevActive[t]; ok && memberProc[a] != nil && !memberProc[a].tasks[t] && count(a) < totalPer {
					updateTotal(memberProc[a].add(a, t, false))
					continue
				}
				if l := prevStandby[t]; len(l) > 0 {
					if s := prevWithLeastLoad(l, &t); s != "" && count(s) < totalPer {
						updateTotal(memberProc[s].add(s, t, false))
						continue
					}
				}
				later = append(later, deferred{t, numStandby - i})
				break
			}
		}
		slices.SortStableFunc(later, func(a, b deferred) int {
			return -cmp.Or(cmp.Compare(a.t.sub, b.t.sub), cmp.Compare(a.t.p, b.t.p))
		})
		for _, d := range later {
			for range d.replica {
				p := leastLoaded(func(p *processState) bool { return p.tasks[d.t] })
				if p == nil {
					break // not enough processes for every replica
				}
				updateTotal(p.addToLeastLoaded(d.t, false))
			}
		}
	}

	out := map[string]tasksTuple{}
	for _, m := range members {
		p := memberProc[m.id]
		out[m.id] = tasksTuple{Active: toTaskSet(p.active[m.id]), Standby: toTaskSet(p.standby[m.id]), Warmup: taskSet{}}
	}
	return out
}

func toTaskSet(ts []streamsTask) taskSet {
	out := taskSet{}
	for _, t := range ts {
		out[t.sub] = append(out[t.sub], t.p)
	}
	for sub := range out {
		slices.Sort(out[sub])
	}
	return out
}

// computeStreamsTarget computes the group's target assignment at its
// current epoch (every member empty while the topology is not ready) and
// emits the members' changed targets and the target metadata.
func (s *shard) computeStreamsTarget(g *streamsGroup, recs *[]record, now int64) {
	ids := sortedKeys(g.members)
	targets := map[string]tasksTuple{}
	if g.configured.ready() {
		var members []assignorMember
		for _, id := range ids {
			members = append(members, assignorMember{id: id, process: g.members[id].meta.ProcessID, prev: g.target[id]})
		}
		var subs []assignorSubtopology
		for _, id := range sortedKeys(g.configured.subtopologies) {
			st := g.configured.subtopologies[id]
			subs = append(subs, assignorSubtopology{id: id, numTasks: st.numTasks, stateful: st.stateful})
		}
		numStandby := 0
		for _, kv := range g.lastAssignmentConfigs {
			if kv.Key == "num.standby.replicas" {
				numStandby, _ = strconv.Atoi(kv.Value)
			}
		}
		targets = stickyAssign(members, subs, numStandby)
	}
	for _, id := range ids {
		t := targets[id]
		if prev, ok := g.target[id]; !ok || !prev.equal(t) {
			s.emit(recs, streamsTargetMemberRecord(g.id, id, t))
		}
	}
	s.emit(recs, streamsTargetMetadataRecord(g.id, g.epoch, now))
	s.c.events.streamsRebalances.Add(1)
}

// taskHolders says which processes hold each task, counting every
// member's assigned tasks and those pending revocation.
type taskHolders struct {
	active  map[streamsTask]string
	standby map[streamsTask]map[string]bool
	warmup  map[streamsTask]map[string]bool
}

func (g *streamsGroup) holders() taskHolders {
	h := taskHolders{active: map[streamsTask]string{}, standby: map[streamsTask]map[string]bool{}, warmup: map[streamsTask]map[string]bool{}}
	addSet := func(into map[streamsTask]map[string]bool, s taskSet, proc string) {
		for sub, ps := range s {
			for _, p := range ps {
				t := streamsTask{sub, p}
				if into[t] == nil {
					into[t] = map[string]bool{}
				}
				into[t][proc] = true
			}
		}
	}
	for _, m := range g.members {
		proc := m.meta.ProcessID
		for _, set := range []taskSet{m.assigned.Active, m.pending.Active} {
			for sub, ps := range set {
				for _, p := range ps {
					h.active[streamsTask{sub, p}] = proc
				}
			}
		}
		addSet(h.standby, m.assigned.Standby, proc)
		addSet(h.standby, m.pending.Standby, proc)
		addSet(h.warmup, m.assigned.Warmup, proc)
		addSet(h.warmup, m.pending.Warmup, proc)
	}
	return h
}

// reconcileStreams moves m one step towards its target (Kafka's streams
// CurrentAssignmentBuilder). It returns the member's next state, or nil
// when nothing changes.
func (s *shard) reconcileStreams(g *streamsGroup, m *streamsMember, targetEpoch int32, target tasksTuple, owned tasksTuple, ownedKnown bool) (*streamsMember, error) {
	switch m.state {
	case streamsStable:
		if m.epoch == targetEpoch {
			return nil, nil
		}
		return g.nextStreamsState(m, m.epoch, targetEpoch, target, owned, ownedKnown), nil
	case streamsUnrevoked:
		if !ownedKnown || overlaps(owned.Active, m.pending.Active) || overlaps(owned.Standby, m.pending.Standby) || overlaps(owned.Warmup, m.pending.Warmup) {
			return nil, nil
		}
		return g.nextStreamsState(m, m.epoch+1, targetEpoch, target, owned, ownedKnown), nil
	case streamsUnreleased:
		return g.nextStreamsState(m, m.epoch, targetEpoch, target, owned, ownedKnown), nil
	}
	if !ownedKnown || !owned.empty() {
		return nil, fmt.Errorf("The streams group member is in a unknown state. The member must abandon all its tasks and rejoin.")
	}
	return g.nextStreamsState(m, targetEpoch, targetEpoch, target, owned, ownedKnown), nil
}

func overlaps(a, b taskSet) bool {
	for sub, ps := range a {
		for _, p := range ps {
			if b.has(sub, p) {
				return true
			}
		}
	}
	return false
}

// nextStreamsState computes the member's next assignment: tasks it keeps,
// tasks to revoke first, and new tasks it may take now (those no other
// process still holds); epoch is the member epoch while revoking.
func (g *streamsGroup) nextStreamsState(m *streamsMember, epoch, targetEpoch int32, target tasksTuple, owned tasksTuple, ownedKnown bool) *streamsMember {
	h := g.holders()
	proc := m.meta.ProcessID
	holdsHere := func(t streamsTask) bool {
		return h.standby[t][proc] || h.warmup[t][proc]
	}
	next := &streamsMember{id: m.id, meta: m.meta, epochs: map[streamsTask]int32{}}
	var revoke tasksTuple
	hasUnreleased := false
	split := func(current, want taskSet, active bool, unreleased func(streamsTask) bool) (kept, revoked, assigned taskSet) {
		kept, revoked, assigned = taskSet{}, taskSet{}, taskSet{}
		for sub, ps := range current {
			for _, p := range ps {
				t := streamsTask{sub, p}
				if want.has(sub, p) {
					kept[sub] = append(kept[sub], p)
					if active {
						next.epochs[t] = m.epochs[t]
					}
				} else {
					revoked[sub] = append(revoked[sub], p)
					if active {
						next.epochs[t] = m.epochs[t]
					}
				}
			}
		}
		for sub, ps := range want {
			for _, p := range ps {
				if current.has(sub, p) {
					continue
				}
				t := streamsTask{sub, p}
				if unreleased(t) {
					hasUnreleased = true
					continue
				}
				assigned[sub] = append(assigned[sub], p)
			}
		}
		return kept, revoked, assigned
	}
	keptA, revA, newA := split(m.assigned.Active, target.Active, true, func(t streamsTask) bool {
		_, held := h.active[t]
		return held || holdsHere(t)
	})
	keptS, revS, newS := split(m.assigned.Standby, target.Standby, false, func(t streamsTask) bool {
		return h.active[t] == proc && h.active[t] != "" || holdsHere(t)
	})
	keptW, revW, newW := split(m.assigned.Warmup, target.Warmup, false, func(t streamsTask) bool {
		return h.active[t] == proc && h.active[t] != "" || holdsHere(t)
	})
	revoke = tasksTuple{Active: sortedSet(revA), Standby: sortedSet(revS), Warmup: sortedSet(revW)}
	kept := tasksTuple{Active: sortedSet(keptA), Standby: sortedSet(keptS), Warmup: sortedSet(keptW)}
	toAssign := tasksTuple{Active: sortedSet(newA), Standby: sortedSet(newS), Warmup: sortedSet(newW)}

	next.prevEpoch = m.epoch
	switch {
	case !revoke.empty() && (!ownedKnown || overlaps(owned.Active, revoke.Active) || overlaps(owned.Standby, revoke.Standby) || overlaps(owned.Warmup, revoke.Warmup)):
		next.state, next.epoch = streamsUnrevoked, epoch
		next.assigned, next.pending = kept, revoke
	default:
		next.state, next.epoch = streamsStable, targetEpoch
		if hasUnreleased {
			next.state = streamsUnreleased
		}
		next.assigned = tasksTuple{Active: union(kept.Active, toAssign.Active), Standby: union(kept.Standby, toAssign.Standby), Warmup: union(kept.Warmup, toAssign.Warmup)}
		next.pending = tasksTuple{Active: taskSet{}, Standby: taskSet{}, Warmup: taskSet{}}
		for t := range next.epochs {
			if !next.assigned.Active.has(t.sub, t.p) {
				delete(next.epochs, t)
			}
		}
		for sub, ps := range toAssign.Active {
			for _, p := range ps {
				next.epochs[streamsTask{sub, p}] = targetEpoch
			}
		}
	}
	if next.state == m.state && next.epoch == m.epoch && next.prevEpoch == m.prevEpoch &&
		next.assigned.equal(m.assigned) && next.pending.equal(m.pending) && sameActiveEpochs(next, m) {
		return nil
	}
	return next
}

func sortedSet(s taskSet) taskSet {
	for sub := range s {
		slices.Sort(s[sub])
	}
	return s
}

func union(a, b taskSet) taskSet {
	out := taskSet{}
	for _, s := range []taskSet{a, b} {
		for sub, ps := range s {
			out[sub] = append(out[sub], ps...)
		}
	}
	for sub := range out {
		slices.Sort(out[sub])
		out[sub] = slices.Compact(out[sub])
	}
	return out
}
