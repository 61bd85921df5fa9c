package group

// The share group assignor Kafka names "simple" (group.share.assignors).
// Share groups hand a partition to several members when there are more
// members than partitions: each partition goes to ceil(M/P) members, and
// each member gets a quota of ceil(x(i+1)) - ceil(x*i) partitions, x being
// the number of assignments over the number of members, so quotas differ
// by one at most. It is sticky: a member keeps the partitions of its
// previous target that it still subscribes to, up to its quota, and a
// partition keeps its holders up to the sharing. With every member on the
// same topics it balances over all of them together; otherwise topic by
// topic, among the members that subscribe to each. Kafka walks its
// members and partitions in Java hash order; here they are sorted, so
// the placement differs from Kafka's while the balance and the stickiness
// are the same.

import (
	"slices"
	"sort"
)

// AssignorSimple is the share assignor's name.
const AssignorSimple = "simple"

// shareAssignMember is one share group member as the assignor sees it.
type shareAssignMember struct {
	id       string
	topics   [][16]byte           // subscribed topic ids that exist, sorted
	previous map[[16]byte][]int32 // previous target assignment
}

// assignShare computes the target assignment of a share group. assignable
// gives, per topic, the partitions whose share state is initialized (the
// only ones that may be handed out), sorted.
func assignShare(members []shareAssignMember, assignable map[[16]byte][]int32) assignment {
	members = slices.Clone(members)
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	out := make(assignment, len(members))
	for _, m := range members {
		out[m.id] = map[[16]byte][]int32{}
	}
	if len(members) == 0 {
		return out
	}
	homogeneous := true
	for _, m := range members[1:] {
		if !slices.Equal(m.topics, members[0].topics) {
			homogeneous = false
		}
	}
	if homogeneous {
		var parts []topicPartition
		for _, t := range members[0].topics {
			for _, p := range assignable[t] {
				parts = append(parts, topicPartition{t, p})
			}
		}
		spreadShare(members, parts, func(m *shareAssignMember, t [16]byte) bool { return true }, out)
		return out
	}
	topics := map[[16]byte]bool{}
	for _, m := range members {
		for _, t := range m.topics {
			topics[t] = true
		}
	}
	for _, t := range sortedTopicIDsOf(topics) {
		var subs []shareAssignMember
		for _, m := range members {
			if _, ok := slices.BinarySearchFunc(m.topics, t, compareTopicID); ok {
				subs = append(subs, m)
			}
		}
		var parts []topicPartition
		for _, p := range assignable[t] {
			parts = append(parts, topicPartition{t, p})
		}
		spreadShare(subs, parts, func(_ *shareAssignMember, topic [16]byte) bool { return topic == t }, out)
	}
	return out
}

// spreadShare assigns parts among members (sorted by id) into out, keeping
// what each member's previous target holds of the topics counted (those
// inScope says are this round's).
func spreadShare(members []shareAssignMember, parts []topicPartition, inScope func(*shareAssignMember, [16]byte) bool, out assignment) {
	if len(parts) == 0 || len(members) == 0 {
		return
	}
	nm, np := len(members), len(parts)
	sharing := (nm + np - 1) / np
	total := sharing * np
	quota := make([]int, nm)
	for i := range quota {
		// ceil(x(i+1)) - ceil(x*i) with x = total/nm, in integers.
		quota[i] = ceilDiv(total*(i+1), nm) - ceilDiv(total*i, nm)
	}
	valid := make(map[topicPartition]bool, np)
	for _, tp := range parts {
		valid[tp] = true
	}
	holders := make(map[topicPartition][]int, np)
	held := make([][]topicPartition, nm)
	// 1. Keep the previous target's partitions that are still to be
	// handed out, up to the member's quota.
	for i := range members {
		m := &members[i]
		for _, t := range sortedTopicIDsOf(m.previous) {
			if !inScope(m, t) {
				continue
			}
			if _, ok := slices.BinarySearchFunc(m.topics, t, compareTopicID); !ok {
				continue
			}
			for _, p := range m.previous[t] {
				tp := topicPartition{t, p}
				if valid[tp] && len(held[i]) < quota[i] && len(holders[tp]) < sharing {
					held[i] = append(held[i], tp)
					holders[tp] = append(holders[tp], i)
				}
			}
		}
	}
	// 2. Fill the partitions short of their sharing with the members short
	// of their quota, round robin, never twice to one member.
	next := 0
	for _, tp := range parts {
		for tries := 0; len(holders[tp]) < sharing && tries < nm; tries++ {
			i := next % nm
			next++
			if len(held[i]) >= quota[i] || slices.Contains(holders[tp], i) {
				continue
			}
			held[i] = append(held[i], tp)
			holders[tp] = append(holders[tp], i)
			tries = -1
		}
	}
	for i := range members {
		a := out[members[i].id]
		for _, tp := range held[i] {
			a[tp.topic] = append(a[tp.topic], tp.partition)
		}
		for t := range a {
			slices.Sort(a[t])
		}
	}
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
