package tiered

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tieredNode starts a node with tiered storage in a directory of the
// test's, working every half second.
func tieredNode(t *testing.T, extra ...string) (*node.Node, string) {
	remote := filepath.Join(t.TempDir(), "remote")
	n := node.Start(t, append([]string{
		"remote.log.storage.system.enable=true",
		"gregor.remote.storage=dir:" + remote,
		"remote.log.manager.task.interval.ms=500",
		"log.retention.check.interval.ms=500",
		"file.delete.delay.ms=1000",
	}, extra...)...)
	return n, remote
}

// listOffset asks ListOffsets v9 for one special timestamp of partition 0.
func listOffset(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, ts int64) (offset int64, epoch int32) {
	t.Helper()
	offset, epoch, err := tryListOffset(ctx, cl, topic, ts)
	if err != nil {
		t.Fatal(err)
	}
	return offset, epoch
}

// tryListOffset is listOffset for a caller that waits through errors (a
// leader moving, say).
func tryListOffset(ctx context.Context, cl *kgo.Client, topic string, ts int64) (offset int64, epoch int32, err error) {
	resp, err := integration.ListOffsetsRequest(topic, ts).RequestWith(ctx, cl)
	if err != nil {
		return 0, 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return 0, 0, fmt.Errorf("ListOffsets %d: %w", ts, err)
	}
	return p.Offset, p.LeaderEpoch, nil
}

func produceN(ctx context.Context, t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(fmt.Sprintf("%08d-%s", i, strings.Repeat("v", 1000)))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing: %v", err)
	}
}

// consumeAll reads n records from the beginning and checks each value.
func consumeAll(ctx context.Context, t *testing.T, n *node.Node, topic string, want int) {
	t.Helper()
	cl := n.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	got := 0
	for got < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records: %v", got, want, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch error after %d records: %v", got, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset != int64(got) || !strings.HasPrefix(string(r.Value), fmt.Sprintf("%08d-", got)) {
				t.Fatalf("record %d: offset %d value %.12q", got, r.Offset, r.Value)
			}
			got++
		})
	}
}

// A tiered topic's old segments move to the store and leave the local
// disk; a consumer from the beginning reads every record (the old ones
// from the store); ListOffsets -2, -4 and -5 tell the log start, the local
// log start and the last tiered offset apart.
func TestTieredTopicReadsOldSegmentsFromTheStore(t *testing.T) {
	n, remote := tieredNode(t, "gregor.http.listener=127.0.0.1:0")
	readsOldSegmentsFromTheStore(t, n, func() int {
		var remoteLogs int
		_ = filepath.Walk(remote, func(path string, info os.FileInfo, err error) error {
			if err == nil && strings.HasSuffix(path, ".log") {
				remoteLogs++
			}
			return nil
		})
		return remoteLogs
	})
}

