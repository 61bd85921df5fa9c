package metadata

// Metadata records: the facts the quorum agrees on. Each raft entry carries
// one batch of records that is applied atomically.
//
// Encoding (all integers big-endian unless noted, kbin primitives):
//
//	batch  := format:int8(=1) count:uvarint record*
//	record := length:uvarint type:uvarint version:uvarint body
//
// Record type numbers follow Kafka's metadata record API keys where Kafka
// has the record, so logs read naturally next to Kafka's. Every type has a
// highest version this build can read; a record with an unknown type or a
// higher version is refused with ErrUnsupportedRecord (the controller stops
// applying instead of skipping a fact it does not understand). When a record
// gains fields, add a version: the decoder keeps reading every older
// version, which is what lets a newer node read an older log.

import (
	"errors"
	"fmt"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kbin"
)

// RecordType identifies a metadata record.
type RecordType uint16

const (
	RecordRegisterBroker           RecordType = 0
	RecordUnregisterBroker         RecordType = 1
	RecordTopic                    RecordType = 2
	RecordPartition                RecordType = 3
	RecordConfig                   RecordType = 4
	RecordPartitionChange          RecordType = 5
	RecordRemoveTopic              RecordType = 9
	RecordFeatureLevel             RecordType = 12
	RecordProducerIDs              RecordType = 15
	RecordBrokerRegistrationChange RecordType = 17
	RecordNoOp                     RecordType = 20
	RecordVoters                   RecordType = 200 // Gregor: the voter set with endpoints
	RecordLearners                 RecordType = 201 // Gregor: controllers following as raft learners
	batchFormatV1                  int8       = 1
	leaderRecoveryNoChange         int8       = -1 // PartitionChangeRecord v1's encoding of nil
)

// The values of PartitionChangeRecord's Leader and of
// BrokerRegistrationChangeRecord's Fenced and InControlledShutdown that
// say "no change", and the changes the latter two make.
const (
	NoLeaderChange                   int32 = -2
	FenceChangeNone                  int8  = 0
	FenceChangeFence                 int8  = 1
	FenceChangeUnfence               int8  = -1
	ControlledShutdownChangeNone     int8  = 0
	ControlledShutdownChangeShutdown int8  = 1
)

// LeaderRecoveryState is Kafka's: whether a partition's leader came from an
// unclean election and has not yet told the controller it recovered
// (KIP-704). A recovering leader keeps the ISR to itself.
type LeaderRecoveryState int8

const (
	LeaderRecovered  LeaderRecoveryState = 0
	LeaderRecovering LeaderRecoveryState = 1
)

// ErrUnsupportedRecord is returned for a record type or version this build
// cannot read.
var ErrUnsupportedRecord = errors.New("unsupported metadata record")

// ErrNoAnswer is the error of a request to the controller that got no
// answer: the controller is shutting down, or the request's context ended
// first. Whoever asked closes the client's connection, as Kafka does.
var ErrNoAnswer = errors.New("the controller gave no answer")

// Record is one metadata record.
type Record interface {
	Type() RecordType
	// Version is the encoding version the record is written with.
	Version() int16
	appendBody(dst []byte) []byte
	readBody(r *kbin.Reader, version int16)
}

// TopicRecord creates a topic.
type TopicRecord struct {
	Name    string
	TopicID protocol.UUID
}

// PartitionRecord creates a partition (or replaces it wholesale in a
// snapshot).
type PartitionRecord struct {
	PartitionID      int32
	TopicID          protocol.UUID
	Replicas         []int32
	ISR              []int32
	RemovingReplicas []int32
	AddingReplicas   []int32
	Leader           int32
	LeaderEpoch      int32
	PartitionEpoch   int32
	Directories      []protocol.UUID
	ELR              []int32
	LastKnownELR     []int32
	// LeaderRecoveryState is written from version 1, which is used only
	// when it is not LeaderRecovered.
	LeaderRecoveryState LeaderRecoveryState
}

