package metadata

import (
	"encoding/hex"
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kbin"
)

// sampleRecords has one record of every type with every field set.
func sampleRecords() []Record {
	id := protocol.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	dir := protocol.UUID{16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1}
	return []Record{
		&FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 30},
		&VotersRecord{Voters: []Voter{{ID: 1, DirectoryID: dir, Endpoints: []Endpoint{{Name: "CONTROLLER", Host: "h", Port: 9093, SecurityProtocol: 0}}}}},
		&RegisterBrokerRecord{BrokerID: 1, IncarnationID: id, BrokerEpoch: 5, Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "b", Port: 9092, SecurityProtocol: 0}},
			Features: []BrokerFeature{{Name: "metadata.version", MinLevel: 7, MaxLevel: 30}}, Rack: strPtr("r1"), Fenced: true, InControlledShutdown: false, LogDirs: []protocol.UUID{dir}},
		&BrokerRegistrationChangeRecord{BrokerID: 1, BrokerEpoch: 5, Fenced: FenceChangeUnfence, InControlledShutdown: ControlledShutdownChangeNone, LogDirs: []protocol.UUID{dir}},
		&TopicRecord{Name: "t", TopicID: id},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "t", Name: "retention.ms", Value: strPtr("1000")},
		&PartitionRecord{PartitionID: 0, TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1, LeaderEpoch: 0, PartitionEpoch: 0, Directories: []protocol.UUID{dir}},
		&PartitionChangeRecord{PartitionID: 0, TopicID: id, Leader: -1, ISR: []int32{1}},
		&ConfigRecord{ResourceType: ConfigResourceTopic, ResourceName: "t", Name: "retention.ms", Value: nil},
		&ProducerIdsRecord{BrokerID: 1, BrokerEpoch: 5, NextProducerID: 1000},
		&NoOpRecord{},
		&RemoveTopicRecord{TopicID: id},
		&UnregisterBrokerRecord{BrokerID: 1, BrokerEpoch: 5},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	in := sampleRecords()
	out, err := DecodeRecords(EncodeRecords(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%#v\n%#v", in, out)
	}
}

// TestReadsVersion0Log: the encoding of version 0 of every record is
// frozen in testdata. A newer build must keep reading it (a change to a
// record adds a version; it never changes an old one).
func TestReadsVersion0Log(t *testing.T) {
	raw, err := os.ReadFile("testdata/records-v0.hex")
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeRecords(data)
	if err != nil {
		t.Fatalf("reading the version 0 log: %v", err)
	}
	if !reflect.DeepEqual(got, sampleRecords()) {
		t.Fatalf("version 0 records decode differently:\n%#v", got)
	}
	// Applying them works too.
	img, err := ApplyBatch(EmptyImage("c"), got[:len(got)-2], 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if img.Topic("t") == nil || img.Brokers[1] == nil || img.NextProducerID != 1000 {
		t.Fatalf("image %+v", img)
	}
}

// futureRecord stands for a record type or version written by a newer
// build.
type futureRecord struct {
	typ     RecordType
	version int16
}

func (f *futureRecord) Type() RecordType { return f.typ }

func (f *futureRecord) Version() int16 { return f.version }

func (f *futureRecord) appendBody(dst []byte) []byte {
	return kbin.AppendString(dst, "from the future")
}

func (f *futureRecord) readBody(r *kbin.Reader, _ int16) {}

func (f *futureRecord) encoded() []byte { return EncodeRecords([]Record{f}) }

func (f *futureRecord) batchWith(recs ...Record) []byte {
	return EncodeRecords(append(recs, f))
}

func TestDecodeRefusesWhatItCannotRead(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"unknown type", (&futureRecord{typ: 150}).encoded()},
		{"newer version of a known type", (&futureRecord{typ: RecordTopic, version: 1}).encoded()},
		{"unknown type after known records", (&futureRecord{typ: 150}).batchWith(&TopicRecord{Name: "x"})},
		{"newer batch format", append([]byte{2}, EncodeRecords(nil)[1:]...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := DecodeRecords(tc.data)
			if !errors.Is(err, ErrUnsupportedRecord) {
				t.Fatalf("err = %v, want ErrUnsupportedRecord", err)
			}
			if recs != nil {
				t.Fatal("records returned with the error")
			}
		})
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"truncated", EncodeRecords(sampleRecords())[:40]},
		{"trailing bytes", append(EncodeRecords(sampleRecords()), 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := DecodeRecords(tc.data); err == nil || errors.Is(err, ErrUnsupportedRecord) {
				t.Fatalf("err = %v, want a decoding error", err)
			}
		})
	}
}