// readsOldSegmentsFromTheStore is the test above on node n, whose store
// holds remoteLogs() segment files.
func readsOldSegmentsFromTheStore(t *testing.T, n *node.Node, remoteLogs func() int) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := n.Client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	topic := "tiered"
	cfg := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr("1000"),
		"segment.bytes":         kadm.StringPtr("1048576"),
	}
	if resp, err := adm.CreateTopic(ctx, 1, 1, cfg, topic); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	const records = 5000 // about 5 MiB: four rolled segments and more
	for i := 0; i < records; i += 500 {
		produceN(ctx, t, cl, topic, i, 500)
	}
	var local, tiered int64
	deadline := time.Now().Add(60 * time.Second)
	for {
		local, _ = listOffset(ctx, t, cl, topic, -4)
		tiered, _ = listOffset(ctx, t, cl, topic, -5)
		if local > 0 && tiered == local-1 && local >= 3000 {
			break
		}
		if time.Until(deadline) < 0 {
			t.Fatalf("local log start %d, last tiered offset %d: the segments did not move to the store; the node's log ends:\n%s", local, tiered, tail(n.Output(), 20))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if start, _ := listOffset(ctx, t, cl, topic, -2); start != 0 {
		t.Fatalf("log start %d, want 0", start)
	}
	if end, _ := listOffset(ctx, t, cl, topic, -1); end != records {
		t.Fatalf("log end %d, want %d", end, records)
	}
	if _, err := os.Stat(filepath.Join(n.Dir, topic+"-0", "00000000000000000000.log")); !os.IsNotExist(err) {
		entries, _ := os.ReadDir(filepath.Join(n.Dir, topic+"-0"))
		t.Fatalf("the first segment is still on the local disk (%v): %v", err, entries)
	}
	logs := remoteLogs()
	if logs < 3 {
		t.Fatalf("%d segment files in the store, want at least 3", logs)
	}
	t.Logf("local log start %d, last tiered offset %d, %d segments in the store", local, tiered, logs)
	consumeAll(ctx, t, n, topic, records)

	// The remote log manager's BrokerTopicMetrics.
	m := regexp.MustCompile(`HTTP listener serving [^\n]* addr=(\S+)`).FindStringSubmatch(n.Output())
	if m == nil {
		t.Fatalf("the node does not say where its HTTP listener is")
	}
	scrape := func() []byte {
		resp, err := http.Get("http://" + m[1] + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return body
	}
	// Every rolled segment is copied within a task or two.
	lagZero := regexp.MustCompile(`(?m)^kafka_server_brokertopicmetrics_remotecopylagsegments\{topic="tiered"\} 0$`)
	var body []byte
	node.WaitFor(t, 10*time.Second, "remote copy lag 0", func() bool {
		body = scrape()
		return lagZero.Match(body)
	})
	for _, name := range []string{"remotecopybytes_total", "remotecopyrequests_total", "remotefetchbytes_total", "remotefetchrequests_total", "remotelogsizebytes", "remotelogmetadatacount"} {
		re := regexp.MustCompile(`(?m)^kafka_server_brokertopicmetrics_` + name + `\{topic="tiered"\} ([0-9.e+]+)$`)
		got := re.FindSubmatch(body)
		if got == nil || string(got[1]) == "0" {
			t.Errorf("/metrics: %s of the topic missing or 0", name)
		}
	}
}

// Turning remote storage off with remote.log.delete.on.disable deletes the
// remote data and starts the log at the local log start; deleting the
// topic deletes what is left in the store.
func TestTieredDisableAndDeleteRemoveRemoteData(t *testing.T) {
	n, remote := tieredNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := n.Client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	adm := kadm.NewClient(cl)
	objects := func() int {
		count := 0
		_ = filepath.Walk(remote, func(path string, info os.FileInfo, err error) error {
			if err == nil && !info.IsDir() {
				count++
			}
			return nil
		})
		return count
	}
	cfg := map[string]*string{
		"remote.storage.enable": kadm.StringPtr("true"),
		"local.retention.ms":    kadm.StringPtr("1000"),
		"segment.bytes":         kadm.StringPtr("1048576"),
	}
	for _, topic := range []string{"disabled", "deleted"} {
		if resp, err := adm.CreateTopic(ctx, 1, 1, cfg, topic); err != nil || resp.Err != nil {
			t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
		}
		produceN(ctx, t, cl, topic, 0, 3000)
	}
	node.WaitFor(t, 60*time.Second, "both topics' first segments copied and gone from the disk", func() bool {
		a, _ := listOffset(ctx, t, cl, "disabled", -4)
		b, _ := listOffset(ctx, t, cl, "deleted", -4)
		return a > 0 && b > 0
	})
	// Kafka refuses to turn remote storage off without deleting the
	// remote data.
	resps, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: kadm.StringPtr("false")}}, "disabled")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On("disabled", nil); err == nil && r.Err != nil {
			err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	if err == nil || !strings.Contains(err.Error(), "It is invalid to disable remote storage without deleting remote data") {
		t.Fatalf("turning remote storage off alone: %v", err)
	}
	resps, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "remote.storage.enable", Value: kadm.StringPtr("false")},
		{Op: kadm.SetConfig, Name: "remote.log.delete.on.disable", Value: kadm.StringPtr("true")},
	}, "disabled")
	if err == nil {
		var r kadm.AlterConfigsResponse
		if r, err = resps.On("disabled", nil); err == nil && r.Err != nil {
			err = fmt.Errorf("%w: %s", r.Err, r.ErrMessage)
		}
	}
	if err != nil {
		t.Fatalf("turning remote storage off with remote.log.delete.on.disable: %v", err)
	}
	local, _ := listOffset(ctx, t, cl, "disabled", -4)
	node.WaitFor(t, 10*time.Second, "the log start at the local log start", func() bool {
		start, _ := listOffset(ctx, t, cl, "disabled", -2)
		return start == local
	})
	dirs, _ := os.ReadDir(remote)
	for _, d := range dirs {
		if strings.HasPrefix(d.Name(), "disabled-0-") {
			node.WaitFor(t, 10*time.Second, "the disabled topic's remote data deleted", func() bool {
				_, err := os.Stat(filepath.Join(remote, d.Name()))
				return os.IsNotExist(err)
			})
		}
	}
	if objects() == 0 {
		t.Fatal("the other topic's remote data went too")
	}
	if resp, err := adm.DeleteTopic(ctx, "deleted"); err != nil || resp.Err != nil {
		t.Fatalf("deleting the topic: %v %v", err, resp.Err)
	}
	node.WaitFor(t, 10*time.Second, "the deleted topic's remote data deleted", func() bool { return objects() == 0 })
}
