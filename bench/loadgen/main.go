// Command loadgen is the franz-go load generator of `make bench`. It lives
// in its own module so that the broker's go.mod does not carry franz-go's
// client. Every mode prints one JSON object on stdout.
//
//	loadgen payloads      -out FILE [-n 10000] [-size 1024] [-seed 1]
//	loadgen produce       -bootstrap B -topic T -partitions P -records N -acks 1|all -payloads FILE [-compression lz4|none]
//	loadgen consume       -bootstrap B -topic T -records N
//	loadgen e2e           -bootstrap B -topic T -partitions P -rate R -duration D -payloads FILE
//	loadgen produce-latency -bootstrap B -topic T -partitions P -rate R -duration D -payloads FILE [-compression lz4|none]
//	loadgen first-produce -bootstrap B -topic T [-timeout 3m]
//	loadgen group-stable  -bootstrap B -topic T -group G -partitions P -members M -protocol classic|consumer
//	loadgen commits       -bootstrap B -topic T -group G -committers C -partitions-each P -duration D
//	loadgen compaction    -bootstrap B -topic T -records N -keys K -size S -rate R
//	loadgen txn-produce   -bootstrap B -topic T -partitions P -records N -per-txn K -payloads FILE
//	loadgen txn-e2e       -bootstrap B -topic T -partitions P -rate R -per-txn K -duration D -payloads FILE
//
// Every mode that connects takes -tls-ca FILE (a PEM truststore: connect
// over TLS, checking the broker's certificate against it and the host
// name) and, for mTLS, -tls-cert FILE and -tls-key FILE (PEM), so that a
// benchmark can run over a broker's SSL listener. produce, e2e and
// produce-latency create their topic first (TOPIC_ALREADY_EXISTS is fine)
// unless given -create=false: a principal that the authorizer lets only
// write must find its topic made beforehand. The producing modes
// compress with lz4 unless given -compression none.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"
)

// clientOpts are added to every client's options (TLS), set once from the
// flags before any client is made.
var clientOpts []kgo.Opt

// produceCodec is what producers compress with (-compression), set once
// from the flags before any client is made.
var produceCodec = kgo.Lz4Compression()

// newClient is kgo.NewClient with clientOpts.
func newClient(opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append(opts, clientOpts...)...)
}

