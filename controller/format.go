package controller

// Formatting the metadata directory: the cluster id, this node's identity,
// the initial voters and the bootstrap feature levels, written once before
// the first start (like Kafka's meta.properties plus bootstrap.checkpoint).
// The first leader turns the bootstrap feature levels and the voter set into
// the first records of the metadata log.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"maps"
	"path"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	// MetadataPartitionDir is the directory of the metadata log inside the
	// metadata dir, named like Kafka's.
	MetadataPartitionDir = "__cluster_metadata-0"
	// BootstrapFile holds the format information.
	BootstrapFile = "bootstrap.checkpoint"

	bootstrapMagic = "GRBOOT01"
	// bootstrapVersion 1 adds the SCRAM credentials of --add-scram; a
	// file without them is written as version 0.
	bootstrapVersion = int16(1)
)

// ErrAlreadyFormatted is returned by Format when the directory already holds
// a format.
var ErrAlreadyFormatted = errors.New("metadata directory is already formatted")

// ErrNotFormatted is returned by ReadFormat and Start when the directory has
// not been formatted.
var ErrNotFormatted = errors.New("metadata directory is not formatted")

// FormatOptions is what `gregor storage format` records.
type FormatOptions struct {
	ClusterID   string
	NodeID      int32
	DirectoryID protocol.UUID
	// Voters is the initial voter set (this node alone for a single
	// combined node); none for a controller that joins a running dynamic
	// quorum (membership.go).
	Voters []metadata.Voter
	// Features are the bootstrap feature levels besides metadata.version
	// and kraft.version (e.g. group.version once it is implemented). A
	// metadata.version or kraft.version entry here overrides the default.
	Features map[string]int16
	// ScramCredentials are written with the bootstrap records
	// (kafka-storage format --add-scram), so that users exist before the
	// first start.
	ScramCredentials []*metadata.UserScramCredentialRecord
}

// FormatInfo is what a formatted metadata directory says (`gregor storage
// info`).
type FormatInfo struct {
	ClusterID   string
	NodeID      int32
	DirectoryID protocol.UUID
	Voters      []metadata.Voter
	// Features are all bootstrap feature levels, including
	// metadata.version and kraft.version.
	Features map[string]int16
	// ScramCredentials are the --add-scram credentials.
	ScramCredentials []*metadata.UserScramCredentialRecord
}

// Format records opts in metadataDir. It refuses a directory that is
// already formatted (ErrAlreadyFormatted).
func Format(fsys vfs.FS, metadataDir string, opts FormatOptions) error {
	if opts.ClusterID == "" {
		return errors.New("formatting metadata directory: cluster id is empty")
	}
	if opts.NodeID < 0 {
		return fmt.Errorf("formatting metadata directory: invalid node id %d", opts.NodeID)
	}
	seen := map[int32]bool{}
	for _, v := range opts.Voters {
		if v.ID < 0 || seen[v.ID] {
			return fmt.Errorf("formatting metadata directory: invalid or duplicate voter id %d", v.ID)
		}
		seen[v.ID] = true
	}
	dir := path.Join(metadataDir, MetadataPartitionDir)
	file := path.Join(dir, BootstrapFile)
	if _, err := fsys.Stat(file); err == nil {
		return fmt.Errorf("formatting %s: %w", metadataDir, ErrAlreadyFormatted)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("formatting %s: %w", metadataDir, err)
	}
	if err := vfs.MkdirAllDurable(fsys, dir, 0o755); err != nil {
		return fmt.Errorf("formatting %s: %w", metadataDir, err)
	}
	features := map[string]int16{
		metadata.MetadataVersionFeature: metadata.LatestMetadataVersion,
		metadata.KRaftVersionFeature:    metadata.LatestKRaftVersion,
	}
	maps.Copy(features, opts.Features)
	info := FormatInfo{
		ClusterID:   opts.ClusterID,
		NodeID:      opts.NodeID,
		DirectoryID: opts.DirectoryID,
		Voters:      opts.Voters,
		Features:    features,

		ScramCredentials: opts.ScramCredentials,
	}
	if err := vfs.WriteFileAtomic(fsys, file, encodeFormat(info)); err != nil {
		return fmt.Errorf("formatting %s: %w", metadataDir, err)
	}
	return nil
}

