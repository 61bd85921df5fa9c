package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Apache Kafka's own verifiers (kafka-tools), run against the target.
const (
	mainClientCompat = "org.apache.kafka.tools.ClientCompatibilityTest"
	mainVerProducer  = "org.apache.kafka.tools.VerifiableProducer"
	mainVerConsumer  = "org.apache.kafka.tools.VerifiableConsumer"
	mainTxnCopier    = "org.apache.kafka.tools.TransactionalMessageCopier"
	mainCompaction   = "org.apache.kafka.tools.LogCompactionTester"
)

func verifierScenarios() []Scenario {
	pair := func(set, protocol string) Scenario {
		return Scenario{
			Name:    fmt.Sprintf("verify/produce-consume-%s-%s", protocol, set[strings.LastIndex(set, "-")+1:]),
			Doc:     fmt.Sprintf("VerifiableProducer (acks=-1, idempotent) then VerifiableConsumer (--group-protocol %s), %s jars; Apache's delivery rule", protocol, set),
			Timeout: 4 * time.Minute,
			Run: func(ctx context.Context, e *Env) error {
				return verifyProduceConsume(ctx, e, set, protocol)
			},
		}
	}
	return []Scenario{
		{Name: "verify/client-compatibility", Doc: "ClientCompatibilityTest on a fresh topic (describeCluster, configs, ACLs, idempotent produce, offsetsForTimes, KIP-74 fetch)", Run: verifyClientCompat},
		pair(SetKafka, "classic"),
		pair(SetKafka, "consumer"),
		pair(SetOldClients, "classic"),
		pair(SetNewClients, "classic"),
		{Name: "verify/transactional-copier", Doc: "TransactionalMessageCopier with random aborts; read_committed consumer sees every input value exactly once", Timeout: 5 * time.Minute, Run: verifyTxnCopier},
		{Name: "verify/log-compaction", Doc: "LogCompactionTester: last value per key survives, deletes honoured", Timeout: 5 * time.Minute, Run: verifyCompaction},
	}
}

func verifyClientCompat(ctx context.Context, e *Env) error {
	topic := e.Name("compat")
	if err := createTopic(ctx, e, topic, 1); err != nil {
		return err
	}
	// The test creates a topic called "newtopic" and insists it is new.
	if _, err := e.Kafka(ctx, mainTopics, "--delete", "--topic", "newtopic", "--if-exists"); err != nil {
		return fmt.Errorf("removing a leftover newtopic: %w", err)
	}
	out, err := e.Kafka(ctx, mainClientCompat, "--num-cluster-nodes", strconv.Itoa(len(e.Target.Topology().Brokers)), "--topic", topic,
		"--create-topics-supported", "true", "--offsets-for-times-supported", "true", "--cluster-id-supported", "true",
		"--expect-record-too-large-exception", "false", "--describe-acls-supported", "true",
		"--describe-configs-supported", "true", "--idempotent-producer-supported", "true")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "SUCCESS.") {
		return fmt.Errorf("ClientCompatibilityTest did not print SUCCESS.: %s", out.Tail())
	}
	return nil
}

// writeProps writes a client properties file into the scenario dir.
func writeProps(e *Env, name string, lines ...string) (string, error) {
	p := filepath.Join(e.Dir, name)
	return p, os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644)
}

// configFlag is how a verifiable client of a given release takes a
// properties file: 3.x only knows the per-client flag.
func configFlag(set, client string) string {
	if set == SetOldClients {
		return "--" + client + ".config"
	}
	return "--command-config"
}

func verifyProduceConsume(ctx context.Context, e *Env, set, protocol string) error {
	const n = 5000
	topic := e.Name("verifiable")
	if err := createTopic(ctx, e, topic, 3); err != nil {
		return err
	}
	acked, err := verifiableProduce(ctx, e, set, topic, n)
	if err != nil {
		return err
	}

	cprops, err := writeProps(e, "consumer.properties", "auto.offset.reset=earliest")
	if err != nil {
		return err
	}
	cargs := []string{"--bootstrap-server", e.Bootstrap(), "--topic", topic, "--group-id", e.Name("verifiable-group"),
		"--max-messages", fmt.Sprint(n), "--verbose", "--reset-policy", "earliest", configFlag(set, "consumer"), cprops}
	if set != SetOldClients {
		cargs = append(cargs, "--group-protocol", protocol)
	}
	// The consumer exits by itself after n records; if records are missing
	// it would wait forever, so the step timeout ends it and the check
	// below says what was missing.
	cout, cerr := e.Java(ctx, 90*time.Second, set, mainVerConsumer, cargs...)
	cev, err := ParseVerifiable(cout.Stdout)
	if err != nil {
		return err
	}
	if err := validateDelivery(acked, consumedValues(cev), true); err != nil {
		if cerr != nil {
			return fmt.Errorf("%w (consumer: %v)", err, cerr)
		}
		return err
	}
	var committed bool
	for _, ev := range cev {
		if ev.Name == "offsets_committed" && ev.Success != nil && *ev.Success {
			committed = true
		}
		if ev.Name == "offsets_committed" && ev.Success != nil && !*ev.Success {
			return fmt.Errorf("offset commit failed: %s", ev.Error)
		}
	}
	if !committed {
		return fmt.Errorf("VerifiableConsumer never committed offsets")
	}
	return nil
}

