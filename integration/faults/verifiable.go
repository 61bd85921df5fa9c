package faults

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
)

// Apache Kafka's verifiable clients (kafka-tools 4.3.1).
const (
	mainVerifiableProducer = "org.apache.kafka.tools.VerifiableProducer"
	mainVerifiableConsumer = "org.apache.kafka.tools.VerifiableConsumer"
)

// Verifiable runs VerifiableProducer (idempotent, acks=all) and a
// VerifiableConsumer group member side by side against a cluster and
// turns what they print into a History, so that the same checker judges
// them.
type Verifiable struct {
	Tools     *integration.Tools
	Dir       string // for the clients' properties files and logs
	Bootstrap string
	Topic     string
	Group     string
	Messages  int // the producer sends values "0" .. Messages-1
	Rate      int // records a second
}

func (v *Verifiable) props(name string, lines ...string) (string, error) {
	p := filepath.Join(v.Dir, name)
	return p, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// StartConsumer starts the consumer in the background; its events go to
// the log file ConsumerLog names.
func (v *Verifiable) StartConsumer(ctx context.Context) (*integration.Proc, error) {
	cprops, err := v.props("consumer.properties", "auto.offset.reset=earliest", "isolation.level=read_uncommitted")
	if err != nil {
		return nil, err
	}
	cmd, err := v.Tools.JavaCmd(ctx, integration.SetKafka, mainVerifiableConsumer, "--bootstrap-server", v.Bootstrap,
		"--topic", v.Topic, "--group-id", v.Group, "--verbose", "--reset-policy", "earliest", "--command-config", cprops)
	if err != nil {
		return nil, err
	}
	return integration.Start(cmd, v.ConsumerLog())
}

// ConsumerLog is where the consumer's output goes.
func (v *Verifiable) ConsumerLog() string { return filepath.Join(v.Dir, "verifiable-consumer.log") }

// Produce runs the producer to the end (every send acknowledged or
// failed) and returns its output.
func (v *Verifiable) Produce(ctx context.Context) (string, error) {
	// VerifiableProducer defaults to retries=0, which idempotence refuses.
	pprops, err := v.props("producer.properties", "enable.idempotence=true", "retries=2147483647",
		"max.in.flight.requests.per.connection=5", "delivery.timeout.ms=120000")
	if err != nil {
		return "", err
	}
	cmd, err := v.Tools.JavaCmd(ctx, integration.SetKafka, mainVerifiableProducer, "--bootstrap-server", v.Bootstrap,
		"--topic", v.Topic, "--max-messages", strconv.Itoa(v.Messages), "--throughput", strconv.Itoa(v.Rate),
		"--acks", "-1", "--command-config", pprops)
	if err != nil {
		return "", err
	}
	cmd.Timeout = time.Duration(v.Messages/v.Rate)*time.Second + 5*time.Minute
	out, err := integration.Run(ctx, cmd)
	if err != nil {
		return out.Stdout, fmt.Errorf("VerifiableProducer: %w", err)
	}
	return out.Stdout, nil
}

// ProducerHistory adds the producer's sends to h: one invocation for
// every value it sends (they are numbered, in sending order), completed
// ok or info by its events.
func ProducerHistory(h *History, stdout string, messages int) error {
	events, err := integration.ParseVerifiable(stdout)
	if err != nil {
		return err
	}
	const process = "verifiable-producer"
	done := map[string]integration.VerifiableEvent{}
	for _, ev := range events {
		if (ev.Name == "producer_send_success" || ev.Name == "producer_send_error") && ev.Value != nil {
			done[*ev.Value] = ev
		}
	}
	for i := range messages {
		value := strconv.Itoa(i)
		h.Add(Op{Process: process, Type: Invoke, F: Send, Seq: int64(i), Value: value})
		ev, ok := done[value]
		switch {
		case !ok:
			h.Add(Op{Process: process, Type: Info, F: Send, Seq: int64(i), Value: value, Error: "no event for this value"})
		case ev.Name == "producer_send_success":
			h.Add(Op{Process: process, Type: OK, F: Send, Seq: int64(i), Value: value, Partition: ev.Partition, Offset: ev.Offset})
		default:
			h.Add(Op{Process: process, Type: Info, F: Send, Seq: int64(i), Value: value, Error: ev.Exception + ": " + ev.Message})
		}
	}
	return nil
}

// ConsumerHistory adds the consumer's events to h: assignments and
// revocations, each run of records between them as one poll, and its
// commits. It returns the values it consumed.
func ConsumerHistory(h *History, stdout, topic string) ([]string, error) {
	events, err := integration.ParseVerifiable(stdout)
	if err != nil {
		return nil, err
	}
	const process = "verifiable-consumer"
	var poll []Record
	var values []string
	flush := func() {
		if len(poll) > 0 {
			h.Add(Op{Process: process, Type: Invoke, F: Poll})
			h.Add(Op{Process: process, Type: OK, F: Poll, Records: poll})
			poll = nil
		}
	}
	partitions := func(ps []integration.VerifiablePartition, withOffsets bool) map[int32]int64 {
		m := map[int32]int64{}
		for _, p := range ps {
			if p.Topic == topic {
				m[p.Partition] = 0
				if withOffsets {
					m[p.Partition] = p.Offset
				}
			}
		}
		return m
	}
	for _, ev := range events {
		switch ev.Name {
		case "record_data":
			if ev.Value != nil && ev.Topic == topic {
				poll = append(poll, Record{Partition: ev.Partition, Offset: ev.Offset, Value: *ev.Value})
				values = append(values, *ev.Value)
			}
		case "partitions_assigned", "partitions_revoked":
			flush()
			f := Assign
			if ev.Name == "partitions_revoked" {
				f = Revoke
			}
			h.Add(Op{Process: process, Type: OK, F: f, Offsets: partitions(ev.Partitions, false)})
		case "offsets_committed":
			flush()
			offs := partitions(ev.Offsets, true)
			h.Add(Op{Process: process, Type: Invoke, F: Commit, Offsets: offs})
			t := OK
			if ev.Success == nil || !*ev.Success {
				t = Info
			}
			h.Add(Op{Process: process, Type: t, F: Commit, Offsets: offs, Error: ev.Error})
		}
	}
	flush()
	return values, nil
}
