// Command scaleprobe measures topic creation, the first produce, shutdown
// and start-up at thousands of partitions, against a freshly started
// Gregor (built from this tree) or Apache Kafka (the compatibility
// harness's kafka target, from the Maven jars in .cache):
//
//	(a) -topics concurrent CreateTopics of -per-topic partitions each: the
//	    time until every one is answered;
//	(b) right after, one record to every partition (acks=all, one
//	    producer): the time until all are acknowledged, and (a)+(b), the
//	    time from the burst until every partition accepted a produce;
//	(c) SIGTERM: the time until the process exits;
//	(d) Gregor only: a restart on the same data, the time from launch
//	    until Metadata names a live leader for every partition, until a
//	    produce is acknowledged, and until every partition has accepted
//	    one;
//	(e) Gregor only, before (c): -scrapes scrapes of /metrics (the HTTP
//	    listener, per-partition series on): the median time of one, and
//	    the heap bytes one allocates (go_memstats_alloc_bytes_total's
//	    growth across them, over their count).
//
// Each round starts the broker on fresh ports with a fresh data dir. The
// medians of the rounds are printed last.
//
//	go run ./bench/cmd/scaleprobe -target gregor -rounds 3
//	go run ./bench/cmd/scaleprobe -target kafka -rounds 3
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gregorbroker/gregor/bench"
	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

type probe struct {
	root     string
	target   string
	topics   int
	perTopic int
	limit    time.Duration
	tools    *integration.Tools
	work     string
	gregor   string // the built binary
	scrapes  int
}

// figures are one round's measurements; a missing one is -1.
type figures map[string]time.Duration

var order = []string{"create answered", "first record to all", "burst to all accepting", "scrape /metrics", "SIGTERM to exit", "restart to leaders in metadata", "restart to first ack", "restart to all accepting"}

func main() {
	p := probe{}
	flag.StringVar(&p.target, "target", "gregor", "gregor or kafka")
	rounds := flag.Int("rounds", 3, "rounds (each on a fresh broker)")
	flag.IntVar(&p.topics, "topics", 50, "concurrent CreateTopics")
	flag.IntVar(&p.perTopic, "per-topic", 100, "partitions per topic")
	flag.DurationVar(&p.limit, "limit", 5*time.Minute, "give up on one measurement after this long")
	flag.IntVar(&p.scrapes, "scrapes", 20, "scrapes of /metrics to time (gregor)")
	flag.StringVar(&p.root, "root", ".", "module root")
	flag.Parse()
	root, err := filepath.Abs(p.root)
	if err != nil {
		log.Fatal(err)
	}
	p.root = root
	p.tools = integration.NewTools(root)
	p.work = filepath.Join(root, "bench", ".work", "scaleprobe-"+p.target)
	_ = os.RemoveAll(p.work)
	if err := os.MkdirAll(p.work, 0o755); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if p.target == "gregor" {
		p.gregor = filepath.Join(p.work, "gregor")
		if _, err := integration.Run(ctx, integration.Cmd{Name: "go", Args: []string{"build", "-o", p.gregor, "./cmd/gregor"}, Dir: root, Timeout: 5 * time.Minute}); err != nil {
			log.Fatalf("building gregor: %v", err)
		}
	}
	var all []figures
	for r := 1; r <= *rounds; r++ {
		f, err := p.round(ctx, r)
		fmt.Printf("round %d: %s\n", r, f.line())
		if err != nil {
			log.Printf("round %d: %v", r, err)
		}
		all = append(all, f)
	}
	fmt.Printf("\n%s, %d × %d partitions, median of %d rounds (load %s)\n", p.target, p.topics, p.perTopic, len(all), bench.LoadAvg())
	for _, name := range order {
		var vals []time.Duration
		for _, f := range all {
			if v, ok := f[name]; ok && v >= 0 {
				vals = append(vals, v)
			}
		}
		if len(vals) == 0 {
			continue
		}
		slices.Sort(vals)
		fmt.Printf("  %-26s %8.2f s   (runs: %s)\n", name, vals[len(vals)/2].Seconds(), secs(vals))
	}
}

func (f figures) line() string {
	var parts []string
	for _, name := range order {
		if v, ok := f[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2fs", name, v.Seconds()))
		}
	}
	return strings.Join(parts, ", ")
}

func secs(vals []time.Duration) string {
	var s []string
	for _, v := range vals {
		s = append(s, fmt.Sprintf("%.2f", v.Seconds()))
	}
	return strings.Join(s, " ")
}

