package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Type is where an operation is in its life, as in Jepsen's histories:
// invoked, or completed as ok (it happened), fail (it certainly did not
// happen) or info (it may or may not have happened).
type Type string

const (
	Invoke Type = "invoke"
	OK     Type = "ok"
	Fail   Type = "fail"
	Info   Type = "info"
)

// Func is what an operation does.
type Func string

const (
	// Send is one produced record: Key and Value on the invocation;
	// Partition and Offset on an ok completion.
	Send Func = "send"
	// Poll is one consumer poll: its records, in the order the client
	// handed them over.
	Poll Func = "poll"
	// Commit is one offset commit of a consumer: Offsets holds, per
	// partition, the next offset to read.
	Commit Func = "commit"
	// Assign and Revoke are the partitions a consumer gained or gave up
	// (lost ones are Revoke too): the keys of Offsets.
	Assign Func = "assign"
	Revoke Func = "revoke"
	// FinalRead is the read of every partition from its start to its end
	// offset, after the faults were healed.
	FinalRead Func = "final-read"
	// Committed is the group's committed offsets, fetched at the end.
	Committed Func = "committed"
	// Txn is one transaction of TxnWorkload: Value names it, Seq numbers
	// it among its producer's, Key is "commit" or "abort" (what the
	// producer meant to do), and the invocation's Records are its writes
	// (Partition and Value). Its completion is OK (committed), Fail (not
	// committed) or Info (commit outcome unknown).
	Txn Func = "txn"
	// TxnPoll is one poll of the read_committed reader.
	TxnPoll Func = "txn-poll"
	// TxnRead is the read_committed read of the transactions' topic, from
	// its start to its end offsets, once no transaction was open.
	TxnRead Func = "txn-read"
	// Create and Alter are MetaWorkload's requests: Value is the topic
	// created; Key the topic altered and Value its new retention.ms.
	Create Func = "create"
	Alter  Func = "alter"
	// BrokerView is one broker's final answer about the metadata
	// workload's topics: Partition is the broker, Configs topic ->
	// retention.ms ("" for the default).
	BrokerView Func = "broker-view"
	// Image is one node's final report of its metadata image: Partition
	// is the node, Offset and Value the image's offset and digest.
	Image Func = "image"
	// ShareSend is one record ShareWorkload's producer sent (as Send).
	ShareSend Func = "share-send"
	// SharePoll is one poll of a share-group member: its records, each
	// with the delivery count the broker gave it.
	SharePoll Func = "share-poll"
	// ShareAccept is a member's acceptance of the records of its last
	// poll: ok when the brokers confirmed it for every partition, info
	// otherwise.
	ShareAccept Func = "share-accept"
	// ShareFinal is the share group's state at the end: Offsets holds
	// each partition's share-partition start offset, Lags its lag as
	// DescribeShareGroupOffsets gives it (KIP-1226: records from the start
	// offset to the end not yet accepted or archived; -1 unknown), Ends
	// its end offset.
	ShareFinal Func = "share-final"
	// Fault is a nemesis step (always Info): Value is FaultStart or
	// FaultStop, Error says what it did.
	Fault Func = "fault"
	// LogStart is an observation of the queue topic's log start offsets
	// (Offsets: partition -> log start offset), invoked and completed
	// like any request (Seq pairs them): retention deleted everything
	// below them. Only CheckRetention reads them (the soak's topic has
	// retention; the fault suite's must lose nothing).
	LogStart Func = "log-start"
	// CompactSend is one record CompactWorkload's producers sent (as
	// Send) to the compacted topic.
	CompactSend Func = "compact-send"
	// CompactRead is the read of every partition of the compacted topic
	// from its start to its end offset, after the producers stopped; its
	// Records carry their keys.
	CompactRead Func = "compact-read"
)

// The Values of Fault ops.
const (
	FaultStart = "start"
	FaultStop  = "stop"
)

// Record is one record as a consumer or the final read saw it.
type Record struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Value     string `json:"v"`
	// Key is the record's key (the final reads only).
	Key string `json:"k,omitempty"`
	// Deliveries is a share-group delivery's count (SharePoll only).
	Deliveries int32 `json:"d,omitempty"`
}

// Op is one entry of a history. Which fields are set depends on F (see
// the Func constants).
type Op struct {
	Index   int      `json:"i"`
	Process string   `json:"process"`
	Type    Type     `json:"type"`
	F       Func     `json:"f"`
	Time    Duration `json:"time"` // since the history began

	// Seq numbers a producer's sends in the order it invoked them.
	Seq       int64  `json:"seq,omitempty"`
	Key       string `json:"key,omitempty"`
	Value     string `json:"value,omitempty"`
	Partition int32  `json:"partition,omitempty"`
	Offset    int64  `json:"offset,omitempty"`

	Records []Record          `json:"records,omitempty"`
	Offsets map[int32]int64   `json:"offsets,omitempty"`
	Lags    map[int32]int64   `json:"lags,omitempty"`
	Ends    map[int32]int64   `json:"ends,omitempty"`
	Configs map[string]string `json:"configs,omitempty"`
	Error   string            `json:"error,omitempty"`
}

// Duration marshals as milliseconds, which is what a reader of a history
// file wants to see.
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(float64(d) / float64(time.Millisecond))
}

func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms float64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(ms * float64(time.Millisecond))
	return nil
}

// History is the ordered list of operations of one run. Recording order
// is real-time order: an op is appended, under mu, at the moment it
// happens, so an op that completed before another was invoked comes
// first. Safe for concurrent use.
type History struct {
	start time.Time

	mu  sync.Mutex
	ops []Op
}

// NewHistory starts an empty history whose clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Add stamps op with its index and time and appends it.
func (h *History) Add(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = len(h.ops)
	op.Time = Duration(time.Since(h.start))
	h.ops = append(h.ops, op)
	return op
}

// Ops is a copy of the operations so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// From is a copy of the operations from index i on (none when i is past
// the end): what a reader following the history has not seen yet.
func (h *History) From(i int) []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i >= len(h.ops) {
		return nil
	}
	return append([]Op(nil), h.ops[max(i, 0):]...)
}

// WriteFile writes the history as one JSON object a line.
func (h *History) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("writing history: %w", err)
	}
	enc := json.NewEncoder(f)
	for _, op := range h.Ops() {
		if err := enc.Encode(op); err != nil {
			f.Close()
			return fmt.Errorf("writing history to %s: %w", path, err)
		}
	}
	return f.Close()
}
