package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

func checkKafkaGo(ctx context.Context, bootstrap, topic, group string, count int) (report, error) {
	var rep report
	client := &kafka.Client{Addr: kafka.TCP(seeds(bootstrap)...), Timeout: 30 * time.Second}
	cres, err := client.CreateTopics(ctx, &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{Topic: topic, NumPartitions: 3, ReplicationFactor: 1}}})
	if err != nil {
		return rep, fmt.Errorf("create topic: %w", err)
	}
	if err := cres.Errors[topic]; err != nil {
		return rep, fmt.Errorf("create topic: %w", err)
	}

	w := &kafka.Writer{Addr: kafka.TCP(seeds(bootstrap)...), Topic: topic, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		Compression: compress.Lz4, BatchTimeout: 10 * time.Millisecond}
	want := values(count)
	msgs := make([]kafka.Message, count)
	for i := range msgs {
		msgs[i] = kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%10)), Value: []byte(want[i])}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		w.Close()
		return rep, fmt.Errorf("produce: %w", err)
	}
	rep.Produced = count
	if err := w.Close(); err != nil {
		return rep, fmt.Errorf("closing writer: %w", err)
	}

	r := kafka.NewReader(kafka.ReaderConfig{Brokers: seeds(bootstrap), GroupID: group, Topic: topic,
		StartOffset: kafka.FirstOffset, MaxWait: 500 * time.Millisecond})
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var got []string
	for len(got) < count {
		m, err := r.FetchMessage(rctx)
		if err != nil {
			r.Close()
			return rep, fmt.Errorf("consumed %d of %d: %w", len(got), count, err)
		}
		got = append(got, string(m.Value))
		if err := r.CommitMessages(rctx, m); err != nil {
			r.Close()
			return rep, fmt.Errorf("commit: %w", err)
		}
	}
	if err := r.Close(); err != nil {
		return rep, fmt.Errorf("closing reader: %w", err)
	}
	rep.Consumed = len(got)
	if err := sameValues(got, want); err != nil {
		return rep, err
	}

	groups, err := client.ListGroups(ctx, &kafka.ListGroupsRequest{})
	if err != nil {
		return rep, fmt.Errorf("list groups: %w", err)
	}
	for _, g := range groups.Groups {
		rep.GroupListed = rep.GroupListed || g.GroupID == group
	}
	offs, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: {0, 1, 2}}})
	if err != nil {
		return rep, fmt.Errorf("fetch offsets: %w", err)
	}
	if offs.Error != nil {
		return rep, fmt.Errorf("fetch offsets: %w", offs.Error)
	}
	for _, p := range offs.Topics[topic] {
		if p.Error != nil {
			return rep, fmt.Errorf("fetch offsets partition %d: %w", p.Partition, p.Error)
		}
		if p.CommittedOffset > 0 {
			rep.Committed += p.CommittedOffset
		}
	}
	desc, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
	if err != nil {
		return rep, fmt.Errorf("describe group: %w", err)
	}
	if len(desc.Groups) == 1 {
		if desc.Groups[0].Error != nil {
			return rep, fmt.Errorf("describe group: %w", desc.Groups[0].Error)
		}
		rep.GroupState = desc.Groups[0].GroupState
	}
	// Metadata through the low-level connection, as older kafka-go code does.
	conn, err := kafka.DialContext(ctx, "tcp", seeds(bootstrap)[0])
	if err != nil {
		return rep, fmt.Errorf("dial: %w", err)
	}
	defer conn.Close()
	parts, err := conn.ReadPartitions(topic)
	if err != nil {
		return rep, fmt.Errorf("read partitions: %w", err)
	}
	if len(parts) != 3 {
		return rep, fmt.Errorf("read partitions: %d, want 3", len(parts))
	}
	if _, _, err := net.SplitHostPort(parts[0].Leader.Host + ":" + strconv.Itoa(parts[0].Leader.Port)); err != nil {
		return rep, fmt.Errorf("leader address: %w", err)
	}
	return rep, nil
}