// broker is one started broker process.
type broker struct {
	bootstrap string
	metrics   string // host:port of the HTTP listener; "" for none
	pid       func() int
	done      <-chan struct{}
	stop      func() error
}

func (p *probe) round(ctx context.Context, r int) (figures, error) {
	f := figures{}
	dir := filepath.Join(p.work, fmt.Sprintf("round-%d", r))
	var b *broker
	var err error
	var launchGregor func() (*broker, error)
	switch p.target {
	case "gregor":
		launchGregor, err = p.gregorLauncher(dir)
		if err == nil {
			b, err = launchGregor()
		}
	case "kafka":
		b, err = p.startKafka(ctx, dir)
	default:
		err = fmt.Errorf("unknown target %q", p.target)
	}
	if err != nil {
		return f, err
	}
	defer func() { _ = b.stop() }()
	if err := integration.WaitReady(ctx, b.bootstrap, b.done); err != nil {
		return f, err
	}
	names := make([]string, p.topics)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i)
	}

	start := time.Now()
	if err := p.createBurst(ctx, b.bootstrap, names); err != nil {
		return f, err
	}
	f["create answered"] = time.Since(start)
	answered := time.Now()
	if err := p.produceAll(ctx, b.bootstrap, names); err != nil {
		return f, err
	}
	f["first record to all"] = time.Since(answered)
	f["burst to all accepting"] = time.Since(start)
	if b.metrics != "" {
		took, allocated, size, err := scrapeCost(ctx, b.metrics, p.scrapes)
		if err != nil {
			return f, fmt.Errorf("scraping /metrics: %w", err)
		}
		f["scrape /metrics"] = took
		fmt.Printf("round %d: a scrape of /metrics: median %v, %d bytes of text, %d bytes allocated by the node\n", r, took.Round(time.Microsecond), size, allocated)
	}

	stopped := time.Now()
	if err := b.terminate(p.limit); err != nil {
		return f, err
	}
	f["SIGTERM to exit"] = time.Since(stopped)
	if launchGregor == nil {
		return f, nil
	}

	launched := time.Now()
	b, err = launchGregor()
	if err != nil {
		return f, err
	}
	defer func() { _ = b.stop() }()
	leaders := make(chan time.Duration, 1)
	go func() { leaders <- p.waitLeaders(ctx, b.bootstrap, names, launched) }()
	last := names[len(names)-1]
	if err := p.produce(ctx, b.bootstrap, []*kgo.Record{{Topic: last, Partition: int32(p.perTopic - 1), Value: []byte("after restart")}}); err != nil {
		return f, fmt.Errorf("first produce after restart: %w", err)
	}
	f["restart to first ack"] = time.Since(launched)
	if err := p.produceAll(ctx, b.bootstrap, names); err != nil {
		return f, fmt.Errorf("producing to every partition after restart: %w", err)
	}
	f["restart to all accepting"] = time.Since(launched)
	f["restart to leaders in metadata"] = <-leaders
	return f, nil
}