// PartitionChangeRecord changes a partition. Nil lists and pointers and
// Leader == -2 mean "unchanged". Applying it bumps the partition epoch, and
// the leader epoch whenever Leader is set, even to the current leader (as
// Kafka's PartitionRegistration.merge does: that is how a change that
// removes replicas fences the old leader epoch).
//
// Version 1 adds RemovingReplicas, AddingReplicas and LeaderRecoveryState;
// a record that sets none of them is written as version 0, so that a node
// that reads only version 0 keeps following the ordinary ISR changes.
type PartitionChangeRecord struct {
	PartitionID         int32
	TopicID             protocol.UUID
	Leader              int32
	ISR                 []int32
	Replicas            []int32
	ELR                 []int32
	LastKnownELR        []int32
	Directories         []protocol.UUID
	RemovingReplicas    []int32
	AddingReplicas      []int32
	LeaderRecoveryState *LeaderRecoveryState
}

// RemoveTopicRecord deletes a topic and its partitions (and its configs).
type RemoveTopicRecord struct {
	TopicID protocol.UUID
}

// ConfigRecord sets (Value != nil) or deletes (Value == nil) one config key.
type ConfigRecord struct {
	ResourceType ConfigResourceType
	ResourceName string
	Name         string
	Value        *string
}

// BrokerFeature is a feature range a broker supports.
type BrokerFeature struct {
	Name     string
	MinLevel int16
	MaxLevel int16
}

// RegisterBrokerRecord registers (or re-registers) a broker.
type RegisterBrokerRecord struct {
	BrokerID             int32
	IncarnationID        protocol.UUID
	BrokerEpoch          int64
	Endpoints            []Endpoint
	Features             []BrokerFeature
	Rack                 *string
	Fenced               bool
	InControlledShutdown bool
	LogDirs              []protocol.UUID
}

// UnregisterBrokerRecord removes a broker registration.
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// BrokerRegistrationChangeRecord fences, unfences or marks a broker as in
// controlled shutdown.
type BrokerRegistrationChangeRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	// Fenced: 1 fence, -1 unfence, 0 unchanged.
	Fenced int8
	// InControlledShutdown: 1 enter controlled shutdown, 0 unchanged.
	InControlledShutdown int8
	LogDirs              []protocol.UUID // nil: unchanged
}

// FeatureLevelRecord sets a finalized feature level (0 removes it).
type FeatureLevelRecord struct {
	Name         string
	FeatureLevel int16
}

// ProducerIdsRecord hands a block of producer ids to a broker: ids below
// NextProducerID are taken.
type ProducerIdsRecord struct {
	BrokerID       int32
	BrokerEpoch    int64
	NextProducerID int64
}

// NoOpRecord carries nothing; a new leader writes it to commit its term.
type NoOpRecord struct{}

// VotersRecord is the controller quorum membership with endpoints.
type VotersRecord struct {
	Voters []Voter
}

// LearnersRecord is the set of controllers that follow the log as raft
// learners (Kafka's observer controllers), with endpoints so that any
// leader can reach them. It is written, like a VotersRecord that changes
// membership, in the context of the raft conf change it goes with
// (controller/membership.go).
type LearnersRecord struct {
	Learners []Voter
}

func (*TopicRecord) Type() RecordType                    { return RecordTopic }
func (*PartitionRecord) Type() RecordType                { return RecordPartition }
func (*PartitionChangeRecord) Type() RecordType          { return RecordPartitionChange }
func (*RemoveTopicRecord) Type() RecordType              { return RecordRemoveTopic }
func (*ConfigRecord) Type() RecordType                   { return RecordConfig }
func (*RegisterBrokerRecord) Type() RecordType           { return RecordRegisterBroker }
func (*UnregisterBrokerRecord) Type() RecordType         { return RecordUnregisterBroker }
func (*BrokerRegistrationChangeRecord) Type() RecordType { return RecordBrokerRegistrationChange }
func (*FeatureLevelRecord) Type() RecordType             { return RecordFeatureLevel }
func (*ProducerIdsRecord) Type() RecordType              { return RecordProducerIDs }
func (*NoOpRecord) Type() RecordType                     { return RecordNoOp }
func (*VotersRecord) Type() RecordType                   { return RecordVoters }
func (*LearnersRecord) Type() RecordType                 { return RecordLearners }

