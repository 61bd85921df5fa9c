package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// TargetRun is one `make compat` run against one target: the column it
// contributes to COMPAT.md.
type TargetRun struct {
	Target   string            `json:"target"`
	Describe string            `json:"describe"`
	Commit   string            `json:"commit"`
	Date     string            `json:"date"`
	Duration string            `json:"duration"`
	Versions map[string]string `json:"versions"`
	Results  []Result          `json:"results"`
	// Added lists later runs of a few scenarios merged into this column
	// (compat -run ... -add): scenarios written after the full run, whose
	// cells would otherwise say "not run" until the next full run.
	Added []AddedRun `json:"added,omitempty"`
}

// AddedRun is a run of a few scenarios merged into an earlier full run's
// column.
type AddedRun struct {
	Commit    string   `json:"commit"`
	Date      string   `json:"date"`
	Duration  string   `json:"duration"`
	Scenarios []string `json:"scenarios"`
}

// compatData is the machine-readable part of COMPAT.md, kept in an HTML
// comment at its end so that a run against one target can merge its column
// with the columns of earlier runs against the others.
type compatData struct {
	Runs map[string]TargetRun `json:"runs"`
}

const dataStart, dataEnd = "<!-- compat-data\n", "\n-->"

var targetOrder = []string{"gregor", "kafka", "gregor-cluster", "kafka-cluster", "gregor-cluster-split", "kafka-cluster-split", "external"}

// UpdateCompat merges run into the report at path (creating it if needed)
// and rewrites it. all gives the row order and each row's description.
func UpdateCompat(path string, all []Scenario, run TargetRun) error {
	data := compatData{Runs: map[string]TargetRun{}}
	if b, err := os.ReadFile(path); err == nil {
		old, err := parseCompatData(b)
		if err != nil {
			return fmt.Errorf("reading earlier results from %s: %w", path, err)
		}
		data = old
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	data.Runs[run.Target] = run
	return os.WriteFile(path, renderCompat(all, data), 0o644)
}

// AddToCompat merges the results of a run of a few scenarios into the
// target's existing column at path: their cells are replaced, the rest of
// the column and its full run's commit and date stay, and the Runs table
// says which scenarios were added at which commit. The column must exist:
// a partial run never stands for a target on its own.
func AddToCompat(path string, all []Scenario, target string, added AddedRun, results []Result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	data, err := parseCompatData(b)
	if err != nil {
		return fmt.Errorf("reading earlier results from %s: %w", path, err)
	}
	run, ok := data.Runs[target]
	if !ok {
		return fmt.Errorf("%s has no column for %s: run every scenario against it first", path, target)
	}
	byName := map[string]int{}
	for i, r := range run.Results {
		byName[r.Scenario] = i
	}
	for _, r := range results {
		if i, ok := byName[r.Scenario]; ok {
			run.Results[i] = r
		} else {
			run.Results = append(run.Results, r)
		}
		added.Scenarios = append(added.Scenarios, r.Scenario)
	}
	run.Added = append(run.Added, added)
	data.Runs[target] = run
	return os.WriteFile(path, renderCompat(all, data), 0o644)
}

func parseCompatData(b []byte) (compatData, error) {
	data := compatData{Runs: map[string]TargetRun{}}
	i := bytes.Index(b, []byte(dataStart))
	if i < 0 {
		return data, nil // hand-written or empty file: start over
	}
	rest := b[i+len(dataStart):]
	j := bytes.Index(rest, []byte(dataEnd))
	if j < 0 {
		return data, errors.New("unterminated compat-data comment")
	}
	if err := json.Unmarshal(rest[:j], &data); err != nil {
		return data, err
	}
	if data.Runs == nil {
		data.Runs = map[string]TargetRun{}
	}
	return data, nil
}

func renderCompat(all []Scenario, data compatData) []byte {
	var b bytes.Buffer
	var targets []string
	for _, t := range targetOrder {
		if _, ok := data.Runs[t]; ok {
			targets = append(targets, t)
		}
	}
	b.WriteString("# Compatibility report\n\n")
	b.WriteString("Written by `make compat TARGET=<target>` (`go run ./integration/cmd/compat`); each run replaces its own\n")
	b.WriteString("column and keeps the others. Do not edit by hand. `kafka` is Apache Kafka " + KafkaVersion + " started from\n")
	b.WriteString("Maven Central jars: a scenario is trusted only once it passes there.\n\n")

	b.WriteString("## Runs\n\n| target | what ran | commit | date (UTC) | duration | pass | fail | skip |\n|---|---|---|---|---|---|---|---|\n")
	for _, t := range targets {
		r := data.Runs[t]
		p, f, s := Summary(r.Results)
		what := r.Describe
		for _, a := range r.Added {
			what += fmt.Sprintf("; then %s at %s (%s, %s)", strings.Join(a.Scenarios, ", "), a.Commit, a.Date, a.Duration)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %d | %d |\n", t, cell(what), r.Commit, r.Date, r.Duration, p, f, s)
	}

	b.WriteString("\n## Results\n\n| scenario | checks |")
	for _, t := range targets {
		b.WriteString(" " + t + " |")
	}
	b.WriteString("\n|---|---|")
	for range targets {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	known := map[string]bool{}
	row := func(name, doc string) {
		fmt.Fprintf(&b, "| `%s` | %s |", name, cell(doc))
		for _, t := range targets {
			b.WriteString(" " + resultCell(data.Runs[t], name) + " |")
		}
		b.WriteString("\n")
	}
	for _, s := range all {
		known[s.Name] = true
		row(s.Name, s.Doc)
	}
	// Rows for scenarios that a column still mentions but that no longer
	// exist, so that nothing silently disappears from the report.
	var stale []string
	for _, t := range targets {
		for _, r := range data.Runs[t].Results {
			if !known[r.Scenario] {
				known[r.Scenario] = true
				stale = append(stale, r.Scenario)
			}
		}
	}
	sort.Strings(stale)
	for _, n := range stale {
		row(n, "(scenario no longer exists)")
	}

	b.WriteString("\n## Where Gregor departs from Kafka\n\nWhere Kafka loses data (or memory), Gregor does what is right; each row names the test that holds it.\n\n| what | Kafka 4.3 | Gregor | proved by |\n|---|---|---|---|\n")
	for _, d := range departures() {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", cell(d.topic), cell(d.kafka), cell(d.gregor), cell(d.proof))
	}

	b.WriteString("\n## Share consumers (KIP-932) by client\n\nWhich of the clients above can consume from a share group in the version tested, and the scenarios that prove it against each target.\n\n| client | share consumer | proved by |\n|---|---|---|\n")
	for _, c := range shareClients() {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", cell(c.client), cell(c.consumer), cell(c.proof))
	}

	b.WriteString("\n## Tool versions\n")
	for _, t := range targets {
		r := data.Runs[t]
		fmt.Fprintf(&b, "\n**%s** (%s)\n\n", t, r.Date)
		keys := make([]string, 0, len(r.Versions))
		for k := range r.Versions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "- %s: %s\n", k, r.Versions[k])
		}
	}

	js, _ := json.MarshalIndent(data, "", " ")
	b.WriteString("\n" + dataStart)
	b.Write(js)
	b.WriteString(dataEnd + "\n")
	return b.Bytes()
}

func resultCell(run TargetRun, name string) string {
	for _, r := range run.Results {
		if r.Scenario != name {
			continue
		}
		note := ""
		if r.Note != "" {
			note = " [" + cell(r.Note) + "]"
		}
		switch r.Status {
		case Pass:
			return fmt.Sprintf("pass (%.0fs)%s", r.Elapsed.Seconds(), note)
		case Skip:
			return "skip: " + cell(r.Reason) + note
		default:
			return "**FAIL**: " + cell(truncate(r.Reason, 300)) + note
		}
	}
	return "not run"
}

// cell makes s safe inside a markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", "\\|")
}

