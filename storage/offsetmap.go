package storage

import (
	"encoding/binary"
	"hash/maphash"
)

// offsetMap is the log cleaner's key → latest offset map, bounded as
// Kafka's SkimpyOffsetMap is: log.cleaner.dedupe.buffer.size (shared by
// the cleaner threads) buys slots of 24 bytes, a 16-byte key hash and an
// 8-byte offset, and the map is full at log.cleaner.io.buffer.load.factor
// of its slots. Keys are not stored: two keys whose 128-bit hashes collide
// would count as one (Kafka takes the same risk with MD5).
//
// Unlike Kafka's, the table is not allocated whole up front: it starts
// small and doubles up to its slot budget, so a cleaner that only ever
// sees a few thousand keys (__consumer_offsets of a small cluster) holds a
// few hundred KB, not the whole dedupe buffer.
//
// An offsetMap belongs to one cleaner thread.
type offsetMap struct {
	seed1, seed2 maphash.Seed
	maxSlots     int // the budget, in slots
	limit        int // entries at which the map is full
	loadFactor   float64

	// table holds slots of offsetMapSlotBytes: hash (16), offset+1 (8;
	// 0 marks an empty slot).
	table   []byte
	slots   int // len(table)/offsetMapSlotBytes
	entries int
	// latest is the largest offset put (or fast-forwarded to); -1 when
	// nothing is mapped.
	latest int64
}

const (
	offsetMapSlotBytes   = 24
	offsetMapHashBytes   = 16
	offsetMapFirstSlots  = 1 << 12
	defaultMapLoadFactor = 0.9
)

func newOffsetMap(memoryBytes int64, loadFactor float64) *offsetMap {
	if loadFactor <= 0 || loadFactor > 1 {
		loadFactor = defaultMapLoadFactor
	}
	maxSlots := int(min(memoryBytes/offsetMapSlotBytes, 1<<31/offsetMapSlotBytes))
	m := &offsetMap{
		seed1:      maphash.MakeSeed(),
		seed2:      maphash.MakeSeed(),
		maxSlots:   max(maxSlots, 1),
		loadFactor: loadFactor,
		latest:     -1,
	}
	m.limit = int(float64(m.maxSlots) * loadFactor)
	return m
}

// usable reports whether the map can hold at least one key (Kafka refuses
// to start a cleaner whose buffer cannot).
func (m *offsetMap) usable() bool { return m.limit >= 1 }

// clear empties the map for the next cleaning, keeping its table.
func (m *offsetMap) clear() {
	clear(m.table)
	m.entries = 0
	m.latest = -1
}

func (m *offsetMap) hash(key []byte) (h [offsetMapHashBytes]byte) {
	binary.LittleEndian.PutUint64(h[:8], maphash.Bytes(m.seed1, key))
	binary.LittleEndian.PutUint64(h[8:], maphash.Bytes(m.seed2, key))
	return h
}

// slotFor finds key's slot, or the empty slot where it would go.
func (m *offsetMap) slotFor(h *[offsetMapHashBytes]byte) (pos int, found bool) {
	i := int(binary.LittleEndian.Uint64(h[:8]) % uint64(m.slots))
	for {
		pos = i * offsetMapSlotBytes
		s := m.table[pos : pos+offsetMapSlotBytes]
		if binary.LittleEndian.Uint64(s[16:]) == 0 {
			return pos, false
		}
		if [offsetMapHashBytes]byte(s[:16]) == *h {
			return pos, true
		}
		if i++; i == m.slots {
			i = 0
		}
	}
}

// put maps key to offset. It returns false, changing nothing, when key is
// new and the map is full.
func (m *offsetMap) put(key []byte, offset int64) bool {
	h := m.hash(key)
	if m.table != nil {
		if pos, found := m.slotFor(&h); found {
			binary.LittleEndian.PutUint64(m.table[pos+16:], uint64(offset+1))
			m.latest = max(m.latest, offset)
			return true
		}
	}
	if m.entries >= m.limit {
		return false
	}
	if m.slots < m.maxSlots && float64(m.entries+1) > float64(m.slots)*m.loadFactor {
		m.grow()
	}
	pos, _ := m.slotFor(&h)
	copy(m.table[pos:], h[:])
	binary.LittleEndian.PutUint64(m.table[pos+16:], uint64(offset+1))
	m.entries++
	m.latest = max(m.latest, offset)
	return true
}

// grow doubles the table, up to the budget, and rehashes.
func (m *offsetMap) grow() {
	slots := min(max(m.slots*2, offsetMapFirstSlots), m.maxSlots)
	if slots <= m.slots {
		return
	}
	old := m.table
	m.table = make([]byte, slots*offsetMapSlotBytes)
	m.slots = slots
	for pos := 0; pos < len(old); pos += offsetMapSlotBytes {
		s := old[pos : pos+offsetMapSlotBytes]
		if binary.LittleEndian.Uint64(s[16:]) == 0 {
			continue
		}
		h := [offsetMapHashBytes]byte(s[:16])
		np, _ := m.slotFor(&h)
		copy(m.table[np:np+offsetMapSlotBytes], s)
	}
}

// get is the latest offset mapped for key, -1 if none.
func (m *offsetMap) get(key []byte) int64 {
	if m.table == nil {
		return -1
	}
	h := m.hash(key)
	pos, found := m.slotFor(&h)
	if !found {
		return -1
	}
	return int64(binary.LittleEndian.Uint64(m.table[pos+16:])) - 1
}

// updateLatest fast-forwards the latest mapped offset (over offsets with
// no keyed record, so that the cleaning covers them).
func (m *offsetMap) updateLatest(offset int64) { m.latest = max(m.latest, offset) }

// utilization is the share of the slot budget in use.
func (m *offsetMap) utilization() float64 { return float64(m.entries) / float64(m.maxSlots) }
