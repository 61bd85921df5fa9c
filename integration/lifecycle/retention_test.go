package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Retention deletes whole segments once retention.ms has passed, and a
// retention.ms set with IncrementalAlterConfigs on a running broker takes
// effect at the next log.retention.check.interval.ms without a restart.
func TestRetentionMsChangedAtRunTimeDeletesSegments(t *testing.T) {
	n := node.Start(t, "log.retention.check.interval.ms=500")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := n.Client(kgo.DefaultProduceTopic("ret"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	segBytes := "1048576"
	if resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": &segBytes}, "ret"); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	value := make([]byte, 100_000)
	for range 40 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	offsets := func() (start, end int64) {
		s, err := adm.ListStartOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		e, err := adm.ListEndOffsets(ctx, "ret")
		if err != nil {
			t.Fatal(err)
		}
		so, _ := s.Lookup("ret", 0)
		eo, _ := e.Lookup("ret", 0)
		return so.Offset, eo.Offset
	}
	// With the default retention (seven days) several checks delete
	// nothing: that nothing happens in three check intervals is what is
	// tested, so this is a sleep, not a wait.
	time.Sleep(1500 * time.Millisecond)
	if start, end := offsets(); start != 0 || end != 40 {
		t.Fatalf("before the change: log start %d, end %d; want 0 and 40", start, end)
	}
	one := "1000"
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &one}}, "ret")
	if err == nil {
		_, err = resps.On("ret", nil)
	}
	if err != nil {
		t.Fatalf("setting retention.ms: %v", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		start, end := offsets()
		if start == 40 && end == 40 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("15s after retention.ms=1000: log start %d, end %d; want 40 and 40", start, end)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The segments are renamed .deleted first (file.delete.delay.ms, a
	// minute here): the renames follow the log start's move, so they are
	// waited for.
	for renameDeadline := time.Now().Add(10 * time.Second); ; {
		entries, err := os.ReadDir(filepath.Join(n.Dir, "ret-0"))
		if err != nil {
			t.Fatal(err)
		}
		deleted := 0
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".log.deleted") {
				deleted++
			}
		}
		if deleted > 0 {
			break
		}
		if time.Now().After(renameDeadline) {
			t.Fatalf("no .log.deleted files 10s after the log start moved: %v", entries)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The partition keeps working: a new record lands at offset 40.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, end := offsets(); end != 41 {
		t.Fatalf("log end %d after one more record", end)
	}
}
