package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// txnRecords is how many input records each transactions check copies in
// its first transaction; it then aborts txnRecords/2 records and commits
// txnRecords/2 more.
const txnRecords = 100

// The values every transactions check writes to its output topic, by the
// transaction that wrote them: copy-in-<i> (the copied input, committed),
// aborted-<i>, commit2-<i>.
const (
	txnCopied   = "copy"
	txnAborted  = "aborted"
	txnCommit2  = "commit2"
	txnJavaMain = "TxnCheck"
)

// txnScenarios are the transactional client checks: each client family
// runs consume-transform-produce with the input offsets sent to the
// transaction (committed), an aborted transaction, and one more committed
// transaction, and reads the output back with read_committed and
// read_uncommitted consumers of its own family. The program prints a
// txnReport; checkTxnReport judges it, the same for every family.
func txnScenarios() []Scenario {
	script := func(name, doc string, run func(ctx context.Context, e *Env, topic, group string) (Output, error)) Scenario {
		return Scenario{Name: name, Doc: doc, Timeout: 4 * time.Minute, Run: func(ctx context.Context, e *Env) error {
			short := strings.TrimPrefix(strings.TrimPrefix(name, "client/"), "verify/")
			out, err := run(ctx, e, e.Name(short), e.Name(short+"-group"))
			if err != nil {
				return err
			}
			note, err := checkTxnReport(out.Stdout, txnRecords)
			e.Notef("%s", note)
			return err
		}}
	}
	java := func(set, version, tv string) Scenario {
		return script("verify/transactions-java-"+version,
			fmt.Sprintf("Apache's Java clients %s (%s): initTransactions, sendOffsetsToTransaction with the consumer's group metadata, commit, abort; read_committed KafkaConsumer", version, tv),
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runJavaClient(ctx, e, set, txnJavaMain, e.Bootstrap(), topic, group, strconv.Itoa(txnRecords))
			})
	}
	return []Scenario{
		script("client/confluent-kafka-python-transactions", "confluent-kafka (librdkafka): init_transactions, send_offsets_to_transaction with the consumer's group metadata, commit, abort; read_committed consumer",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runPython(ctx, e, "confluent_txn_check.py", topic, group, txnRecords)
			}),
		script("client/kafkajs-transactions", "kafkajs: transactional idempotent producer, transaction.send, sendOffsets, commit, abort; consumer with readUncommitted false",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runNode(ctx, e, "kafkajs_txn_check.js", topic, group, txnRecords)
			}),
		script("client/sarama-transactions", "sarama: Transaction.ID, BeginTxn, AddOffsetsToTxnWithGroupMetadata from the consumer group session, CommitTxn, AbortTxn; consumer IsolationLevel ReadCommitted",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runGoClient(ctx, e, "sarama-transactions", topic, group, txnRecords)
			}),
		{Name: "client/kafka-go-transactions", Timeout: 4 * time.Minute,
			Doc: "segmentio/kafka-go (no transactional producer: offsets only): InitProducerID with a transactional id, AddOffsetsToTxn, TxnOffsetCommit, EndTxn commit, abort, commit; the group's offset moves only on commit; a second InitProducerID fences the first session",
			Run: func(ctx context.Context, e *Env) error {
				out, err := runGoClient(ctx, e, "kafka-go-transactions", e.Name("kafka-go-txn"), e.Name("kafka-go-txn-group"), txnRecords)
				if err != nil {
					return err
				}
				note, err := checkKafkaGoTxnReport(out.Stdout, txnRecords)
				e.Notef("%s", note)
				return err
			}},
		java(SetKafka, KafkaVersion, "transactions V2 where the broker finalizes transaction.version 2, V1 otherwise"),
		java(SetOldClients, OldClientsVersion, "transactions V1: KIP-890's client side came in 4.0"),
	}
}

// runJavaClient runs a program of integration/clients/java, compiled
// against a Maven set's jars.
func runJavaClient(ctx context.Context, e *Env, set, mainClass string, args ...string) (Output, error) {
	classes, err := e.Tools.JavaClients(ctx, set)
	if err != nil {
		return Output{}, err
	}
	c, err := e.Tools.JavaCmdWithClasspath(ctx, set, classes, mainClass, args...)
	if err != nil {
		return Output{}, err
	}
	c.Timeout = 3 * time.Minute
	return e.Exec(ctx, c)
}

