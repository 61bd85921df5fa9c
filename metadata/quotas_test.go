package metadata

import (
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
)

func sampleQuotaRecords() []Record {
	return []Record{
		&ClientQuotaRecord{Entity: []QuotaEntityData{{Type: "user", Name: strPtr("alice")}, {Type: "client-id", Name: nil}}, Key: "producer_byte_rate", Value: 1024},
		&ClientQuotaRecord{Entity: []QuotaEntityData{{Type: "ip", Name: strPtr("10.0.0.1")}}, Key: "connection_creation_rate", Value: 5},
		&ClientQuotaRecord{Entity: []QuotaEntityData{{Type: "user", Name: strPtr("alice")}, {Type: "client-id", Name: nil}}, Key: "producer_byte_rate", Remove: true},
	}
}

// TestClientQuotaRecordVersion0: the version 0 encoding is frozen in
// testdata; a newer build must keep reading it.
func TestClientQuotaRecordVersion0(t *testing.T) {
	raw, err := os.ReadFile("testdata/quota-records-v0.hex")
	if err != nil {
		t.Fatal(err)
	}
	data, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	if got := EncodeRecords(sampleQuotaRecords()); !reflect.DeepEqual(got, data) {
		t.Fatalf("encoding changed:\n%x\nwant\n%x", got, data)
	}
	got, err := DecodeRecords(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sampleQuotaRecords()) {
		t.Fatalf("decoded %#v", got)
	}
	img, err := ApplyBatch(EmptyImage("c"), got, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := map[QuotaEntity]map[string]float64{{IP: QuotaNamed("10.0.0.1")}: {"connection_creation_rate": 5}}
	if !reflect.DeepEqual(img.ClientQuotas, want) {
		t.Fatalf("quotas %v", img.ClientQuotas)
	}
}

func TestClientQuotaRecordRefusesBadEntity(t *testing.T) {
	for _, ent := range [][]QuotaEntityData{
		nil,
		{{Type: "group", Name: strPtr("g")}},
		{{Type: "user", Name: strPtr("a")}, {Type: "user", Name: strPtr("b")}},
	} {
		if _, err := ApplyBatch(EmptyImage("c"), []Record{&ClientQuotaRecord{Entity: ent, Key: "k", Value: 1}}, 1, 1); err == nil {
			t.Errorf("entity %v replayed", ent)
		}
	}
}
