package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// clientRecords is how many records each client check produces.
const clientRecords = 200

func clientScenarios() []Scenario {
	script := func(name, doc string, run func(ctx context.Context, e *Env, topic, group string) (Output, error)) Scenario {
		return Scenario{Name: name, Doc: doc, Timeout: 4 * time.Minute, Run: func(ctx context.Context, e *Env) error {
			topic, group := e.Name(strings.TrimPrefix(name, "client/")), e.Name(strings.TrimPrefix(name, "client/")+"-group")
			out, err := run(ctx, e, topic, group)
			if err != nil {
				return err
			}
			return checkClientReport(out.Stdout)
		}}
	}
	return []Scenario{
		{Name: "client/kcat", Doc: "kcat (librdkafka): metadata -L -J, keyed lz4 idempotent produce, -C read back, -G group consume with commit", Timeout: 4 * time.Minute, Run: clientKcat},
		script("client/confluent-kafka-python", "confluent-kafka (librdkafka): AdminClient create, idempotent lz4 produce, group consume + commit, list/describe groups",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runPython(ctx, e, "confluent_check.py", topic, group, clientRecords)
			}),
		script("client/confluent-kafka-python-consumer-protocol", "confluent-kafka (librdkafka) with group.protocol=consumer (KIP-848): produce, group consume + commit, the group described as a consumer group",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runPython(ctx, e, "confluent_check.py", topic, group, clientRecords, "consumer")
			}),
		script("client/kafka-python", "kafka-python: admin create, produce acks=all, group consume + commit, list groups, group offsets",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runPython(ctx, e, "kafka_python_check.py", topic, group, clientRecords)
			}),
		script("client/kafkajs", "kafkajs: admin create, idempotent produce, group consume + commit, list/describe groups, fetch offsets",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runNode(ctx, e, "kafkajs_check.js", topic, group, clientRecords)
			}),
		script("client/sarama", "sarama with config.Version = sarama.MaxVersion: cluster admin, idempotent lz4 produce, consumer group, admin offsets/describe",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runGoClient(ctx, e, "sarama", topic, group, clientRecords)
			}),
		script("client/kafka-go", "segmentio/kafka-go: Client.CreateTopics, Writer acks=all lz4, group Reader with commits, ListGroups/OffsetFetch/DescribeGroups",
			func(ctx context.Context, e *Env, topic, group string) (Output, error) {
				return runGoClient(ctx, e, "kafka-go", topic, group, clientRecords)
			}),
	}
}

// runPython runs a script of integration/clients/python in the harness's
// venv: SCRIPT BOOTSTRAP TOPIC GROUP COUNT [EXTRA...].
func runPython(ctx context.Context, e *Env, script, topic, group string, count int, extra ...string) (Output, error) {
	py, err := e.Tools.Python(ctx)
	if err != nil {
		return Output{}, err
	}
	args := append([]string{filepath.Join(e.Tools.Root, "integration", "clients", "python", script),
		e.Bootstrap(), topic, group, strconv.Itoa(count)}, extra...)
	return e.Exec(ctx, Cmd{Name: py, Args: args, Timeout: 3 * time.Minute})
}

// runNode runs a script of integration/clients/node with the pinned
// kafkajs: SCRIPT BOOTSTRAP TOPIC GROUP COUNT.
func runNode(ctx context.Context, e *Env, script, topic, group string, count int) (Output, error) {
	mods, err := e.Tools.NodeModules(ctx)
	if err != nil {
		return Output{}, err
	}
	return e.Exec(ctx, Cmd{Name: "node", Args: []string{filepath.Join(e.Tools.Root, "integration", "clients", "node", script),
		e.Bootstrap(), topic, group, strconv.Itoa(count)}, Env: []string{"NODE_PATH=" + mods}, Timeout: 3 * time.Minute})
}

// runGoClient runs one check of the goclients program (integration/clients/go).
func runGoClient(ctx context.Context, e *Env, client, topic, group string, count int) (Output, error) {
	bin, err := e.Tools.GoClients(ctx)
	if err != nil {
		return Output{}, err
	}
	return e.Exec(ctx, Cmd{Name: bin, Args: []string{client, e.Bootstrap(), topic, group, strconv.Itoa(count)}, Timeout: 3 * time.Minute})
}

// clientReport is the JSON line every client script prints on success.
type clientReport struct {
	Produced    int    `json:"produced"`
	Consumed    int    `json:"consumed"`
	Committed   int64  `json:"committed"`
	GroupListed bool   `json:"group_listed"`
	GroupState  string `json:"group_state"`
}

