package group

// The streams group records of __consumer_offsets (KIP-1071), encoded from
// Kafka 4.3's group-coordinator JSON schemas: keys are non-flexible
// (GroupId, and MemberId for member records), values are flexible from
// version 0. Record types 17 and 19-23 are Kafka's; 18 (the partition
// metadata record of early KIP-1071 builds) is read and ignored, as
// Kafka 4.3 ignores it.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Streams group record types (the key's leading int16).
const (
	recStreamsGroupMetadata     int16 = 17
	recStreamsPartitionMetadata int16 = 18 // deprecated, read and ignored
	recStreamsMemberMetadata    int16 = 19
	recStreamsTargetMetadata    int16 = 20
	recStreamsTargetMember      int16 = 21
	recStreamsCurrentMember     int16 = 22
	recStreamsTopology          int16 = 23
)

// keyValue is the KeyValue / LastAssignmentConfig / TopicConfig struct of
// the streams schemas: two strings.
type keyValue struct {
	Key, Value string
}

func appendKeyValues(b []byte, kvs []keyValue) []byte {
	b = kbin.AppendCompactArrayLen(b, len(kvs))
	for _, kv := range kvs {
		b = kbin.AppendCompactString(b, kv.Key)
		b = kbin.AppendCompactString(b, kv.Value)
		b = kbin.AppendUvarint(b, 0)
	}
	return b
}

func readKeyValues(r *kbin.Reader) []keyValue {
	return readArray(r, 3, func(r *kbin.Reader) keyValue {
		kv := keyValue{Key: r.CompactString(), Value: r.CompactString()}
		skipTags(r)
		return kv
	})
}

// taggedField is one tagged field of a value about to be written.
type taggedField struct {
	tag  uint32
	body []byte
}

// appendTagged writes a tagged-fields section: the count, then each field
// as tag, size and body, in tag order.
func appendTagged(b []byte, fields ...taggedField) []byte {
	b = kbin.AppendUvarint(b, uint32(len(fields)))
	for _, f := range fields {
		b = kbin.AppendUvarint(b, f.tag)
		b = kbin.AppendUvarint(b, uint32(len(f.body)))
		b = append(b, f.body...)
	}
	return b
}

// readTagged calls fn for every tagged field of a section, each with a
// reader over that field's bytes alone.
func readTagged(r *kbin.Reader, fn func(tag uint32, field *kbin.Reader) error) error {
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		tag, size := r.Uvarint(), int(r.Uvarint())
		field := kbin.Reader{Src: r.Span(size)}
		if !r.Ok() {
			break
		}
		if err := fn(tag, &field); err != nil {
			return err
		}
	}
	return nil
}

// streamsGroupMetadataValue is StreamsGroupMetadataValue v0.
type streamsGroupMetadataValue struct {
	Epoch                  int32
	MetadataHash           int64
	ValidatedTopologyEpoch int32      // tag 0, default -1
	LastAssignmentConfigs  []keyValue // tag 1, nullable (nil: absent)
}

func (v *streamsGroupMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.Epoch)
	b = kbin.AppendInt64(b, v.MetadataHash)
	var tags []taggedField
	if v.ValidatedTopologyEpoch != -1 {
		tags = append(tags, taggedField{0, kbin.AppendInt32(nil, v.ValidatedTopologyEpoch)})
	}
	if v.LastAssignmentConfigs != nil {
		tags = append(tags, taggedField{1, appendKeyValues(nil, v.LastAssignmentConfigs)})
	}
	return appendTagged(b, tags...)
}

func (v *streamsGroupMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported StreamsGroupMetadataValue version %d", ver)
	}
	v.Epoch = r.Int32()
	v.MetadataHash = r.Int64()
	v.ValidatedTopologyEpoch, v.LastAssignmentConfigs = -1, nil
	err := readTagged(&r, func(tag uint32, f *kbin.Reader) error {
		switch tag {
		case 0:
			v.ValidatedTopologyEpoch = f.Int32()
		case 1:
			v.LastAssignmentConfigs = readKeyValues(f)
			if v.LastAssignmentConfigs == nil {
				v.LastAssignmentConfigs = []keyValue{}
			}
		default:
			return nil
		}
		return f.Complete()
	})
	if err != nil {
		return fmt.Errorf("decoding StreamsGroupMetadataValue tags: %w", err)
	}
	return r.Complete()
}

// streamsEndpoint is the Endpoint struct: where a member serves
// interactive queries.
type streamsEndpoint struct {
	Host string
	Port uint16
}