func (*TopicRecord) Version() int16                    { return 0 }
func (*RemoveTopicRecord) Version() int16              { return 0 }
func (*ConfigRecord) Version() int16                   { return 0 }
func (*RegisterBrokerRecord) Version() int16           { return 0 }
func (*UnregisterBrokerRecord) Version() int16         { return 0 }
func (*BrokerRegistrationChangeRecord) Version() int16 { return 0 }
func (*FeatureLevelRecord) Version() int16             { return 0 }
func (*ProducerIdsRecord) Version() int16              { return 0 }
func (*NoOpRecord) Version() int16                     { return 0 }
func (*VotersRecord) Version() int16                   { return 0 }
func (*LearnersRecord) Version() int16                 { return 0 }

// Version is the lowest version that holds the record's content.
func (x *PartitionRecord) Version() int16 {
	if x.LeaderRecoveryState != LeaderRecovered {
		return 1
	}
	return 0
}

// Version is the lowest version that holds the record's content.
func (x *PartitionChangeRecord) Version() int16 {
	if x.RemovingReplicas != nil || x.AddingReplicas != nil || x.LeaderRecoveryState != nil {
		return 1
	}
	return 0
}

// contentVersioned is a record whose Version depends on what it carries
// (the lowest version that holds it); highestVersion is the newest version
// this build reads.
type contentVersioned interface {
	highestVersion() int16
}

func (*PartitionRecord) highestVersion() int16       { return 1 }
func (*PartitionChangeRecord) highestVersion() int16 { return 1 }

// highestVersion is the newest version of rec's type this build reads.
func highestVersion(rec Record) int16 {
	if cv, ok := rec.(contentVersioned); ok {
		return cv.highestVersion()
	}
	return rec.Version()
}

func newRecord(t RecordType) Record {
	switch t {
	case RecordTopic:
		return &TopicRecord{}
	case RecordPartition:
		return &PartitionRecord{}
	case RecordPartitionChange:
		return &PartitionChangeRecord{}
	case RecordRemoveTopic:
		return &RemoveTopicRecord{}
	case RecordConfig:
		return &ConfigRecord{}
	case RecordRegisterBroker:
		return &RegisterBrokerRecord{}
	case RecordUnregisterBroker:
		return &UnregisterBrokerRecord{}
	case RecordBrokerRegistrationChange:
		return &BrokerRegistrationChangeRecord{}
	case RecordFeatureLevel:
		return &FeatureLevelRecord{}
	case RecordProducerIDs:
		return &ProducerIdsRecord{}
	case RecordNoOp:
		return &NoOpRecord{}
	case RecordVoters:
		return &VotersRecord{}
	case RecordLearners:
		return &LearnersRecord{}
	case RecordAccessControlEntry:
		return &AccessControlEntryRecord{}
	case RecordRemoveAccessControlEntry:
		return &RemoveAccessControlEntryRecord{}
	case RecordUserScramCredential:
		return &UserScramCredentialRecord{}
	case RecordRemoveUserScramCredential:
		return &RemoveUserScramCredentialRecord{}
	case RecordClientQuota:
		return &ClientQuotaRecord{}
	case RecordDelegationToken:
		return &DelegationTokenRecord{}
	case RecordRemoveDelegationToken:
		return &RemoveDelegationTokenRecord{}
	}
	return nil
}

// EncodeRecords encodes records as one batch (one raft entry).
func EncodeRecords(records []Record) []byte {
	dst := make([]byte, 0, 64*len(records)+8)
	dst = append(dst, byte(batchFormatV1))
	dst = kbin.AppendUvarint(dst, uint32(len(records)))
	var body []byte
	for _, rec := range records {
		body = body[:0]
		body = kbin.AppendUvarint(body, uint32(rec.Type()))
		body = kbin.AppendUvarint(body, uint32(rec.Version()))
		body = rec.appendBody(body)
		dst = kbin.AppendUvarint(dst, uint32(len(body)))
		dst = append(dst, body...)
	}
	return dst
}

