package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// Kafka's ProducerStateEntry.NUM_BATCHES_TO_RETAIN: how many recent batches
// per producer are remembered to answer retries as duplicates.
const producerBatchesToRetain = 5

// Producer-id related sentinels from Kafka's RecordBatch.
const (
	noProducerEpoch = -1
	noSequence      = -1
)

// DefaultProducerIDExpirationMs is producer.id.expiration.ms's default (1 day).
const DefaultProducerIDExpirationMs = 86400000

// producerBatch is Kafka's BatchMetadata: one appended batch of a producer.
type producerBatch struct {
	lastSeq     int32
	lastOffset  int64
	offsetDelta int32
	timestamp   int64
}

func (b producerBatch) firstSeq() int32    { return decrementSequence(b.lastSeq, b.offsetDelta) }
func (b producerBatch) firstOffset() int64 { return b.lastOffset - int64(b.offsetDelta) }

// incrementSequence and decrementSequence wrap at MaxInt32 as Kafka's
// DefaultRecordBatch does (sequence numbers roll over to 0).
func incrementSequence(seq, inc int32) int32 {
	if seq > math.MaxInt32-inc {
		return inc - (math.MaxInt32 - seq) - 1
	}
	return seq + inc
}

func decrementSequence(seq, dec int32) int32 {
	if seq < dec {
		return math.MaxInt32 - (dec - seq) + 1
	}
	return seq - dec
}

// inSequence is Kafka's ProducerAppendInfo.inSequence.
func inSequence(lastSeq, nextSeq int32) bool {
	return int64(nextSeq) == int64(lastSeq)+1 || (nextSeq == 0 && lastSeq == math.MaxInt32)
}

// producerEntry is Kafka's ProducerStateEntry: a producer's epoch and its
// most recent batches, oldest first. It is a value type so an append can
// validate on a copy and commit only when the whole append succeeds.
type producerEntry struct {
	epoch            int16
	batches          [producerBatchesToRetain]producerBatch
	n                int
	coordinatorEpoch int32
	lastTimestamp    int64
	// currentTxnFirstOffset is the first offset of the producer's open
	// transaction, -1 if none. Transactions are a later issue; this is the
	// seam (snapshots already carry it).
	currentTxnFirstOffset int64
}

func emptyProducerEntry() producerEntry {
	return producerEntry{epoch: noProducerEpoch, coordinatorEpoch: -1, lastTimestamp: -1, currentTxnFirstOffset: -1}
}

func (e *producerEntry) last() (producerBatch, bool) {
	if e.n == 0 {
		return producerBatch{}, false
	}
	return e.batches[e.n-1], true
}

func (e *producerEntry) lastSeq() int32 {
	if b, ok := e.last(); ok {
		return b.lastSeq
	}
	return noSequence
}

// maybeUpdateEpoch forgets the batches of an older epoch.
func (e *producerEntry) maybeUpdateEpoch(epoch int16) {
	if e.epoch != epoch {
		e.n = 0
		e.epoch = epoch
	}
}