// tlsConfig trusts the CA certificates in caFile and presents the client
// certificate in certFile and keyFile when both are given.
func tlsConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	pemCerts, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCerts) {
		return nil, fmt.Errorf("no certificate in %s", caFile)
	}
	cfg := &tls.Config{RootCAs: roots}
	if certFile != "" || keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("reading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen payloads|produce|consume|e2e|produce-latency|first-produce|group-stable|commits|compaction|txn-produce|txn-e2e|share-ack|share-lock-expiry [flags]")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:9092", "broker")
	topic := fs.String("topic", "", "topic")
	partitions := fs.Int("partitions", 1, "partitions of the topic to create")
	records := fs.Int("records", 100000, "records to produce or consume")
	acks := fs.String("acks", "all", "1 or all")
	payloadFile := fs.String("payloads", "", "newline-separated payloads (from `loadgen payloads`)")
	out := fs.String("out", "", "payload file to write")
	n := fs.Int("n", 10000, "distinct payloads")
	size := fs.Int("size", 1024, "payload size in bytes")
	seed := fs.Uint64("seed", 1, "payload generator seed")
	rate := fs.Int("rate", 1000, "records per second (e2e)")
	duration := fs.Duration("duration", 20*time.Second, "how long to produce (e2e) or commit (commits)")
	timeout := fs.Duration("timeout", 3*time.Minute, "bound on the whole mode")
	group := fs.String("group", "", "consumer group (group-stable, commits) or share group (share-ack)")
	members := fs.Int("members", 30, "group members, one client each (group-stable)")
	protocol := fs.String("protocol", "classic", "group protocol: classic or consumer (KIP-848) (group-stable)")
	committers := fs.Int("committers", 1, "concurrent committers, one client each (commits)")
	partitionsEach := fs.Int("partitions-each", 3, "partitions in each committer's OffsetCommit (commits)")
	keys := fs.Int("keys", 10000, "distinct keys (compaction)")
	perTxn := fs.Int("per-txn", 100, "records per transaction (txn-produce, txn-e2e)")
	tlsCA := fs.String("tls-ca", "", "PEM file of the CA certificates to trust: connect over TLS")
	tlsCert := fs.String("tls-cert", "", "PEM client certificate chain (mTLS; with -tls-key)")
	tlsKey := fs.String("tls-key", "", "PEM client private key (mTLS; with -tls-cert)")
	maxRecords := fs.Int("max-records", 500, "records a share consumer's poll returns at most (share-ack)")
	samples := fs.Int("samples", 3, "measurements (share-lock-expiry)")
	lock := fs.Duration("lock", 10*time.Second, "the brokers' group.share.record.lock.duration.ms (share-lock-expiry)")
	create := fs.Bool("create", true, "create the topic first (produce, e2e, produce-latency)")
	compression := fs.String("compression", "lz4", "what producers compress with: lz4 or none")
	_ = fs.Parse(os.Args[2:])
	switch *compression {
	case "lz4":
	case "none":
		produceCodec = kgo.NoCompression()
	default:
		fmt.Fprintln(os.Stderr, "loadgen: -compression must be lz4 or none")
		os.Exit(2)
	}
	if *tlsCA != "" {
		cfg, err := tlsConfig(*tlsCA, *tlsCert, *tlsKey)
		if err != nil {
			fmt.Fprintln(os.Stderr, "loadgen:", err)
			os.Exit(2)
		}
		clientOpts = append(clientOpts, kgo.DialTLSConfig(cfg))
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	var res any
	var err error
	switch mode {
	case "payloads":
		res, err = writePayloads(*out, *n, *size, *seed)
	case "produce":
		res, err = produce(ctx, *bootstrap, *topic, *partitions, *records, *acks, *payloadFile, *create)
	case "consume":
		res, err = consume(ctx, *bootstrap, *topic, *records)
	case "e2e":
		res, err = endToEnd(ctx, *bootstrap, *topic, *partitions, *rate, *duration, *payloadFile, *create)
	case "produce-latency":
		res, err = produceLatency(ctx, *bootstrap, *topic, *partitions, *rate, *duration, *payloadFile, *create)
	case "first-produce":
		res, err = firstProduce(ctx, *bootstrap, *topic)
	case "group-stable":
		res, err = groupStable(ctx, *bootstrap, *topic, *group, *members, *partitions, *protocol)
	case "commits":
		res, err = commits(ctx, *bootstrap, *topic, *group, *committers, *partitionsEach, *duration)
	case "compaction":
		res, err = compaction(ctx, *bootstrap, *topic, *records, *keys, *size, *rate)
	case "txn-produce":
		res, err = txnProduce(ctx, *bootstrap, *topic, *partitions, *records, *perTxn, *payloadFile)
	case "txn-e2e":
		res, err = txnEndToEnd(ctx, *bootstrap, *topic, *partitions, *rate, *perTxn, *duration, *payloadFile)
	case "share-ack":
		res, err = shareAck(ctx, *bootstrap, *topic, *group, *records, *maxRecords)
	case "share-lock-expiry":
		res, err = shareLockExpiry(ctx, *bootstrap, *topic, *samples, *lock)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen "+mode+":", err)
		os.Exit(1)
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// vocabulary for payloads that look like application events: repeated
// field names and a limited set of words compress, ids and numbers do not,
// which lands lz4 near 2:1 as on typical JSON event streams.
var (
	events = []string{"page_view", "add_to_cart", "checkout", "search", "login", "logout", "click", "scroll", "purchase", "refund"}
	words  = strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu north south east west red green blue amber slate")
)

func payload(r *rand.Rand, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"ts":%d,"user":"u-%07d","session":"%016x","event":%q,"path":"/p/%d/%s","latency_ms":%d,"tags":[`,
		1_700_000_000_000+r.Int64N(100_000_000_000), r.IntN(10_000_000), r.Uint64(), events[r.IntN(len(events))],
		r.IntN(100000), words[r.IntN(len(words))], r.IntN(5000))
	for b.Len() < size-40 {
		if r.IntN(3) == 0 {
			fmt.Fprintf(&b, `"%s-%x",`, words[r.IntN(len(words))], r.Uint32())
		} else {
			fmt.Fprintf(&b, `"%s",`, words[r.IntN(len(words))])
		}
	}
	fmt.Fprintf(&b, `"end"],"crc":"%08x"}`, r.Uint32())
	p := b.Bytes()
	for len(p) < size {
		p = append(p, ' ')
	}
	return p[:size]
}

type payloadReport struct {
	File     string  `json:"file"`
	Count    int     `json:"count"`
	Size     int     `json:"size"`
	LZ4Ratio float64 `json:"lz4_ratio"` // over 16 KiB blocks, as in a producer batch
}

func writePayloads(path string, n, size int, seed uint64) (payloadReport, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var all bytes.Buffer
	seen := map[string]bool{}
	for i := 0; i < n; i++ {
		p := payload(r, size)
		if seen[string(p)] {
			i--
			continue
		}
		seen[string(p)] = true
		all.Write(p)
		all.WriteByte('\n')
	}
	if err := os.WriteFile(path, all.Bytes(), 0o644); err != nil {
		return payloadReport{}, err
	}
	raw := bytes.ReplaceAll(all.Bytes(), []byte("\n"), nil)
	var in, outN int
	dst := make([]byte, lz4.CompressBlockBound(16384))
	for off := 0; off < len(raw); off += 16384 {
		block := raw[off:min(off+16384, len(raw))]
		c, err := lz4.CompressBlock(block, dst, nil)
		if err != nil {
			return payloadReport{}, err
		}
		if c == 0 {
			c = len(block) // incompressible
		}
		in += len(block)
		outN += c
	}
	return payloadReport{File: path, Count: n, Size: size, LZ4Ratio: float64(in) / float64(outN)}, nil
}

func readPayloads(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var ps [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		ps = append(ps, append([]byte(nil), sc.Bytes()...))
	}
	if len(ps) == 0 {
		return nil, errors.New("no payloads in " + path)
	}
	return ps, sc.Err()
}

func producerOpts(bootstrap, acks string) []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ProducerBatchCompression(produceCodec),
		kgo.ProducerLinger(5 * time.Millisecond), kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedRecords(100_000)}
	if acks == "1" {
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	} else {
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	return opts
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, partitions int) error {
	return createTopicWith(ctx, cl, topic, partitions, nil)
}

type throughput struct {
	Records       int     `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	MBPerSec      float64 `json:"mb_per_sec"` // MiB of payload per second, as the perf tools print
	// EndedUnixNanos is when produce had the last acknowledgement.
	EndedUnixNanos int64 `json:"ended_unix_nanos,omitempty"`
	// FirstRecordMs is how long consume waited for its first record,
	// from its first poll (its clock's start).
	FirstRecordMs float64 `json:"first_record_ms,omitempty"`
}

func newThroughput(n int, bytes int64, d time.Duration) throughput {
	s := d.Seconds()
	return throughput{Records: n, Bytes: bytes, Seconds: s, RecordsPerSec: float64(n) / s, MBPerSec: float64(bytes) / s / (1 << 20)}
}

func produce(ctx context.Context, bootstrap, topic string, partitions, n int, acks, payloadFile string, create bool) (throughput, error) {
	payloads, err := readPayloads(payloadFile)
	if err != nil {
		return throughput{}, err
	}
	cl, err := newClient(append(producerOpts(bootstrap, acks), kgo.DefaultProduceTopic(topic))...)
	if err != nil {
		return throughput{}, err
	}
	defer cl.Close()
	if create {
		if err := createTopic(ctx, cl, topic, partitions); err != nil {
			return throughput{}, err
		}
	}
	// Warm up metadata and the producer id before the clock starts.
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: payloads[0]}).FirstErr(); err != nil {
		return throughput{}, fmt.Errorf("warm-up produce: %w", err)
	}
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	var bytes int64
	start := time.Now()
	for i := 0; i < n; i++ {
		p := payloads[i%len(payloads)]
		bytes += int64(len(p))
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Value: p}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	ended := time.Now()
	d := ended.Sub(start)
	if e := failed.Load(); e != nil {
		return throughput{}, fmt.Errorf("produce: %w", *e)
	}
	res := newThroughput(n, bytes, d)
	res.EndedUnixNanos = ended.UnixNano()
	return res, nil
}

