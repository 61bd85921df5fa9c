package metadata

import (
	"bytes"
	"encoding/hex"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestScramRecordsVersion0Frozen: the version 0 encoding of the SCRAM
// records is Kafka's field order and stays readable.
func TestScramRecordsVersion0Frozen(t *testing.T) {
	recs := []Record{
		&UserScramCredentialRecord{Name: "alice", Mechanism: 1, Salt: []byte("salt"), StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 8192},
		&RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
	}
	checkFrozenRecords(t, "testdata/scram-records-v0.hex", recs)
	// Removing a credential that does not exist is refused, as Kafka's
	// replay refuses it.
	if _, err := ApplyBatch(EmptyImage("c"), recs[1:], 1, 1); err == nil {
		t.Fatal("removing an unknown credential applied")
	}
}

// checkFrozenRecords decodes the hex golden file at path and requires
// exactly recs; it returns the file's bytes. With GREGOR_WRITE_TESTDATA
// set, a missing file is written from recs and the test skipped.
func checkFrozenRecords(t *testing.T, path string, recs []Record) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) && os.Getenv("GREGOR_WRITE_TESTDATA") != "" {
		if err := os.WriteFile(path, []byte(hex.EncodeToString(EncodeRecords(recs))+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Skip("wrote testdata")
	}
	data, derr := hex.DecodeString(strings.TrimSpace(string(raw)))
	if err != nil || derr != nil {
		t.Fatal(err, derr)
	}
	got, err := DecodeRecords(data)
	if err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %#v, %v", got, err)
	}
	return data
}
