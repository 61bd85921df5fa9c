package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// File names Kafka uses inside a log dir and inside a partition dir.
const (
	RecoveryPointCheckpointFile  = "recovery-point-offset-checkpoint"
	LogStartOffsetCheckpointFile = "log-start-offset-checkpoint"
	ReplicationCheckpointFile    = "replication-offset-checkpoint"
	MetaPropertiesFile           = "meta.properties"
	CleanShutdownFile            = ".kafka_cleanshutdown"
	LeaderEpochCheckpointFile    = "leader-epoch-checkpoint"
	PartitionMetadataFile        = "partition.metadata"
)

// checkpointVersion is the only version Kafka writes for the offset and
// leader-epoch checkpoint files.
const checkpointVersion = 0

// encodeOffsetCheckpoint renders Kafka's OffsetCheckpointFile format:
//
//	0
//	<count>
//	<topic> <partition> <offset>
//
// Entries are sorted so the file is deterministic (Kafka writes map order,
// readers do not care).
func encodeOffsetCheckpoint(offsets map[TopicPartition]int64) []byte {
	tps := make([]TopicPartition, 0, len(offsets))
	for tp := range offsets {
		tps = append(tps, tp)
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i].Topic != tps[j].Topic {
			return tps[i].Topic < tps[j].Topic
		}
		return tps[i].Partition < tps[j].Partition
	})
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(tps))
	for _, tp := range tps {
		fmt.Fprintf(&b, "%s %d %d\n", tp.Topic, tp.Partition, offsets[tp])
	}
	return b.Bytes()
}

// checkpointLines splits a checkpoint file into its entry lines after
// checking the version and count header, as Kafka's CheckpointReadBuffer does.
func checkpointLines(data []byte, fields int) ([][]string, error) {
	sc := bufio.NewScanner(bytes.NewReader(data))
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		return sc.Text(), true
	}
	line, ok := next()
	if !ok {
		return nil, errors.New("missing version line")
	}
	version, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return nil, fmt.Errorf("malformed version line %q", line)
	}
	if version != checkpointVersion {
		return nil, fmt.Errorf("unrecognised checkpoint version %d", version)
	}
	line, ok = next()
	if !ok {
		return nil, errors.New("missing count line")
	}
	count, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || count < 0 {
		return nil, fmt.Errorf("malformed count line %q", line)
	}
	out := make([][]string, 0, count)
	for {
		line, ok = next()
		if !ok {
			break
		}
		parts := strings.Fields(line)
		if len(parts) != fields {
			return nil, fmt.Errorf("malformed checkpoint line %q", line)
		}
		out = append(out, parts)
	}
	if len(out) != count {
		return nil, fmt.Errorf("checkpoint says %d entries but has %d", count, len(out))
	}
	return out, nil
}

func decodeOffsetCheckpoint(data []byte) (map[TopicPartition]int64, error) {
	lines, err := checkpointLines(data, 3)
	if err != nil {
		return nil, err
	}
	out := make(map[TopicPartition]int64, len(lines))
	for _, parts := range lines {
		p, err := strconv.ParseInt(parts[1], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("malformed partition %q", parts[1])
		}
		off, err := strconv.ParseInt(parts[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed offset %q", parts[2])
		}
		out[TopicPartition{Topic: parts[0], Partition: int32(p)}] = off
	}
	return out, nil
}

// readOffsetCheckpoint reads one of a log dir's offset checkpoint files. A
// missing file is an empty checkpoint (a new dir).
func readOffsetCheckpoint(fsys vfs.FS, name string) (map[TopicPartition]int64, error) {
	data, err := vfs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return map[TopicPartition]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	m, err := decodeOffsetCheckpoint(data)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", name, err)
	}
	return m, nil
}

func writeOffsetCheckpoint(fsys vfs.FS, name string, offsets map[TopicPartition]int64) error {
	if err := vfs.WriteFileAtomic(fsys, name, encodeOffsetCheckpoint(offsets)); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

// EpochEntry is one leader-epoch-checkpoint line: the first offset written
// in a leader epoch.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

func encodeEpochCheckpoint(entries []EpochEntry) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n", checkpointVersion, len(entries))
	for _, e := range entries {
		fmt.Fprintf(&b, "%d %d\n", e.Epoch, e.StartOffset)
	}
	return b.Bytes()
}