// DecodeRecords decodes a batch written by EncodeRecords. An unknown record
// type or version yields an error wrapping ErrUnsupportedRecord; a malformed
// batch yields another error. Either way no record of the batch is returned.
func DecodeRecords(data []byte) ([]Record, error) {
	if len(data) == 0 {
		return nil, errors.New("empty metadata record batch")
	}
	if int8(data[0]) != batchFormatV1 {
		return nil, fmt.Errorf("metadata record batch format %d: %w", int8(data[0]), ErrUnsupportedRecord)
	}
	r := kbin.Reader{Src: data[1:]}
	n := r.Uvarint()
	if !r.Ok() || int(n) > len(r.Src) {
		return nil, errors.New("malformed metadata record batch header")
	}
	records := make([]Record, 0, n)
	for i := uint32(0); i < n; i++ {
		l := r.Uvarint()
		raw := r.Span(int(l))
		if !r.Ok() {
			return nil, fmt.Errorf("metadata record %d of %d is truncated", i, n)
		}
		rec, err := decodeRecord(raw)
		if err != nil {
			return nil, fmt.Errorf("metadata record %d of %d: %w", i, n, err)
		}
		records = append(records, rec)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("metadata record batch has %d trailing bytes", len(r.Src))
	}
	return records, nil
}

func decodeRecord(raw []byte) (Record, error) {
	r := kbin.Reader{Src: raw}
	t := RecordType(r.Uvarint())
	v := int16(r.Uvarint())
	if !r.Ok() {
		return nil, errors.New("malformed record header")
	}
	rec := newRecord(t)
	if rec == nil {
		return nil, fmt.Errorf("record type %d: %w", t, ErrUnsupportedRecord)
	}
	if v < 0 || v > highestVersion(rec) {
		return nil, fmt.Errorf("record type %d version %d (this node reads up to %d): %w", t, v, highestVersion(rec), ErrUnsupportedRecord)
	}
	rec.readBody(&r, v)
	if err := r.Complete(); err != nil {
		return nil, fmt.Errorf("record type %d version %d: %w", t, v, err)
	}
	if len(r.Src) != 0 {
		return nil, fmt.Errorf("record type %d version %d has %d trailing bytes", t, v, len(r.Src))
	}
	return rec, nil
}

// AppendRecordBody appends rec's body, without the type and version that
// EncodeRecords writes before it: for a file that embeds a record in its
// own framing (the controller's bootstrap.checkpoint), which knows the
// record's type and version.
func AppendRecordBody(dst []byte, rec Record) []byte { return rec.appendBody(dst) }

// ReadRecordBody reads into rec a body AppendRecordBody wrote at version;
// r's error state says whether it was complete.
func ReadRecordBody(r *kbin.Reader, rec Record, version int16) { rec.readBody(r, version) }

// Primitive helpers shared by the record bodies.

func appendInt32s(dst []byte, s []int32) []byte {
	dst = kbin.AppendNullableArrayLen(dst, len(s), s == nil)
	for _, v := range s {
		dst = kbin.AppendInt32(dst, v)
	}
	return dst
}

func readInt32s(r *kbin.Reader) []int32 {
	n := r.ArrayLen()
	if n < 0 || !r.Ok() {
		return nil
	}
	s := make([]int32, n)
	for i := range s {
		s[i] = r.Int32()
	}
	return s
}

func appendUUIDs(dst []byte, s []protocol.UUID) []byte {
	dst = kbin.AppendNullableArrayLen(dst, len(s), s == nil)
	for _, v := range s {
		dst = kbin.AppendUuid(dst, v)
	}
	return dst
}

func readUUIDs(r *kbin.Reader) []protocol.UUID {
	n := r.ArrayLen()
	if n < 0 || !r.Ok() {
		return nil
	}
	s := make([]protocol.UUID, n)
	for i := range s {
		s[i] = r.Uuid()
	}
	return s
}

func appendEndpoints(dst []byte, eps []Endpoint) []byte {
	dst = kbin.AppendArrayLen(dst, len(eps))
	for _, ep := range eps {
		dst = kbin.AppendString(dst, ep.Name)
		dst = kbin.AppendString(dst, ep.Host)
		dst = kbin.AppendInt32(dst, ep.Port)
		dst = kbin.AppendInt16(dst, ep.SecurityProtocol)
	}
	return dst
}

func readEndpoints(r *kbin.Reader) []Endpoint {
	n := r.ArrayLen()
	if n <= 0 || !r.Ok() {
		return nil
	}
	eps := make([]Endpoint, n)
	for i := range eps {
		eps[i] = Endpoint{Name: r.String(), Host: r.String(), Port: r.Int32(), SecurityProtocol: r.Int16()}
	}
	return eps
}

func (x *TopicRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendString(dst, x.Name)
	return kbin.AppendUuid(dst, x.TopicID)
}

