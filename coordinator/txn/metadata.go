package txn

import (
	"math"
	"slices"
	"strings"
)

// State is a transaction's state, numbered as Kafka's TransactionState ids
// (the value written to __transaction_state).
type State int8

const (
	StateEmpty             State = 0
	StateOngoing           State = 1
	StatePrepareCommit     State = 2
	StatePrepareAbort      State = 3
	StateCompleteCommit    State = 4
	StateCompleteAbort     State = 5
	StateDead              State = 6
	StatePrepareEpochFence State = 7
)

var stateNames = [...]string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead", "PrepareEpochFence"}

// String is Kafka's name for the state, as ListTransactions and
// DescribeTransactions report it.
func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "Unknown"
}

// ParseState maps Kafka's state name to its State (case-insensitive, as
// Kafka's TransactionState.fromName is not, but kafka-transactions
// normalises: exact names are what clients send).
func ParseState(name string) (State, bool) {
	for i, n := range stateNames {
		if strings.EqualFold(n, name) {
			return State(i), true
		}
	}
	return 0, false
}

// Producer-id sentinels of Kafka's RecordBatch.
const (
	noProducerID    int64 = -1
	noProducerEpoch int16 = -1
)

// epochExhausted is Kafka's TransactionMetadata.isEpochExhausted: the
// coordinator keeps the last epoch for fencing, so a client never gets
// MaxInt16.
func epochExhausted(epoch int16) bool { return epoch >= math.MaxInt16-1 }

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func comparePartitions(a, b TopicPartition) int {
	if c := strings.Compare(a.Topic, b.Topic); c != 0 {
		return c
	}
	return int(a.Partition) - int(b.Partition)
}

// txnState is what the log records of one transactional id (Kafka's
// TransactionMetadata fields, less the in-memory ones). It is a value:
// a transition builds the next txnState, persists it, and only then
// replaces the current one.
type txnState struct {
	producerID     int64
	prevProducerID int64
	nextProducerID int64
	epoch          int16
	// lastEpoch is not persisted (Kafka's lastProducerEpoch): it lets a
	// retried InitProducerId that lost its answer get the same epoch.
	lastEpoch int16
	timeoutMs int32
	state     State
	// partitions are sorted; nil when none.
	partitions []TopicPartition
	startMs    int64
	updateMs   int64
	// clientTV is the client's transaction version (2: the epoch bumps at
	// every EndTxn, KIP-890 part 2).
	clientTV int16
}

// txnMeta is one transactional id's state in a loaded shard. Its fields
// are guarded by the shard's mu.
type txnMeta struct {
	id string
	txnState
	// pending: a state write is in flight; requests that
	// would transition the transaction meanwhile get
	// CONCURRENT_TRANSACTIONS (Kafka's pendingState).
	pending    bool
	markersOut bool // a marker round for the PrepareCommit/PrepareAbort in state runs
}

func (s *txnState) hasPartitions(tps []TopicPartition) bool {
	for _, tp := range tps {
		if _, found := slices.BinarySearchFunc(s.partitions, tp, comparePartitions); !found {
			return false
		}
	}
	return true
}

// withPartitions is the union of the state's partitions and tps, sorted.
func (s *txnState) withPartitions(tps []TopicPartition) []TopicPartition {
	out := slices.Clone(s.partitions)
	for _, tp := range tps {
		if i, found := slices.BinarySearchFunc(out, tp, comparePartitions); !found {
			out = slices.Insert(out, i, tp)
		}
	}
	return out
}

// supportsEpochBump is TransactionVersion.supportsEpochBump.
func supportsEpochBump(tv int16) bool { return tv >= 2 }

// Transitions, each Kafka's TransactionMetadata.prepare* of the same name.
// They compute the next state from the current one and never change it.

func (s txnState) incrementEpoch(timeoutMs int32, expected int16, hasExpected bool, nowMs int64) (txnState, bool) {
	next := s
	bumped := s.epoch + 1
	switch {
	case !hasExpected:
		next.epoch, next.lastEpoch = bumped, noProducerEpoch
	case s.epoch == noProducerEpoch || expected == s.epoch:
		next.epoch, next.lastEpoch = bumped, s.epoch
	case expected == s.lastEpoch:
		// A retry of an InitProducerId that succeeded: the same epoch.
	default:
		return s, false
	}
	next.state, next.timeoutMs, next.partitions, next.startMs, next.updateMs = StateEmpty, timeoutMs, nil, -1, nowMs
	next.nextProducerID, next.clientTV = noProducerID, 0
	return next, true
}

func (s txnState) rotateProducerID(newID int64, timeoutMs int32, nowMs int64, recordLastEpoch bool) txnState {
	next := s
	next.prevProducerID, next.producerID, next.nextProducerID = s.producerID, newID, noProducerID
	next.epoch, next.lastEpoch = 0, noProducerEpoch
	if recordLastEpoch {
		next.lastEpoch = s.epoch
	}
	next.state, next.timeoutMs, next.partitions, next.startMs, next.updateMs, next.clientTV = StateEmpty, timeoutMs, nil, -1, nowMs, 0
	return next
}

func (s txnState) addPartitions(tps []TopicPartition, nowMs int64) txnState {
	next := s
	switch s.state {
	case StateEmpty, StateCompleteAbort, StateCompleteCommit:
		next.startMs = nowMs
	}
	next.state, next.partitions, next.updateMs = StateOngoing, s.withPartitions(tps), nowMs
	return next
}

// abortOrCommit moves an Ongoing transaction to PrepareCommit or
// PrepareAbort; with TV2 the epoch bumps (and nextProducerID is the
// producer id to switch to when that bump exhausts the epochs).
func (s txnState) abortOrCommit(to State, clientTV int16, nextProducerID int64, nowMs int64) txnState {
	next := s
	if supportsEpochBump(clientTV) {
		next.epoch, next.lastEpoch = s.epoch+1, s.epoch
	}
	next.state, next.clientTV, next.nextProducerID, next.updateMs = to, clientTV, nextProducerID, nowMs
	return next
}

// complete moves PrepareCommit/PrepareAbort to CompleteCommit/CompleteAbort
// once every marker is written.
func (s txnState) complete(nowMs int64) txnState {
	next := s
	next.state = StateCompleteAbort
	if s.state == StatePrepareCommit {
		next.state = StateCompleteCommit
	}
	if supportsEpochBump(s.clientTV) && s.nextProducerID != noProducerID {
		next.prevProducerID, next.producerID, next.epoch = s.producerID, s.nextProducerID, 0
	}
	next.nextProducerID, next.lastEpoch, next.partitions, next.updateMs = noProducerID, s.epoch, nil, nowMs
	return next
}

// fencedAbort is prepareFenceProducerEpoch followed by the abort it leads
// to: the epoch bumps (fencing the producer that holds the transaction)
// and the transaction goes to PrepareAbort at the new epoch.
//
// The abort is the coordinator's, not a client's, so it follows the
// finalized transaction.version (serverTV), as Kafka's does: under TV2
// the abort bumps the epoch once more, so the markers go out two epochs
// above the fenced producer's.
func (s txnState) fencedAbort(serverTV int16, nowMs int64) txnState {
	next := s
	next.epoch, next.lastEpoch = s.epoch+1, noProducerEpoch
	if supportsEpochBump(serverTV) && s.epoch < math.MaxInt16-1 {
		next.epoch, next.lastEpoch = s.epoch+2, s.epoch+1
	}
	next.state, next.updateMs, next.nextProducerID = StatePrepareAbort, nowMs, noProducerID
	next.clientTV = serverTV
	return next
}