func decodeEpochCheckpoint(data []byte) ([]EpochEntry, error) {
	lines, err := checkpointLines(data, 2)
	if err != nil {
		return nil, err
	}
	out := make([]EpochEntry, 0, len(lines))
	for _, parts := range lines {
		epoch, err := strconv.ParseInt(parts[0], 10, 32)
		if err != nil {
			return nil, fmt.Errorf("malformed epoch %q", parts[0])
		}
		off, err := strconv.ParseInt(parts[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed offset %q", parts[1])
		}
		out = append(out, EpochEntry{Epoch: int32(epoch), StartOffset: off})
	}
	return out, nil
}

// encodePartitionMetadata renders partition.metadata exactly as Kafka's
// PartitionMetadata.encode: two lines, no trailing newline.
func encodePartitionMetadata(topicID [16]byte) []byte {
	return []byte("version: 0\ntopic_id: " + protocol.UUID(topicID).String())
}

func decodePartitionMetadata(data []byte) ([16]byte, error) {
	var id [16]byte
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 {
		return id, fmt.Errorf("partition.metadata has %d lines, want 2", len(lines))
	}
	version, ok := strings.CutPrefix(lines[0], "version: ")
	if !ok || strings.TrimSpace(version) != "0" {
		return id, fmt.Errorf("partition.metadata: unsupported version line %q", lines[0])
	}
	topicID, ok := strings.CutPrefix(lines[1], "topic_id: ")
	if !ok {
		return id, fmt.Errorf("partition.metadata: malformed topic_id line %q", lines[1])
	}
	return protocol.ParseUUID(strings.TrimSpace(topicID))
}

// MetaProperties is a log dir's meta.properties.
type MetaProperties struct {
	Version     int
	ClusterID   string
	NodeID      int32
	DirectoryID string
}

// ReadMetaProperties reads <dir>/meta.properties (Java properties syntax).
// Version 0 files (ZooKeeper era) name the node broker.id.
func ReadMetaProperties(fsys vfs.FS, dir string) (MetaProperties, error) {
	name := filepath.Join(dir, MetaPropertiesFile)
	data, err := vfs.ReadFile(fsys, name)
	if err != nil {
		return MetaProperties{}, fmt.Errorf("reading %s: %w", name, err)
	}
	props := parseJavaProperties(data)
	var mp MetaProperties
	v, ok := props["version"]
	if !ok {
		return mp, fmt.Errorf("%s: missing version", name)
	}
	if mp.Version, err = strconv.Atoi(v); err != nil || (mp.Version != 0 && mp.Version != 1) {
		return mp, fmt.Errorf("%s: unsupported version %q", name, v)
	}
	idKey := "node.id"
	if mp.Version == 0 {
		idKey = "broker.id"
	}
	id, ok := props[idKey]
	if !ok {
		return mp, fmt.Errorf("%s: missing %s", name, idKey)
	}
	n, err := strconv.ParseInt(id, 10, 32)
	if err != nil {
		return mp, fmt.Errorf("%s: malformed %s %q", name, idKey, id)
	}
	mp.NodeID = int32(n)
	mp.ClusterID = props["cluster.id"]
	mp.DirectoryID = props["directory.id"]
	if mp.DirectoryID != "" {
		if _, err := protocol.ParseUUID(mp.DirectoryID); err != nil {
			return mp, fmt.Errorf("%s: directory.id: %w", name, err)
		}
	}
	return mp, nil
}

// WriteMetaProperties writes <dir>/meta.properties the way Kafka's
// PropertiesUtils does (java.util.Properties.store with an empty comment:
// a "#" line, a date line, then key=value lines), atomically.
func WriteMetaProperties(fsys vfs.FS, dir string, mp MetaProperties) error {
	var b bytes.Buffer
	b.WriteString("#\n#" + time.Now().Format("Mon Jan 02 15:04:05 MST 2006") + "\n")
	idKey := "node.id"
	if mp.Version == 0 {
		idKey = "broker.id"
	}
	fmt.Fprintf(&b, "%s=%d\n", idKey, mp.NodeID)
	if mp.DirectoryID != "" {
		b.WriteString("directory.id=" + escapeJavaProperty(mp.DirectoryID) + "\n")
	}
	fmt.Fprintf(&b, "version=%d\n", mp.Version)
	if mp.ClusterID != "" {
		b.WriteString("cluster.id=" + escapeJavaProperty(mp.ClusterID) + "\n")
	}
	name := filepath.Join(dir, MetaPropertiesFile)
	if err := vfs.WriteFileAtomic(fsys, name, b.Bytes()); err != nil {
		return fmt.Errorf("writing %s: %w", name, err)
	}
	return nil
}

func escapeJavaProperty(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '=', ':', '#', '!', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// parseJavaProperties reads the subset of java.util.Properties syntax that
// meta.properties uses: comments, key=value or key:value, backslash escapes.
// Line continuations are not needed for these keys.
func parseJavaProperties(data []byte) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || line[0] == '#' || line[0] == '!' {
			continue
		}
		var key, value strings.Builder
		inValue, escaped := false, false
		for _, r := range line {
			switch {
			case escaped:
				escaped = false
			case r == '\\':
				escaped = true
				continue
			case !inValue && (r == '=' || r == ':'):
				inValue = true
				continue
			}
			if inValue {
				value.WriteRune(r)
			} else {
				key.WriteRune(r)
			}
		}
		out[strings.TrimSpace(key.String())] = strings.TrimSpace(value.String())
	}
	return out
}

// cleanShutdownContent is Kafka's CleanShutdownFileHandler JSON body.
type cleanShutdownContent struct {
	Version     int   `json:"version"`
	BrokerEpoch int64 `json:"brokerEpoch"`
}

func encodeCleanShutdown(brokerEpoch int64) []byte {
	b, _ := json.Marshal(cleanShutdownContent{Version: 0, BrokerEpoch: brokerEpoch})
	return b
}

func decodeCleanShutdown(data []byte) (int64, error) {
	var c cleanShutdownContent
	if err := json.Unmarshal(data, &c); err != nil {
		return 0, fmt.Errorf("parsing clean shutdown marker: %w", err)
	}
	return c.BrokerEpoch, nil
}
