// Package lifecycle tests the gregor binary's start-up, configuration,
// shutdown and crash behaviour as a user sees it.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/internal/await"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func createTopic(t *testing.T, n *node.Node, topic string, partitions int32) {
	t.Helper()
	adm := kadm.NewClient(n.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("creating %s: %v %v", topic, err, resp.Err)
	}
}

// consumeAll reads every record of topic from the start until it has want
// records or the timeout passes.
func consumeAll(t *testing.T, n *node.Node, topic string, want int) []*kgo.Record {
	t.Helper()
	cl := n.Client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch error: %v", err) })
		out = append(out, fs.Records()...)
	}
	return out
}

func TestStartsOnEmptyDirAndPrintsWhereItListens(t *testing.T) {
	n := node.Start(t)
	t.Logf("ready %v after exec", n.StartupDur)
	// The node answers ApiVersions as soon as its listener is up; the
	// start-up line comes after the rest of start-up, on stdout, copied
	// by its own goroutine, so the test waits for it rather than
	// expecting it by the first answer.
	await.Until(t, 15*time.Second, "the start-up line naming the listener", func() error {
		out := n.Output()
		if !strings.Contains(out, "PLAINTEXT://"+n.Addr()) || !strings.Contains(out, "started") {
			return fmt.Errorf("start-up message does not say where it listens:\n%s", out)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(n.Dir, "meta.properties")); err != nil {
		t.Fatalf("not formatted: %v", err)
	}
}

// Every record acknowledged with acks=all survives kill -9 at an arbitrary
// moment, with its offset (DESIGN.md §6, invariant 6).
func TestKill9LosesNothingAcknowledged(t *testing.T) {
	n := node.Start(t)
	createTopic(t, n, "crash", 4)
	acked := map[string]int64{} // value -> offset
	var mu sync.Mutex
	for round := 0; round < 3; round++ {
		cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr()), kgo.DefaultProduceTopic("crash"),
			kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(0), kgo.ProducerLinger(time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := 0; w < 4; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					v := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
						if err == nil {
							mu.Lock()
							acked[v] = r.Offset
							mu.Unlock()
						}
					})
					if i%50 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}(w)
		}
		// The round's producers are through to the broker (an ack)
		// before the kill; when in the stream it comes, 300 ms later in
		// each round, is the test's point, so that part is a sleep.
		mu.Lock()
		before := len(acked)
		mu.Unlock()
		await.Until(t, 30*time.Second, fmt.Sprintf("an acknowledgement in round %d", round), func() error {
			mu.Lock()
			defer mu.Unlock()
			if len(acked) == before {
				return fmt.Errorf("%d records acknowledged, as before the round", before)
			}
			return nil
		})
		time.Sleep(time.Duration(300+round*200) * time.Millisecond)
		n.Kill()
		cancel()
		wg.Wait()
		cl.Close()
		n.Restart()
	}
	mu.Lock()
	want := len(acked)
	mu.Unlock()
	if want == 0 {
		t.Fatal("nothing was acknowledged")
	}
	got := consumeAll(t, n, "crash", want)
	seen := map[string]bool{}
	for _, r := range got {
		v := string(r.Value)
		if off, ok := acked[v]; ok && off != r.Offset {
			t.Fatalf("record %s acknowledged at offset %d, read at %d", v, off, r.Offset)
		}
		seen[v] = true
	}
	missing := 0
	for v := range acked {
		if !seen[v] {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged records lost after kill -9", missing, want)
	}
	t.Logf("%d acknowledged records survived 3 kill -9 restarts", want)
}

// SIGTERM shuts down cleanly: exit status 0, the clean-shutdown marker
// written, and everything readable after a restart.
func TestSIGTERMShutsDownCleanly(t *testing.T) {
	n := node.Start(t)
	createTopic(t, n, "clean", 1)
	cl := n.Client(kgo.DefaultProduceTopic("clean"))
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := n.Stop(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, n.Output())
	}
	if _, err := os.Stat(filepath.Join(n.Dir, ".kafka_cleanshutdown")); err != nil {
		t.Fatalf("no clean-shutdown marker: %v", err)
	}
	n.Restart()
	if got := consumeAll(t, n, "clean", 100); len(got) != 100 {
		t.Fatalf("read %d records after restart", len(got))
	}
}