func (x *TopicRecord) readBody(r *kbin.Reader, _ int16) {
	x.Name = r.String()
	x.TopicID = r.Uuid()
}

func (x *PartitionRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.PartitionID)
	dst = kbin.AppendUuid(dst, x.TopicID)
	dst = appendInt32s(dst, x.Replicas)
	dst = appendInt32s(dst, x.ISR)
	dst = appendInt32s(dst, x.RemovingReplicas)
	dst = appendInt32s(dst, x.AddingReplicas)
	dst = kbin.AppendInt32(dst, x.Leader)
	dst = kbin.AppendInt32(dst, x.LeaderEpoch)
	dst = kbin.AppendInt32(dst, x.PartitionEpoch)
	dst = appendUUIDs(dst, x.Directories)
	dst = appendInt32s(dst, x.ELR)
	dst = appendInt32s(dst, x.LastKnownELR)
	if x.Version() >= 1 {
		dst = kbin.AppendInt8(dst, int8(x.LeaderRecoveryState))
	}
	return dst
}

func (x *PartitionRecord) readBody(r *kbin.Reader, version int16) {
	x.PartitionID = r.Int32()
	x.TopicID = r.Uuid()
	x.Replicas = readInt32s(r)
	x.ISR = readInt32s(r)
	x.RemovingReplicas = readInt32s(r)
	x.AddingReplicas = readInt32s(r)
	x.Leader = r.Int32()
	x.LeaderEpoch = r.Int32()
	x.PartitionEpoch = r.Int32()
	x.Directories = readUUIDs(r)
	x.ELR = readInt32s(r)
	x.LastKnownELR = readInt32s(r)
	if version >= 1 {
		x.LeaderRecoveryState = LeaderRecoveryState(r.Int8())
	}
}

func (x *PartitionChangeRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.PartitionID)
	dst = kbin.AppendUuid(dst, x.TopicID)
	dst = kbin.AppendInt32(dst, x.Leader)
	dst = appendInt32s(dst, x.ISR)
	dst = appendInt32s(dst, x.Replicas)
	dst = appendInt32s(dst, x.ELR)
	dst = appendInt32s(dst, x.LastKnownELR)
	dst = appendUUIDs(dst, x.Directories)
	if x.Version() >= 1 {
		dst = appendInt32s(dst, x.RemovingReplicas)
		dst = appendInt32s(dst, x.AddingReplicas)
		state := leaderRecoveryNoChange
		if x.LeaderRecoveryState != nil {
			state = int8(*x.LeaderRecoveryState)
		}
		dst = kbin.AppendInt8(dst, state)
	}
	return dst
}

func (x *PartitionChangeRecord) readBody(r *kbin.Reader, version int16) {
	x.PartitionID = r.Int32()
	x.TopicID = r.Uuid()
	x.Leader = r.Int32()
	x.ISR = readInt32s(r)
	x.Replicas = readInt32s(r)
	x.ELR = readInt32s(r)
	x.LastKnownELR = readInt32s(r)
	x.Directories = readUUIDs(r)
	if version >= 1 {
		x.RemovingReplicas = readInt32s(r)
		x.AddingReplicas = readInt32s(r)
		if state := r.Int8(); state != leaderRecoveryNoChange {
			s := LeaderRecoveryState(state)
			x.LeaderRecoveryState = &s
		}
	}
}

func (x *RemoveTopicRecord) appendBody(dst []byte) []byte {
	return kbin.AppendUuid(dst, x.TopicID)
}

func (x *RemoveTopicRecord) readBody(r *kbin.Reader, _ int16) { x.TopicID = r.Uuid() }

func (x *ConfigRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt8(dst, int8(x.ResourceType))
	dst = kbin.AppendString(dst, x.ResourceName)
	dst = kbin.AppendString(dst, x.Name)
	return kbin.AppendNullableString(dst, x.Value)
}

func (x *ConfigRecord) readBody(r *kbin.Reader, _ int16) {
	x.ResourceType = ConfigResourceType(r.Int8())
	x.ResourceName = r.String()
	x.Name = r.String()
	x.Value = r.NullableString()
}

