package broker

// The transaction APIs a producer sends, answered by the transaction
// coordinator (coordinator/txn) on __transaction_state:
//
//	AddPartitionsToTxn 0-5, AddOffsetsToTxn 0-4, EndTxn 0-5
//
// (InitProducerId with a transactional id is in initproducerid.go,
// FindCoordinator's transaction keys in findcoordinator.go,
// WriteTxnMarkers in writetxnmarkers.go, ListTransactions and
// DescribeTransactions in listtransactions.go.)
//
// AddPartitionsToTxn v0-3 come from producers: one transaction, its
// partitions added (UNKNOWN_TOPIC_OR_PARTITION for partitions that do not
// exist and OPERATION_NOT_ATTEMPTED for the others, as Kafka answers).
// v4-5 are the broker-to-broker form: a batch of transactions, each added
// or, with verify_only, checked (KIP-890 part 1). EndTxn v5 is the
// Transactions V2 form (the epoch bumps with every transaction). As in
// Kafka, PRODUCER_FENCED goes to clients older than EndTxn v2,
// AddPartitionsToTxn v2, AddOffsetsToTxn v2 and InitProducerId v4 as
// INVALID_PRODUCER_EPOCH.
//
// Authorization: v0-3 need WRITE on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic
// (TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED); an
// internal topic is never added this way (TOPIC_AUTHORIZATION_FAILED, as
// in Kafka with or without an authorizer). v4+ need CLUSTER_ACTION.
// AddOffsetsToTxn needs WRITE on the transactional id, then READ on the
// group; EndTxn WRITE on the transactional id.
//
// Produce's half of KIP-890 part 1 is here too: the first transactional
// batch of a transaction on a partition is verified with the coordinator
// before it is appended, with the guard that a marker written meanwhile
// revokes (replica.Manager.StartTxnVerification).
//
// The coordinator's shards are loaded and unloaded with the leadership of
// their __transaction_state partitions by the coordinator runtime
// (coordinator/runtime); this file only wires it in.