// waitLeaders polls Metadata until every partition of names has a leader
// that the answer lists, and returns the time since launched (-1 when the
// limit passes first): when the broker is ready, whatever the client's
// retry backoffs.
func (p *probe) waitLeaders(ctx context.Context, bootstrap string, names []string, launched time.Time) time.Duration {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return -1
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for time.Since(launched) < p.limit {
		md, err := adm.Metadata(ctx, names...)
		if err == nil && allLed(md, len(names), p.perTopic) {
			return time.Since(launched)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return -1
}

func allLed(md kadm.Metadata, topics, perTopic int) bool {
	if len(md.Topics) != topics {
		return false
	}
	for _, t := range md.Topics {
		if t.Err != nil || len(t.Partitions) != perTopic {
			return false
		}
		for _, pt := range t.Partitions {
			if pt.Err != nil || !slices.Contains(md.Brokers.NodeIDs(), pt.Leader) {
				return false
			}
		}
	}
	return true
}

// terminate sends SIGTERM to the broker and waits for it to exit.
func (b *broker) terminate(limit time.Duration) error {
	if err := syscall.Kill(b.pid(), syscall.SIGTERM); err != nil {
		return fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-b.done:
		return b.stop()
	case <-time.After(limit):
		return fmt.Errorf("broker did not exit %s after SIGTERM", limit)
	}
}

// gregorLauncher returns a function that starts the built gregor on data
// under dir (the same data at each call, on the same address: claimed
// until the probe exits).
func (p *probe) gregorLauncher(dir string) (func() (*broker, error), error) {
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	host, err := integration.ClaimLoopback()
	if err != nil {
		return nil, err
	}
	metricsAddr := host.Addr(integration.DebugPort)
	args := append(integration.GregorArgs(data, host.IP), "--override", "gregor.http.listener="+metricsAddr)
	return func() (*broker, error) {
		proc, err := integration.Start(integration.Cmd{Name: p.gregor, Args: args, Dir: dir}, filepath.Join(dir, "broker.log"))
		if err != nil {
			return nil, err
		}
		return &broker{
			bootstrap: host.Addr(integration.ClientPort),
			metrics:   metricsAddr,
			pid:       proc.Pid,
			done:      proc.Done(),
			stop:      func() error { return proc.Stop(10 * time.Second) },
		}, nil
	}, nil
}

// startKafka starts the harness's kafka target (fresh dir and ports).
func (p *probe) startKafka(ctx context.Context, dir string) (*broker, error) {
	t, err := integration.NewTarget("kafka", p.tools, integration.TargetOptions{WorkDir: dir})
	if err != nil {
		return nil, err
	}
	if err := t.Start(ctx); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		for t.Alive() == nil {
			time.Sleep(20 * time.Millisecond)
		}
		close(done)
	}()
	return &broker{bootstrap: t.Bootstrap(), pid: t.Pid, done: done, stop: t.Stop}, nil
}

// createBurst sends one CreateTopics per name at once, on one client (as
// an application creating topics concurrently would).
func (p *probe) createBurst(ctx context.Context, bootstrap string, names []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(ctx, p.limit)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			resp, err := adm.CreateTopic(ctx, int32(p.perTopic), 1, nil, name)
			if err == nil {
				err = resp.Err
			}
			if err != nil {
				errs[i] = fmt.Errorf("creating %s: %w", name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// produceAll sends one record to every partition of names and waits until
// all are acknowledged.
func (p *probe) produceAll(ctx context.Context, bootstrap string, names []string) error {
	var recs []*kgo.Record
	for _, name := range names {
		for i := 0; i < p.perTopic; i++ {
			recs = append(recs, &kgo.Record{Topic: name, Partition: int32(i), Value: []byte("one record")})
		}
	}
	return p.produce(ctx, bootstrap, recs)
}

// produce sends recs with one producer (franz-go's defaults, acks=all,
// except that a topic missing from metadata is retried until the limit
// instead of four times: a broker may answer CreateTopics before its
// metadata shows the topic) and waits for every acknowledgement.
func (p *probe) produce(ctx context.Context, bootstrap string, recs []*kgo.Record) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond),
		kgo.MaxBufferedRecords(len(recs)+1),
		kgo.UnknownTopicRetries(-1),
	)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, p.limit)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, r := range recs {
		wg.Add(1)
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("%s-%d: %w", r.Topic, r.Partition, err))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return fmt.Errorf("%d of %d records failed, first: %w", len(errs), len(recs), errs[0])
	}
	return nil
}

// scrapeCost scrapes addr's /metrics n times, one after the other: the
// median time of one, the node's heap allocations per scrape (the growth of
// go_memstats_alloc_bytes_total, read by a scrape before and after, over
// n+1 scrapes), and the size of the last answer.
func scrapeCost(ctx context.Context, addr string, n int) (median time.Duration, allocated int64, size int, err error) {
	get := func() (string, time.Duration, error) {
		start := time.Now()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			return "", 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", 0, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return string(body), time.Since(start), err
	}
	allocs := func(text string) (float64, error) {
		for _, line := range strings.Split(text, "\n") {
			if v, ok := strings.CutPrefix(line, "go_memstats_alloc_bytes_total "); ok {
				return strconv.ParseFloat(v, 64)
			}
		}
		return 0, errors.New("no go_memstats_alloc_bytes_total in /metrics")
	}
	text, _, err := get()
	if err != nil {
		return 0, 0, 0, err
	}
	before, err := allocs(text)
	if err != nil {
		return 0, 0, 0, err
	}
	var times []time.Duration
	for range n {
		var took time.Duration
		if text, took, err = get(); err != nil {
			return 0, 0, 0, err
		}
		times = append(times, took)
	}
	after, err := allocs(text)
	if err != nil {
		return 0, 0, 0, err
	}
	slices.Sort(times)
	// The first scrape's own allocations fall before its reading, the
	// last's after: the growth spans n scrapes.
	return times[len(times)/2], int64((after - before) / float64(n)), len(text), nil
}
