package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAckLatenciesFailOnAnyError(t *testing.T) {
	a := newAckLatencies(3)
	a.add(3*time.Millisecond, nil)
	a.add(time.Millisecond, nil)
	if l, err := a.result(10); err != nil || l.Records != 2 || l.P50Ms != 3 || l.MaxMs != 3 || l.Rate != 10 {
		t.Fatalf("two acknowledged: %+v, %v", l, err)
	}
	a.add(0, errors.New("TOPIC_AUTHORIZATION_FAILED"))
	if _, err := a.result(10); err == nil || !strings.Contains(err.Error(), "1 of 3 records failed") {
		t.Fatalf("a failed record: %v", err)
	}
	if _, err := newAckLatencies(0).result(10); err == nil {
		t.Fatal("nothing acknowledged passed")
	}
}
