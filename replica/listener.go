package replica

// Leadership listeners: how components whose state lives in a topic's
// partitions (the coordinators and their internal topics) learn that this
// node leads one of them, without the replica manager knowing which
// topics those are.

// LeadershipListener hears of this node's leadership of a topic's
// partitions. Calls for one partition come in the order leadership
// changed, on the metadata goroutine (or, for the partitions already led
// when the listener is added, on the caller's); they must not block.
type LeadershipListener interface {
	// BecameLeader: this node leads tp at leaderEpoch. It is called again
	// with the new epoch when this node is re-elected.
	BecameLeader(tp TopicPartition, leaderEpoch int32)
	// Resigned: this node no longer leads tp (another replica does, it
	// has no leader, or the partition is gone from this node).
	Resigned(tp TopicPartition)
}

type listenerEntry struct{ l LeadershipListener }

// AddLeadershipListener registers l for topic's partitions and tells it at
// once of those this node leads. remove unregisters it; l hears nothing
// after remove returns.
func (m *Manager) AddLeadershipListener(topic string, l LeadershipListener) (remove func()) {
	e := &listenerEntry{l: l}
	m.applyMu.Lock()
	defer m.applyMu.Unlock()
	m.listeners[topic] = append(m.listeners[topic], e)
	m.mu.RLock()
	var led []*Partition
	for tp, p := range m.parts {
		if tp.Topic == topic && p.announcedEpoch >= 0 {
			led = append(led, p)
		}
	}
	m.mu.RUnlock()
	for _, p := range led {
		l.BecameLeader(p.tp, p.announcedEpoch)
	}
	return func() {
		m.applyMu.Lock()
		defer m.applyMu.Unlock()
		list := m.listeners[topic]
		for i, x := range list {
			if x == e {
				m.listeners[topic] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(m.listeners[topic]) == 0 {
			delete(m.listeners, topic)
		}
	}
}

// announce tells p's topic's listeners of a change in this node's
// leadership of p since the last announcement. The caller holds applyMu.
func (m *Manager) announce(p *Partition) {
	p.mu.RLock()
	epoch := int32(-1)
	if p.isLeaderLocked() {
		epoch = p.leaderEpoch
	}
	p.mu.RUnlock()
	if epoch == p.announcedEpoch {
		return
	}
	resigned := epoch < 0
	p.announcedEpoch = epoch
	for _, e := range m.listeners[p.tp.Topic] {
		if resigned {
			e.l.Resigned(p.tp)
		} else {
			e.l.BecameLeader(p.tp, epoch)
		}
	}
}
