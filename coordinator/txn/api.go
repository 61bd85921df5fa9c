package txn

import (
	"context"
	"math"
	"regexp"
	"slices"
	"time"

	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The coordinator's requests, each following Kafka 4.3's
// TransactionCoordinator method of the same purpose. Answers are Kafka
// error codes; the broker maps them for older request versions
// (PRODUCER_FENCED to INVALID_PRODUCER_EPOCH) as KafkaApis does.

// ValidTimeout is TransactionStateManager.validateTransactionTimeoutMs.
func (c *Coordinator) ValidTimeout(ms int32) bool { return ms > 0 && ms <= c.cfg.MaxTimeoutMs }

// InitProducerID serves InitProducerId for a transactional id: a new id
// gets a producer id at epoch 0; a known one gets its epoch bumped, which
// fences any older producer of the id; an open transaction is aborted
// first (the answer is then CONCURRENT_TRANSACTIONS and the client
// retries). expectedID/expectedEpoch are the request's (KIP-360; -1 when
// absent).
func (c *Coordinator) InitProducerID(ctx context.Context, id string, timeoutMs int32, expectedID int64, expectedEpoch int16) (int64, int16, int16) {
	fail := func(code int16) (int64, int16, int16) { return noProducerID, noProducerEpoch, code }
	if id == "" {
		return fail(kerr.InvalidRequest.Code)
	}
	if !c.ValidTimeout(timeoutMs) {
		return fail(kerr.InvalidTransactionTimeout.Code)
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return fail(code)
	}
	hasExpected := expectedID != noProducerID
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.txns[id]
	if m == nil {
		s.mu.Unlock()
		pid, err := c.opts.ProducerIDs(ctx)
		s.mu.Lock()
		if err != nil {
			c.log.Warn("allocating a producer id", "transactional_id", id, "err", err)
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		if s.status != runtime.ShardActive {
			return fail(kerr.NotCoordinator.Code)
		}
		if m = s.txns[id]; m == nil {
			m = &txnMeta{id: id, txnState: txnState{
				producerID: pid, prevProducerID: noProducerID, nextProducerID: noProducerID,
				epoch: noProducerEpoch, lastEpoch: noProducerEpoch, timeoutMs: timeoutMs,
				state: StateEmpty, startMs: -1, updateMs: c.nowMs(),
			}}
			s.txns[id] = m
		}
	}
	if m.pending {
		return fail(kerr.ConcurrentTransactions.Code)
	}
	if hasExpected && m.epoch != noProducerEpoch && expectedID != m.producerID &&
		(expectedID != m.prevProducerID || !epochExhausted(expectedEpoch)) {
		return fail(kerr.ProducerFenced.Code)
	}
	switch m.state {
	case StatePrepareAbort, StatePrepareCommit:
		return fail(kerr.ConcurrentTransactions.Code)
	case StateOngoing:
		// Abort the open transaction at a bumped epoch (never returned to
		// the client); its retry bumps the epoch again.
		if code := s.persist(ctx, m, m.fencedAbort(c.transactionVersion(), c.nowMs())); code != 0 {
			return fail(code)
		}
		s.startMarkersLocked(m)
		return fail(kerr.ConcurrentTransactions.Code)
	case StateEmpty, StateCompleteAbort, StateCompleteCommit:
	default:
		c.log.Error("transactional id in a state no request may find", "transactional_id", id, "state", m.state)
		return fail(kerr.UnknownServerError.Code)
	}
	var next txnState
	if epochExhausted(m.epoch) && (!hasExpected || expectedEpoch == m.epoch) {
		m.pending = true
		s.mu.Unlock()
		pid, err := c.opts.ProducerIDs(ctx)
		s.mu.Lock()
		m.pending = false
		if err != nil {
			c.log.Warn("allocating a producer id", "transactional_id", id, "err", err)
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		next = m.rotateProducerID(pid, timeoutMs, c.nowMs(), hasExpected)
	} else {
		var ok bool
		if next, ok = m.incrementEpoch(timeoutMs, expectedEpoch, hasExpected, c.nowMs()); !ok {
			return fail(kerr.ProducerFenced.Code)
		}
	}
	if code := s.persist(ctx, m, next); code != 0 {
		return fail(code)
	}
	c.log.Info("initialized transactional id", "transactional_id", id, "producer_id", next.producerID, "producer_epoch", next.epoch, "partition", s.partition)
	return next.producerID, next.epoch, 0
}

// lockTxn finds id's transaction and returns with its shard's mu held
// (s is nil when no shard was locked): INVALID_REQUEST for an empty id,
// the coordinator errors of shardFor, INVALID_PRODUCER_ID_MAPPING for an
// id the coordinator does not know.
func (c *Coordinator) lockTxn(id string) (*shard, *txnMeta, int16) {
	if id == "" {
		return nil, nil, kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return nil, nil, code
	}
	s.mu.Lock()
	m := s.txns[id]
	if m == nil {
		return s, nil, kerr.InvalidProducerIDMapping.Code
	}
	return s, m, 0
}

// checkProducer is the producer id and epoch check every transactional
// request starts with.
func checkProducer(m *txnMeta, pid int64, epoch int16) int16 {
	switch {
	case m.producerID != pid:
		return kerr.InvalidProducerIDMapping.Code
	case m.epoch != epoch:
		return kerr.ProducerFenced.Code
	}
	return 0
}

// AddPartitions adds partitions to id's transaction (AddPartitionsToTxn,
// AddOffsetsToTxn), starting it if none is open. The broker has checked
// that the partitions exist.
func (c *Coordinator) AddPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	code, _ := c.addPartitions(ctx, id, pid, epoch, tps)
	return code
}

// AddPartitionsWaiting is AddPartitions for an addition the broker makes
// on a producer's behalf (Produce v12+, TxnOffsetCommit v5): while the
// previous transaction's markers are being written it waits, up to
// add.partitions.to.txn.retry.backoff.max.ms, instead of answering
// CONCURRENT_TRANSACTIONS at once (Kafka's AddPartitionsToTxnManager
// retries the same way), so a Transactions V2 producer that starts its
// next transaction right after EndTxn is not sent into a client backoff.
func (c *Coordinator) AddPartitionsWaiting(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition) int16 {
	deadline := c.now().Add(time.Duration(c.cfg.AddRetryBackoffMaxMs) * time.Millisecond)
	poll := time.Duration(max(c.cfg.AddRetryBackoffMs, 1)) * time.Millisecond
	for {
		code, completed := c.addPartitions(ctx, id, pid, epoch, tps)
		left := deadline.Sub(c.now())
		if code != kerr.ConcurrentTransactions.Code || left <= 0 {
			return code
		}
		t := time.NewTimer(min(left, poll))
		select {
		case <-completed:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return code
		}
		t.Stop()
	}
}

// addPartitions is AddPartitions; on CONCURRENT_TRANSACTIONS it also
// returns a channel closed when the shard's next state write ends (the
// pending write, or the completion the markers lead to).
func (c *Coordinator) addPartitions(ctx context.Context, id string, pid int64, epoch int16, tps []TopicPartition) (int16, <-chan struct{}) {
	s, m, code := c.lockTxn(id)
	if s != nil {
		defer s.mu.Unlock()
	}
	if code == 0 {
		code = checkProducer(m, pid, epoch)
	}
	if code != 0 {
		return code, nil
	}
	switch {
	case m.pending, m.state == StatePrepareCommit, m.state == StatePrepareAbort:
		return kerr.ConcurrentTransactions.Code, s.written
	case m.state == StateOngoing && m.hasPartitions(tps):
		return 0, nil
	case m.state == StateDead || m.state == StatePrepareEpochFence:
		return kerr.UnknownServerError.Code, nil
	}
	sorted := slices.Clone(tps)
	slices.SortFunc(sorted, comparePartitions)
	return s.persist(ctx, m, m.addPartitions(sorted, c.nowMs())), nil
}

// VerifyPartitions answers AddPartitionsToTxn v4+'s verify_only
// transactions (KIP-890 part 1): whether each partition is in id's open
// transaction at this producer id and epoch. A partition not in it gets
// TRANSACTION_ABORTABLE; a failed producer check answers every partition.
func (c *Coordinator) VerifyPartitions(id string, pid int64, epoch int16, tps []TopicPartition) []int16 {
	codes := make([]int16, len(tps))
	all := func(code int16) []int16 {
		for i := range codes {
			codes[i] = code
		}
		return codes
	}
	s, m, code := c.lockTxn(id)
	if s != nil {
		defer s.mu.Unlock()
	}
	if code == 0 {
		code = checkProducer(m, pid, epoch)
	}
	if code != 0 {
		return all(code)
	}
	if m.state == StatePrepareCommit || m.state == StatePrepareAbort {
		return all(kerr.ConcurrentTransactions.Code)
	}
	for i, tp := range tps {
		if !m.hasPartitions([]TopicPartition{tp}) {
			codes[i] = kerr.TransactionAbortable.Code
		}
	}
	return codes
}

// EndTxn commits or aborts id's transaction: the prepare state is written,
// the answer given, and the markers written after it (the transaction
// completes when they all are). clientTV is 2 for EndTxn v5+: Transactions
// V2, where the epoch bumps with every EndTxn (KIP-890 part 2) and the
// retry rules differ. The answer carries the producer id and epoch the
// client goes on with.
func (c *Coordinator) EndTxn(ctx context.Context, id string, pid int64, epoch int16, commit bool, clientTV int16) (int64, int16, int16) {
	fail := func(code int16) (int64, int16, int16) { return noProducerID, noProducerEpoch, code }
	s, m, code := c.lockTxn(id)
	if s != nil {
		defer s.mu.Unlock()
	}
	if code != 0 {
		return fail(code)
	}
	invalid := func() (int64, int16, int16) {
		c.log.Debug("EndTxn in a state that does not allow it", "transactional_id", id, "state", m.state, "commit", commit)
		return fail(kerr.InvalidTxnState.Code)
	}
	current := func() (int64, int16, int16) { return m.producerID, m.epoch, 0 }
	// Under Transactions V1 the epoch must be the current one, and a
	// completed transaction answers its own retry. Under V2 a retry
	// carries the epoch before the bump its first attempt made (or, when
	// that bump ran out of epochs, the old producer id at the last
	// epoch), and the current epoch on a completed transaction is the
	// next EndTxn. Kafka's V2 table:
	//
	//	                 Abort retry/current   Commit retry/current
	//	Empty            FENCED / bump         FENCED / INVALID_TXN_STATE
	//	CompleteAbort    ok     / bump         INVALID_TXN_STATE both
	//	CompleteCommit   INVALID_TXN_STATE / bump   ok / INVALID_TXN_STATE
	tv2 := supportsEpochBump(clientTV)
	validEpoch, isRetry, otherPID := epoch == m.epoch, epoch == m.epoch, m.producerID != pid
	if tv2 {
		retryOnOverflow := m.prevProducerID == pid && epoch == math.MaxInt16-1 && m.epoch == 0
		retryOnBump := m.epoch == epoch+1
		isRetry, otherPID = retryOnBump || retryOnOverflow, otherPID && !retryOnOverflow
		if m.state == StateCompleteCommit || m.state == StateCompleteAbort {
			validEpoch = isRetry || epoch == m.epoch
		}
	}
	// A prepared transaction is completing (its markers are being
	// written), which Kafka marks as a pending transition; pending comes
	// before the epoch check (KAFKA-18464) so that a V2 client aborting
	// an empty transaction at the epoch its commit just gave it waits for
	// that commit instead of being fenced by it.
	switch {
	case otherPID:
		return fail(kerr.InvalidProducerIDMapping.Code)
	case m.pending, m.state == StatePrepareCommit, m.state == StatePrepareAbort:
		return fail(kerr.ConcurrentTransactions.Code)
	case !validEpoch:
		return fail(kerr.ProducerFenced.Code)
	}
	switch m.state {
	case StateOngoing:
		return s.prepareEnd(ctx, m, commit, clientTV)
	case StateEmpty:
		if tv2 && !commit {
			return s.prepareEnd(ctx, m, false, clientTV)
		}
	case StateCompleteCommit:
		switch {
		case commit && isRetry:
			return current()
		case tv2 && !commit && !isRetry:
			return s.prepareEnd(ctx, m, false, clientTV)
		}
	case StateCompleteAbort:
		switch {
		case !commit && isRetry:
			return current()
		case tv2 && !commit:
			return s.prepareEnd(ctx, m, false, clientTV)
		}
	}
	return invalid()
}

// prepareEnd writes PrepareCommit or PrepareAbort for m and starts its
// markers. Under TV2 an abort may end a transaction with no partitions
// (from Empty or a completed one): it only bumps the epoch. The caller
// holds s.mu (released during the write, as persist does).
func (s *shard) prepareEnd(ctx context.Context, m *txnMeta, commit bool, clientTV int16) (int64, int16, int16) {
	fail := func(code int16) (int64, int16, int16) { return noProducerID, noProducerEpoch, code }
	to := StatePrepareAbort
	if commit {
		to = StatePrepareCommit
	}
	nextPID := noProducerID
	if supportsEpochBump(clientTV) && epochExhausted(m.epoch) {
		m.pending = true
		s.mu.Unlock()
		newPID, err := s.c.opts.ProducerIDs(ctx)
		s.mu.Lock()
		m.pending = false
		if err != nil {
			return fail(kerr.CoordinatorNotAvailable.Code)
		}
		nextPID = newPID
	}
	next := m.abortOrCommit(to, clientTV, nextPID, s.c.nowMs())
	if code := s.persist(ctx, m, next); code != 0 {
		return fail(code)
	}
	s.startMarkersLocked(m)
	return m.producerID, m.epoch, 0
}

// startMarkersLocked starts the marker round of m's prepared transaction
// unless one runs already. The caller holds s.mu.
func (s *shard) startMarkersLocked(m *txnMeta) {
	if m.markersOut || s.status != runtime.ShardActive {
		return
	}
	m.markersOut = true
	st := m.txnState
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.finishTransaction(m, st)
	}()
}

// Marker retry backoff bounds.
const (
	markerBackoffMin = 20 * time.Millisecond
	markerBackoffMax = 1000 * time.Millisecond
)

// finishTransaction writes st's markers to each of its partitions, retrying
// the ones that fail, and then records the transaction complete. It stops
// when the shard is unloaded (the next coordinator starts over: markers
// are idempotent) or when a partition says this coordinator is stale.
func (s *shard) finishTransaction(m *txnMeta, st txnState) {
	ctx := s.ctx
	marker := Marker{ProducerID: st.producerID, ProducerEpoch: st.epoch, CoordinatorEpoch: s.coordinatorEpoch,
		Commit: st.state == StatePrepareCommit, TransactionVersion: st.clientTV}
	left := slices.Clone(st.partitions)
	backoff := markerBackoffMin
	for len(left) > 0 {
		if ctx.Err() != nil {
			return
		}
		marker.Partitions = left
		codes := s.c.opts.Markers.WriteMarkers(ctx, marker)
		var retry []TopicPartition
		for i, code := range codes {
			switch code {
			case 0:
			case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
				s.c.log.Warn("a partition refused this coordinator's transaction marker: the coordinator is stale",
					"transactional_id", m.id, "partition", left[i], "err", kerr.ErrorForCode(code))
				s.mu.Lock()
				m.markersOut = false
				s.mu.Unlock()
				return
			default:
				retry = append(retry, left[i])
			}
		}
		left = retry
		if len(left) > 0 && !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, markerBackoffMax)
	}
	backoff = markerBackoffMin
	for {
		s.mu.Lock()
		if s.status != runtime.ShardActive || s.txns[m.id] != m || m.producerID != st.producerID || m.epoch != st.epoch || m.state != st.state {
			m.markersOut = false
			s.mu.Unlock()
			return
		}
		code := s.persist(ctx, m, m.complete(s.c.nowMs()))
		if code == 0 || code == kerr.NotCoordinator.Code {
			m.markersOut = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		if !sleepCtx(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, markerBackoffMax)
	}
}

// AbortTimedOut aborts every open transaction older than its timeout, at a
// bumped epoch so that its producer is fenced (Kafka's
// abortTimedOutTransactions).
func (c *Coordinator) AbortTimedOut(ctx context.Context) {
	now := c.nowMs()
	for _, s := range c.activeShards() {
		s.mu.Lock()
		var due []*txnMeta
		if s.status == runtime.ShardActive {
			for _, m := range s.txns {
				if m.state == StateOngoing && !m.pending && m.startMs+int64(m.timeoutMs) < now {
					due = append(due, m)
				}
			}
		}
		for _, m := range due {
			if m.pending || m.state != StateOngoing || s.txns[m.id] != m || s.status != runtime.ShardActive {
				continue
			}
			if code := s.persist(ctx, m, m.fencedAbort(c.transactionVersion(), c.nowMs())); code != 0 {
				c.log.Warn("aborting a timed-out transaction failed", "transactional_id", m.id, "err", kerr.ErrorForCode(code))
				continue
			}
			c.log.Info("aborting a transaction open longer than its timeout", "transactional_id", m.id,
				"producer_id", m.producerID, "producer_epoch", m.epoch, "timeout_ms", m.timeoutMs)
			s.startMarkersLocked(m)
		}
		s.mu.Unlock()
	}
}

// ExpireTransactionalIDs removes transactional ids whose last transaction
// ended longer than transactional.id.expiration.ms ago, with a tombstone
// in the log (Kafka's removeExpiredTransactionalIds).
func (c *Coordinator) ExpireTransactionalIDs(ctx context.Context) {
	now := c.nowMs()
	for _, s := range c.activeShards() {
		s.mu.Lock()
		var due []*txnMeta
		for _, m := range s.txns {
			switch m.state {
			case StateEmpty, StateCompleteCommit, StateCompleteAbort:
				if !m.pending && m.updateMs+int64(c.cfg.IDExpirationMs) <= now {
					due = append(due, m)
				}
			}
		}
		for _, m := range due {
			if s.status != runtime.ShardActive || s.txns[m.id] != m || m.pending || m.updateMs+int64(c.cfg.IDExpirationMs) > now {
				continue
			}
			if code := s.writeTombstone(ctx, m); code != 0 {
				c.log.Warn("expiring a transactional id failed", "transactional_id", m.id, "err", kerr.ErrorForCode(code))
				continue
			}
			c.log.Info("expired transactional id", "transactional_id", m.id, "producer_id", m.producerID)
		}
		s.mu.Unlock()
	}
}

// writeTombstone removes m from the log and the shard. Like persist, it
// releases s.mu during the append.
func (s *shard) writeTombstone(ctx context.Context, m *txnMeta) int16 {
	return s.write(ctx, m, nil, StateDead, func() { delete(s.txns, m.id) })
}

// Listing is one transaction as ListTransactions reports it.
type Listing struct {
	TransactionalID string
	ProducerID      int64
	State           string
}

// ListFilter is ListTransactions' filters; zero values filter nothing.
type ListFilter struct {
	States      []string
	ProducerIDs []int64
	// MinDurationMs keeps transactions running longer than it; -1 keeps
	// all.
	MinDurationMs int64
	// Pattern is a regular expression transactional ids must match.
	Pattern *string
}

// List answers ListTransactions for the partitions led here: the listed
// transactions and the state filters that name no state.
// COORDINATOR_LOAD_IN_PROGRESS while any partition loads;
// INVALID_REGULAR_EXPRESSION for a pattern that does not compile.
func (c *Coordinator) List(f ListFilter) (out []Listing, unknownStates []string, code int16) {
	var pattern *regexp.Regexp
	if f.Pattern != nil && *f.Pattern != "" {
		re, err := regexp.Compile(*f.Pattern)
		if err != nil {
			return nil, nil, kerr.InvalidRegularExpression.Code
		}
		pattern = re
	}
	var states []State
	for _, name := range f.States {
		if st, ok := ParseState(name); ok && st.String() == name {
			states = append(states, st)
		} else {
			unknownStates = append(unknownStates, name)
		}
	}
	now := c.nowMs()
	for _, s := range c.activeShards() {
		s.mu.Lock()
		if s.status == runtime.ShardLoading {
			s.mu.Unlock()
			return nil, nil, kerr.CoordinatorLoadInProgress.Code
		}
		for _, m := range s.txns {
			switch {
			case m.state == StateDead:
			case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.producerID):
			case len(f.States) > 0 && !slices.Contains(states, m.state):
			case f.MinDurationMs >= 0 && now-m.startMs <= f.MinDurationMs:
			case pattern != nil && !pattern.MatchString(m.id):
			default:
				out = append(out, Listing{TransactionalID: m.id, ProducerID: m.producerID, State: m.state.String()})
			}
		}
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Listing) int {
		switch {
		case a.TransactionalID < b.TransactionalID:
			return -1
		case a.TransactionalID > b.TransactionalID:
			return 1
		}
		return 0
	})
	return out, unknownStates, 0
}

// Description is one transaction as DescribeTransactions reports it.
type Description struct {
	ProducerID  int64
	Epoch       int16
	State       string
	TimeoutMs   int32
	StartTimeMs int64
	Partitions  []TopicPartition
}

// Describe answers DescribeTransactions for one id:
// TRANSACTIONAL_ID_NOT_FOUND when it is unknown.
func (c *Coordinator) Describe(id string) (Description, int16) {
	if id == "" {
		return Description{}, kerr.InvalidRequest.Code
	}
	s, code := c.shardFor(id)
	if code != 0 {
		return Description{}, code
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.txns[id]
	if m == nil || m.state == StateDead {
		return Description{}, kerr.TransactionalIDNotFound.Code
	}
	return Description{ProducerID: m.producerID, Epoch: m.epoch, State: m.state.String(), TimeoutMs: m.timeoutMs,
		StartTimeMs: m.startMs, Partitions: slices.Clone(m.partitions)}, 0
}

// sleepCtx waits d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
