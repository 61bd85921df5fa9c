package integration

import (
	"strings"
	"testing"
)

func TestValidateDelivery(t *testing.T) {
	for _, c := range []struct {
		name       string
		acked      []string
		consumed   []string
		idempotent bool
		wantErr    string
	}{
		{"all there", []string{"0", "1", "2"}, []string{"2", "0", "1"}, true, ""},
		{"extra unacked value is fine", []string{"0", "1"}, []string{"0", "1", "2"}, true, ""},
		{"missing", []string{"0", "1", "2"}, []string{"0", "2"}, true, "1 of 3 acked values never consumed (first: 1)"},
		{"duplicate with idempotence", []string{"0", "1"}, []string{"0", "1", "1"}, true, "1 values consumed more than once"},
		{"duplicate allowed without idempotence", []string{"0", "1"}, []string{"0", "1", "1"}, false, ""},
		{"nothing consumed", []string{"0"}, nil, false, "never consumed"},
	} {
		err := validateDelivery(c.acked, c.consumed, c.idempotent)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.wantErr)
		}
	}
}

func TestParseVerifiable(t *testing.T) {
	out := `{"timestamp":1,"name":"startup_complete"}
some warning printed to stdout
{"timestamp":2,"name":"producer_send_success","key":null,"value":"0","offset":0,"topic":"vp1","partition":2}
{"timestamp":3,"name":"producer_send_error","exception":"org.apache.kafka.common.errors.TimeoutException","message":"expired","topic":"vp1","key":null,"value":"1"}
{"timestamp":4,"name":"record_data","key":"k","value":"0","topic":"vp1","partition":2,"offset":0}
`
	ev, err := ParseVerifiable(out)
	if err != nil {
		t.Fatal(err)
	}
	acked, sendErr := ackedValues(ev)
	if len(acked) != 1 || acked[0] != "0" || !strings.Contains(sendErr, "TimeoutException") {
		t.Fatalf("acked %v err %q", acked, sendErr)
	}
	if c := consumedValues(ev); len(c) != 1 || c[0] != "0" {
		t.Fatalf("consumed %v", c)
	}
	if _, err := ParseVerifiable("{not json\n"); err == nil {
		t.Fatal("bad JSON: no error")
	}
}
