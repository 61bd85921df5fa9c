package integration

import (
	"fmt"
	"strconv"
	"strings"
)

// Parsers for the stock tools' human-readable output. Each is small and
// has a unit test built from output captured from Apache Kafka 4.3.1.

// topicDescription is what `kafka-topics --describe` prints for one topic.
type topicDescription struct {
	Name              string
	TopicID           string
	PartitionCount    int
	ReplicationFactor int
	Configs           map[string]string
	Partitions        []partitionDescription
}

type partitionDescription struct {
	Partition int
	Leader    string
	Replicas  string
	Isr       string
}

// parseTopicDescribe parses TopicCommand --describe output, which is
// tab-separated "Key: value" pairs, one header line per topic and one
// line per partition.
func parseTopicDescribe(out string) (map[string]*topicDescription, error) {
	topics := map[string]*topicDescription{}
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		kv := tabPairs(line)
		name, ok := kv["Topic"]
		if !ok {
			continue
		}
		if _, isPart := kv["Partition"]; isPart {
			t := topics[name]
			if t == nil {
				return nil, fmt.Errorf("partition line before topic line for %s", name)
			}
			p, err := strconv.Atoi(kv["Partition"])
			if err != nil {
				return nil, fmt.Errorf("partition %q: %w", kv["Partition"], err)
			}
			t.Partitions = append(t.Partitions, partitionDescription{Partition: p, Leader: kv["Leader"], Replicas: kv["Replicas"], Isr: kv["Isr"]})
			continue
		}
		t := &topicDescription{Name: name, TopicID: kv["TopicId"], Configs: map[string]string{}}
		var err error
		if t.PartitionCount, err = strconv.Atoi(kv["PartitionCount"]); err != nil {
			return nil, fmt.Errorf("PartitionCount in %q: %w", line, err)
		}
		if t.ReplicationFactor, err = strconv.Atoi(kv["ReplicationFactor"]); err != nil {
			return nil, fmt.Errorf("ReplicationFactor in %q: %w", line, err)
		}
		for _, c := range strings.Split(kv["Configs"], ",") {
			if k, v, ok := strings.Cut(c, "="); ok {
				t.Configs[k] = v
			}
		}
		topics[name] = t
	}
	return topics, nil
}

// tabPairs splits "Key: value<TAB>Key: value" into a map.
func tabPairs(line string) map[string]string {
	kv := map[string]string{}
	for _, f := range strings.Split(line, "\t") {
		k, v, ok := strings.Cut(strings.TrimSpace(f), ":")
		if !ok {
			continue
		}
		kv[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return kv
}

// parseColumns parses a table whose first non-empty line (after skip lines
// that do not contain header) is a header of whitespace-separated column
// names, as printed by kafka-consumer-groups and kafka-transactions. Cells
// contain no spaces in these tools, so splitting on whitespace is exact.
func parseColumns(out, firstColumn string) []map[string]string {
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if fields[0] == firstColumn {
			header = fields
			continue
		}
		if header == nil || len(fields) != len(header) {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = fields[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// parseTabColumns parses the tab-separated tables of kafka-transactions,
// whose cells may be empty (TopicPartitions of a finished transaction).
func parseTabColumns(out, firstColumn string) []map[string]string {
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		cells := strings.Split(line, "\t")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if cells[0] == firstColumn {
			header = cells
			continue
		}
		if header == nil {
			continue
		}
		row := map[string]string{}
		for i, h := range header {
			if h != "" && i < len(cells) {
				row[h] = cells[i]
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// parseOffsets parses kafka-get-offsets lines "topic:partition:offset".
func parseOffsets(out string) (map[int]int64, error) {
	res := map[int]int64{}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		i := strings.LastIndex(line, ":")
		j := strings.LastIndex(line[:max(i, 0)], ":")
		if i < 0 || j < 0 {
			return nil, fmt.Errorf("unexpected get-offsets line %q", line)
		}
		p, err1 := strconv.Atoi(line[j+1 : i])
		o, err2 := strconv.ParseInt(line[i+1:], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unexpected get-offsets line %q", line)
		}
		res[p] = o
	}
	return res, nil
}

// configEntry is one line of kafka-configs --describe.
type configEntry struct {
	Value     string
	Sensitive bool
	Synonyms  string // the raw {SOURCE:key=value, ...} text
}

// parseConfigs parses kafka-configs --describe output: a heading line
// followed by "  key=value sensitive=bool synonyms={...}" lines.
func parseConfigs(out string) map[string]configEntry {
	res := map[string]configEntry{}
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, "  ") {
			continue
		}
		line = strings.TrimSpace(line)
		si := strings.LastIndex(line, " sensitive=")
		if si < 0 {
			continue
		}
		kv, rest := line[:si], line[si+len(" sensitive="):]
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		sens, syn, _ := strings.Cut(rest, " synonyms=")
		res[k] = configEntry{Value: v, Sensitive: sens == "true", Synonyms: syn}
	}
	return res
}

// dumpedBatch and dumpedRecord are what kafka-dump-log --print-data-log
// prints for a segment.
type dumpedBatch struct {
	BaseOffset, LastOffset int64
	Count                  int
	Valid                  bool
	Magic                  string
	Records                []dumpedRecord
}

type dumpedRecord struct {
	Offset       int64
	Key, Payload string
}

// parseDumpLog parses DumpLogSegments --print-data-log output.
func parseDumpLog(out string) ([]dumpedBatch, error) {
	var batches []dumpedBatch
	for _, line := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(line, "baseOffset: "):
			f := spacedPairs(line)
			b := dumpedBatch{Valid: f["isvalid"] == "true", Magic: f["magic"]}
			var err error
			if b.BaseOffset, err = strconv.ParseInt(f["baseOffset"], 10, 64); err != nil {
				return nil, fmt.Errorf("baseOffset in %q", line)
			}
			if b.LastOffset, err = strconv.ParseInt(f["lastOffset"], 10, 64); err != nil {
				return nil, fmt.Errorf("lastOffset in %q", line)
			}
			if b.Count, err = strconv.Atoi(f["count"]); err != nil {
				return nil, fmt.Errorf("count in %q", line)
			}
			batches = append(batches, b)
		case strings.HasPrefix(line, "| offset: "):
			if len(batches) == 0 {
				return nil, fmt.Errorf("record line before any batch: %q", line)
			}
			f := spacedPairs(strings.TrimPrefix(line, "| "))
			off, err := strconv.ParseInt(f["offset"], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("offset in %q", line)
			}
			r := dumpedRecord{Offset: off, Key: f["key"]}
			// The payload is last on the line and may contain spaces.
			if i := strings.Index(line, " payload: "); i >= 0 {
				r.Payload = line[i+len(" payload: "):]
			}
			last := &batches[len(batches)-1]
			last.Records = append(last.Records, r)
		}
	}
	return batches, nil
}

// spacedPairs splits "k: v k2: v2" where values have no spaces.
func spacedPairs(line string) map[string]string {
	res := map[string]string{}
	fields := strings.Fields(line)
	for i := 0; i+1 < len(fields); i++ {
		if strings.HasSuffix(fields[i], ":") {
			res[strings.TrimSuffix(fields[i], ":")] = fields[i+1]
			i++
		}
	}
	return res
}