func (e *producerEntry) addBatch(epoch int16, b producerBatch) {
	e.maybeUpdateEpoch(epoch)
	if e.n == producerBatchesToRetain {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
	e.lastTimestamp = b.timestamp
}

// findDuplicate returns the retained batch with exactly this epoch and
// sequence range (a producer retry of an append that already succeeded).
func (e *producerEntry) findDuplicate(epoch int16, firstSeq, lastSeq int32) (producerBatch, bool) {
	if epoch != e.epoch {
		return producerBatch{}, false
	}
	for _, b := range e.batches[:e.n] {
		if b.firstSeq() == firstSeq && b.lastSeq == lastSeq {
			return b, true
		}
	}
	return producerBatch{}, false
}

// producerState is Kafka's ProducerStateManager for one partition: the
// entries of every unexpired producer and the offset up to which batches
// have been applied. It is owned by the log's appender (Log.mu).
type producerState struct {
	fsys      vfs.FS
	dir       string
	producers map[int64]*producerEntry
	// ongoing are the producers with an open transaction and its first
	// offset (Kafka's ongoingTxns): the last stable offset is the
	// smallest of them. Kept with producers by set and clear.
	ongoing map[int64]int64
	// completed are the transactions ended since the log last took them
	// (Log.takeCompletedTxns).
	completed []completedTxn
	// verifying are the producers whose next transaction on this
	// partition is being verified with the transaction coordinator
	// (Kafka's VerificationStateEntry), by the guard an append must carry
	// to start it. Not persisted: a restart makes producers verify again.
	verifying map[int64]verification
	lastGuard uint64
	// mapEndOffset is the offset after the last batch applied.
	mapEndOffset int64
	// lastSnapOffset is the offset of the newest snapshot file.
	lastSnapOffset int64
	// listed are the snapshot files' offsets, ascending, while the log
	// loads (its directory listing has them): loadLatestSnapshot takes
	// them instead of listing the directory again. Nil otherwise.
	listed []int64
}

// newProducerState is empty; its maps are made when first written (three
// empty maps were about 450 bytes of every idle partition's heap).
func newProducerState(fsys vfs.FS, dir string) *producerState {
	return &producerState{fsys: fsys, dir: dir}
}

// verification is one producer's verification in progress.
type verification struct {
	guard uint64
	epoch int16
}

// startVerification is Kafka's maybeCreateVerificationStateEntry: the
// guard an append of pid's first transactional batch must carry, 0 when
// pid has a transaction open here already (nothing to verify).
//
// An open transaction at another epoch does not count: under Transactions
// V2 the epoch bumps with every EndTxn, and the next transaction's first
// batch can arrive before the previous one's marker. It is a new
// transaction and must be verified (the coordinator answers
// CONCURRENT_TRANSACTIONS until the previous one's markers are written),
// never taken into the open one.
func (ps *producerState) startVerification(pid int64, epoch int16) uint64 {
	if e, ok := ps.producers[pid]; ok && e.currentTxnFirstOffset >= 0 && e.epoch == epoch {
		return 0
	}
	v, ok := ps.verifying[pid]
	if !ok || epoch > v.epoch {
		if !ok {
			ps.lastGuard++
			v.guard = ps.lastGuard
		}
		v.epoch = epoch
		if ps.verifying == nil {
			ps.verifying = map[int64]verification{}
		}
		ps.verifying[pid] = v
	}
	return v.guard
}

// SkipTxnVerification is the guard of an append that needs no
// verification: transaction.partition.verification.enable=false lets any
// transactional batch open a transaction, as in Kafka.
const SkipTxnVerification = ^uint64(0)

// verified reports whether guard is pid's verification in progress.
func (ps *producerState) verified(pid int64, guard uint64) bool {
	if guard == SkipTxnVerification {
		return true
	}
	v, ok := ps.verifying[pid]
	return ok && guard != 0 && v.guard == guard
}

// pendingProducer is one producer's entry as an append in progress would
// leave it.
type pendingProducer struct {
	pid     int64
	orig    producerEntry
	updated producerEntry
	touched bool // updated has batches from this append
}

// completedTxn is a transaction a marker ended: its first offset and the
// marker's. Until the marker is below the high watermark the transaction
// still holds the last stable offset back (Kafka's unreplicated
// transactions).
type completedTxn struct {
	firstOffset  int64
	markerOffset int64
}

// producerAppend validates the batches of one append against the producer
// state without changing it (Kafka's ProducerAppendInfo); commit applies it.
// It is reused across appends by the appender.
type producerAppend struct {
	pending []pendingProducer
	// completed are the transactions this append's markers end.
	completed []completedTxn
	// verifiedDone are the producers whose verification this append
	// consumes: their transaction started, or a marker ended it.
	verifiedDone []int64
}

func (a *producerAppend) reset() {
	a.pending, a.completed, a.verifiedDone = a.pending[:0], a.completed[:0], a.verifiedDone[:0]
}

func (a *producerAppend) entry(ps *producerState, pid int64) *pendingProducer {
	for i := range a.pending {
		if a.pending[i].pid == pid {
			return &a.pending[i]
		}
	}
	cur := emptyProducerEntry()
	if p, ok := ps.producers[pid]; ok {
		cur = *p
	}
	a.pending = append(a.pending, pendingProducer{pid: pid, orig: cur, updated: cur})
	return &a.pending[len(a.pending)-1]
}

// checkDuplicate answers a client retry: the committed entry already holds
// a batch with this epoch and sequence range.
func (ps *producerState) checkDuplicate(h protocol.BatchHeader) (producerBatch, bool) {
	e, ok := ps.producers[h.ProducerID]
	if !ok {
		return producerBatch{}, false
	}
	return e.findDuplicate(h.ProducerEpoch, h.BaseSequence, incrementSequence(h.BaseSequence, h.LastOffsetDelta))
}

// add validates one batch (with its final offsets) and records it in the
// pending state, following Kafka 4.3's ProducerAppendInfo rules. Errors are
// INVALID_PRODUCER_EPOCH, OUT_OF_ORDER_SEQUENCE_NUMBER or INVALID_TXN_STATE.
//
// guard is the append's verification (StartTxnVerification); markerEpoch
// the coordinator epoch of a marker a coordinator writes (-1 otherwise).
func (a *producerAppend) add(ps *producerState, h protocol.BatchHeader, origin AppendOrigin, guard uint64, markerEpoch int32) error {
	p := a.entry(ps, h.ProducerID)
	e := &p.updated
	newTxn := e.currentTxnFirstOffset < 0 || h.ProducerEpoch != e.epoch
	if origin == AppendClient && h.IsTransactional() && !h.IsControl() && newTxn && !ps.verified(h.ProducerID, guard) {
		// Kafka writes a transactional batch only into a transaction the
		// transaction coordinator knows of: the first batch of each
		// transaction on a partition is verified with the coordinator
		// (KIP-890 part 1; StartTxnVerification), later ones continue the
		// open transaction. A batch no verification covers, or whose
		// verification a marker has ended since (a late produce of an
		// aborted transaction), would open a transaction that nothing
		// ends, pinning the last stable offset. Kafka's log refuses it
		// with this error.
		return fmt.Errorf("producer %d: record at offset %d was not part of an ongoing transaction: %w",
			h.ProducerID, h.BaseOffset, kerr.InvalidTxnState)
	}
	if origin == AppendClient && h.IsTransactional() && !h.IsControl() && e.currentTxnFirstOffset >= 0 && h.ProducerEpoch > e.epoch {
		// A new transaction (a higher epoch) while the previous one is
		// still open here: its marker has not been written yet. Taking the
		// batch would make it part of the previous transaction, committed
		// or aborted with it. The producer retries once the marker is in.
		return fmt.Errorf("producer %d at epoch %d: the transaction of epoch %d is not ended on this partition yet: %w",
			h.ProducerID, h.ProducerEpoch, e.epoch, kerr.NotEnoughReplicas)
	}
	if h.ProducerEpoch < e.epoch && origin != AppendReplication {
		return fmt.Errorf("epoch of producer %d at offset %d is %d, older than the last seen epoch %d: %w",
			h.ProducerID, h.BaseOffset, h.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if h.IsControl() {
		// A transaction marker ends the producer's transaction; one from
		// a coordinator older than the last that wrote here is a zombie's
		// (Kafka's ProducerAppendInfo.checkCoordinatorEpoch).
		if origin != AppendReplication && markerEpoch >= 0 {
			if markerEpoch < e.coordinatorEpoch {
				return fmt.Errorf("invalid coordinator epoch for producer %d at offset %d: %d (zombie), %d (current): %w",
					h.ProducerID, h.BaseOffset, markerEpoch, e.coordinatorEpoch, kerr.TransactionCoordinatorFenced)
			}
			e.coordinatorEpoch = markerEpoch
		}
		e.maybeUpdateEpoch(h.ProducerEpoch)
		if e.currentTxnFirstOffset >= 0 {
			a.completed = append(a.completed, completedTxn{firstOffset: e.currentTxnFirstOffset, markerOffset: h.BaseOffset})
		}
		e.currentTxnFirstOffset = -1
		e.lastTimestamp = h.MaxTimestamp
		a.verifiedDone = append(a.verifiedDone, h.ProducerID)
		return nil
	}
	lastSeq := incrementSequence(h.BaseSequence, h.LastOffsetDelta)
	if origin == AppendClient {
		if err := checkSequence(p, h); err != nil {
			return err
		}
	}
	e.addBatch(h.ProducerEpoch, producerBatch{lastSeq: lastSeq, lastOffset: h.LastOffset(), offsetDelta: h.LastOffsetDelta, timestamp: h.MaxTimestamp})
	p.touched = true
	switch {
	case e.currentTxnFirstOffset >= 0 && !h.IsTransactional():
		return fmt.Errorf("producer %d wrote a non-transactional batch at offset %d while a transaction is open: %w",
			h.ProducerID, h.BaseOffset, kerr.InvalidTxnState)
	case e.currentTxnFirstOffset < 0 && h.IsTransactional():
		e.currentTxnFirstOffset = h.BaseOffset
		a.verifiedDone = append(a.verifiedDone, h.ProducerID)
	}
	return nil
}

// checkSequence is ProducerAppendInfo.checkSequence for a client append.
func checkSequence(p *pendingProducer, h protocol.BatchHeader) error {
	e := &p.updated
	firstSeq := h.BaseSequence
	if h.ProducerEpoch != e.epoch {
		if firstSeq != 0 && e.epoch != noProducerEpoch {
			return fmt.Errorf("invalid sequence number for new epoch %d of producer %d at offset %d: %d (current epoch %d): %w",
				h.ProducerEpoch, h.ProducerID, h.BaseOffset, firstSeq, e.epoch, kerr.OutOfOrderSequenceNumber)
		}
		return nil
	}
	var currentLastSeq int32 = noSequence
	switch {
	case p.touched:
		currentLastSeq = e.lastSeq()
	case h.ProducerEpoch == p.orig.epoch:
		currentLastSeq = p.orig.lastSeq()
	}
	// With no known epoch (state lost to retention or DeleteRecords) any
	// sequence is accepted.
	if p.orig.epoch != noProducerEpoch && !inSequence(currentLastSeq, firstSeq) {
		return fmt.Errorf("out of order sequence number for producer %d at offset %d: %d (incoming), %d (current end): %w",
			h.ProducerID, h.BaseOffset, firstSeq, currentLastSeq, kerr.OutOfOrderSequenceNumber)
	}
	return nil
}

// commit applies the pending entries and moves the map end offset.
func (a *producerAppend) commit(ps *producerState, endOffset int64) {
	for _, p := range a.pending {
		ps.set(p.pid, p.updated)
	}
	ps.completed = append(ps.completed, a.completed...)
	for _, pid := range a.verifiedDone {
		delete(ps.verifying, pid)
	}
	if endOffset > ps.mapEndOffset {
		ps.mapEndOffset = endOffset
	}
	a.reset()
}

// replay applies a batch read back from the log (recovery, truncation),
// with replication's rules: no sequence checks, stale epochs tolerated.
func (ps *producerState) replay(h protocol.BatchHeader, scratch *producerAppend) {
	if h.HasProducerID() {
		scratch.reset()
		// Replication origin never fails.
		_ = scratch.add(ps, h, AppendReplication, 0, -1)
		scratch.commit(ps, h.LastOffset()+1)
		return
	}
	if next := h.LastOffset() + 1; next > ps.mapEndOffset {
		ps.mapEndOffset = next
	}
}

// removeExpired drops producers idle for producer.id.expiration.ms that
// have no open transaction.
func (ps *producerState) removeExpired(nowMs, expirationMs int64) int {
	removed := 0
	for pid, e := range ps.producers {
		if e.currentTxnFirstOffset < 0 && nowMs-e.lastTimestamp >= expirationMs {
			delete(ps.producers, pid)
			removed++
		}
	}
	return removed
}

func (ps *producerState) clear() {
	clear(ps.producers)
	clear(ps.verifying)
	clear(ps.ongoing)
	ps.completed = ps.completed[:0]
}

// set stores a producer's entry and keeps ongoing in step with it.
//
// Entries are held by pointer: a map of 8-slot groups holding the
// 250-byte entries by value took about 2 KiB for a partition's one
// producer.
func (ps *producerState) set(pid int64, e producerEntry) {
	p, ok := ps.producers[pid]
	if !ok {
		// A new pointer, not &e: e would escape, and every append
		// would allocate.
		p = new(producerEntry)
		if ps.producers == nil {
			ps.producers = map[int64]*producerEntry{}
		}
		ps.producers[pid] = p
	}
	*p = e
	if e.currentTxnFirstOffset >= 0 {
		if ps.ongoing == nil {
			ps.ongoing = map[int64]int64{}
		}
		ps.ongoing[pid] = e.currentTxnFirstOffset
	} else {
		delete(ps.ongoing, pid)
	}
}

// firstUnstableOffset is the first offset of the oldest open
// transaction; ok is false when none is open.
func (ps *producerState) firstUnstableOffset() (offset int64, ok bool) {
	for _, first := range ps.ongoing {
		if !ok || first < offset {
			offset, ok = first, true
		}
	}
	return offset, ok
}

// Producer snapshot file (Kafka's ProducerSnapshot message, version 1):
// int16 version, uint32 CRC-32C of everything after the CRC, int32 entry
// count, then per producer: int64 producer id, int16 epoch, int32 last
// sequence, int64 last offset, int32 offset delta, int64 timestamp, int32
// coordinator epoch, int64 current transaction first offset.
const (
	snapshotVersion     = 1
	snapshotCRCPos      = 2
	snapshotEntriesPos  = 6
	snapshotEntrySize   = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8
	snapshotHeaderBytes = snapshotEntriesPos + 4
)

var crc32c = crc32.MakeTable(crc32.Castagnoli)

func snapshotFileName(dir string, offset int64) string {
	return segmentFileName(dir, offset, snapshotSuffix)
}

// encodeSnapshot writes the entries sorted by producer id.
func encodeSnapshot(producers map[int64]*producerEntry) []byte {
	pids := make([]int64, 0, len(producers))
	for pid := range producers {
		pids = append(pids, pid)
	}
	sort.Slice(pids, func(i, j int) bool { return pids[i] < pids[j] })
	buf := make([]byte, snapshotHeaderBytes+len(pids)*snapshotEntrySize)
	be := binary.BigEndian
	be.PutUint16(buf, snapshotVersion)
	be.PutUint32(buf[snapshotEntriesPos:], uint32(len(pids)))
	p := buf[snapshotHeaderBytes:]
	for _, pid := range pids {
		e := producers[pid]
		last, ok := e.last()
		if !ok {
			last = producerBatch{lastSeq: noSequence, lastOffset: -1}
		}
		be.PutUint64(p[0:], uint64(pid))
		be.PutUint16(p[8:], uint16(e.epoch))
		be.PutUint32(p[10:], uint32(last.lastSeq))
		be.PutUint64(p[14:], uint64(last.lastOffset))
		be.PutUint32(p[22:], uint32(last.offsetDelta))
		be.PutUint64(p[26:], uint64(e.lastTimestamp))
		be.PutUint32(p[34:], uint32(e.coordinatorEpoch))
		be.PutUint64(p[38:], uint64(e.currentTxnFirstOffset))
		p = p[snapshotEntrySize:]
	}
	be.PutUint32(buf[snapshotCRCPos:], crc32.Checksum(buf[snapshotEntriesPos:], crc32c))
	return buf
}

var errCorruptSnapshot = errors.New("corrupt producer snapshot")

func decodeSnapshot(buf []byte) (map[int64]*producerEntry, error) {
	be := binary.BigEndian
	if len(buf) < snapshotHeaderBytes {
		return nil, fmt.Errorf("%w: %d bytes", errCorruptSnapshot, len(buf))
	}
	if v := int16(be.Uint16(buf)); v != snapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errCorruptSnapshot, v)
	}
	if crc := be.Uint32(buf[snapshotCRCPos:]); crc != crc32.Checksum(buf[snapshotEntriesPos:], crc32c) {
		return nil, fmt.Errorf("%w: CRC mismatch", errCorruptSnapshot)
	}
	n := int32(be.Uint32(buf[snapshotEntriesPos:]))
	if n < 0 || int64(len(buf)-snapshotHeaderBytes) != int64(n)*snapshotEntrySize {
		return nil, fmt.Errorf("%w: %d entries in %d bytes", errCorruptSnapshot, n, len(buf))
	}
	out := make(map[int64]*producerEntry, n)
	p := buf[snapshotHeaderBytes:]
	for i := int32(0); i < n; i++ {
		e := emptyProducerEntry()
		pid := int64(be.Uint64(p[0:]))
		e.epoch = int16(be.Uint16(p[8:]))
		b := producerBatch{
			lastSeq:     int32(be.Uint32(p[10:])),
			lastOffset:  int64(be.Uint64(p[14:])),
			offsetDelta: int32(be.Uint32(p[22:])),
		}
		e.lastTimestamp = int64(be.Uint64(p[26:]))
		b.timestamp = e.lastTimestamp
		e.coordinatorEpoch = int32(be.Uint32(p[34:]))
		e.currentTxnFirstOffset = int64(be.Uint64(p[38:]))
		if b.lastOffset >= 0 {
			e.batches[0], e.n = b, 1
		}
		out[pid] = &e
		p = p[snapshotEntrySize:]
	}
	return out, nil
}

// listSnapshots returns the offsets of the dir's snapshot files, ascending.
func listSnapshots(fsys vfs.FS, dir string) ([]int64, error) {
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var out []int64
	for _, ent := range ents {
		name, ok := strings.CutSuffix(ent.Name(), snapshotSuffix)
		if !ok || ent.IsDir() {
			continue
		}
		off, err := strconv.ParseInt(name, 10, 64)
		if err != nil {
			continue
		}
		out = append(out, off)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// takeSnapshot writes a snapshot at mapEndOffset unless one exists there.
func (ps *producerState) takeSnapshot() error {
	_, err := ps.writeSnapshot(vfs.WriteFileAtomic)
	return err
}

func (ps *producerState) writeSnapshot(write func(vfs.FS, string, []byte) error) (bool, error) {
	if ps.mapEndOffset <= ps.lastSnapOffset {
		return false, nil
	}
	name := snapshotFileName(ps.dir, ps.mapEndOffset)
	if err := write(ps.fsys, name, encodeSnapshot(ps.producers)); err != nil {
		return false, fmt.Errorf("writing producer snapshot %s: %w", name, err)
	}
	ps.lastSnapOffset = ps.mapEndOffset
	return true, nil
}

// loadLatestSnapshot loads the newest readable snapshot at or below
// maxOffset, deleting corrupt ones and any above maxOffset (Kafka's
// truncateAndReload). Without one the state starts empty at logStart.
//
// The removals need no directory sync of their own. A removed snapshot
// that comes back after a crash is above the point it was removed for;
// every later load removes it again before choosing, unless the load
// point has moved past it, and the load point (the log end after a clean
// close, the first rescanned segment after a crash) moves past it only
// when a newer snapshot exists there (the close's, or the roll's, whose
// directory entry the flush that moved the recovery point synced, along
// with the removal). So a snapshot of a truncated history is never loaded
// (TestTruncatedProducerSnapshotStaysRemoved).
func (ps *producerState) loadLatestSnapshot(logStart, maxOffset, nowMs, expirationMs int64) (err error) {
	ps.clear()
	offs := ps.listed
	if offs == nil {
		if offs, err = listSnapshots(ps.fsys, ps.dir); err != nil {
			return err
		}
	}
	for i := len(offs) - 1; i >= 0; i-- {
		off := offs[i]
		name := snapshotFileName(ps.dir, off)
		if off > maxOffset {
			if err := ps.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("removing producer snapshot %s: %w", name, err)
			}
			ps.forget(off)
			continue
		}
		data, err := vfs.ReadFile(ps.fsys, name)
		if err != nil {
			return fmt.Errorf("reading producer snapshot %s: %w", name, err)
		}
		entries, err := decodeSnapshot(data)
		if err != nil {
			if rerr := ps.fsys.Remove(name); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
				return fmt.Errorf("removing corrupt producer snapshot %s: %w", name, rerr)
			}
			ps.forget(off)
			continue
		}
		ps.restore(entries, nowMs, expirationMs)
		ps.mapEndOffset, ps.lastSnapOffset = off, off
		return nil
	}
	ps.mapEndOffset, ps.lastSnapOffset = logStart, logStart
	return nil
}

// forget drops a removed snapshot from listed.
func (ps *producerState) forget(off int64) {
	if i, ok := slices.BinarySearch(ps.listed, off); ok {
		ps.listed = slices.Delete(ps.listed, i, i+1)
	}
}

// restore takes a snapshot's entries, leaving out the producers expired
// by nowMs (those with an open transaction stay).
func (ps *producerState) restore(entries map[int64]*producerEntry, nowMs, expirationMs int64) {
	for pid, e := range entries {
		if e.currentTxnFirstOffset >= 0 || nowMs-e.lastTimestamp < expirationMs {
			ps.set(pid, *e)
		}
	}
}

// deleteSnapshotsBefore removes snapshot files below offset.
func (ps *producerState) deleteSnapshotsBefore(offset int64) error {
	offs, err := listSnapshots(ps.fsys, ps.dir)
	if err != nil {
		return err
	}
	for _, off := range offs {
		if off >= offset {
			break
		}
		name := filepath.Join(ps.dir, fmt.Sprintf("%020d%s", off, snapshotSuffix))
		if err := ps.fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("removing producer snapshot %s: %w", name, err)
		}
	}
	return nil
}
