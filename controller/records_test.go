package controller

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"go.etcd.io/raft/v3"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// TestOlderNodeStopsAtUnreadableRecord: a committed entry this build
// cannot read stops the controller from applying (the image stays where it
// was) and a restart refuses to start rather than skipping it.
func TestOlderNodeStopsAtUnreadableRecord(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	before := c.Image()
	// A leader never proposes records it cannot apply itself (the pending
	// image is built from them first), so the entry goes straight to raft,
	// as one written by a newer leader arrives.
	data := futureBatch(metadata.RecordTopic, 3, &metadata.TopicRecord{Name: "x", TopicID: protocol.RandomUUID()})
	proposed := make(chan error, 1)
	c.report(func(rn *raft.RawNode) { proposed <- rn.Propose(data) })
	if err := <-proposed; err != nil {
		t.Fatalf("proposing the unreadable entry: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.Err() == nil && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !errors.Is(c.Err(), metadata.ErrUnsupportedRecord) {
		t.Fatalf("controller error = %v", c.Err())
	}
	if c.Image() != before || c.Image().Topic("x") != nil {
		t.Fatal("image advanced past an unreadable record")
	}
	if r := createTopic(t, c, "y", 1, 1); r.ErrorCode == 0 {
		t.Fatal("controller kept serving after refusing a record")
	}
	c.Close()
	if _, err := Start(context.Background(), testConfig(fsys)); !errors.Is(err, metadata.ErrUnsupportedRecord) {
		t.Fatalf("restart: err = %v, want ErrUnsupportedRecord", err)
	}
}

// futureBatch is recs followed by a record of type typ at version, as a
// newer build writes it: EncodeRecords's framing (format, count, then
// each record's length, type, version and body) with a body this build
// never reads.
func futureBatch(typ metadata.RecordType, version int16, recs ...metadata.Record) []byte {
	known := metadata.EncodeRecords(recs)
	r := kbin.Reader{Src: known[1:]}
	r.Uvarint() // the count; the records follow
	var future []byte
	future = kbin.AppendUvarint(future, uint32(typ))
	future = kbin.AppendUvarint(future, uint32(version))
	future = kbin.AppendString(future, "from the future")
	out := []byte{known[0]}
	out = kbin.AppendUvarint(out, uint32(len(recs)+1))
	out = append(out, r.Src...)
	out = kbin.AppendUvarint(out, uint32(len(future)))
	return append(out, future...)
}