// txnReport is the JSON line every transactions check prints.
type txnReport struct {
	Client          string         `json:"client"`
	Input           int            `json:"input"`        // records the group consumer read from the input
	Acked           map[string]int `json:"acked"`        // records acknowledged, by transaction (value prefix)
	GroupOffset     int64          `json:"group_offset"` // the group's committed input offset at the end
	ReadCommitted   []string       `json:"read_committed"`
	ReadUncommitted []string       `json:"read_uncommitted"`
	// TransactionVersion is the finalized transaction.version the program
	// saw, and ProducerEpoch the transactional id's epoch at the end
	// (DescribeTransactions), where it can tell (the Java check).
	TransactionVersion *int `json:"transaction_version,omitempty"`
	ProducerEpoch      *int `json:"producer_epoch,omitempty"`
}

// javaTxnEpoch is the producer epoch a Java check must end with: its three
// EndTxns bump it under transactions V2, which clients use from 4.0 on when
// the broker finalizes transaction.version 2; under V1 it stays at
// InitProducerId's 0.
func javaTxnEpoch(client string, tv int) (epoch int, protocol string) {
	major, _, _ := strings.Cut(strings.TrimPrefix(client, "java-"), ".")
	if m, err := strconv.Atoi(major); err == nil && m >= 4 && tv >= 2 {
		return 3, "transactions V2"
	}
	return 0, "transactions V1"
}

// checkTxnReport checks a transactions report for n input records and
// returns a summary for the report's note.
func checkTxnReport(stdout string, n int) (string, error) {
	var line string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			line = l
		}
	}
	var r txnReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return "", fmt.Errorf("client printed no JSON report (%v): %q", err, truncate(stdout, 300))
	}
	extra := n / 2
	want := map[string]int{txnCopied: n, txnAborted: extra, txnCommit2: extra}
	var problems []string
	if r.Input != n {
		problems = append(problems, fmt.Sprintf("the group consumer read %d input records, want %d", r.Input, n))
	}
	for _, k := range []string{txnCopied, txnAborted, txnCommit2} {
		if r.Acked[k] != want[k] {
			problems = append(problems, fmt.Sprintf("%d %s records acknowledged, want %d", r.Acked[k], k, want[k]))
		}
	}
	if r.GroupOffset != int64(n) {
		problems = append(problems, fmt.Sprintf("group offset on the input is %d, want %d (sent with the committed transaction; the aborted one sent 1)", r.GroupOffset, n))
	}
	ru := tallyTxnValues(r.ReadUncommitted, n, extra)
	if p := ru.mismatch("read_uncommitted", want); p != "" {
		problems = append(problems, p)
	}
	rc := tallyTxnValues(r.ReadCommitted, n, extra)
	if p := rc.mismatch("read_committed", map[string]int{txnCopied: n, txnAborted: 0, txnCommit2: extra}); p != "" {
		problems = append(problems, p)
	}
	if r.TransactionVersion != nil && r.ProducerEpoch != nil {
		epoch, protocol := javaTxnEpoch(r.Client, *r.TransactionVersion)
		if *r.ProducerEpoch != epoch {
			problems = append(problems, fmt.Sprintf("producer epoch %d after 3 transactions, want %d (%s under transaction.version %d)",
				*r.ProducerEpoch, epoch, protocol, *r.TransactionVersion))
		}
	}
	note := fmt.Sprintf("%s: read_committed %d (aborted %d), read_uncommitted %d, group offset %d", r.Client,
		len(r.ReadCommitted), rc.distinct[txnAborted], len(r.ReadUncommitted), r.GroupOffset)
	if r.TransactionVersion != nil {
		note += fmt.Sprintf(", transaction.version %d", *r.TransactionVersion)
	}
	if r.ProducerEpoch != nil {
		note += fmt.Sprintf(", producer epoch %d", *r.ProducerEpoch)
	}
	if len(problems) > 0 {
		return note, fmt.Errorf("%s: %s", r.Client, strings.Join(problems, "; "))
	}
	return note, nil
}

// txnTally counts a consumer's output values by the transaction that
// wrote them.
type txnTally struct {
	distinct   map[string]int // distinct expected values, by prefix
	duplicates int
	unknown    []string
}