// ReadFormat reads what Format recorded in metadataDir.
func ReadFormat(fsys vfs.FS, metadataDir string) (FormatInfo, error) {
	file := path.Join(metadataDir, MetadataPartitionDir, BootstrapFile)
	raw, err := vfs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return FormatInfo{}, fmt.Errorf("reading %s: %w", file, ErrNotFormatted)
	}
	if err != nil {
		return FormatInfo{}, fmt.Errorf("reading %s: %w", file, err)
	}
	info, err := decodeFormat(raw)
	if err != nil {
		return FormatInfo{}, fmt.Errorf("reading %s: %w", file, err)
	}
	return info, nil
}

// encodeFormat: magic, crc32c of the rest, then version and fields.
func encodeFormat(info FormatInfo) []byte {
	var body []byte
	version := int16(0)
	if len(info.ScramCredentials) > 0 {
		version = 1
	}
	body = kbin.AppendInt16(body, version)
	body = kbin.AppendString(body, info.ClusterID)
	body = kbin.AppendInt32(body, info.NodeID)
	body = kbin.AppendUuid(body, info.DirectoryID)
	body = metadata.AppendRecordBody(body, &metadata.VotersRecord{Voters: info.Voters})
	names := slices.Sorted(maps.Keys(info.Features))
	body = kbin.AppendArrayLen(body, len(names))
	for _, n := range names {
		body = kbin.AppendString(body, n)
		body = kbin.AppendInt16(body, info.Features[n])
	}
	if version >= 1 {
		body = kbin.AppendArrayLen(body, len(info.ScramCredentials))
		for _, rec := range info.ScramCredentials {
			body = metadata.AppendRecordBody(body, rec)
		}
	}
	out := append([]byte(bootstrapMagic), 0, 0, 0, 0)
	binary.BigEndian.PutUint32(out[len(bootstrapMagic):], crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	return append(out, body...)
}

func decodeFormat(raw []byte) (FormatInfo, error) {
	hdr := len(bootstrapMagic) + 4
	if len(raw) < hdr || string(raw[:len(bootstrapMagic)]) != bootstrapMagic {
		return FormatInfo{}, errors.New("not a Gregor bootstrap file")
	}
	body := raw[hdr:]
	if crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)) != binary.BigEndian.Uint32(raw[len(bootstrapMagic):]) {
		return FormatInfo{}, errors.New("bootstrap file checksum mismatch")
	}
	r := kbin.Reader{Src: body}
	version := r.Int16()
	if version < 0 || version > bootstrapVersion {
		return FormatInfo{}, fmt.Errorf("bootstrap file version %d is not supported by this build", version)
	}
	var info FormatInfo
	info.ClusterID = r.String()
	info.NodeID = r.Int32()
	info.DirectoryID = r.Uuid()
	var vr metadata.VotersRecord
	metadata.ReadRecordBody(&r, &vr, 0)
	info.Voters = vr.Voters
	info.Features = map[string]int16{}
	n := r.ArrayLen()
	for i := int32(0); i < n && r.Ok(); i++ {
		name := r.String()
		info.Features[name] = r.Int16()
	}
	if version >= 1 {
		n := r.ArrayLen()
		for i := int32(0); i < n && r.Ok(); i++ {
			rec := &metadata.UserScramCredentialRecord{}
			metadata.ReadRecordBody(&r, rec, 0)
			info.ScramCredentials = append(info.ScramCredentials, rec)
		}
	}
	if err := r.Complete(); err != nil || len(r.Src) != 0 {
		return FormatInfo{}, errors.New("bootstrap file is malformed")
	}
	return info, nil
}

// bootstrapRecords are the first records the first leader writes.
func (info FormatInfo) bootstrapRecords() []metadata.Record {
	var recs []metadata.Record
	for _, name := range slices.Sorted(maps.Keys(info.Features)) {
		if lvl := info.Features[name]; lvl != 0 {
			recs = append(recs, &metadata.FeatureLevelRecord{Name: name, FeatureLevel: lvl})
		}
	}
	recs = append(recs, &metadata.VotersRecord{Voters: info.Voters})
	for _, rec := range info.ScramCredentials {
		recs = append(recs, rec)
	}
	return recs
}