// streamsMemberMetadataValue is StreamsGroupMemberMetadataValue v0.
type streamsMemberMetadataValue struct {
	InstanceID         *string
	RackID             *string
	ClientID           string
	ClientHost         string
	RebalanceTimeoutMs int32
	TopologyEpoch      int32
	ProcessID          string
	UserEndpoint       *streamsEndpoint
	ClientTags         []keyValue
}

func (v *streamsMemberMetadataValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendCompactNullableString(b, v.InstanceID)
	b = kbin.AppendCompactNullableString(b, v.RackID)
	b = kbin.AppendCompactString(b, v.ClientID)
	b = kbin.AppendCompactString(b, v.ClientHost)
	b = kbin.AppendInt32(b, v.RebalanceTimeoutMs)
	b = kbin.AppendInt32(b, v.TopologyEpoch)
	b = kbin.AppendCompactString(b, v.ProcessID)
	if v.UserEndpoint == nil {
		b = kbin.AppendInt8(b, -1)
	} else {
		b = kbin.AppendInt8(b, 1)
		b = kbin.AppendCompactString(b, v.UserEndpoint.Host)
		b = kbin.AppendUint16(b, v.UserEndpoint.Port)
		b = kbin.AppendUvarint(b, 0)
	}
	b = appendKeyValues(b, v.ClientTags)
	return kbin.AppendUvarint(b, 0)
}

func (v *streamsMemberMetadataValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported StreamsGroupMemberMetadataValue version %d", ver)
	}
	v.InstanceID = r.CompactNullableString()
	v.RackID = r.CompactNullableString()
	v.ClientID = r.CompactString()
	v.ClientHost = r.CompactString()
	v.RebalanceTimeoutMs = r.Int32()
	v.TopologyEpoch = r.Int32()
	v.ProcessID = r.CompactString()
	v.UserEndpoint = nil
	if r.Int8() >= 0 {
		v.UserEndpoint = &streamsEndpoint{Host: r.CompactString(), Port: r.Uint16()}
		skipTags(&r)
	}
	v.ClientTags = readKeyValues(&r)
	skipTags(&r)
	return r.Complete()
}

// taskSet is a role's tasks: subtopology id to its sorted partitions.
type taskSet map[string][]int32

// tasksTuple is a member's tasks by role.
type tasksTuple struct {
	Active, Standby, Warmup taskSet
}

func (t tasksTuple) empty() bool {
	return len(t.Active) == 0 && len(t.Standby) == 0 && len(t.Warmup) == 0
}

func (t tasksTuple) equal(o tasksTuple) bool {
	return t.Active.equal(o.Active) && t.Standby.equal(o.Standby) && t.Warmup.equal(o.Warmup)
}

func (s taskSet) equal(o taskSet) bool {
	if len(s) != len(o) {
		return false
	}
	for id, ps := range s {
		if !slices.Equal(ps, o[id]) {
			return false
		}
	}
	return true
}

func (s taskSet) has(subtopology string, partition int32) bool {
	_, ok := slices.BinarySearch(s[subtopology], partition)
	return ok
}

// appendTaskIDs writes a []TaskIds; epochs, when not nil, gives the
// AssignmentEpochs tagged field (tag 0) of each entry, by subtopology and
// then in the order of its partitions.
func appendTaskIDs(b []byte, s taskSet, epochs map[string][]int32) []byte {
	b = kbin.AppendCompactArrayLen(b, len(s))
	for _, id := range sortedKeys(s) {
		b = kbin.AppendCompactString(b, id)
		b = kbin.AppendCompactArrayLen(b, len(s[id]))
		for _, p := range s[id] {
			b = kbin.AppendInt32(b, p)
		}
		if e, ok := epochs[id]; ok && epochs != nil {
			body := kbin.AppendCompactArrayLen(nil, len(e))
			for _, x := range e {
				body = kbin.AppendInt32(body, x)
			}
			b = appendTagged(b, taggedField{0, body})
		} else {
			b = kbin.AppendUvarint(b, 0)
		}
	}
	return b
}