func FuzzDecodeRecords(f *testing.F) {
	f.Add(EncodeRecords(sampleRecords()))
	f.Add(EncodeRecords(sampleACLRecords()))
	f.Add(EncodeRecords(sampleQuotaRecords()))
	f.Add(EncodeRecords(sampleTokenRecords()))
	f.Add([]byte{1, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := DecodeRecords(data)
		if err != nil {
			return
		}
		// What decodes survives a round trip.
		again, err := DecodeRecords(EncodeRecords(recs))
		if err != nil || !reflect.DeepEqual(again, recs) {
			t.Fatalf("round trip of decoded records: %v", err)
		}
	})
}

func TestUUIDStringIsKafkas(t *testing.T) {
	if got := (protocol.UUID{}).String(); got != "AAAAAAAAAAAAAAAAAAAAAA" {
		t.Fatalf("zero uuid %q", got)
	}
	// Kafka's METADATA_TOPIC_ID is Uuid(0, 1).
	if got := (protocol.UUID{15: 1}).String(); got != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Fatalf("metadata topic id %q", got)
	}
	for range 100 {
		u := protocol.RandomUUID()
		s := u.String()
		if len(s) != 22 || s[0] == '-' || u[6]>>4 != 4 {
			t.Fatalf("random uuid %x %q", u, s)
		}
	}
}

// sampleRecordsV1 sets the fields that only version 1 of PartitionRecord
// and PartitionChangeRecord carries.
func sampleRecordsV1() []Record {
	id := protocol.UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	recovering := LeaderRecovering
	return []Record{
		&PartitionRecord{PartitionID: 0, TopicID: id, Replicas: []int32{2, 3, 1}, ISR: []int32{1}, RemovingReplicas: []int32{1}, AddingReplicas: []int32{2, 3},
			Leader: 1, LeaderEpoch: 4, PartitionEpoch: 9, LeaderRecoveryState: LeaderRecovering},
		&PartitionChangeRecord{PartitionID: 0, TopicID: id, Leader: NoLeaderChange, Replicas: []int32{2, 3}, RemovingReplicas: []int32{}, AddingReplicas: []int32{},
			LeaderRecoveryState: &recovering},
	}
}

// TestRecordsVersion1: the version 1 encodings are frozen, and records
// that carry nothing new are still written as version 0, which a node
// that reads only version 0 keeps reading.
func TestRecordsVersion1(t *testing.T) {
	in := sampleRecordsV1()
	for _, rec := range in {
		if rec.Version() != 1 {
			t.Fatalf("%T written as version %d", rec, rec.Version())
		}
	}
	out, err := DecodeRecords(EncodeRecords(in))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("round trip:\n%#v\n%#v", in, out)
	}
	const frozen = "01025b0301000000000102030405060708090a0b0c0d0e0f100000000300000002000000030000000100000001000000010000000100000001000000020000000200000003000000010000000400000009ffffffffffffffffffffffff013f0501000000000102030405060708090a0b0c0d0e0f10fffffffeffffffff000000020000000200000003ffffffffffffffffffffffff000000000000000001"
	if got := hex.EncodeToString(EncodeRecords(in)); got != frozen {
		t.Fatalf("encoding %s", got)
	}
	// An ISR change and a partition that has recovered stay version 0.
	plain := []Record{
		&PartitionRecord{PartitionID: 0, TopicID: protocol.UUID{1}, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
		&PartitionChangeRecord{PartitionID: 0, TopicID: protocol.UUID{1}, Leader: NoLeaderChange, ISR: []int32{1, 2}},
	}
	for _, rec := range plain {
		if rec.Version() != 0 {
			t.Fatalf("%T without version 1 fields written as version %d", rec, rec.Version())
		}
	}
}

func strPtr(s string) *string { return &s }
