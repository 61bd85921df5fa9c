package group

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/protocol"
)

func TestConsumerRecordsRoundTrip(t *testing.T) {
	inst, rack, re, assignor := "i", "r", "foo.*", "uniform"
	mm := memberMetadataValue{InstanceID: &inst, RackID: &rack, ClientID: "c", ClientHost: "/h",
		SubscribedTopicNames: []string{"a", "b"}, SubscribedTopicRegex: &re, RebalanceTimeoutMs: 300000, ServerAssignor: &assignor}
	var mm2 memberMetadataValue
	if err := mm2.decode(mm.encode()); err != nil || !sameMemberMetadata(&mm, &mm2) {
		t.Fatalf("member metadata: %+v %v", mm2, err)
	}
	ca := currentAssignmentValue{MemberEpoch: 5, PreviousMemberEpoch: 4, State: memberUnrevokedPartitions,
		Assigned: []topicPartitions{{TopicID: [16]byte{1}, Partitions: []int32{0, 2}}}, PendingRevocation: []topicPartitions{{TopicID: [16]byte{2}, Partitions: []int32{1}}}}
	var ca2 currentAssignmentValue
	if err := ca2.decode(ca.encode()); err != nil || ca2.MemberEpoch != 5 || ca2.PreviousMemberEpoch != 4 || ca2.State != 1 ||
		len(ca2.Assigned) != 1 || ca2.Assigned[0].Partitions[1] != 2 || ca2.PendingRevocation[0].TopicID != [16]byte{2} {
		t.Fatalf("current assignment: %+v %v", ca2, err)
	}
	tps, err := decodeTargetMemberValue(encodeTargetMemberValue(ca.Assigned))
	if err != nil || len(tps) != 1 || tps[0].Partitions[0] != 0 {
		t.Fatalf("target: %+v %v", tps, err)
	}
	rv := regexValue{Topics: []string{"foo1"}, Version: 3, Timestamp: 9}
	var rv2 regexValue
	if err := rv2.decode(rv.encode()); err != nil || rv2.Topics[0] != "foo1" || rv2.Version != 3 || rv2.Timestamp != 9 {
		t.Fatalf("regex: %+v %v", rv2, err)
	}
	if e, err := decodeEpochValue(encodeGroupEpochValue(42)); err != nil || e != 42 {
		t.Fatalf("epoch %d %v", e, err)
	}
	// Exact bytes of a ConsumerGroupMetadataValue v0: version, epoch,
	// empty tagged fields.
	if got := encodeGroupEpochValue(1); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 1, 0}) {
		t.Fatalf("epoch value bytes %v", got)
	}
	k, err := parseKey(consumerMemberKey(recConsumerCurrentMember, "g", "m"))
	if err != nil || k.typ != 8 || k.group != "g" || k.member != "m" {
		t.Fatalf("key %+v %v", k, err)
	}
	k, err = parseKey(consumerRegexKey("g", "r.*"))
	if err != nil || k.typ != 16 || k.regex != "r.*" {
		t.Fatalf("regex key %+v %v", k, err)
	}
	if _, err := parseKey([]byte{0}); err == nil {
		t.Fatal("short key accepted")
	}
}

func TestBatchRoundTrip(t *testing.T) {
	recs := []record{
		{key: offsetKey("g", "t", 1), value: []byte("v")},
		{key: groupMetadataKey("g")}, // tombstone
		{key: []byte("k"), value: []byte{}},
	}
	b := encodeBatch(recs, 1234)
	if !protocol.CheckBatchCRC(b) {
		t.Fatal("bad CRC")
	}
	h, err := protocol.ParseBatchHeader(b)
	if err != nil || h.NumRecords != 3 || h.ProducerID != -1 || h.MaxTimestamp != 1234 || h.TotalSize() != int64(len(b)) {
		t.Fatalf("header %+v %v", h, err)
	}
	// kmsg agrees with the layout.
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(b); err != nil || rb.NumRecords != 3 {
		t.Fatalf("kmsg: %+v %v", rb, err)
	}
	var got []record
	if err := decodeBatch(b, func(_ protocol.BatchHeader, _ int64, r record) error { got = append(got, r); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || string(got[0].value) != "v" || got[1].value != nil || got[2].value == nil || len(got[2].value) != 0 {
		t.Fatalf("records %+v", got)
	}
	b[len(b)-1] ^= 1
	if err := decodeBatch(b, func(protocol.BatchHeader, int64, record) error { return nil }); err == nil {
		t.Fatal("corrupt batch accepted")
	}
}

func FuzzReplay(f *testing.F) {
	f.Add(encodeBatch([]record{{key: offsetKey("g", "t", 0), value: offsetRecord("g", "t", 0, &offsetEntry{offset: 1, expireTimestamp: -1}).value}}, 1))
	f.Add(encodeBatch([]record{currentAssignmentRecord("g", &consumerMember{id: "m", assigned: map[[16]byte][]int32{{1}: {0}}})}, 1))
	mm := memberMetadataValue{ClientID: "c", SubscribedTopicNames: []string{"x"}}
	f.Add(encodeBatch([]record{memberMetadataRecord("g", "m", &mm), epochRecord("g", 3)}, 1))
	f.Add(encodeProducerBatch([]record{offsetRecord("g", "t", 0, &offsetEntry{offset: 1, expireTimestamp: -1})}, 1, batchProducer{id: 7, epoch: 0}))
	f.Add(protocol.EndTxnMarkerBatch(7, 0, true, 0, 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newShard(New(DefaultConfig(), newFakeTopics(nil)), 0, nil)
		_ = decodeBatch(b, s.replayLogged)
		// Also feed the raw bytes as a key and as values of every type.
		for _, typ := range []int16{0, 1, 2, 3, 5, 6, 7, 8, 16} {
			key := consumerMemberKey(typ, "g", "m")
			if typ <= 1 {
				key = offsetKey("g", "t", 0)
			}
			_ = s.replay(record{key: key, value: b})
		}
		_ = s.replay(record{key: b, value: b})
	})
}