// verifiableProduce runs VerifiableProducer (idempotent, acks=-1) for n
// records to topic and returns the values it reports acknowledged, all n
// of them or an error.
func verifiableProduce(ctx context.Context, e *Env, set, topic string, n int) ([]string, error) {
	// VerifiableProducer defaults to retries=0, which idempotence refuses;
	// ducktape's config is the same as this one.
	pprops, err := writeProps(e, "producer.properties", "enable.idempotence=true", "retries=2147483647", "max.in.flight.requests.per.connection=5")
	if err != nil {
		return nil, err
	}
	pout, err := e.Java(ctx, 2*time.Minute, set, mainVerProducer, "--bootstrap-server", e.Bootstrap(), "--topic", topic,
		"--max-messages", fmt.Sprint(n), "--acks", "-1", "--repeating-keys", "101", configFlag(set, "producer"), pprops)
	if err != nil {
		return nil, fmt.Errorf("VerifiableProducer: %w", err)
	}
	pev, err := ParseVerifiable(pout.Stdout)
	if err != nil {
		return nil, err
	}
	acked, sendErr := ackedValues(pev)
	if sendErr != "" {
		return nil, fmt.Errorf("VerifiableProducer send error: %s", sendErr)
	}
	if len(acked) != n {
		return nil, fmt.Errorf("VerifiableProducer acked %d of %d", len(acked), n)
	}
	return acked, nil
}

func verifyTxnCopier(ctx context.Context, e *Env) error {
	const n = 3000
	in, out := e.Name("copier-in"), e.Name("copier-out")
	for _, t := range []string{in, out} {
		if err := createTopic(ctx, e, t, 1); err != nil {
			return err
		}
	}
	pprops, err := writeProps(e, "producer.properties", "enable.idempotence=true", "retries=2147483647")
	if err != nil {
		return err
	}
	pout, err := e.Java(ctx, 2*time.Minute, SetKafka, mainVerProducer, "--bootstrap-server", e.Bootstrap(), "--topic", in,
		"--max-messages", fmt.Sprint(n), "--acks", "-1", "--command-config", pprops)
	if err != nil {
		return fmt.Errorf("VerifiableProducer: %w", err)
	}
	pev, err := ParseVerifiable(pout.Stdout)
	if err != nil {
		return err
	}
	acked, sendErr := ackedValues(pev)
	if sendErr != "" || len(acked) != n {
		return fmt.Errorf("VerifiableProducer acked %d of %d (%s)", len(acked), n, sendErr)
	}
	cp, err := e.Java(ctx, 3*time.Minute, SetKafka, mainTxnCopier, "--broker-list", e.Bootstrap(), "--input-topic", in,
		"--input-partition", "0", "--output-topic", out, "--transactional-id", e.Name("copier"), "--transaction-size", "100",
		"--transaction-timeout", "30000", "--max-messages", fmt.Sprint(n), "--enable-random-aborts", "--use-group-metadata",
		"--consumer-group", e.Name("copier-group"))
	if err != nil {
		return fmt.Errorf("TransactionalMessageCopier: %w", err)
	}
	if !strings.Contains(cp.Stdout, `"stage":"ShutdownComplete"`) || !strings.Contains(cp.Stdout, `"remaining":0`) {
		return fmt.Errorf("copier did not finish: %s", cp.Tail())
	}
	cprops, err := writeProps(e, "consumer.properties", "isolation.level=read_committed", "auto.offset.reset=earliest")
	if err != nil {
		return err
	}
	cout, cerr := e.Java(ctx, 90*time.Second, SetKafka, mainVerConsumer, "--bootstrap-server", e.Bootstrap(), "--topic", out,
		"--group-id", e.Name("copier-check"), "--max-messages", fmt.Sprint(n), "--verbose", "--reset-policy", "earliest",
		"--command-config", cprops)
	cev, err := ParseVerifiable(cout.Stdout)
	if err != nil {
		return err
	}
	consumed := consumedValues(cev)
	// Exactly once: every input value, none twice, nothing else.
	if err := validateDelivery(acked, consumed, true); err != nil {
		if cerr != nil {
			return fmt.Errorf("read_committed output: %w (consumer: %v)", err, cerr)
		}
		return fmt.Errorf("read_committed output: %w", err)
	}
	if len(consumed) != n {
		return fmt.Errorf("read_committed output has %d records, want %d", len(consumed), n)
	}
	return nil
}

func verifyCompaction(ctx context.Context, e *Env) error {
	// --sleep is in seconds in 4.3.1; the cleaner may or may not run in
	// that time: the check (last value per key, deletes honoured) holds
	// either way.
	out, err := e.Java(ctx, 4*time.Minute, SetKafka, mainCompaction, "--bootstrap-server", e.Bootstrap(),
		"--messages", "20000", "--duplicates", "5", "--percent-deletes", "10", "--sleep", "5", "--topics", "2")
	if err != nil {
		return err
	}
	if !strings.Contains(out.Stdout, "Data verification is completed") || !strings.Contains(out.Stdout, " 0 mismatches") {
		return fmt.Errorf("LogCompactionTester: %s", out.Tail())
	}
	return nil
}
