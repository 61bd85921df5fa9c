package protocol

// MetadataFetch: Gregor's second private API, how a broker-only node
// follows the metadata log without voting (KRaft's observers fetch
// __cluster_metadata from the leader the same way). The broker asks a
// controller for the committed entries from an offset on; the controller
// answers with them (at most MaxBytes, waiting up to MaxWaitMs for one to
// commit), preceded by a snapshot of the image when the entries wanted were
// compacted away. Any voter answers from what it has applied and names the
// leader it knows; brokers ask the active controller when they know it,
// which records them as observers for DescribeQuorum. Served on
// controller listeners only, left out of ApiVersions.
//
// Request v0: cluster_id string, node_id int32, fetch_offset int64 (the
// first raft index wanted), max_bytes int32, max_wait_ms int32.
// Response v0: error_code int16, leader_id int32, high_watermark int64,
// has_snapshot int8 [snapshot_index int64, snapshot_term int64,
// snapshot_data bytes], entries [int32 count] of (index int64, term int64,
// type int8, data bytes). bytes are an int32 length and the bytes.
//
// v1 (KIP-853's joining controllers): the request adds directory_id uuid
// and controller_endpoints [int32 count] of (name string, host string,
// port int32, security_protocol int16); the response adds
// leader_endpoints in the same form. A controller that is not a member of
// the quorum announces itself with a v1 request whose max_bytes is 0 (no
// entries wanted): the active controller adds it as a raft learner
// (controller/membership.go), and every controller names the active one's
// endpoints so the joiner can reach it before it has any of the log.

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MetadataFetchKey is the private API key of MetadataFetch.
const MetadataFetchKey int16 = 32001

// MetadataFetchRequest asks for committed metadata log entries.
type MetadataFetchRequest struct {
	Version     int16
	ClusterID   string
	NodeID      int32
	FetchOffset int64
	MaxBytes    int32
	MaxWaitMs   int32
	// v1: the announcing controller's metadata directory id and its
	// controller listeners.
	DirectoryID UUID
	Endpoints   []MetadataEndpoint
}

// MetadataEndpoint is a controller listener in a MetadataFetch v1.
type MetadataEndpoint struct {
	Name             string
	Host             string
	Port             int32
	SecurityProtocol int16
}

func appendMetadataEndpoints(dst []byte, eps []MetadataEndpoint) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(eps)))
	for _, ep := range eps {
		dst = appendString(dst, ep.Name)
		dst = appendString(dst, ep.Host)
		dst = binary.BigEndian.AppendUint32(dst, uint32(ep.Port))
		dst = binary.BigEndian.AppendUint16(dst, uint16(ep.SecurityProtocol))
	}
	return dst
}

func (d *decoder) metadataEndpoints() []MetadataEndpoint {
	// Each endpoint takes at least 10 bytes.
	count := d.int32()
	if count < 0 || int(count) > len(d.b)/10 {
		d.fail(fmt.Errorf("%d endpoints in %d bytes", count, len(d.b)))
		return nil
	}
	var out []MetadataEndpoint
	for range count {
		ep := MetadataEndpoint{Name: d.string(), Host: d.string(), Port: d.int32(), SecurityProtocol: d.int16()}
		if d.err != nil {
			return nil
		}
		out = append(out, ep)
	}
	return out
}

func (*MetadataFetchRequest) Key() int16           { return MetadataFetchKey }
func (*MetadataFetchRequest) MaxVersion() int16    { return 1 }
func (r *MetadataFetchRequest) SetVersion(v int16) { r.Version = v }
func (r *MetadataFetchRequest) GetVersion() int16  { return r.Version }
func (*MetadataFetchRequest) IsFlexible() bool     { return false }
func (r *MetadataFetchRequest) ResponseKind() kmsg.Response {
	return &MetadataFetchResponse{Version: r.Version}
}

func (r *MetadataFetchRequest) AppendTo(dst []byte) []byte {
	dst = appendString(dst, r.ClusterID)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.NodeID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.FetchOffset))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.MaxBytes))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.MaxWaitMs))
	if r.Version >= 1 {
		dst = append(dst, r.DirectoryID[:]...)
		dst = appendMetadataEndpoints(dst, r.Endpoints)
	}
	return dst
}