func (x *RegisterBrokerRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.BrokerID)
	dst = kbin.AppendUuid(dst, x.IncarnationID)
	dst = kbin.AppendInt64(dst, x.BrokerEpoch)
	dst = appendEndpoints(dst, x.Endpoints)
	dst = kbin.AppendArrayLen(dst, len(x.Features))
	for _, f := range x.Features {
		dst = kbin.AppendString(dst, f.Name)
		dst = kbin.AppendInt16(dst, f.MinLevel)
		dst = kbin.AppendInt16(dst, f.MaxLevel)
	}
	dst = kbin.AppendNullableString(dst, x.Rack)
	dst = kbin.AppendBool(dst, x.Fenced)
	dst = kbin.AppendBool(dst, x.InControlledShutdown)
	return appendUUIDs(dst, x.LogDirs)
}

func (x *RegisterBrokerRecord) readBody(r *kbin.Reader, _ int16) {
	x.BrokerID = r.Int32()
	x.IncarnationID = r.Uuid()
	x.BrokerEpoch = r.Int64()
	x.Endpoints = readEndpoints(r)
	if n := r.ArrayLen(); n > 0 && r.Ok() {
		x.Features = make([]BrokerFeature, n)
		for i := range x.Features {
			x.Features[i] = BrokerFeature{Name: r.String(), MinLevel: r.Int16(), MaxLevel: r.Int16()}
		}
	}
	x.Rack = r.NullableString()
	x.Fenced = r.Bool()
	x.InControlledShutdown = r.Bool()
	x.LogDirs = readUUIDs(r)
}

func (x *UnregisterBrokerRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.BrokerID)
	return kbin.AppendInt64(dst, x.BrokerEpoch)
}

func (x *UnregisterBrokerRecord) readBody(r *kbin.Reader, _ int16) {
	x.BrokerID = r.Int32()
	x.BrokerEpoch = r.Int64()
}

func (x *BrokerRegistrationChangeRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.BrokerID)
	dst = kbin.AppendInt64(dst, x.BrokerEpoch)
	dst = kbin.AppendInt8(dst, x.Fenced)
	dst = kbin.AppendInt8(dst, x.InControlledShutdown)
	return appendUUIDs(dst, x.LogDirs)
}

func (x *BrokerRegistrationChangeRecord) readBody(r *kbin.Reader, _ int16) {
	x.BrokerID = r.Int32()
	x.BrokerEpoch = r.Int64()
	x.Fenced = r.Int8()
	x.InControlledShutdown = r.Int8()
	x.LogDirs = readUUIDs(r)
}

func (x *FeatureLevelRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendString(dst, x.Name)
	return kbin.AppendInt16(dst, x.FeatureLevel)
}

func (x *FeatureLevelRecord) readBody(r *kbin.Reader, _ int16) {
	x.Name = r.String()
	x.FeatureLevel = r.Int16()
}

func (x *ProducerIdsRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendInt32(dst, x.BrokerID)
	dst = kbin.AppendInt64(dst, x.BrokerEpoch)
	return kbin.AppendInt64(dst, x.NextProducerID)
}

func (x *ProducerIdsRecord) readBody(r *kbin.Reader, _ int16) {
	x.BrokerID = r.Int32()
	x.BrokerEpoch = r.Int64()
	x.NextProducerID = r.Int64()
}

func (*NoOpRecord) appendBody(dst []byte) []byte { return dst }
func (*NoOpRecord) readBody(*kbin.Reader, int16) {}
func (x *VotersRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendArrayLen(dst, len(x.Voters))
	for _, v := range x.Voters {
		dst = kbin.AppendInt32(dst, v.ID)
		dst = kbin.AppendUuid(dst, v.DirectoryID)
		dst = appendEndpoints(dst, v.Endpoints)
	}
	return dst
}

func (x *VotersRecord) readBody(r *kbin.Reader, _ int16) {
	n := r.ArrayLen()
	if n <= 0 || !r.Ok() {
		return
	}
	x.Voters = make([]Voter, n)
	for i := range x.Voters {
		x.Voters[i] = Voter{ID: r.Int32(), DirectoryID: r.Uuid(), Endpoints: readEndpoints(r)}
	}
}

func (x *LearnersRecord) appendBody(dst []byte) []byte {
	return (&VotersRecord{Voters: x.Learners}).appendBody(dst)
}

func (x *LearnersRecord) readBody(r *kbin.Reader, v int16) {
	var vr VotersRecord
	vr.readBody(r, v)
	x.Learners = vr.Voters
}