func runGregor(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, node.Binary(t), args...).CombinedOutput()
	return string(out), err
}

func TestBadConfigValueStopsStartupNamingTheKey(t *testing.T) {
	out, err := runGregor(t, "--override", "num.partitions=abc", "--override", "log.dirs="+t.TempDir())
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(out, "num.partitions") {
		t.Fatalf("want a failed start naming num.partitions, got %v:\n%s", err, out)
	}
}

func TestUnknownConfigKeyWarns(t *testing.T) {
	n := node.Start(t, "no.such.key=1")
	if !strings.Contains(n.Output(), "no.such.key") {
		t.Fatalf("no warning about the unknown key:\n%s", n.Output())
	}
}

func TestDataDirOfAnotherClusterIsRefused(t *testing.T) {
	n := node.Start(t)
	n.Stop()
	meta := filepath.Join(n.Dir, "meta.properties")
	raw, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(l, "cluster.id=") {
			l = "cluster.id=AAAAAAAAAAAAAAAAAAAAAQ"
		}
		lines = append(lines, l)
	}
	if err := os.WriteFile(meta, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runGregor(t, n.Args()...)
	if err == nil || !strings.Contains(out, "cluster") {
		t.Fatalf("a node whose dir belongs to another cluster started: %v\n%s", err, out)
	}
}

func TestStorageFormatAndInfo(t *testing.T) {
	id, err := runGregor(t, "storage", "random-uuid")
	id = strings.TrimSpace(id)
	if err != nil || len(id) != 22 {
		t.Fatalf("random-uuid: %q %v", id, err)
	}
	dir := t.TempDir()
	props := filepath.Join(dir, "server.properties")
	host := node.Host(t)
	os.WriteFile(props, []byte(fmt.Sprintf(`process.roles=broker,controller
node.id=1
listeners=PLAINTEXT://%s,CONTROLLER://%s
controller.listener.names=CONTROLLER
controller.quorum.bootstrap.servers=%s
log.dirs=%s/data
`, host.Addr(integration.ClientPort), host.Addr(integration.ControllerPort), host.Addr(integration.ControllerPort), dir)), 0o644)
	if out, err := runGregor(t, "storage", "format", "--standalone", "-t", id, "-c", props); err != nil || !strings.Contains(out, "Formatting") {
		t.Fatalf("format: %v\n%s", err, out)
	}
	if out, err := runGregor(t, "storage", "format", "--standalone", "-t", id, "-c", props); err == nil {
		t.Fatalf("formatting twice succeeded:\n%s", out)
	}
	if out, err := runGregor(t, "storage", "format", "--standalone", "-t", id, "-c", props, "--ignore-formatted"); err != nil {
		t.Fatalf("--ignore-formatted: %v\n%s", err, out)
	}
	out, err := runGregor(t, "storage", "info", "-c", props)
	if err != nil || !strings.Contains(out, "cluster.id="+id) {
		t.Fatalf("info: %v\n%s", err, out)
	}
}

// Every codec produces and consumes through Gregor with franz-go.
func TestEveryCodecRoundTrips(t *testing.T) {
	n := node.Start(t)
	codecs := map[string]kgo.CompressionCodec{
		"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
		"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
	}
	for name, codec := range codecs {
		topic := "codec-" + name
		createTopic(t, n, topic, 1)
		cl := n.Client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(codec))
		for i := 0; i < 50; i++ {
			cl.Produce(context.Background(), &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte(strings.Repeat(name, 20))}, nil)
		}
		if err := cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := consumeAll(t, n, topic, 50)
		if len(got) != 50 || string(got[49].Value) != strings.Repeat(name, 20) {
			t.Fatalf("%s: read %d records", name, len(got))
		}
	}
}
