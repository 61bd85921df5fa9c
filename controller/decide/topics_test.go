package decide

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// permitBudget is a strict mutation quota with permits left to take.
type permitBudget struct{ left int }

func (b *permitBudget) Record(permits int) bool {
	if permits > b.left {
		return false
	}
	b.left -= permits
	return true
}

// underQuota is d deciding for a requester whose mutation quota is q.
func underQuota[In, Out any](d decision[In, Out], q metadata.MutationQuota) decision[In, Out] {
	return func(e *Env, ctx context.Context, img *metadata.Image, offset int64, in In) ([]metadata.Record, Out) {
		return d(e, metadata.WithMutationQuota(ctx, q), img, offset, in)
	}
}

// topicsImage has unfenced brokers 1 to brokers and the given topics, each
// with its partitions on broker 1.
func topicsImage(t *testing.T, brokers int32, topics map[string]int) *metadata.Image {
	t.Helper()
	var recs []metadata.Record
	for id := int32(1); id <= brokers; id++ {
		recs = append(recs, &metadata.RegisterBrokerRecord{BrokerID: id, IncarnationID: protocol.RandomUUID(), BrokerEpoch: int64(id)})
	}
	for name, partitions := range topics {
		id := protocol.RandomUUID()
		recs = append(recs, &metadata.TopicRecord{Name: name, TopicID: id})
		for p := range int32(partitions) {
			recs = append(recs, &metadata.PartitionRecord{PartitionID: p, TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1})
		}
	}
	return imageOf(t, recs...)
}

// recordCounts counts recs by type.
func recordCounts(recs []metadata.Record) map[metadata.RecordType]int {
	n := map[metadata.RecordType]int{}
	for _, r := range recs {
		n[r.Type()]++
	}
	return n
}

func TestCreateTopicsDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	img := topicsImage(t, 3, map[string]int{"exists": 1})
	withCfg := topicReq("c", 1, -1)
	withCfg.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: strPtr("5000")}}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{
		topicReq("dup", 1, 1), topicReq("a", 3, 2), topicReq("exists", 1, 1), topicReq("__cluster_metadata", 1, 1), withCfg, topicReq("dup", 1, 1),
	}
	recs, resp, next := decideOn(t, e, img, (*Env).CreateTopics, req)
	if n := recordCounts(recs); len(recs) != 7 || n[metadata.RecordTopic] != 2 || n[metadata.RecordPartition] != 4 || n[metadata.RecordConfig] != 1 {
		t.Fatalf("records %v", recs)
	}
	type answer struct {
		topic string
		code  int16
		msg   string
	}
	want := []answer{
		{"a", 0, ""},
		{"exists", kerr.TopicAlreadyExists.Code, "Topic 'exists' already exists."},
		{"c", 0, ""},
		{"dup", kerr.InvalidRequest.Code, "Duplicate topic name."},
		{"__cluster_metadata", kerr.InvalidRequest.Code, "Creation of internal topic __cluster_metadata is prohibited."},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("results %+v", resp.Topics)
	}
	for i, w := range want {
		r := resp.Topics[i]
		msg := ""
		if r.ErrorMessage != nil {
			msg = *r.ErrorMessage
		}
		if r.Topic != w.topic || r.ErrorCode != w.code || msg != w.msg {
			t.Fatalf("result %d: %s %d %q, want %+v", i, r.Topic, r.ErrorCode, msg, w)
		}
	}
	a := next.Topic("a")
	if a == nil || protocol.UUID(resp.Topics[0].TopicID) != a.ID || a.Partitions.Len() != 3 || resp.Topics[0].NumPartitions != 3 || resp.Topics[0].ReplicationFactor != 2 {
		t.Fatalf("a: answered %+v, image %+v", resp.Topics[0], a)
	}
	for i, p := range a.Partitions.All() {
		if len(p.Replicas) != 2 || p.Replicas[0] == p.Replicas[1] || p.Leader != p.Replicas[0] || len(p.ISR) != 2 {
			t.Fatalf("a partition %d: %+v", i, p)
		}
	}
	// -1 takes default.replication.factor.
	if resp.Topics[2].ReplicationFactor != e.DefaultReplicationFactor {
		t.Fatalf("c: replication factor %d", resp.Topics[2].ReplicationFactor)
	}
	if got := next.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "c"}]["retention.ms"]; got != "5000" {
		t.Fatalf("c's retention.ms = %q", got)
	}
	if next.Topic("dup") != nil || next.Topics.Len() != 3 {
		t.Fatalf("topics after: %v", next.Topics)
	}

	// Validate-only answers as a creation would, with no records.
	req = kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("v", 2, 3)}
	if recs, resp, _ := decideOn(t, e, img, (*Env).CreateTopics, req); len(recs) != 0 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("validate only: records %v, %+v", recs, resp.Topics)
	}

	// The quota takes a permit per partition, topic by topic.
	req = kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("x", 2, 1), topicReq("y", 2, 1), topicReq("z", 1, 1)}
	quota := &permitBudget{left: 3}
	recs, resp, next = decideOn(t, e, img, underQuota((*Env).CreateTopics, quota), req)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.ThrottlingQuotaExceeded.Code ||
		*resp.Topics[1].ErrorMessage != "The throttling quota has been exceeded." || resp.Topics[2].ErrorCode != 0 {
		t.Fatalf("under quota: %+v", resp.Topics)
	}
	if len(recs) != 5 || next.Topic("y") != nil || next.Topic("x") == nil || next.Topic("z") == nil || quota.left != 0 {
		t.Fatalf("under quota: records %v, topics %v, %d permits left", recs, next.Topics, quota.left)
	}

	// Too many records refuse every topic the request could create.
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("big", 20000, 1), topicReq("small", 1, 1), topicReq("exists", 1, 1)}
	recs, resp, _ = decideOn(t, e, img, (*Env).CreateTopics, req)
	if len(recs) != 0 {
		t.Fatalf("too large: records %v", recs)
	}
	for _, r := range resp.Topics {
		if r.ErrorCode != kerr.PolicyViolation.Code || *r.ErrorMessage != excessivelyLargeOperation {
			t.Fatalf("too large: %+v", resp.Topics)
		}
	}

	// A failed commit answers every topic of the request, duplicates too.
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("a", 1, 1), topicReq("a", 1, 1), topicReq("b", 1, 1)}
	failed := CreateTopicsFailed(req, commitError(errNotController))
	if len(failed.Topics) != 3 {
		t.Fatalf("failed commit: %+v", failed.Topics)
	}
	for _, r := range failed.Topics {
		if r.ErrorCode != kerr.NotController.Code || *r.ErrorMessage != errNotController.Error() || r.NumPartitions != -1 || r.ReplicationFactor != -1 || r.TopicID != [16]byte{} {
			t.Fatalf("failed commit: %+v", failed.Topics)
		}
	}
}

func TestDeleteTopicsDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	img := topicsImage(t, 1, map[string]int{"a": 2, "b": 1, "c": 1})
	b := img.Topic("b").ID
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		{Topic: strPtr("a")}, {TopicID: b}, {Topic: strPtr("missing")}, {}, {Topic: strPtr("d")}, {Topic: strPtr("d")}, {TopicID: protocol.RandomUUID()},
	}
	recs, resp, next := decideOn(t, e, img, (*Env).DeleteTopics, req)
	if len(recs) != 2 || next.Topic("a") != nil || next.Topic("b") != nil || next.Topic("c") == nil {
		t.Fatalf("records %v, topics after %v", recs, next.Topics)
	}
	// The request's own mistakes first, then ids looked up, then names,
	// then the deletions, ids before names.
	want := []struct {
		name string
		code int16
	}{
		{"", kerr.InvalidRequest.Code},
		{"d", kerr.InvalidRequest.Code},
		{"", kerr.UnknownTopicID.Code},
		{"missing", kerr.UnknownTopicOrPartition.Code},
		{"b", 0},
		{"a", 0},
	}
	if len(resp.Topics) != len(want) {
		t.Fatalf("results %+v", resp.Topics)
	}
	for i, w := range want {
		r := resp.Topics[i]
		name := ""
		if r.Topic != nil {
			name = *r.Topic
		}
		if name != w.name || r.ErrorCode != w.code {
			t.Fatalf("result %d: %q %d %v, want %+v", i, name, r.ErrorCode, r.ErrorMessage, w)
		}
	}
	if protocol.UUID(resp.Topics[4].TopicID) != b {
		t.Fatalf("b deleted by id answers id %x", resp.Topics[4].TopicID)
	}

	// The quota takes a permit per deleted partition.
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: strPtr("a")}, {Topic: strPtr("c")}}
	recs, resp, next = decideOn(t, e, img, underQuota((*Env).DeleteTopics, metadata.MutationQuota(&permitBudget{left: 1})), req)
	if len(recs) != 1 || resp.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || resp.Topics[1].ErrorCode != 0 || next.Topic("a") == nil || next.Topic("c") != nil {
		t.Fatalf("under quota: records %v, %+v", recs, resp.Topics)
	}

	// delete.topic.enable=false refuses every topic, with the code the
	// request's version knows.
	disabled := testEnv()
	disabled.DisableTopicDeletion = true
	recs, resp, _ = decideOn(t, disabled, img, (*Env).DeleteTopics, req)
	if len(recs) != 0 || len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.TopicDeletionDisabled.Code || resp.Topics[1].ErrorCode != kerr.TopicDeletionDisabled.Code {
		t.Fatalf("disabled: records %v, %+v", recs, resp.Topics)
	}
	old := kmsg.NewPtrDeleteTopicsRequest()
	old.Version = 2
	old.TopicNames = []string{"a"}
	if _, resp, _ := decideOn(t, disabled, img, (*Env).DeleteTopics, old); len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || *resp.Topics[0].ErrorMessage != "Topic deletion is disabled." {
		t.Fatalf("disabled, v2: %+v", resp.Topics)
	}

	// A failed commit answers every topic as the request named it.
	req.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: strPtr("a")}, {TopicID: b}}
	failed := DeleteTopicsFailed(req, commitError(errNotController))
	if len(failed.Topics) != 2 || *failed.Topics[0].Topic != "a" || protocol.UUID(failed.Topics[1].TopicID) != b {
		t.Fatalf("failed commit: %+v", failed.Topics)
	}
	for _, r := range failed.Topics {
		if r.ErrorCode != kerr.NotController.Code {
			t.Fatalf("failed commit: %+v", failed.Topics)
		}
	}
}

func TestCreatePartitionsDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	img := topicsImage(t, 2, map[string]int{"t": 1, "u": 1})
	cp := func(name string, count int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = name, count
		return rt
	}
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 3), cp("missing", 2), cp("u", 2), cp("u", 2)}
	recs, resp, next := decideOn(t, e, img, (*Env).CreatePartitions, req)
	if len(recs) != 2 || next.Topic("t").Partitions.Len() != 3 || next.Topic("u").Partitions.Len() != 1 {
		t.Fatalf("records %v", recs)
	}
	for i, p := range next.Topic("t").Partitions.All() {
		if len(p.Replicas) != 1 || p.Leader != p.Replicas[0] {
			t.Fatalf("t partition %d: %+v", i, p)
		}
	}
	// The duplicate is refused once, before the others.
	if len(resp.Topics) != 3 || resp.Topics[0].Topic != "u" || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code ||
		resp.Topics[1].Topic != "t" || resp.Topics[1].ErrorCode != 0 ||
		resp.Topics[2].Topic != "missing" || resp.Topics[2].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("results %+v", resp.Topics)
	}

	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 3), cp("u", 3)}
	recs, resp, _ = decideOn(t, e, img, underQuota((*Env).CreatePartitions, metadata.MutationQuota(&permitBudget{left: 3})), req)
	if len(recs) != 2 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("under quota: records %v, %+v", recs, resp.Topics)
	}

	req.ValidateOnly = true
	if recs, resp, _ := decideOn(t, e, img, (*Env).CreatePartitions, req); len(recs) != 0 || resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != 0 {
		t.Fatalf("validate only: records %v, %+v", recs, resp.Topics)
	}

	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 3), cp("t", 3), cp("u", 3)}
	failed := CreatePartitionsFailed(req, commitError(context.DeadlineExceeded))
	if len(failed.Topics) != 3 {
		t.Fatalf("failed commit: %+v", failed.Topics)
	}
	for _, r := range failed.Topics {
		if r.ErrorCode != kerr.RequestTimedOut.Code || *r.ErrorMessage != context.DeadlineExceeded.Error() {
			t.Fatalf("failed commit: %+v", failed.Topics)
		}
	}
}