import (
	"time"

	"context"
	"fmt"
	"github.com/gregorbroker/gregor/metrics"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/gregorbroker/gregor/coordinator/runtime"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// txnCoordinator is the transaction coordinator inside the broker.
type txnCoordinator struct {
	cfg     txn.Config
	coord   *txn.Coordinator
	runtime *runtime.Runtime
	// loadTimes are the milliseconds its partitions took to load
	// (coordmetrics.go).
	loadTimes metrics.Window
}

// startTxns builds the transaction coordinator and its runtime. As for
// groups, an existing __transaction_state decides the partition count.
func (b *Broker) startTxns(ctx context.Context) *txnCoordinator {
	cfg := txn.DefaultConfig()
	if b.opts.Transactions != nil {
		cfg = *b.opts.Transactions
	}
	if img := b.meta.Image(); img != nil {
		if t := img.Topic(txn.StateTopic); t != nil && t.Partitions.Len() > 0 {
			cfg.NumPartitions = int32(t.Partitions.Len())
		}
	}
	if cfg.Logger == nil {
		cfg.Logger = b.log.With("component", "transaction-coordinator")
	}
	if cfg.Now == nil {
		cfg.Now = b.now
	}
	t := &txnCoordinator{cfg: cfg}
	t.coord = txn.New(txn.Options{
		Config:      cfg,
		ProducerIDs: func(ctx context.Context) (int64, error) { return b.producerIDs.next(ctx, b) },
		Markers:     markerWriter{b: b},
		TransactionVersion: func() int16 {
			if img := b.meta.Image(); img != nil {
				return img.Features["transaction.version"]
			}
			return 0
		},
	})
	t.runtime = runtime.Start(ctx, runtime.Options{
		Topic:       cfg.TopicSpec(),
		Coordinator: t.coord,
		Replicas:    b.replicas,
		CreateTopic: b.createInternalTopic,
		Logger:      cfg.Logger,
		Loaded:      func(took time.Duration) { t.loadTimes.Record(millis(took), b.now()) },
	})
	return t
}

// fencedForOldClients is KafkaApis' mapping of PRODUCER_FENCED for clients
// that predate it.
func fencedForOldClients(code int16, version, firstFencedVersion int16) int16 {
	if code == kerr.ProducerFenced.Code && version < firstFencedVersion {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

func (b *Broker) handleAddPartitionsToTxn(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	v := r.Version()
	who := identityOf(r)
	if v >= 4 && !b.clusterAllowed(who, kmsg.ACLOperationClusterAction) {
		r.Respond(errorResponse(req, clusterDenied(who, kmsg.ACLOperationClusterAction)))
		return
	}
	r.GoAsync(func() {
		if v < 4 {
			tps := make([]txn.TopicPartition, 0, len(req.Topics))
			for _, t := range req.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			var codes []int16
			if !b.allowed(who, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
				codes = fillCodes(make([]int16, len(tps)), kerr.TransactionalIDAuthorizationFailed.Code)
			} else {
				denied := map[string]bool{}
				for _, t := range req.Topics {
					denied[t.Topic] = isInternalTopic(t.Topic) || !b.allowed(who, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTopic, t.Topic)
				}
				codes = b.addPartitionsToTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps, false, false, denied)
			}
			for i, tp := range tps {
				code := fencedForOldClients(codes[i], v, 2)
				if n := len(resp.Topics); n == 0 || resp.Topics[n-1].Topic != tp.Topic {
					rt := kmsg.NewAddPartitionsToTxnResponseTopic()
					rt.Topic = tp.Topic
					resp.Topics = append(resp.Topics, rt)
				}
				rt := &resp.Topics[len(resp.Topics)-1]
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Respond(resp)
			return
		}
		for _, tr := range req.Transactions {
			tps := make([]txn.TopicPartition, 0, len(tr.Topics))
			for _, t := range tr.Topics {
				for _, p := range t.Partitions {
					tps = append(tps, txn.TopicPartition{Topic: t.Topic, Partition: p})
				}
			}
			// v4+ comes from partition leaders: an add waits out the
			// previous transaction's completion here, as Kafka's leader
			// retries CONCURRENT_TRANSACTIONS.
			codes := b.addPartitionsToTxn(ctx, tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tps, tr.VerifyOnly, true, nil)
			rtx := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rtx.TransactionalID = tr.TransactionalID
			for i, tp := range tps {
				if n := len(rtx.Topics); n == 0 || rtx.Topics[n-1].Topic != tp.Topic {
					rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
					rt.Topic = tp.Topic
					rtx.Topics = append(rtx.Topics, rt)
				}
				rt := &rtx.Topics[len(rtx.Topics)-1]
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, codes[i]
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Transactions = append(resp.Transactions, rtx)
		}
		r.Respond(resp)
	})
}

// addPartitionsToTxn adds (or, verifyOnly, checks) one transaction's
// partitions and returns a code per partition. Partitions of denied topics
// and partitions that do not exist fail the whole transaction as in
// KafkaApis.
func (b *Broker) addPartitionsToTxn(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly, wait bool, denied map[string]bool) []int16 {
	codes := make([]int16, len(tps))
	img := b.meta.Image()
	missing := false
	for i, tp := range tps {
		t := img.Topic(tp.Topic)
		if denied[tp.Topic] {
			codes[i] = kerr.TopicAuthorizationFailed.Code
			missing = true
		} else if t == nil || tp.Partition < 0 || int(tp.Partition) >= t.Partitions.Len() {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			missing = true
		}
	}
	if missing {
		for i := range codes {
			if codes[i] == 0 {
				codes[i] = kerr.OperationNotAttempted.Code
			}
		}
		return codes
	}
	if b.txns == nil {
		return fillCodes(codes, kerr.CoordinatorNotAvailable.Code)
	}
	if verifyOnly {
		return b.txns.coord.VerifyPartitions(id, pid, epoch, tps)
	}
	if wait {
		return fillCodes(codes, b.txns.coord.AddPartitionsWaiting(ctx, id, pid, epoch, tps))
	}
	return fillCodes(codes, b.txns.coord.AddPartitions(ctx, id, pid, epoch, tps))
}

// askTxnCoordinator has the transaction coordinator of id add (or with
// verifyOnly, confirm) a partition leader's partitions in the
// transaction, and returns the first partition's code: in process when
// this node leads id's __transaction_state partition, else with
// AddPartitionsToTxn v5 to the broker that does (KIP-890's
// AddPartitionsToTxnManager).
func (b *Broker) askTxnCoordinator(ctx context.Context, id string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool) int16 {
	leader := b.opts.NodeID
	if t := b.meta.Image().Topic(txn.StateTopic); t != nil {
		if p := b.txns.coord.PartitionFor(id); int(p) < t.Partitions.Len() {
			leader = t.Partitions.At(int(p)).Leader
		}
	}
	switch {
	case leader == b.opts.NodeID:
		if verifyOnly {
			return b.txns.coord.VerifyPartitions(id, pid, epoch, tps)[0]
		}
		return b.txns.coord.AddPartitionsWaiting(ctx, id, pid, epoch, tps)
	case leader < 0:
		return kerr.CoordinatorNotAvailable.Code
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.SetVersion(5)
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = id, pid, epoch, verifyOnly
	for _, tp := range tps {
		if n := len(tr.Topics); n == 0 || tr.Topics[n-1].Topic != tp.Topic {
			rt := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			rt.Topic = tp.Topic
			tr.Topics = append(tr.Topics, rt)
		}
		tr.Topics[len(tr.Topics)-1].Partitions = append(tr.Topics[len(tr.Topics)-1].Partitions, tp.Partition)
	}
	req.Transactions = append(req.Transactions, tr)
	ctx, cancel := context.WithTimeout(ctx, defaultForwardTimeout)
	defer cancel()
	answer, err := b.peers.send(ctx, leader, laneVerify, req)
	if err != nil {
		b.log.Debug("asking the transaction coordinator", "broker", leader, "err", err)
		return kerr.CoordinatorNotAvailable.Code
	}
	resp := answer.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return resp.ErrorCode
	}
	for _, rtx := range resp.Transactions {
		for _, rt := range rtx.Topics {
			for _, rp := range rt.Partitions {
				if rt.Topic == tps[0].Topic && rp.Partition == tps[0].Partition {
					return rp.ErrorCode
				}
			}
		}
	}
	return kerr.UnknownServerError.Code
}

func fillCodes(codes []int16, code int16) []int16 {
	for i := range codes {
		codes[i] = code
	}
	return codes
}

func (b *Broker) handleAddOffsetsToTxn(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if !b.can(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		r.Respond(errorResponse(req, errCode(kerr.TransactionalIDAuthorizationFailed)))
		return
	}
	if !b.can(r, kmsg.ACLOperationRead, kmsg.ACLResourceTypeGroup, req.Group) {
		r.Respond(errorResponse(req, errCode(kerr.GroupAuthorizationFailed)))
		return
	}
	if b.txns == nil || b.groups == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	r.GoAsync(func() {
		tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: b.groups.coord.PartitionFor(req.Group)}
		code := b.txns.coord.AddPartitions(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
		resp.ErrorCode = fencedForOldClients(code, r.Version(), 2)
		r.Respond(resp)
	})
}

func (b *Broker) handleEndTxn(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if !b.can(r, kmsg.ACLOperationWrite, kmsg.ACLResourceTypeTransactionalId, req.TransactionalID) {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
		r.Respond(resp)
		return
	}
	if b.txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	var clientTV int16
	if r.Version() >= 5 {
		clientTV = 2
	}
	r.GoAsync(func() {
		pid, epoch, code := b.txns.coord.EndTxn(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, clientTV)
		resp.ErrorCode = fencedForOldClients(code, r.Version(), 2)
		resp.ProducerID, resp.ProducerEpoch = pid, epoch
		r.Respond(resp)
	})
}

// verifyTxnBatch is Produce's KIP-890 check of a transactional batch (part
// 1: verified; part 2, Produce v12+: added to the transaction): the guard
// its append carries, or the error the partition gets.
// A producer with a transaction already open on the partition needs no
// check (guard 0). Verification errors reach producers as Kafka
// translates them (ReplicaManager's postVerificationCallback and
// AddPartitionsToTxnManager).
func (b *Broker) verifyTxnBatch(version int16, transactionalID *string, tp replica.TopicPartition, h protocol.BatchHeader) (uint64, *kerr.Error, string) {
	if !b.txnVerification.Load() {
		return replica.SkipTxnVerification, nil, ""
	}
	if transactionalID == nil || b.txns == nil {
		// Nothing to verify with: the log refuses the batch unless it
		// continues an open transaction.
		return 0, nil, ""
	}
	parts := []txn.TopicPartition{{Topic: tp.Topic, Partition: tp.Partition}}
	var guard uint64
	var code int16
	// The guard is taken before the coordinator is asked, so that a
	// marker written meanwhile (the transaction aborted by its timeout)
	// voids it. A marker can also be the previous transaction's, still
	// being written when a Transactions V2 producer starts its next one:
	// then the coordinator is asked again with a fresh guard, and says
	// yes at once.
	for attempt := 0; attempt < 3; attempt++ {
		var ke *kerr.Error
		guard, ke = b.replicas.StartTxnVerification(tp, h.ProducerID, h.ProducerEpoch)
		if ke != nil || guard == 0 {
			// A partition not led here fails in the append with its
			// error; guard 0: the producer's transaction is open here.
			return 0, nil, ""
		}
		// Transactions V2 (KIP-890 part 2): Produce v12+ adds the
		// partition to the transaction itself, in place of the client's
		// AddPartitionsToTxn (Kafka's addPartition operation); before,
		// the coordinator only confirms it was added.
		code = b.askTxnCoordinator(context.Background(), *transactionalID, h.ProducerID, h.ProducerEpoch, parts, version < 12)
		if code != 0 || b.replicas.TxnVerificationHolds(tp, h.ProducerID, guard) {
			break
		}
	}
	switch code {
	case 0:
		return guard, nil, ""
	case kerr.ProducerFenced.Code:
		return 0, kerr.InvalidProducerEpoch, ""
	case kerr.TransactionAbortable.Code:
		if version < 11 {
			return 0, kerr.InvalidTxnState, "Partition was not added to the transaction"
		}
		return 0, kerr.TransactionAbortable, ""
	case kerr.InvalidTxnState.Code:
		return 0, kerr.InvalidTxnState, "Partition was not added to the transaction"
	case kerr.ConcurrentTransactions.Code, kerr.CoordinatorLoadInProgress.Code, kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		return 0, kerr.NotEnoughReplicas, fmt.Sprintf("Unable to verify the partition has been added to the transaction. Underlying error: %s", kerr.ErrorForCode(code))
	}
	return 0, kerr.TypedErrorForCode(code), ""
}

// SetTransactionVerification applies a change of
// transaction.partition.verification.enable (dynamic, cluster-wide in
// Kafka): with it off, transactional batches open transactions without
// asking the coordinator, as Kafka's log then allows.
func (b *Broker) SetTransactionVerification(on bool) { b.txnVerification.Store(on) }

func init() {
	register(api{
		key: kmsg.AddPartitionsToTxn, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "WRITE on the transactional id and each topic; CLUSTER_ACTION from v4",
		errorAnswer: errorAnswerOf(func(r *kmsg.AddPartitionsToTxnRequest, out *kmsg.AddPartitionsToTxnResponse, e apiErr) {
			if r.Version >= 4 {
				out.ErrorCode = e.code
				return
			}
			for _, t := range r.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					rp.Partition, rp.ErrorCode = p, e.code
					rt.Partitions = append(rt.Partitions, rp)
				}
				out.Topics = append(out.Topics, rt)
			}
		}),
		handle: (*Broker).handleAddPartitionsToTxn,
	})
	register(api{
		key: kmsg.AddOffsetsToTxn, min: 0, max: 4,
		listeners:    clientListeners,
		authorizedAs: "WRITE on the transactional id, READ on the group",
		errorAnswer: errorAnswerOf(func(_ *kmsg.AddOffsetsToTxnRequest, out *kmsg.AddOffsetsToTxnResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleAddOffsetsToTxn,
	})
	register(api{
		key: kmsg.EndTxn, min: 0, max: 5,
		listeners:    clientListeners,
		authorizedAs: "WRITE on the transactional id",
		errorAnswer: errorAnswerOf(func(_ *kmsg.EndTxnRequest, out *kmsg.EndTxnResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleEndTxn,
	})
}
