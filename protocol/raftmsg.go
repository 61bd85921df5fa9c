package protocol

// RaftMessages: the one API that is Gregor's own. Controllers carry etcd
// raft's messages to each other over the CONTROLLER listener in frames of
// the Kafka protocol (size, request header, body), so that the quorum needs
// no port of its own, as KRaft needs none. It is one-way: a frame carries a
// batch of messages and gets no response (like Produce with acks=0); raft
// retransmits what is lost. It is served on controller listeners only and
// is left out of ApiVersions, so no Kafka client or tool ever sees it.
//
// Body, version 0 (big-endian, Kafka's primitive types):
//
//	cluster_id  string   the sender's cluster (messages from another
//	                     cluster are refused)
//	from        int32    the sender's node id
//	messages    [int32 count] of bytes (int32 length + a marshalled
//	            raftpb.Message)

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// RaftMessagesKey is the private API key of RaftMessages, far above
// Kafka's (which end below 100).
const RaftMessagesKey int16 = 32000

// RaftMessagesRequest is a batch of raft messages from one controller to
// another. It implements kmsg.Request so that the server reads it like any
// other request.
type RaftMessagesRequest struct {
	Version   int16
	ClusterID string
	From      int32
	Messages  [][]byte
}

func (*RaftMessagesRequest) Key() int16           { return RaftMessagesKey }
func (*RaftMessagesRequest) MaxVersion() int16    { return 0 }
func (r *RaftMessagesRequest) SetVersion(v int16) { r.Version = v }
func (r *RaftMessagesRequest) GetVersion() int16  { return r.Version }
func (*RaftMessagesRequest) IsFlexible() bool     { return false }

// ResponseKind exists for the interface: nobody answers RaftMessages.
func (r *RaftMessagesRequest) ResponseKind() kmsg.Response {
	return &RaftMessagesResponse{Version: r.Version}
}

func (r *RaftMessagesRequest) AppendTo(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(r.ClusterID)))
	dst = append(dst, r.ClusterID...)
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.From))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Messages)))
	for _, m := range r.Messages {
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(m)))
		dst = append(dst, m...)
	}
	return dst
}

var errShortRaftMessages = errors.New("RaftMessages: truncated body")

func (r *RaftMessagesRequest) ReadFrom(b []byte) error {
	if len(b) < 2 {
		return errShortRaftMessages
	}
	n := int(binary.BigEndian.Uint16(b))
	b = b[2:]
	if len(b) < n+8 {
		return errShortRaftMessages
	}
	r.ClusterID = string(b[:n])
	b = b[n:]
	r.From = int32(binary.BigEndian.Uint32(b))
	count := binary.BigEndian.Uint32(b[4:])
	b = b[8:]
	// Every message takes at least its 4-byte length: a count the body
	// cannot hold is refused before anything is allocated for it.
	if uint64(count)*4 > uint64(len(b)) {
		return errShortRaftMessages
	}
	r.Messages = make([][]byte, 0, count)
	for range count {
		if len(b) < 4 {
			return errShortRaftMessages
		}
		size := binary.BigEndian.Uint32(b)
		b = b[4:]
		if uint64(size) > uint64(len(b)) {
			return errShortRaftMessages
		}
		r.Messages = append(r.Messages, b[:size:size])
		b = b[size:]
	}
	if len(b) != 0 {
		return fmt.Errorf("RaftMessages: %d bytes after the last message", len(b))
	}
	return nil
}

// RaftMessagesResponse is never sent; it completes the kmsg.Request
// interface.
type RaftMessagesResponse struct{ Version int16 }

func (*RaftMessagesResponse) Key() int16                 { return RaftMessagesKey }
func (*RaftMessagesResponse) MaxVersion() int16          { return 0 }
func (r *RaftMessagesResponse) SetVersion(v int16)       { r.Version = v }
func (r *RaftMessagesResponse) GetVersion() int16        { return r.Version }
func (*RaftMessagesResponse) IsFlexible() bool           { return false }
func (*RaftMessagesResponse) AppendTo(dst []byte) []byte { return dst }
func (*RaftMessagesResponse) ReadFrom([]byte) error      { return nil }
func (r *RaftMessagesResponse) RequestKind() kmsg.Request {
	return &RaftMessagesRequest{Version: r.Version}
}