// readTaskIDs reads a []TaskIds; its AssignmentEpochs, if any entry has
// them, come back by subtopology.
func readTaskIDs(r *kbin.Reader) (taskSet, map[string][]int32) {
	n := r.CompactArrayLen()
	if n <= 0 || !r.Ok() {
		return nil, nil
	}
	if int(n) > len(r.Src) {
		r.Span(len(r.Src) + 1)
		return nil, nil
	}
	out := make(taskSet, n)
	var epochs map[string][]int32
	for range n {
		id := r.CompactString()
		np := r.CompactArrayLen()
		if np > 0 && int(np)*4 > len(r.Src) {
			r.Span(len(r.Src) + 1)
			return nil, nil
		}
		ps := make([]int32, 0, max(np, 0))
		for range np {
			ps = append(ps, r.Int32())
		}
		out[id] = ps
		_ = readTagged(r, func(tag uint32, f *kbin.Reader) error {
			if tag != 0 {
				return nil
			}
			ne := f.CompactArrayLen()
			if ne < 0 || int(ne)*4 > len(f.Src) {
				return nil // null, or not an array of int32s
			}
			e := make([]int32, ne)
			for i := range e {
				e[i] = f.Int32()
			}
			if epochs == nil {
				epochs = map[string][]int32{}
			}
			epochs[id] = e
			return nil
		})
		if !r.Ok() {
			return nil, nil
		}
	}
	return out, epochs
}

// streamsTargetMemberValue is StreamsGroupTargetAssignmentMemberValue v0.
func encodeStreamsTargetMemberValue(t tasksTuple) []byte {
	b := kbin.AppendInt16(nil, 0)
	b = appendTaskIDs(b, t.Active, nil)
	b = appendTaskIDs(b, t.Standby, nil)
	b = appendTaskIDs(b, t.Warmup, nil)
	return kbin.AppendUvarint(b, 0)
}

func decodeStreamsTargetMemberValue(b []byte) (tasksTuple, error) {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return tasksTuple{}, fmt.Errorf("unsupported StreamsGroupTargetAssignmentMemberValue version %d", ver)
	}
	var t tasksTuple
	t.Active, _ = readTaskIDs(&r)
	t.Standby, _ = readTaskIDs(&r)
	t.Warmup, _ = readTaskIDs(&r)
	skipTags(&r)
	return t, r.Complete()
}

// streamsCurrentAssignmentValue is StreamsGroupCurrentMemberAssignmentValue
// v0. ActiveEpochs and PendingActiveEpochs are the AssignmentEpochs of the
// active tasks assigned and pending revocation: the member epoch at which
// each was assigned, by subtopology and in the order of its partitions.
type streamsCurrentAssignmentValue struct {
	MemberEpoch         int32
	PreviousMemberEpoch int32
	State               int8
	Assigned            tasksTuple
	ActiveEpochs        map[string][]int32
	PendingRevocation   tasksTuple
	PendingActiveEpochs map[string][]int32
}

func (v *streamsCurrentAssignmentValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.MemberEpoch)
	b = kbin.AppendInt32(b, v.PreviousMemberEpoch)
	b = kbin.AppendInt8(b, v.State)
	b = appendTaskIDs(b, v.Assigned.Active, v.ActiveEpochs)
	b = appendTaskIDs(b, v.Assigned.Standby, nil)
	b = appendTaskIDs(b, v.Assigned.Warmup, nil)
	b = appendTaskIDs(b, v.PendingRevocation.Active, v.PendingActiveEpochs)
	b = appendTaskIDs(b, v.PendingRevocation.Standby, nil)
	b = appendTaskIDs(b, v.PendingRevocation.Warmup, nil)
	return kbin.AppendUvarint(b, 0)
}

func (v *streamsCurrentAssignmentValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported StreamsGroupCurrentMemberAssignmentValue version %d", ver)
	}
	v.MemberEpoch = r.Int32()
	v.PreviousMemberEpoch = r.Int32()
	v.State = r.Int8()
	v.Assigned.Active, v.ActiveEpochs = readTaskIDs(&r)
	v.Assigned.Standby, _ = readTaskIDs(&r)
	v.Assigned.Warmup, _ = readTaskIDs(&r)
	v.PendingRevocation.Active, v.PendingActiveEpochs = readTaskIDs(&r)
	v.PendingRevocation.Standby, _ = readTaskIDs(&r)
	v.PendingRevocation.Warmup, _ = readTaskIDs(&r)
	skipTags(&r)
	return r.Complete()
}

// streamsTopicInfo is the TopicInfo struct: an internal topic a
// subtopology needs (Partitions 0: not fixed; ReplicationFactor 0: the
// broker's default).
type streamsTopicInfo struct {
	Name              string
	Partitions        int32
	ReplicationFactor int16
	Configs           []keyValue
}

// streamsCopartitionGroup is a CopartitionGroup: indexes into its
// subtopology's SourceTopics, SourceTopicRegex and RepartitionSourceTopics.
type streamsCopartitionGroup struct {
	SourceTopics, SourceTopicRegex, RepartitionSourceTopics []int16
}

