package tiered

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// The partition of __remote_log_metadata a topic partition's records go
// to is the one Kafka 4.3.1's RemoteLogMetadataTopicPartitioner picks:
// these rows are what it printed for each topic id (most and least
// significant halves), partition and partition count.
func TestMetadataPartitionAsKafka(t *testing.T) {
	for _, c := range []struct {
		msb, lsb         int64
		partition, parts int32
		want             int32
	}{
		{72623859790382856, 651345242494996240, 0, 50, 13},
		{72623859790382856, 651345242494996240, 0, 1, 0},
		{72623859790382856, 651345242494996240, 0, 7, 3},
		{72623859790382856, 651345242494996240, 1, 50, 41},
		{72623859790382856, 651345242494996240, 1, 1, 0},
		{72623859790382856, 651345242494996240, 1, 7, 3},
		{72623859790382856, 651345242494996240, 7, 50, 18},
		{72623859790382856, 651345242494996240, 7, 1, 0},
		{72623859790382856, 651345242494996240, 7, 7, 0},
		{72623859790382856, 651345242494996240, 123, 50, 38},
		{72623859790382856, 651345242494996240, 123, 1, 0},
		{72623859790382856, 651345242494996240, 123, 7, 3},
		{-1, 42, 0, 50, 17},
		{-1, 42, 0, 1, 0},
		{-1, 42, 0, 7, 6},
		{-1, 42, 1, 50, 41},
		{-1, 42, 1, 1, 0},
		{-1, 42, 1, 7, 0},
		{-1, 42, 7, 50, 22},
		{-1, 42, 7, 1, 0},
		{-1, 42, 7, 7, 0},
		{-1, 42, 123, 50, 16},
		{-1, 42, 123, 1, 0},
		{-1, 42, 123, 7, 6},
		{8603657889541918976, -1234605616436508552, 0, 50, 1},
		{8603657889541918976, -1234605616436508552, 0, 1, 0},
		{8603657889541918976, -1234605616436508552, 0, 7, 2},
		{8603657889541918976, -1234605616436508552, 1, 50, 46},
		{8603657889541918976, -1234605616436508552, 1, 1, 0},
		{8603657889541918976, -1234605616436508552, 1, 7, 2},
		{8603657889541918976, -1234605616436508552, 7, 50, 8},
		{8603657889541918976, -1234605616436508552, 7, 1, 0},
		{8603657889541918976, -1234605616436508552, 7, 7, 4},
		{8603657889541918976, -1234605616436508552, 123, 50, 8},
		{8603657889541918976, -1234605616436508552, 123, 1, 0},
		{8603657889541918976, -1234605616436508552, 123, 7, 4},
	} {
		var id [16]byte
		binary.BigEndian.PutUint64(id[:8], uint64(c.msb))
		binary.BigEndian.PutUint64(id[8:], uint64(c.lsb))
		if got := MetadataPartition(id, c.partition, c.parts); got != c.want {
			t.Errorf("topic id %x partition %d of %d: metadata partition %d, Kafka's %d", id, c.partition, c.parts, got, c.want)
		}
	}
	// Kafka's Utils.murmur2 of "hello" and "abcdefg" (a tail of 3).
	if h := int32(murmur2([]byte("hello"))); h != 2132663229 {
		t.Errorf("murmur2(hello) = %d", h)
	}
	if h := int32(murmur2([]byte("abcdefg"))); h != -346467175 {
		t.Errorf("murmur2(abcdefg) = %d", h)
	}
}

func sampleRecords() []MetadataRecord {
	m := sampleMetadata()
	empty := sampleMetadata()
	empty.TxnIndexEmpty = true
	return []MetadataRecord{
		{Segment: &m},
		{Segment: &empty},
		{Update: &SegmentUpdate{Topic: m.Topic, TopicID: m.TopicID, Partition: m.Partition, SegmentID: m.SegmentID,
			BrokerID: 2, EventTimeMs: 1700000000900, CustomMetadata: []byte("x"), State: DeleteSegmentStarted}},
		{PartitionDelete: &PartitionDelete{Topic: m.Topic, TopicID: m.TopicID, Partition: m.Partition, BrokerID: 1,
			EventTimeMs: 1700000001000, State: DeletePartitionFinished}},
	}
}

// Each record decodes back to what was encoded, starts with Kafka's frame
// (version 1, its api key, version 0), and no cut of it decodes.
func TestMetadataRecordsRoundTrip(t *testing.T) {
	for i, rec := range sampleRecords() {
		b := rec.Encode()
		if b[0] != 1 || b[1] != byte(max(i-1, 0)) || b[2] != 0 {
			t.Fatalf("record %d: frame % x", i, b[:3])
		}
		got, err := DecodeMetadataRecord(b)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, rec) {
			t.Fatalf("decoded %+v, want %+v", got, rec)
		}
		for cut := range len(b) {
			if _, err := DecodeMetadataRecord(b[:cut]); err == nil {
				t.Fatalf("record %d cut at %d of %d bytes decoded", i, cut, len(b))
			}
		}
	}
}

func FuzzDecodeMetadataRecord(f *testing.F) {
	for _, rec := range sampleRecords() {
		f.Add(rec.Encode())
	}
	f.Add([]byte{1, 3, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := DecodeMetadataRecord(b)
		if err != nil {
			return
		}
		again, err := DecodeMetadataRecord(got.Encode())
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("re-encoding %+v: %+v, %v", got, again, err)
		}
	})
}