// ReadNameList reads a file of names, one per line; blank lines and lines
// starting with # are ignored.
func ReadNameList(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var names []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		names = append(names, line)
	}
	return names, sc.Err()
}

// GitCommit is the repository's short commit (with +dirty) for reports.
func GitCommit(ctx context.Context, root string) string {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	return gitDescribe(ctx, root)
}

// shareClient is one row of the share consumers table.
type shareClient struct{ client, consumer, proof string }

// shareClients says which tested clients have a share consumer (KIP-932).
func shareClients() []shareClient {
	return []shareClient{
		{"Java 4.3.1 (kafka-clients)", "yes: KafkaShareConsumer, implicit and explicit acknowledgement, commitSync and commitAsync",
			"cli/share-console-consumers, cli/share-console-release (explicit, every record released to the delivery limit), cli/share-consumer-killed, cli/share-groups-offsets, cli/share-perf-test, verify/share-consumer (sync), verify/share-consumer-async, verify/share-consumer-auto"},
		{"franz-go v1.22.3", "yes: kgo.ShareGroup, Record.Ack (accept, release, reject, renew), FlushAcks",
			"kgo/suite (TestShareGroup*, TestConsumeRegexShareSkipsInternal in kgo-ALLOWLIST); integration/replication TestShareGroupSurvives*Kill; the fault campaign's share workload"},
		{"confluent-kafka 2.16.1 (librdkafka 2.16.0)", "yes, a preview there: ShareConsumer, explicit acknowledgement, commit_sync",
			"client/confluent-kafka-python-share"},
		{"kcat 1.7.1 (librdkafka 2.0.2)", "no", "–"},
		{"kafka-python 3.0.12", "no", "–"},
		{"kafkajs 2.2.4", "no", "–"},
		{"sarama v1.61.1, kafka-go v0.4.51", "no", "–"},
	}
}
