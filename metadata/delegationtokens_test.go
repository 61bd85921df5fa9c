package metadata

import (
	"crypto/hmac"
	"crypto/sha512"
	"reflect"
	"strings"
	"testing"
)

func sampleTokenRecords() []Record {
	return []Record{
		&DelegationTokenRecord{Owner: "User:alice", Requester: "User:admin", Renewers: []string{"User:bob", "User:carol"},
			IssueTimestamp: 1_700_000_000_000, MaxTimestamp: 1_700_604_800_000, ExpirationTimestamp: 1_700_086_400_000, TokenID: "hUjq_K7rRTmG3uxuX9GmsA"},
		&DelegationTokenRecord{Owner: "User:dave", Requester: "User:dave", TokenID: "t2"},
		&RemoveDelegationTokenRecord{TokenID: "hUjq_K7rRTmG3uxuX9GmsA"},
	}
}

// TestDelegationTokenRecordsVersion0Frozen: the version 0 encoding of the
// token records (Kafka's field order) stays readable.
func TestDelegationTokenRecordsVersion0Frozen(t *testing.T) {
	data := checkFrozenRecords(t, "testdata/delegation-token-records-v0.hex", sampleTokenRecords())
	// The HMAC is no part of what is stored. It is computed here as
	// sasl.TokenHMAC computes it (HmacSHA512 of the id keyed with the
	// secret): metadata does not import sasl, not even in its tests.
	h := hmac.New(sha512.New, []byte("token-secret"))
	h.Write([]byte("hUjq_K7rRTmG3uxuX9GmsA"))
	if mac := h.Sum(nil); strings.Contains(string(data), string(mac)) {
		t.Fatal("the record holds the HMAC")
	}
}

// TestDelegationTokensSnapshotted: the image's tokens survive a snapshot
// (ImageRecords) and a removal of an unknown token applies, as Kafka's
// delta takes it.
func TestDelegationTokensSnapshotted(t *testing.T) {
	img, err := ApplyBatch(EmptyImage("c"), sampleTokenRecords()[:2], 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	again, err := ApplyBatch(EmptyImage("c"), ImageRecords(img), 2, 1)
	if err != nil || !reflect.DeepEqual(again.DelegationTokens, img.DelegationTokens) {
		t.Fatalf("rebuilt %+v, %v", again.DelegationTokens, err)
	}
	base := img
	img, err = ApplyBatch(img, []Record{&RemoveDelegationTokenRecord{TokenID: "t2"}, &RemoveDelegationTokenRecord{TokenID: "none"}}, 3, 1)
	if err != nil || len(img.DelegationTokens) != 1 || len(base.DelegationTokens) != 2 {
		t.Fatalf("after removal %+v (base %d), %v", img.DelegationTokens, len(base.DelegationTokens), err)
	}
}
