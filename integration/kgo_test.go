package integration

import (
	"strings"
	"testing"
)

func TestParseGoTestJSON(t *testing.T) {
	out := `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"fail","Package":"p","Test":"TestA/sub","Elapsed":0.1}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.2}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"output","Package":"p","Test":"TestB","Output":"    x_test.go:1: KGO_TEST_SCRAM_SEEDS not set\n"}
{"Action":"output","Package":"p","Test":"TestB","Output":"--- SKIP: TestB (0.00s)\n"}
{"Action":"skip","Package":"p","Test":"TestB","Elapsed":0}
{"Action":"run","Package":"p","Test":"TestC"}
{"Action":"pass","Package":"p","Test":"TestC","Elapsed":1.5}
{"Action":"run","Package":"p","Test":"TestHung"}
not json at all
{"Action":"fail","Package":"p","Elapsed":720}
`
	got := parseGoTestJSON(out)
	want := map[string]string{"TestA": "fail", "TestB": "skip", "TestC": "pass", "TestHung": "run"}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for _, o := range got {
		if want[o.Test] != o.Action {
			t.Errorf("%s: %s, want %s", o.Test, o.Action, want[o.Test])
		}
		if o.Test == "TestB" && !strings.Contains(o.Skip, "KGO_TEST_SCRAM_SEEDS") {
			t.Errorf("skip reason %q", o.Skip)
		}
	}
	if err := checkAllowlist(got, []string{"TestC"}); err != nil {
		t.Errorf("allowlist of passing test: %v", err)
	}
	err := checkAllowlist(got, []string{"TestC", "TestA", "TestHung", "TestGone"})
	if err == nil || !strings.Contains(err.Error(), "3 of 4") || !strings.Contains(err.Error(), "TestGone (not run)") {
		t.Errorf("got %v", err)
	}
}

func TestCheckClientReport(t *testing.T) {
	good := `{"produced": 200, "consumed": 200, "committed": 200, "group_listed": true, "group_state": "EMPTY"}`
	for name, c := range map[string]struct {
		out string
		ok  bool
	}{
		"good":           {"noise\n" + good + "\n", true},
		"missing commit": {`{"produced": 200, "consumed": 200, "committed": 0, "group_listed": true}`, false},
		"not listed":     {`{"produced": 200, "consumed": 200, "committed": 200, "group_listed": false}`, false},
		"stable group":   {`{"produced": 200, "consumed": 200, "committed": 200, "group_listed": true, "group_state": "Stable"}`, false},
		"no json":        {"OK\n", false},
	} {
		if err := checkClientReport(c.out); (err == nil) != c.ok {
			t.Errorf("%s: %v", name, err)
		}
	}
}
