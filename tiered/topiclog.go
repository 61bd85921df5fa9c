package tiered

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MetadataTopicName is Kafka's remote log metadata topic.
const MetadataTopicName = "__remote_log_metadata"

// TopicLogOptions configure a TopicLog (Kafka's rlmm.config.remote.log.metadata.* keys).
type TopicLogOptions struct {
	// Seeds are brokers to bootstrap from (this broker's own listener).
	Seeds []string
	// Dial connects to a broker as the listener asks (TLS, SASL).
	Dial     func(ctx context.Context, addr string) (net.Conn, error)
	ClientID string
	// Partitions, ReplicationFactor and RetentionMs are what the topic is
	// created with: remote.log.metadata.topic.num.partitions (50),
	// .replication.factor (3) and .retention.ms (-1).
	Partitions        int32
	ReplicationFactor int16
	RetentionMs       int64
	Logger            *slog.Logger
}

// TopicLog is __remote_log_metadata on the cluster, produced to and read
// with a Kafka client inside the broker, as Kafka's
// TopicBasedRemoteLogMetadataManager does with its producer and consumer:
// the metadata partitions a broker follows need not be on it.
type TopicLog struct {
	opts TopicLogOptions
	cl   *kgo.Client
}

// NewTopicLog makes the client; nothing is dialled before it is used.
func NewTopicLog(opts TopicLogOptions) (*TopicLog, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	kopts := []kgo.Opt{
		kgo.SeedBrokers(opts.Seeds...),
		kgo.ClientID(opts.ClientID),
		kgo.WithLogger(kgoLogger{opts.Logger}),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.DefaultProduceTopic(MetadataTopicName),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
		// Kafka's manager produces uncompressed records.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	}
	if opts.Dial != nil {
		dial := opts.Dial
		kopts = append(kopts, kgo.Dialer(func(ctx context.Context, _, host string) (net.Conn, error) { return dial(ctx, host) }))
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("the client of %s: %w", MetadataTopicName, err)
	}
	return &TopicLog{opts: opts, cl: cl}, nil
}

func (t *TopicLog) Partitions() int32 { return t.opts.Partitions }

// Init creates the topic with Kafka's configs for it, or checks that the
// topic there has the configured partition count (Kafka's manager will
// not start with another either: the partitioner depends on it).
func (t *TopicLog) Init(ctx context.Context) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = MetadataTopicName, t.opts.Partitions, t.opts.ReplicationFactor
	for _, kv := range [][2]string{
		{"retention.ms", strconv.FormatInt(t.opts.RetentionMs, 10)},
		{"cleanup.policy", "delete"},
		{"remote.storage.enable", "false"},
	} {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		v := kv[1]
		c.Name, c.Value = kv[0], &v
		topic.Configs = append(topic.Configs, c)
	}
	req.Topics = append(req.Topics, topic)
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return fmt.Errorf("creating %s: %w", MetadataTopicName, err)
	}
	if len(resp.Topics) != 1 {
		return fmt.Errorf("creating %s: %d answers", MetadataTopicName, len(resp.Topics))
	}
	created := resp.Topics[0]
	switch err := kerr.ErrorForCode(created.ErrorCode); {
	case err == nil:
		t.opts.Logger.Info("created the remote log metadata topic", "topic", MetadataTopicName, "partitions", t.opts.Partitions,
			"replication_factor", t.opts.ReplicationFactor)
		t.warnFewReplicas(ctx)
		return nil
	case errors.Is(err, kerr.TopicAlreadyExists):
	case errors.Is(err, kerr.InvalidReplicationFactor):
		msg := ""
		if created.ErrorMessage != nil {
			msg = *created.ErrorMessage
		}
		return fmt.Errorf("creating %s with replication factor %d: %w (%s); set rlmm.config.remote.log.metadata.topic.replication.factor to at most the brokers there are",
			MetadataTopicName, t.opts.ReplicationFactor, err, msg)
	default:
		return fmt.Errorf("creating %s: %w", MetadataTopicName, err)
	}
	meta := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	name := MetadataTopicName
	mt.Topic = &name
	meta.Topics = append(meta.Topics, mt)
	mresp, err := meta.RequestWith(ctx, t.cl)
	if err != nil {
		return fmt.Errorf("describing %s: %w", MetadataTopicName, err)
	}
	if len(mresp.Topics) != 1 || mresp.Topics[0].ErrorCode != 0 {
		return fmt.Errorf("describing %s: not found", MetadataTopicName)
	}
	if n := int32(len(mresp.Topics[0].Partitions)); n != t.opts.Partitions {
		return fmt.Errorf("%s has %d partitions but remote.log.metadata.topic.num.partitions is %d: records would be looked for in the wrong partitions",
			MetadataTopicName, n, t.opts.Partitions)
	}
	return nil
}