func consume(ctx context.Context, bootstrap, topic string, n int) (throughput, error) {
	cl, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
	if err != nil {
		return throughput{}, err
	}
	defer cl.Close()
	var got int
	var bytes int64
	var first time.Duration
	start := time.Now()
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return throughput{}, fmt.Errorf("consumed %d of %d: %w", got, n, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return throughput{}, fmt.Errorf("fetch: %w", ferr)
		}
		if got == 0 && !fs.Empty() {
			first = time.Since(start)
		}
		fs.EachRecord(func(r *kgo.Record) {
			got++
			bytes += int64(len(r.Value))
		})
	}
	res := newThroughput(got, bytes, time.Since(start))
	res.FirstRecordMs = float64(first) / float64(time.Millisecond)
	return res, nil
}

type latency struct {
	Records int     `json:"records"`
	Rate    int     `json:"rate"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p999_ms"`
	MaxMs   float64 `json:"max_ms"`
	// SentSeconds is how long produce-latency took to send every record
	// (its rate was kept if it is about records/rate).
	SentSeconds float64 `json:"sent_seconds,omitempty"`
}

// endToEnd produces at a fixed rate with acks=all and measures, in the
// same process (one clock), the time from Produce to the record arriving
// at a consumer that tails the topic.
func endToEnd(ctx context.Context, bootstrap, topic string, partitions, rate int, dur time.Duration, payloadFile string, create bool) (latency, error) {
	payloads, err := readPayloads(payloadFile)
	if err != nil {
		return latency{}, err
	}
	prod, err := newClient(append(producerOpts(bootstrap, "all"), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))...)
	if err != nil {
		return latency{}, err
	}
	defer prod.Close()
	if create {
		if err := createTopic(ctx, prod, topic, partitions); err != nil {
			return latency{}, err
		}
	}
	if err := prod.ProduceSync(ctx, &kgo.Record{Value: payloads[0]}).FirstErr(); err != nil {
		return latency{}, fmt.Errorf("warm-up produce: %w", err)
	}
	cons, err := newClient(kgo.SeedBrokers(bootstrap), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return latency{}, err
	}
	defer cons.Close()
	total := int(dur.Seconds() * float64(rate))
	done := tail(ctx, cons, total)
	interval := time.Second / time.Duration(rate)
	next := time.Now()
	var failed atomic.Pointer[error]
	for i := 0; i < total; i++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		prod.Produce(ctx, &kgo.Record{Value: stamped(payloads[i%len(payloads)], time.Now().UnixNano())}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	got := <-done
	if got.err != nil {
		return latency{}, got.err
	}
	if e := failed.Load(); e != nil {
		return latency{}, fmt.Errorf("produce: %w", *e)
	}
	return latencyOf(got.ms, rate), nil
}