// checkClientReport re-checks, on the harness side, what the script says
// it saw, so that a script that exits 0 by mistake still fails.
func checkClientReport(stdout string) error {
	var line string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "{") {
			line = l
		}
	}
	var r clientReport
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return fmt.Errorf("client printed no JSON report (%v): %q", err, truncate(stdout, 300))
	}
	if r.Produced != clientRecords || r.Consumed != clientRecords || r.Committed != clientRecords || !r.GroupListed {
		return fmt.Errorf("client report %+v: want %d produced, consumed and committed, and the group listed", r, clientRecords)
	}
	if r.GroupState != "" && !strings.EqualFold(r.GroupState, "Empty") {
		return fmt.Errorf("group state after the consumer left is %q, want Empty", r.GroupState)
	}
	return nil
}

func clientKcat(ctx context.Context, e *Env) error {
	kcat, err := e.Tools.Kcat(ctx)
	if err != nil {
		return err
	}
	topic, group := e.Name("kcat"), e.Name("kcat-group")
	if err := createTopic(ctx, e, topic, 3); err != nil {
		return err
	}
	out, err := e.Exec(ctx, Cmd{Name: kcat, Args: []string{"-b", e.Bootstrap(), "-L", "-J", "-t", topic}, Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	var md struct {
		ControllerID int `json:"controllerid"`
		Brokers      []struct {
			ID   int    `json:"id"`
			Name string `json:"name"`
		} `json:"brokers"`
		Topics []struct {
			Topic      string            `json:"topic"`
			Partitions []json.RawMessage `json:"partitions"`
		} `json:"topics"`
	}
	if err := json.Unmarshal([]byte(out.Stdout), &md); err != nil {
		return fmt.Errorf("kcat -L -J: %w: %s", err, out.Tail())
	}
	// KRaft names a broker as the controller to clients (the quorum's
	// leader is not one of the brokers they can reach).
	want, got := map[int]string{}, map[int]string{}
	for _, b := range e.Target.Topology().Brokers {
		want[b.ID] = b.Addr
	}
	for _, b := range md.Brokers {
		got[b.ID] = b.Name
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(md.Brokers) != len(want) || want[md.ControllerID] == "" {
		return fmt.Errorf("kcat metadata: brokers %+v controller %d, want the brokers %v with one of them as controller", md.Brokers, md.ControllerID, want)
	}
	if len(md.Topics) != 1 || md.Topics[0].Topic != topic || len(md.Topics[0].Partitions) != 3 {
		return fmt.Errorf("kcat metadata for %s: %s", topic, truncate(out.Stdout, 300))
	}

	lines := keyedLines("kcat", clientRecords)
	if _, err := e.Exec(ctx, Cmd{Name: kcat, Args: []string{"-b", e.Bootstrap(), "-t", topic, "-P", "-K:", "-X", "enable.idempotence=true",
		"-X", "compression.codec=lz4", "-X", "linger.ms=5"}, Stdin: strings.Join(lines, "\n") + "\n", Timeout: time.Minute}); err != nil {
		return fmt.Errorf("kcat produce: %w", err)
	}
	out, err = e.Exec(ctx, Cmd{Name: kcat, Args: []string{"-b", e.Bootstrap(), "-t", topic, "-C", "-e", "-o", "beginning", "-q", "-f", "%k:%s\n"}, Timeout: time.Minute})
	if err != nil {
		return fmt.Errorf("kcat consume: %w", err)
	}
	if err := sameSet(nonEmptyLines(out.Stdout), lines); err != nil {
		return fmt.Errorf("kcat -C read back: %w", err)
	}
	out, err = e.Exec(ctx, Cmd{Name: kcat, Args: []string{"-b", e.Bootstrap(), "-G", group, "-X", "auto.offset.reset=earliest",
		"-c", strconv.Itoa(clientRecords), "-q", "-f", "%k:%s\n", topic}, Timeout: 90 * time.Second})
	if err != nil {
		return fmt.Errorf("kcat -G: %w", err)
	}
	if err := sameSet(nonEmptyLines(out.Stdout), lines); err != nil {
		return fmt.Errorf("kcat -G read: %w", err)
	}
	// kcat commits on close; the stock tool must see those offsets.
	offsets, raw, err := describeGroupOffsets(ctx, e, group, topic)
	if err != nil {
		return err
	}
	var total int
	for _, row := range offsets {
		n, _ := strconv.Atoi(row["CURRENT-OFFSET"])
		total += n
	}
	if total != clientRecords {
		return fmt.Errorf("kcat group committed %d offsets in total, want %d: %s", total, clientRecords, truncate(raw, 300))
	}
	return nil
}

func nonEmptyLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return slices.Clip(out)
}
