package integration

// Client quotas: kafka-configs on users, clients, their
// combination, their defaults and ips, and clients throttled to the
// quotas they are given.
//
// The target is shared with other scenarios, so every quota set here is
// on entities named for this run, and defaults are set to rates nobody
// reaches and deleted again before the scenario ends.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func quotaScenarios() []Scenario {
	return []Scenario{
		{Name: "cli/configs-quotas", Doc: "kafka-configs --alter/--describe/--delete-config of client quotas for clients, users+clients, user and client defaults and ips, with Kafka's output and its refusals", Run: cliConfigsQuotas},
		{Name: "cli/configs-quotas-users", Doc: "kafka-configs --describe of a user's quotas (the tool also asks DescribeUserScramCredentials)", Run: cliConfigsQuotasUsers},
		// The rates are measured over a minute each, on a node of their own
		// (beside the shared target's scenarios).
		onOwnNode(Scenario{Name: "quota/producer-byte-rate", Doc: "on a node of its own, a kgo producer with a fixed client.id asking for 1.25 times its producer_byte_rate=512 KiB/s achieves that rate within 10% (over four 11 s periods after the first)", Timeout: 3 * time.Minute, Run: quotaProducerByteRate}),
		onOwnNode(Scenario{Name: "quota/consumer-byte-rate", Doc: "on a node of its own, a kgo consumer with a fixed client.id asking for 1.25 times its consumer_byte_rate=256 KiB/s achieves that rate within 10% (over four 11 s periods after the first)", Timeout: 4 * time.Minute, Run: quotaConsumerByteRate}),
	}
}

// configsExpect runs kafka-configs and checks that its stdout is exactly
// the given lines, in any order (entities print in the order of a Java
// hash map of them). A --describe is asked again for up to 30 s: a
// broker's metadata follows the controller's commit.
func configsExpect(ctx context.Context, e *Env, want []string, args ...string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := configsExpectOnce(ctx, e, want, args...)
		if err == nil || args[0] != "--describe" || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
}

