package main

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestStampedCopiesAndStamps(t *testing.T) {
	payload := []byte(`{"ts":1700000000000,"user":"u-0000001"}`)
	orig := append([]byte(nil), payload...)
	v := stamped(payload, 1234567890123)
	if got := int64(binary.BigEndian.Uint64(v)); got != 1234567890123 {
		t.Fatalf("stamp = %d", got)
	}
	if !bytes.Equal(v[8:], payload[8:]) || len(v) != len(payload) {
		t.Fatalf("payload after the stamp changed: %q", v)
	}
	if !bytes.Equal(payload, orig) {
		t.Fatal("stamped wrote into the shared payload")
	}
	// The warm-up record's zero stamp is what the consumers skip.
	if binary.BigEndian.Uint64(stamped(payload, 0)) != 0 {
		t.Fatal("zero stamp not zero")
	}
}
