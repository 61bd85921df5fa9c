package broker

// ListTransactions (key 66), versions 0-2, and DescribeTransactions (key
// 65), version 0: what kafka-transactions list and describe show.
//
// ListTransactions lists the transactional ids whose __transaction_state
// partitions this node leads, filtered by state names (unknown names come
// back in UnknownStateFilters), producer ids, v1's minimum duration and
// v2's transactional id pattern (a regular expression; Go's RE2 syntax,
// which accepts the patterns Java's does short of backreferences and
// lookaround: those answer INVALID_REGULAR_EXPRESSION). The answer is
// COORDINATOR_LOAD_IN_PROGRESS while a partition loads. DescribeTransactions
// answers each id from its coordinator: NOT_COORDINATOR when that is
// another node, TRANSACTIONAL_ID_NOT_FOUND for an unknown id.
//
// Authorization: both show only the transactional ids the principal may
// DESCRIBE (DescribeTransactions answers the others
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), and a described transaction
// lists only the topics it may DESCRIBE.

import (
	"context"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/coordinator/txn"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleListTransactions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	if b.txns == nil {
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		r.Respond(resp)
		return
	}
	f := txn.ListFilter{States: req.StateFilters, ProducerIDs: req.ProducerIDFilters, MinDurationMs: -1}
	if r.Version() >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	if r.Version() >= 2 {
		f.Pattern = req.TransactionalIDPattern
	}
	list, unknown, code := b.txns.coord.List(f)
	resp.ErrorCode = code
	resp.UnknownStateFilters = unknown
	if resp.UnknownStateFilters == nil {
		resp.UnknownStateFilters = []string{}
	}
	for _, l := range list {
		if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, l.TransactionalID) {
			continue
		}
		s := kmsg.NewListTransactionsResponseTransactionState()
		s.TransactionalID, s.ProducerID, s.TransactionState = l.TransactionalID, l.ProducerID, l.State
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	r.Respond(resp)
}

func (b *Broker) handleDescribeTransactions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		s := kmsg.NewDescribeTransactionsResponseTransactionState()
		s.TransactionalID = id
		if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTransactionalId, id) {
			s.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		if b.txns == nil {
			s.ErrorCode = kerr.CoordinatorNotAvailable.Code
			resp.TransactionStates = append(resp.TransactionStates, s)
			continue
		}
		d, code := b.txns.coord.Describe(id)
		s.ErrorCode = code
		if code == 0 {
			s.State, s.TimeoutMillis, s.StartTimestamp = d.State, d.TimeoutMs, d.StartTimeMs
			s.ProducerID, s.ProducerEpoch = d.ProducerID, d.Epoch
			for _, tp := range d.Partitions {
				if !b.can(r, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, tp.Topic) {
					continue
				}
				if n := len(s.Topics); n == 0 || s.Topics[n-1].Topic != tp.Topic {
					t := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
					t.Topic = tp.Topic
					s.Topics = append(s.Topics, t)
				}
				t := &s.Topics[len(s.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, s)
	}
	r.Respond(resp)
}

func init() {
	register(api{
		key: kmsg.ListTransactions, min: 0, max: 2,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each transactional id listed",
		handle:       (*Broker).handleListTransactions,
	})
	register(api{
		key: kmsg.DescribeTransactions, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each transactional id and its topics",
		handle:       (*Broker).handleDescribeTransactions,
	})
}