// warnFewReplicas warns when the topic has fewer replicas than it could
// have (up to 3): a broker that holds the only copies of a metadata
// partition takes the remote segments it names with it when it loses its
// disk.
func (t *TopicLog) warnFewReplicas(ctx context.Context) {
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, t.cl)
	if err != nil {
		return
	}
	if brokers := len(resp.Brokers); int(t.opts.ReplicationFactor) < min(brokers, 3) {
		t.opts.Logger.Warn("__remote_log_metadata has fewer replicas than the cluster could give it: a broker that loses its disk loses the remote segments its partitions name",
			"replication_factor", t.opts.ReplicationFactor, "brokers", brokers,
			"key", "rlmm.config.remote.log.metadata.topic.replication.factor")
	}
}

// Append produces value to partition with acks=all.
func (t *TopicLog) Append(ctx context.Context, partition int32, value []byte) (int64, error) {
	r, err := t.cl.ProduceSync(ctx, &kgo.Record{Topic: MetadataTopicName, Partition: partition, Value: value}).First()
	if err != nil {
		return 0, err
	}
	return r.Offset, nil
}

// EndOffsets lists the partitions' end offsets.
func (t *TopicLog) EndOffsets(ctx context.Context, partitions []int32) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = MetadataTopicName
	for _, p := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	// The client sends each partition's part to its leader.
	resp, err := req.RequestWith(ctx, t.cl)
	if err != nil {
		return nil, err
	}
	ends := make(map[int32]int64, len(partitions))
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return nil, fmt.Errorf("partition %d: %w", rp.Partition, err)
			}
			ends[rp.Partition] = rp.Offset
		}
	}
	for _, p := range partitions {
		if _, ok := ends[p]; !ok {
			return nil, fmt.Errorf("partition %d: no answer", p)
		}
	}
	return ends, nil
}

// Follow consumes the partitions from their start.
func (t *TopicLog) Follow(partitions []int32) {
	ps := make(map[int32]kgo.Offset, len(partitions))
	for _, p := range partitions {
		ps[p] = kgo.NewOffset().AtStart()
	}
	t.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{MetadataTopicName: ps})
}

// Poll returns the next records fetched.
func (t *TopicLog) Poll(ctx context.Context) ([]MetadataEntry, error) {
	fs := t.cl.PollFetches(ctx)
	if fs.IsClientClosed() {
		return nil, errors.New("the client is closed")
	}
	var errs []error
	fs.EachError(func(topic string, p int32, err error) {
		if !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			errs = append(errs, fmt.Errorf("%s partition %d: %w", topic, p, err))
		}
	})
	var out []MetadataEntry
	fs.EachRecord(func(r *kgo.Record) {
		out = append(out, MetadataEntry{Partition: r.Partition, Offset: r.Offset, Value: r.Value})
	})
	if len(out) == 0 && len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

func (t *TopicLog) Close() { t.cl.Close() }

// kgoLogger hands the client's warnings and errors to slog.
type kgoLogger struct{ l *slog.Logger }

func (k kgoLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (k kgoLogger) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	switch level {
	case kgo.LogLevelError:
		k.l.Error(msg, keyvals...)
	case kgo.LogLevelWarn:
		k.l.Warn(msg, keyvals...)
	}
}