// tailed is what tail delivers.
type tailed struct {
	ms  []float64 // sorted
	err error
}

// tail waits up to 2 s for cons to have its positions (so that nothing
// produced after it returns is missed), then consumes in a goroutine of
// its own until n records with a send time in their first 8 bytes (see
// stamped; 0 is none) have arrived, and delivers their latencies in
// milliseconds, or why they did not all arrive. Closing cons ends it.
func tail(ctx context.Context, cons *kgo.Client, n int) <-chan tailed {
	pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
	cons.PollFetches(pctx)
	pcancel()
	done := make(chan tailed, 1)
	go func() {
		lat := make([]float64, 0, n)
		for len(lat) < n {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				done <- tailed{err: fmt.Errorf("received %d of %d: %w", len(lat), n, ctx.Err())}
				return
			}
			now := time.Now().UnixNano()
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				done <- tailed{err: fmt.Errorf("fetch after %d of %d: %w", len(lat), n, ferr)}
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				if len(r.Value) >= 8 {
					if sent := int64(binary.BigEndian.Uint64(r.Value)); sent > 0 {
						lat = append(lat, float64(now-sent)/1e6)
					}
				}
			})
		}
		sort.Float64s(lat)
		done <- tailed{ms: lat}
	}()
	return done
}

// latencyOf summarises sorted latencies (ms), at least one.
func latencyOf(sorted []float64, rate int) latency {
	return latency{Records: len(sorted), Rate: rate, P50Ms: quantile(sorted, 0.50), P99Ms: quantile(sorted, 0.99),
		P999Ms: quantile(sorted, 0.999), MaxMs: sorted[len(sorted)-1]}
}

type firstAck struct {
	AckedUnixNanos int64 `json:"acked_unix_nanos"`
	Attempts       int   `json:"attempts"`
}

// firstProduce retries one produce (auto-creating the topic) until the
// broker acknowledges it, and reports when that happened. Backoffs are
// short (10 ms) so that the figure measures the broker, not the client's
// retry schedule.
func firstProduce(ctx context.Context, bootstrap, topic string) (firstAck, error) {
	attempts := 0
	for {
		attempts++
		cl, err := newClient(kgo.SeedBrokers(bootstrap), kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic(topic),
			kgo.RetryBackoffFn(func(int) time.Duration { return 10 * time.Millisecond }), kgo.MetadataMinAge(10*time.Millisecond),
			kgo.RecordDeliveryTimeout(5*time.Second), kgo.DialTimeout(time.Second))
		if err != nil {
			return firstAck{}, err
		}
		actx, cancel := context.WithTimeout(ctx, 6*time.Second)
		err = cl.ProduceSync(actx, &kgo.Record{Value: []byte("first")}).FirstErr()
		cancel()
		cl.Close()
		if err == nil {
			return firstAck{AckedUnixNanos: time.Now().UnixNano(), Attempts: attempts}, nil
		}
		if ctx.Err() != nil {
			return firstAck{}, fmt.Errorf("no produce acknowledged after %d attempts: %w", attempts, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
