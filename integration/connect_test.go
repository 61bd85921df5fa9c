package integration

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

func linesFrom(idx ...int) []string {
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = connectLine(n)
	}
	return out
}

func TestCheckExactLines(t *testing.T) {
	if err := checkExactLines(linesFrom(0, 1, 2, 3), 4); err != nil {
		t.Errorf("every line once, in order: %v", err)
	}
	for name, c := range map[string]struct {
		got  []string
		want string
	}{
		"lost":         {linesFrom(0, 1, 3), "1 lines missing (connect-line-00000002)"},
		"aborted seen": {linesFrom(0, 1, 2, 1, 2, 3), "2 read more than once (connect-line-00000001 ×2, connect-line-00000002 ×2)"},
		"foreign":      {append(linesFrom(0, 1, 2, 3), "garbage"), `1 records that are no input line ("garbage")`},
		"reordered":    {linesFrom(0, 2, 1, 3), "out of order: record 1 is connect-line-00000002"},
		"one too many": {linesFrom(0, 1, 2, 3, 4), `no input line ("connect-line-00000004")`},
	} {
		err := checkExactLines(c.got, 4)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, c.want)
		}
	}
}

func TestScanSinkFile(t *testing.T) {
	file := func(idx ...int) string { return strings.Join(linesFrom(idx...), "\n") + "\n" }
	for name, c := range map[string]struct {
		content        string
		next, repeated int
		err            string
	}{
		"empty":               {"", 0, 0, ""},
		"in order":            {file(0, 1, 2), 3, 0, ""},
		"a run written again": {file(0, 1, 2, 3, 1, 2, 3, 4), 5, 3, ""},
		"a line skipped":      {file(0, 1, 3), 2, 0, "connect-line-00000003, before connect-line-00000002 was ever copied"},
		"changed":             {file(0) + "connect-line-0000000x\n", 1, 0, `"connect-line-0000000x", no input line`},
		"torn":                {file(0) + "connect-line-000\n", 1, 0, "no input line"},
	} {
		next, repeated, err := scanSinkFile(c.content)
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%s: error %v, want %q", name, err, c.err)
		}
		if err == nil && (next != c.next || repeated != c.repeated) {
			t.Errorf("%s: next %d, repeated %d; want %d, %d", name, next, repeated, c.next, c.repeated)
		}
	}
}

func TestLineAppender(t *testing.T) {
	a, err := newLineAppender(t.TempDir() + "/in.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Append(3); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(2); err != nil {
		t.Fatal(err)
	}
	n, err := a.Stop()
	if err != nil || n != 5 {
		t.Fatalf("Stop: %d lines, %v; want 5", n, err)
	}
	raw, err := os.ReadFile(a.path)
	if err != nil {
		t.Fatal(err)
	}
	b := string(raw)
	if next, repeated, err := scanSinkFile(b); next != 5 || repeated != 0 || err != nil {
		t.Errorf("the file holds %d lines (%d repeated, %v), want 5", next, repeated, err)
	}
	if int64(len(b)) != 5*connectLineBytes {
		t.Errorf("the file has %d bytes, want 5 lines of %d", len(b), connectLineBytes)
	}
}

// The config topic as the console consumer printed it with print.key
// after a run against Kafka 4.3.1 (values cut short).
const capturedConfigTopic = `session-key	{"key":"/SEwox065LT0IQG9r07veaIvjM3zaRV98AA+ZcPs+Rk=","algorithm":"HmacSHA256","creation-timestamp":1796624439718}
connector-file-source	{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector","exactly.once.support":"required"}}
task-file-source-0	{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSourceConnector","task.class":"org.apache.kafka.connect.file.FileStreamSourceTask"}}
commit-file-source	{"tasks":1}
tasks-fencing-file-source	{"task-count":1}
connector-file-sink	{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSinkConnector"}}
task-file-sink-0	{"properties":{"connector.class":"org.apache.kafka.connect.file.FileStreamSinkConnector"}}
commit-file-sink	{"tasks":1}
restart-connector-file-source	{"include-tasks":true,"only-failed":false}
`

func TestParseKeyedRecords(t *testing.T) {
	recs, err := parseKeyedRecords(capturedConfigTopic)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		keys = append(keys, r.Key)
	}
	want := []string{"session-key", "connector-file-source", "task-file-source-0", "commit-file-source", "tasks-fencing-file-source",
		"connector-file-sink", "task-file-sink-0", "commit-file-sink", "restart-connector-file-source"}
	if !slices.Equal(keys, want) {
		t.Errorf("keys %v, want %v", keys, want)
	}
	if recs[3].Value != `{"tasks":1}` {
		t.Errorf("commit-file-source's value is %q", recs[3].Value)
	}
	if _, err := parseKeyedRecords("no tab here\n"); err == nil {
		t.Error("a line without a key separator was accepted")
	}
}

func TestFilePositions(t *testing.T) {
	// From the offsets topic of a run against Kafka 4.3.1, with another
	// connector's and another file's offsets and a reset added.
	const out = `["file-source",{"filename":"/w/in.txt"}]	{"position":44000}
["file-source",{"filename":"/w/in.txt"}]	{"position":88000}
["other-source",{"filename":"/w/in.txt"}]	{"position":5}
["file-source",{"filename":"/w/other.txt"}]	{"position":7}
["file-source",{"filename":"/w/in.txt"}]	null
["file-source",{"filename":"/w/in.txt"}]	{"position":118800}
`
	recs, err := parseKeyedRecords(out)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := filePositions(recs, "file-source", "/w/in.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{44000, 88000, -1, 118800}; !slices.Equal(pos, want) {
		t.Errorf("positions %v, want %v", pos, want)
	}
	recs = append(recs, keyedRecord{Key: `["file-source",{"filename":"/w/in.txt"}]`, Value: `{"offset":3}`})
	if _, err := filePositions(recs, "file-source", "/w/in.txt"); err == nil {
		t.Error("an offset without a position was accepted")
	}
}

func TestConnectorStatus(t *testing.T) {
	// GET /connectors/<name>/status as Kafka 4.3.1 answers it (KIP-745's
	// restart answer has the same shape).
	const body = `{"name":"file-source","connector":{"state":"RUNNING","worker_id":"127.100.0.3:19096"},
		"tasks":[{"id":0,"state":"FAILED","worker_id":"127.100.0.3:19097","trace":"org.apache.kafka.connect.errors.ConnectException: boom\n\tat x"}],"type":"source"}`
	var st connectorStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	if !st.failed() || st.running(1, "") {
		t.Errorf("a FAILED task: failed %v, running %v", st.failed(), st.running(1, ""))
	}
	if want := "file-source RUNNING on 127.100.0.3:19096; task 0 FAILED on 127.100.0.3:19097 (org.apache.kafka.connect.errors.ConnectException: boom)"; st.String() != want {
		t.Errorf("String() = %q, want %q", st.String(), want)
	}
	st.Tasks[0].State, st.Tasks[0].Trace = "RUNNING", ""
	if !st.running(1, "") || st.running(1, "127.100.0.3:19096") || !st.running(1, "127.100.0.3:19097") || st.running(2, "") {
		t.Error("running() is wrong about a task RUNNING on 127.100.0.3:19097")
	}
}