// streamsSubtopology is one Subtopology of a topology.
type streamsSubtopology struct {
	ID                      string
	SourceTopics            []string
	SourceTopicRegex        []string
	StateChangelogTopics    []streamsTopicInfo
	RepartitionSinkTopics   []string
	RepartitionSourceTopics []streamsTopicInfo
	CopartitionGroups       []streamsCopartitionGroup
}

// streamsTopologyValue is StreamsGroupTopologyValue v0: the topology the
// group's members run, as the first member at its epoch described it.
type streamsTopologyValue struct {
	Epoch         int32
	Subtopologies []streamsSubtopology
}

func appendTopicInfos(b []byte, ts []streamsTopicInfo) []byte {
	b = kbin.AppendCompactArrayLen(b, len(ts))
	for _, t := range ts {
		b = kbin.AppendCompactString(b, t.Name)
		b = kbin.AppendInt32(b, t.Partitions)
		b = kbin.AppendInt16(b, t.ReplicationFactor)
		b = appendKeyValues(b, t.Configs)
		b = kbin.AppendUvarint(b, 0)
	}
	return b
}

func readTopicInfos(r *kbin.Reader) []streamsTopicInfo {
	return readArray(r, 9, func(r *kbin.Reader) streamsTopicInfo {
		ti := streamsTopicInfo{Name: r.CompactString(), Partitions: r.Int32(), ReplicationFactor: r.Int16(), Configs: readKeyValues(r)}
		skipTags(r)
		return ti
	})
}

func appendInt16s(b []byte, xs []int16) []byte {
	b = kbin.AppendCompactArrayLen(b, len(xs))
	for _, x := range xs {
		b = kbin.AppendInt16(b, x)
	}
	return b
}

func readInt16s(r *kbin.Reader) []int16 {
	return readArray(r, 2, func(r *kbin.Reader) int16 { return r.Int16() })
}

func (v *streamsTopologyValue) encode() []byte {
	b := kbin.AppendInt16(nil, 0)
	b = kbin.AppendInt32(b, v.Epoch)
	b = kbin.AppendCompactArrayLen(b, len(v.Subtopologies))
	for _, s := range v.Subtopologies {
		b = kbin.AppendCompactString(b, s.ID)
		b = appendStrings(b, s.SourceTopics)
		b = appendStrings(b, s.SourceTopicRegex)
		b = appendTopicInfos(b, s.StateChangelogTopics)
		b = appendStrings(b, s.RepartitionSinkTopics)
		b = appendTopicInfos(b, s.RepartitionSourceTopics)
		b = kbin.AppendCompactArrayLen(b, len(s.CopartitionGroups))
		for _, g := range s.CopartitionGroups {
			b = appendInt16s(b, g.SourceTopics)
			b = appendInt16s(b, g.SourceTopicRegex)
			b = appendInt16s(b, g.RepartitionSourceTopics)
			b = kbin.AppendUvarint(b, 0)
		}
		b = kbin.AppendUvarint(b, 0)
	}
	return kbin.AppendUvarint(b, 0)
}

func (v *streamsTopologyValue) decode(b []byte) error {
	r := kbin.Reader{Src: b}
	if ver := r.Int16(); ver != 0 {
		return fmt.Errorf("unsupported StreamsGroupTopologyValue version %d", ver)
	}
	v.Epoch = r.Int32()
	v.Subtopologies = nil
	n := r.CompactArrayLen()
	if n > 0 && int(n) > len(r.Src) {
		return fmt.Errorf("StreamsGroupTopologyValue claims %d subtopologies in %d bytes", n, len(r.Src))
	}
	for range max(n, 0) {
		var s streamsSubtopology
		s.ID = r.CompactString()
		s.SourceTopics = readStrings(&r)
		s.SourceTopicRegex = readStrings(&r)
		s.StateChangelogTopics = readTopicInfos(&r)
		s.RepartitionSinkTopics = readStrings(&r)
		s.RepartitionSourceTopics = readTopicInfos(&r)
		ng := r.CompactArrayLen()
		if ng > 0 && int(ng) > len(r.Src) {
			return fmt.Errorf("StreamsGroupTopologyValue claims %d copartition groups in %d bytes", ng, len(r.Src))
		}
		for range max(ng, 0) {
			var g streamsCopartitionGroup
			g.SourceTopics = readInt16s(&r)
			g.SourceTopicRegex = readInt16s(&r)
			g.RepartitionSourceTopics = readInt16s(&r)
			skipTags(&r)
			s.CopartitionGroups = append(s.CopartitionGroups, g)
		}
		skipTags(&r)
		if !r.Ok() {
			break
		}
		v.Subtopologies = append(v.Subtopologies, s)
	}
	skipTags(&r)
	return r.Complete()
}