func configsExpectOnce(ctx context.Context, e *Env, want []string, args ...string) error {
	out, err := e.Kafka(ctx, mainConfigs, args...)
	if err != nil {
		return fmt.Errorf("kafka-configs %s: %w", strings.Join(args, " "), err)
	}
	var got []string
	for _, l := range strings.Split(out.Stdout, "\n") {
		if l = strings.TrimRight(l, "\r"); l != "" {
			got = append(got, l)
		}
	}
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("kafka-configs %s printed\n%s\nwant\n%s", strings.Join(args, " "), strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	return nil
}

// configsRefused runs kafka-configs, which must fail printing msg.
func configsRefused(ctx context.Context, e *Env, msg string, args ...string) error {
	out, err := e.Kafka(ctx, mainConfigs, args...)
	if err == nil {
		return fmt.Errorf("kafka-configs %s succeeded, want it refused with %q", strings.Join(args, " "), msg)
	}
	if !strings.Contains(out.Stdout+out.Stderr, msg) {
		return fmt.Errorf("kafka-configs %s: want %q in its output: %s", strings.Join(args, " "), msg, out.Tail())
	}
	return nil
}

func cliConfigsQuotas(ctx context.Context, e *Env) error {
	client := e.Name("quota-client")
	user := e.Name("quota-user")
	steps := []struct {
		want []string
		args []string
	}{
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"}},
		{[]string{"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0"},
			[]string{"--describe", "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Completed updating config for user " + user + "."},
			[]string{"--alter", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client, "--add-config", "request_percentage=50,controller_mutation_rate=10"}},
		{[]string{"Quota configs for user-principal '" + user + "', client-id '" + client + "' are controller_mutation_rate=10.0, request_percentage=50.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Quota configs for user-principal '" + user + "', client-id '" + client + "' are controller_mutation_rate=10.0, request_percentage=50.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-name", user, "--entity-type", "clients"}},
		// Defaults: rates no client of another scenario reaches.
		{[]string{"Completed updating default config for users in the cluster."},
			[]string{"--alter", "--entity-type", "users", "--entity-default", "--add-config", "producer_byte_rate=1000000000000"}},
		{[]string{"Completed updating default config for clients in the cluster."},
			[]string{"--alter", "--entity-type", "clients", "--entity-default", "--add-config", "consumer_byte_rate=1000000000000"}},
		{[]string{"Completed updating default config for users in the cluster."},
			[]string{"--alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=100000"}},
		{[]string{"Quota configs for the default user-principal are producer_byte_rate=1.0E12"},
			[]string{"--describe", "--entity-type", "users", "--entity-default"}},
		{[]string{"Quota configs for the default client-id are consumer_byte_rate=1.0E12"},
			[]string{"--describe", "--entity-type", "clients", "--entity-default"}},
		{[]string{"Quota configs for the default user-principal, the default client-id are request_percentage=100000.0"},
			[]string{"--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default"}},
		{[]string{
			"Quota configs for the default client-id are consumer_byte_rate=1.0E12",
			"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0",
		}, []string{"--describe", "--entity-type", "clients"}},
		{[]string{"Completed updating config for ip 127.0.0.1."},
			[]string{"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config", "connection_creation_rate=100000"}},
		{[]string{"Quota configs for ip '127.0.0.1' are connection_creation_rate=100000.0"},
			[]string{"--describe", "--entity-type", "ips", "--entity-name", "127.0.0.1"}},
		// --delete-config, one key and then the last.
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config", "producer_byte_rate"}},
		{[]string{"Quota configs for client-id '" + client + "' are consumer_byte_rate=2048.0"},
			[]string{"--describe", "--entity-type", "clients", "--entity-name", client}},
		{[]string{"Completed updating config for client " + client + "."},
			[]string{"--alter", "--entity-type", "clients", "--entity-name", client, "--delete-config", "consumer_byte_rate"}},
		{nil, []string{"--describe", "--entity-type", "clients", "--entity-name", client}},
	}
	for _, s := range steps {
		if err := configsExpect(ctx, e, s.want, s.args...); err != nil {
			return err
		}
	}
	// The broker's refusals, with Kafka's messages.
	for _, r := range []struct{ value, msg string }{
		{"producer_byte_rate=1.5", "InvalidRequestException: producer_byte_rate cannot be a fractional value."},
		{"producer_byte_rate=0", "InvalidRequestException: Quota producer_byte_rate must be greater than 0"},
		{"request_percentage=-1", "InvalidRequestException: Quota request_percentage must be greater than 0"},
		{"producer_byte_rate=1e30", "InvalidRequestException: Proposed value for producer_byte_rate is too large for a LONG."},
	} {
		if err := configsRefused(ctx, e, r.msg, "--alter", "--entity-type", "clients", "--entity-name", client, "--add-config", r.value); err != nil {
			return err
		}
	}
	if err := configsRefused(ctx, e, "InvalidRequestException: connection_creation_rate cannot be a fractional value.",
		"--alter", "--entity-type", "ips", "--entity-name", "127.0.0.1", "--add-config", "connection_creation_rate=2.5"); err != nil {
		return err
	}
	// Nothing refused was stored.
	if err := configsExpect(ctx, e, nil, "--describe", "--entity-type", "clients", "--entity-name", client); err != nil {
		return err
	}
	// Clean up: every default and the rest.
	for _, args := range [][]string{
		{"--entity-type", "users", "--entity-name", user, "--entity-type", "clients", "--entity-name", client, "--delete-config", "request_percentage,controller_mutation_rate"},
		{"--entity-type", "users", "--entity-default", "--delete-config", "producer_byte_rate"},
		{"--entity-type", "clients", "--entity-default", "--delete-config", "consumer_byte_rate"},
		{"--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default", "--delete-config", "request_percentage"},
		{"--entity-type", "ips", "--entity-name", "127.0.0.1", "--delete-config", "connection_creation_rate"},
	} {
		if _, err := e.Kafka(ctx, mainConfigs, append([]string{"--alter"}, args...)...); err != nil {
			return fmt.Errorf("cleaning up: %w", err)
		}
	}
	return configsExpect(ctx, e, nil, "--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients", "--entity-default")
}

// cliConfigsQuotasUsers describes one user's quotas: kafka-configs prints
// them and then asks for the user's SCRAM credentials
// (DescribeUserScramCredentials), printing nothing for a user without any.
func cliConfigsQuotasUsers(ctx context.Context, e *Env) error {
	user := e.Name("quota-user")
	if err := configsExpect(ctx, e, []string{"Completed updating config for user " + user + "."},
		"--alter", "--entity-type", "users", "--entity-name", user, "--add-config", "producer_byte_rate=4096"); err != nil {
		return err
	}
	if err := configsExpect(ctx, e, []string{"Quota configs for user-principal '" + user + "' are producer_byte_rate=4096.0"},
		"--describe", "--entity-type", "users", "--entity-name", user); err != nil {
		return err
	}
	if err := configsExpect(ctx, e, []string{"Completed updating config for user " + user + "."},
		"--alter", "--entity-type", "users", "--entity-name", user, "--delete-config", "producer_byte_rate"); err != nil {
		return err
	}
	return configsExpect(ctx, e, nil, "--describe", "--entity-type", "users", "--entity-name", user)
}

// Throttled clients ask for a quarter more than their quota, paced. A
// client starts with the window's allowance, quota * (samples-1)
// windows, which it may use at once; it can then go on only as its
// samples expire, samples windows after each began. So its rate is
// measured from the end of the first period of the window (quota.window.num
// samples of a second: 11 s) over four whole periods, where the
// allowance and the expiries even out.
const (
	quotaMeasureFrom = 11 * time.Second
	quotaMeasureEnd  = 55 * time.Second
	quotaDemand      = 1.25
	quotaRecordSize  = 1000
	// quotaRequestBytes bounds a throttled client's produce batches and
	// fetches.
	quotaRequestBytes = 16 << 10
)

// incompressible is n random bytes: quotas count the bytes on the wire,
// which a compressible value would make far fewer than the records'.
func incompressible(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

// setClientIDQuota sets (value > 0) or removes (value 0) one quota key of
// a client id.
func setClientIDQuota(ctx context.Context, e *Env, clientID, key string, value float64) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrAlterClientQuotasRequest()
	entry := kmsg.NewAlterClientQuotasRequestEntry()
	entry.Entity = []kmsg.AlterClientQuotasRequestEntryEntity{{Type: "client-id", Name: &clientID}}
	entry.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: key, Value: value, Remove: value == 0}}
	req.Entries = []kmsg.AlterClientQuotasRequestEntry{entry}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("AlterClientQuotas: %w", err)
	}
	for _, r := range resp.Entries {
		if r.ErrorCode != 0 {
			return fmt.Errorf("AlterClientQuotas: error %d %v", r.ErrorCode, r.ErrorMessage)
		}
	}
	// Brokers apply the quota once their metadata has it: wait until
	// every broker describes it so (DescribeClientQuotas answers from the
	// broker's own metadata).
	for _, b := range e.Target.Topology().Brokers {
		if err := awaitClientIDQuota(ctx, cl.Broker(b.ID), clientID, key, value); err != nil {
			return fmt.Errorf("broker %d (%s): %w", b.ID, b.Addr, err)
		}
	}
	return nil
}

