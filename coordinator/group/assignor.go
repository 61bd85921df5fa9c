package group

// Server-side assignors of the KIP-848 consumer protocol
// (group.consumer.assignors). Both are deterministic functions of the
// members, their subscriptions and the previous target assignment, so a
// replayed group computes the same target as the live one did.

import (
	"bytes"
	"slices"
	"sort"
)

// Assignor names accepted in group.consumer.assignors and in
// ConsumerGroupHeartbeat's ServerAssignor.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// assignMember is one member as an assignor sees it.
type assignMember struct {
	id         string
	instanceID string
	topics     [][16]byte           // subscribed topic ids that exist, sorted
	previous   map[[16]byte][]int32 // previous target assignment
}

// assignment maps member id -> topic id -> sorted partitions.
type assignment map[string]map[[16]byte][]int32

// runAssignor computes the target assignment. partitions gives each
// existing topic's partition count.
func runAssignor(name string, members []assignMember, partitions map[[16]byte]int32) assignment {
	members = slices.Clone(members)
	sort.Slice(members, func(i, j int) bool { return members[i].id < members[j].id })
	if name == AssignorRange {
		return assignRange(members, partitions)
	}
	return assignUniform(members, partitions)
}

type topicPartition struct {
	topic     [16]byte
	partition int32
}

func subscribedTo(m *assignMember, topic [16]byte) bool {
	_, found := slices.BinarySearchFunc(m.topics, topic, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	return found
}

// assignRange gives each member a contiguous range of every topic it
// subscribes to: members in id order, the first n%m one partition more.
func assignRange(members []assignMember, partitions map[[16]byte]int32) assignment {
	out := make(assignment, len(members))
	for _, m := range members {
		out[m.id] = map[[16]byte][]int32{}
	}
	for _, topic := range sortedTopicIDs(partitions) {
		var eligible []*assignMember
		for i := range members {
			if subscribedTo(&members[i], topic) {
				eligible = append(eligible, &members[i])
			}
		}
		if len(eligible) == 0 {
			continue
		}
		n := partitions[topic]
		quota, extra := n/int32(len(eligible)), n%int32(len(eligible))
		start := int32(0)
		for i, m := range eligible {
			count := quota
			if int32(i) < extra {
				count++
			}
			if count == 0 {
				continue
			}
			ps := make([]int32, count)
			for j := range ps {
				ps[j] = start + int32(j)
			}
			out[m.id][topic] = ps
			start += count
		}
	}
	return out
}

// assignUniform spreads partitions evenly over the members subscribed to
// them while keeping as many previous assignments as balance allows.
func assignUniform(members []assignMember, partitions map[[16]byte]int32) assignment {
	index := make(map[string]int, len(members))
	for i, m := range members {
		index[m.id] = i
	}
	owner := map[topicPartition]int{}
	count := make([]int, len(members))

	// Keep previous ownership where it is still valid.
	for i := range members {
		m := &members[i]
		for _, topic := range sortedTopicIDsOf(m.previous) {
			n, exists := partitions[topic]
			if !exists || !subscribedTo(m, topic) {
				continue
			}
			for _, p := range m.previous[topic] {
				tp := topicPartition{topic, p}
				if p < 0 || p >= n {
					continue
				}
				if _, taken := owner[tp]; taken {
					continue
				}
				owner[tp] = i
				count[i]++
			}
		}
	}

	var all []topicPartition
	eligible := map[[16]byte][]int{}
	for _, topic := range sortedTopicIDs(partitions) {
		for i := range members {
			if subscribedTo(&members[i], topic) {
				eligible[topic] = append(eligible[topic], i)
			}
		}
		if len(eligible[topic]) == 0 {
			continue
		}
		for p := int32(0); p < partitions[topic]; p++ {
			all = append(all, topicPartition{topic, p})
		}
	}

	// Give unowned partitions to the least loaded eligible member.
	for _, tp := range all {
		if _, ok := owner[tp]; ok {
			continue
		}
		best := -1
		for _, i := range eligible[tp.topic] {
			if best < 0 || count[i] < count[best] {
				best = i
			}
		}
		owner[tp] = best
		count[best]++
	}

	// Balance: move a partition from a member to an eligible one holding at
	// least two fewer until no such move exists. Each move lowers the sum of
	// squared counts, so this ends.
	for moved := true; moved; {
		moved = false
		for _, tp := range all {
			from := owner[tp]
			to := -1
			for _, i := range eligible[tp.topic] {
				if count[i] < count[from]-1 && (to < 0 || count[i] < count[to]) {
					to = i
				}
			}
			if to >= 0 {
				owner[tp] = to
				count[from]--
				count[to]++
				moved = true
			}
		}
	}

	out := make(assignment, len(members))
	for _, m := range members {
		out[m.id] = map[[16]byte][]int32{}
	}
	for _, tp := range all {
		m := members[owner[tp]].id
		out[m][tp.topic] = append(out[m][tp.topic], tp.partition)
	}
	return out
}

func sortedTopicIDs(m map[[16]byte]int32) [][16]byte { return sortedTopicIDsOf(m) }

// sortedTopicIDsOf is the keys of a map by topic id, sorted.
func sortedTopicIDsOf[V any](m map[[16]byte]V) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareTopicID)
	return ids
}

func compareTopicID(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }
