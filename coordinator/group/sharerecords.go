package group

// The share group records of __consumer_offsets (KIP-932), encoded from
// Kafka 4.3's group-coordinator JSON schemas: keys are non-flexible
// (GroupId, and MemberId for member records), values are flexible from
// version 0. Record types 10-15 are Kafka's.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Share group record types (the key's leading int16).
const (
	recShareMemberMetadata  int16 = 10
	recShareGroupMetadata   int16 = 11
	recShareTargetMetadata  int16 = 12
	recShareTargetMember    int16 = 13
	recShareCurrentMember   int16 = 14
	recShareStatePartitions int16 = 15
)

// shareMemberMetadataValue is ShareGroupMemberMetadataValue v0.
type shareMemberMetadataValue struct {
	RackID               *string
	ClientID             string
	ClientHost           string
	SubscribedTopicNames []string
}

func (v *shareMemberMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendCompactNullableString(b, v.RackID)
	b = kbin.AppendCompactString(b, v.ClientID)
	b = kbin.AppendCompactString(b, v.ClientHost)
	b = appendStrings(b, v.SubscribedTopicNames)
	return kbin.AppendUvarint(b, 0)
}

func (v *shareMemberMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ShareGroupMemberMetadataValue version %d", ver)
	}
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	v.SubscribedTopicNames = readStrings(&r)
	skipTags(&r)
	return r.Complete()
}

// shareGroupMetadataValue is ShareGroupMetadataValue v0 (unlike the
// consumer group's, its MetadataHash is a regular field, not a tag).
type shareGroupMetadataValue struct {
	Epoch        int32
	MetadataHash int64
}

func (v *shareGroupMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.Epoch)
	b = kbin.AppendInt64(b, v.MetadataHash)
	return kbin.AppendUvarint(b, 0)
}

func (v *shareGroupMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ShareGroupMetadataValue version %d", ver)
	}
	v.Epoch = r.Int32()
	v.MetadataHash = r.Int64()
	skipTags(&r)
	return r.Complete()
}

// shareTargetMetadataValue is ShareGroupTargetAssignmentMetadataValue v0
// with its tagged AssignmentTimestamp (tag 0).
type shareTargetMetadataValue struct {
	AssignmentEpoch     int32
	AssignmentTimestamp int64
}

func (v *shareTargetMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.AssignmentEpoch)
	if v.AssignmentTimestamp == 0 {
		return kbin.AppendUvarint(b, 0)
	}
	b = kbin.AppendUvarint(b, 1) // one tagged field
	b = kbin.AppendUvarint(b, 0) // tag 0
	b = kbin.AppendUvarint(b, 8)
	return kbin.AppendInt64(b, v.AssignmentTimestamp)
}

func (v *shareTargetMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ShareGroupTargetAssignmentMetadataValue version %d", ver)
	}
	v.AssignmentEpoch = r.Int32()
	v.AssignmentTimestamp = 0
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), int(r.Uvarint())
		field := kbin.Reader{Src: r.Span(size)}
		if tag == 0 {
			v.AssignmentTimestamp = field.Int64()
			if err := field.Complete(); err != nil {
				return fmt.Errorf("decoding AssignmentTimestamp: %w", err)
			}
		}
	}
	return r.Complete()
}

// shareCurrentAssignmentValue is ShareGroupCurrentMemberAssignmentValue v0.
type shareCurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            []topicPartitions
}

func (v *shareCurrentAssignmentValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.MemberEpoch)
	b = kbin.AppendInt32(b, v.PreviousMemberEpoch)
	b = kbin.AppendInt8(b, v.State)
	b = appendTopicPartitions(b, v.Assigned)
	return kbin.AppendUvarint(b, 0)
}

func (v *shareCurrentAssignmentValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ShareGroupCurrentMemberAssignmentValue version %d", ver)
	}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = r.Int8()
	v.Assigned = readTopicPartitions(&r)
	skipTags(&r)
	return r.Complete()
}

// shareTopicPartitionsInfo is the TopicPartitionsInfo struct of
// ShareGroupStatePartitionMetadataValue (Partitions nil for its TopicInfo
// entries, the topics being deleted).
type shareTopicPartitionsInfo struct {
	TopicID    [16]byte
	TopicName  string
	Partitions []int32
}

// shareStatePartitionsValue is ShareGroupStatePartitionMetadataValue v0:
// which topic partitions' share state the share coordinator has been asked
// to initialize, has initialized, or is deleting.
type shareStatePartitionsValue struct {
	Initializing []shareTopicPartitionsInfo
	Initialized  []shareTopicPartitionsInfo
	Deleting     []shareTopicPartitionsInfo
}

func appendShareTopicInfos(b []byte, ts []shareTopicPartitionsInfo, withPartitions bool) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ts))
	for _, t := range ts {
		b = kbin.AppendUuid(b, t.TopicID)
		b = kbin.AppendCompactString(b, t.TopicName)
		if withPartitions {
			b = kbin.AppendCompactArrayLen(b, len(t.Partitions))
			for _, p := range t.Partitions {
				b = kbin.AppendInt32(b, p)
			}
		}
		b = kbin.AppendUvarint(b, 0)
	}
	return b
}

func readShareTopicInfos(r *kbin.Reader, withPartitions bool) []shareTopicPartitionsInfo {
	n := r.CompactArrayLen()
	if n <= 0 || !r.Ok() {
		return nil
	}
	if int(n) > len(r.Src) {
		r.Span(len(r.Src) + 1) // poison the reader
		return nil
	}
	out := make([]shareTopicPartitionsInfo, n)
	for i := range out {
		out[i].TopicID = r.Uuid()
		out[i].TopicName = r.CompactString()
		if withPartitions {
			np := r.CompactArrayLen()
			if np > 0 && int(np)*4 > len(r.Src) {
				r.Span(len(r.Src) + 1)
				return nil
			}
			for j := int32(0); j < np; j++ {
				out[i].Partitions = append(out[i].Partitions, r.Int32())
			}
		}
		skipTags(r)
	}
	return out
}

func (v *shareStatePartitionsValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = appendShareTopicInfos(b, v.Initializing, true)
	b = appendShareTopicInfos(b, v.Initialized, true)
	b = appendShareTopicInfos(b, v.Deleting, false)
	return kbin.AppendUvarint(b, 0)
}

func (v *shareStatePartitionsValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported ShareGroupStatePartitionMetadataValue version %d", ver)
	}
	v.Initializing = readShareTopicInfos(&r, true)
	v.Initialized = readShareTopicInfos(&r, true)
	v.Deleting = readShareTopicInfos(&r, false)
	skipTags(&r)
	return r.Complete()
}