// awaitClientIDQuota asks b for the quotas of clientID until key is value
// (absent for 0), for up to 30 s.
func awaitClientIDQuota(ctx context.Context, b *kgo.Broker, clientID, key string, value float64) error {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Strict = true
	req.Components = []kmsg.DescribeClientQuotasRequestComponent{{EntityType: "client-id", MatchType: kmsg.QuotasMatchTypeExact, Match: &clientID}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		var seen string
		resp, err := b.Request(ctx, req)
		if err == nil {
			r := resp.(*kmsg.DescribeClientQuotasResponse)
			got := 0.0
			for _, en := range r.Entries {
				for _, v := range en.Values {
					if v.Key == key {
						got = v.Value
					}
				}
			}
			if r.ErrorCode == 0 && got == value {
				return nil
			}
			seen = fmt.Sprintf("error %d, %s=%v", r.ErrorCode, key, got)
		} else {
			seen = err.Error()
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s=%v for client-id %s not described within 30 s; last: %s", key, value, clientID, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// rateMeter counts bytes over time.
type rateMeter struct {
	mu    sync.Mutex
	start time.Time
	bytes []struct {
		at time.Duration
		n  int
	}
}

func (m *rateMeter) add(n int) {
	m.mu.Lock()
	m.bytes = append(m.bytes, struct {
		at time.Duration
		n  int
	}{time.Since(m.start), n})
	m.mu.Unlock()
}

// rate is the bytes per second counted between from and to.
func (m *rateMeter) rate(from, to time.Duration) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for _, b := range m.bytes {
		if b.at >= from && b.at < to {
			total += b.n
		}
	}
	return float64(total) / (to - from).Seconds()
}

// quotaPace waits until a client that has moved done bytes since start
// is no further ahead than quotaDemand times its quota; false when ctx
// ends first.
func quotaPace(ctx context.Context, start time.Time, done int, quota float64) bool {
	ahead := time.Duration(float64(done)/(quotaDemand*quota)*float64(time.Second)) - time.Since(start)
	if ahead <= 0 {
		return true
	}
	select {
	case <-time.After(ahead):
		return true
	case <-ctx.Done():
		return false
	}
}

// checkQuotaRate checks the rate m counted between from and to against
// the quota.
func checkQuotaRate(e *Env, what string, m *rateMeter, from, to time.Duration, quota float64) error {
	got := m.rate(from, to)
	e.Notef("%s %.0f B/s against a quota of %.0f B/s (%+.1f%%)", what, got, quota, (got-quota)/quota*100)
	if math.Abs(got-quota) > quota/10 {
		var per []string
		for s := time.Duration(0); s < to; s += time.Second {
			per = append(per, fmt.Sprintf("%.0f", m.rate(s, s+time.Second)))
		}
		return fmt.Errorf("%s achieved %.0f B/s, not within 10%% of its %.0f B/s quota; bytes per second: %s", what, got, quota, strings.Join(per, " "))
	}
	return nil
}

func quotaProducerByteRate(ctx context.Context, e *Env) error {
	const quota = 512 << 10
	topic := e.Name("quota-produce")
	clientID := e.Name("quota-producer")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	if err := setClientIDQuota(ctx, e, clientID, "producer_byte_rate", quota); err != nil {
		return err
	}
	defer setClientIDQuota(context.Background(), e, clientID, "producer_byte_rate", 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(e.Bootstrap(), ",")...), kgo.ClientID(clientID),
		kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(2000), kgo.ProducerBatchCompression(kgo.NoCompression()),
		// Small requests, one at a time: each moves the measured rate
		// little, so the throttles hold the client close to its quota.
		kgo.ProducerBatchMaxBytes(quotaRequestBytes), kgo.MaxProduceRequestsInflightPerBroker(1))
	if err != nil {
		return err
	}
	defer cl.Close()
	m := &rateMeter{start: time.Now()}
	value := incompressible(quotaRecordSize)
	var failed error
	var failMu sync.Mutex
	pctx, stop := context.WithTimeout(ctx, quotaMeasureEnd)
	defer stop()
	for sent := 0; pctx.Err() == nil; sent += len(value) {
		if !quotaPace(pctx, m.start, sent, quota) {
			break
		}
		cl.Produce(pctx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
			if err != nil {
				if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					failMu.Lock()
					failed = err
					failMu.Unlock()
				}
				return
			}
			m.add(len(r.Value))
		})
	}
	failMu.Lock()
	defer failMu.Unlock()
	if failed != nil {
		return fmt.Errorf("producing: %w", failed)
	}
	return checkQuotaRate(e, "producer", m, quotaMeasureFrom, quotaMeasureEnd, quota)
}