func tallyTxnValues(values []string, n, extra int) txnTally {
	t := txnTally{distinct: map[string]int{}}
	seen := map[string]bool{}
	for _, v := range values {
		if seen[v] {
			t.duplicates++
			continue
		}
		seen[v] = true
		prefix, idx, ok := splitTxnValue(v)
		limit := map[string]int{txnCopied: n, txnAborted: extra, txnCommit2: extra}[prefix]
		if !ok || idx >= limit {
			t.unknown = append(t.unknown, v)
			continue
		}
		t.distinct[prefix]++
	}
	return t
}

// splitTxnValue splits copy-in-7, aborted-7 or commit2-7 into its prefix
// and index.
func splitTxnValue(v string) (string, int, bool) {
	i := strings.LastIndexByte(v, '-')
	if i < 0 {
		return "", 0, false
	}
	idx, err := strconv.Atoi(v[i+1:])
	if err != nil || idx < 0 {
		return "", 0, false
	}
	prefix := v[:i]
	if prefix == txnCopied+"-in" {
		prefix = txnCopied
	}
	switch prefix {
	case txnCopied, txnAborted, txnCommit2:
		return prefix, idx, true
	}
	return "", 0, false
}

func (t txnTally) mismatch(consumer string, want map[string]int) string {
	var p []string
	for _, k := range []string{txnCopied, txnAborted, txnCommit2} {
		if t.distinct[k] != want[k] {
			p = append(p, fmt.Sprintf("%d distinct %s values, want %d", t.distinct[k], k, want[k]))
		}
	}
	if t.duplicates > 0 {
		p = append(p, fmt.Sprintf("%d duplicates", t.duplicates))
	}
	if len(t.unknown) > 0 {
		p = append(p, fmt.Sprintf("%d unexpected values (%s)", len(t.unknown), strings.Join(t.unknown[:min(3, len(t.unknown))], ", ")))
	}
	if len(p) == 0 {
		return ""
	}
	return consumer + " consumer saw " + strings.Join(p, ", ")
}

// kafkaGoTxnReport is what the kafka-go transactions check prints
// (integration/clients/go/kafkagotxn.go).
type kafkaGoTxnReport struct {
	Client  string  `json:"client"`
	Input   int     `json:"input"`
	Offsets []int64 `json:"offsets"`
	Fenced  string  `json:"fenced"`
}

// checkKafkaGoTxnReport checks the kafka-go report for n input records: the
// group's offset after a commit of n/2, an aborted offset 1 and a commit
// of n, and the first session fenced (PRODUCER_FENCED, or
// INVALID_PRODUCER_EPOCH as Kafka answers the older request versions
// kafka-go sends).
func checkKafkaGoTxnReport(stdout string, n int) (string, error) {
	var line string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			line = l
		}
	}
	var r kafkaGoTxnReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return "", fmt.Errorf("client printed no JSON report (%v): %q", err, truncate(stdout, 300))
	}
	note := fmt.Sprintf("%s: input %d, group offset after commit/abort/commit %v, old session's AddOffsetsToTxn: error %s", r.Client, r.Input, r.Offsets, r.Fenced)
	want := []int64{int64(n / 2), int64(n / 2), int64(n)}
	var problems []string
	if r.Input != n {
		problems = append(problems, fmt.Sprintf("read %d input records, want %d", r.Input, n))
	}
	if fmt.Sprint(r.Offsets) != fmt.Sprint(want) {
		problems = append(problems, fmt.Sprintf("group offsets %v after the three transactions, want %v (the aborted one must not move it)", r.Offsets, want))
	}
	if r.Fenced != strconv.Itoa(int(kerrProducerFenced)) && r.Fenced != strconv.Itoa(int(kerrInvalidProducerEpoch)) {
		problems = append(problems, fmt.Sprintf("the fenced session's AddOffsetsToTxn got %q, want PRODUCER_FENCED (90) or INVALID_PRODUCER_EPOCH (47)", r.Fenced))
	}
	if len(problems) > 0 {
		return note, fmt.Errorf("%s: %s", r.Client, strings.Join(problems, "; "))
	}
	return note, nil
}

// Kafka's error codes for a fenced producer.
const (
	kerrInvalidProducerEpoch = 47
	kerrProducerFenced       = 90
)