func (r *MetadataFetchRequest) ReadFrom(b []byte) error {
	d := decoder{b: b}
	r.ClusterID = d.string()
	r.NodeID = d.int32()
	r.FetchOffset = d.int64()
	r.MaxBytes = d.int32()
	r.MaxWaitMs = d.int32()
	if r.Version >= 1 {
		copy(r.DirectoryID[:], d.take(16))
		r.Endpoints = d.metadataEndpoints()
	}
	return d.finish("MetadataFetch request")
}

// MetadataEntry is one raft entry of the metadata log.
type MetadataEntry struct {
	Index int64
	Term  int64
	Type  int8 // raftpb.EntryType
	Data  []byte
}

// MetadataFetchResponse carries committed entries.
type MetadataFetchResponse struct {
	Version       int16
	ErrorCode     int16
	LeaderID      int32
	HighWatermark int64
	HasSnapshot   bool
	SnapshotIndex int64
	SnapshotTerm  int64
	SnapshotData  []byte
	Entries       []MetadataEntry
	// v1: the active controller's controller listeners, when known.
	LeaderEndpoints []MetadataEndpoint
}

func (*MetadataFetchResponse) Key() int16           { return MetadataFetchKey }
func (*MetadataFetchResponse) MaxVersion() int16    { return 1 }
func (r *MetadataFetchResponse) SetVersion(v int16) { r.Version = v }
func (r *MetadataFetchResponse) GetVersion() int16  { return r.Version }
func (*MetadataFetchResponse) IsFlexible() bool     { return false }
func (r *MetadataFetchResponse) RequestKind() kmsg.Request {
	return &MetadataFetchRequest{Version: r.Version}
}

func (r *MetadataFetchResponse) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(r.ErrorCode))
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.LeaderID))
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.HighWatermark))
	if r.HasSnapshot {
		dst = append(dst, 1)
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.SnapshotIndex))
		dst = binary.BigEndian.AppendUint64(dst, uint64(r.SnapshotTerm))
		dst = appendBytes(dst, r.SnapshotData)
	} else {
		dst = append(dst, 0)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Entries)))
	for _, e := range r.Entries {
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Index))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.Term))
		dst = append(dst, byte(e.Type))
		dst = appendBytes(dst, e.Data)
	}
	if r.Version >= 1 {
		dst = appendMetadataEndpoints(dst, r.LeaderEndpoints)
	}
	return dst
}

func (r *MetadataFetchResponse) ReadFrom(b []byte) error {
	d := decoder{b: b}
	r.ErrorCode = d.int16()
	r.LeaderID = d.int32()
	r.HighWatermark = d.int64()
	switch d.int8() {
	case 0:
	case 1:
		r.HasSnapshot = true
		r.SnapshotIndex = d.int64()
		r.SnapshotTerm = d.int64()
		r.SnapshotData = d.bytes()
	default:
		d.fail(errors.New("bad snapshot flag"))
	}
	// Every entry takes at least 21 bytes: a count the rest cannot hold is
	// refused before anything is allocated for it.
	count := d.int32()
	if count < 0 || int(count) > len(d.b)/21 {
		d.fail(fmt.Errorf("%d entries in %d bytes", count, len(d.b)))
		count = 0
	}
	r.Entries = make([]MetadataEntry, 0, count)
	for range count {
		e := MetadataEntry{Index: d.int64(), Term: d.int64(), Type: d.int8(), Data: d.bytes()}
		if d.err != nil {
			break
		}
		r.Entries = append(r.Entries, e)
	}
	if r.Version >= 1 {
		r.LeaderEndpoints = d.metadataEndpoints()
	}
	return d.finish("MetadataFetch response")
}

func appendString(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBytes(dst, b []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
	return append(dst, b...)
}

// decoder reads big-endian primitives, remembering the first failure.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.b = nil
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n < 0 || len(d.b) < n {
		d.fail(errors.New("truncated"))
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) int8() int8 {
	if b := d.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (d *decoder) int16() int16 {
	if b := d.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (d *decoder) int32() int32 {
	if b := d.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (d *decoder) int64() int64 {
	if b := d.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (d *decoder) string() string {
	n := d.int16()
	return string(d.take(int(uint16(n))))
}

func (d *decoder) bytes() []byte {
	n := d.int32()
	return d.take(int(n))
}

func (d *decoder) finish(what string) error {
	if d.err != nil {
		return fmt.Errorf("%s: %w", what, d.err)
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%s: %d bytes after the end", what, len(d.b))
	}
	return nil
}