func quotaConsumerByteRate(ctx context.Context, e *Env) error {
	const quota = 256 << 10
	topic := e.Name("quota-consume")
	clientID := e.Name("quota-consumer")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	// Enough records for the whole measurement at the quota, and more.
	seeds := strings.Split(e.Bootstrap(), ",")
	// Small batches: a fetch returns whole batches, so they are the
	// consumer's steps.
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(quotaRequestBytes))
	if err != nil {
		return err
	}
	n := int(2*quota*quotaMeasureEnd.Seconds()) / quotaRecordSize
	value := incompressible(quotaRecordSize)
	for i := 0; i < n; i += 1000 {
		batch := make([]*kgo.Record, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			batch = append(batch, &kgo.Record{Value: value})
		}
		if err := prod.ProduceSync(ctx, batch...).FirstErr(); err != nil {
			prod.Close()
			return fmt.Errorf("filling the topic: %w", err)
		}
	}
	prod.Close()
	if err := setClientIDQuota(ctx, e, clientID, "consumer_byte_rate", quota); err != nil {
		return err
	}
	defer setClientIDQuota(context.Background(), e, clientID, "consumer_byte_rate", 0)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID(clientID),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		// Small fetches: a fetch that would go over the quota is answered
		// empty, so a large one waits for the rate to fall well below the
		// quota before it gets through.
		kgo.FetchMaxBytes(quotaRequestBytes), kgo.FetchMaxPartitionBytes(quotaRequestBytes))
	if err != nil {
		return err
	}
	defer cl.Close()
	m := &rateMeter{start: time.Now()}
	cctx, stop := context.WithTimeout(ctx, quotaMeasureEnd)
	defer stop()
	consumed, consumedBytes := 0, 0
	for cctx.Err() == nil {
		if !quotaPace(cctx, m.start, consumedBytes, quota) {
			break
		}
		fetches := cl.PollFetches(cctx)
		for _, fe := range fetches.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return fmt.Errorf("consuming: %w", fe.Err)
			}
		}
		bytes := 0
		fetches.EachRecord(func(r *kgo.Record) { bytes += len(r.Value); consumed++ })
		if bytes > 0 {
			m.add(bytes)
			consumedBytes += bytes
		}
	}
	if consumed >= n {
		return fmt.Errorf("the consumer read all %d records before the end of the measurement", n)
	}
	return checkQuotaRate(e, "consumer", m, quotaMeasureFrom, quotaMeasureEnd, quota)
}
