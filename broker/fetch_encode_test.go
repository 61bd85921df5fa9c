package broker

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// materialize turns chunks into the bytes a client receives.
func materialize(t *testing.T, chunks []network.Chunk) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, c := range chunks {
		if c.Bytes != nil {
			out.Write(c.Bytes)
			continue
		}
		if _, err := io.Copy(&out, io.NewSectionReader(c.File.File, c.File.Pos, c.File.Size)); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}

func TestEncodeFetchResponseMatchesKmsg(t *testing.T) {
	fsys := vfs.NewMemFS()
	f, err := fsys.OpenFile("/seg", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
	f.Write(payload)
	rack := "r1"

	for v := int16(4); v <= 18; v++ {
		p1 := newFetchPartitionResult(0)
		p1.highWatermark, p1.lastStableOffset, p1.logStartOffset = 100, 90, 5
		p1.records = vfs.FileRange{File: f, Pos: 10, Size: 20}
		p1.abortedTxns = []replica.AbortedTransaction{{ProducerID: 7, FirstOffset: 42}, {ProducerID: 1 << 40, FirstOffset: 43}}
		p2 := newFetchPartitionResult(3)
		p2.errorCode = 6
		p2.currentLeaderID, p2.currentLeaderEpoch = 2, 9
		p2.divergingEpoch, p2.divergingEndOffset = 4, 77
		// read_committed with no aborted transaction: an empty list, not
		// null (Kafka's emptyFetchDataInfo with its aborted list).
		p3 := newFetchPartitionResult(4)
		p3.abortedTxnsNonNull = true
		body := &fetchResponseBody{
			throttleMillis: 1, errorCode: 0, sessionID: 1234,
			topics:        []fetchTopicResult{{name: "t", id: [16]byte{1, 2, 3}, partitions: []fetchPartitionResult{p1, p2, p3}}},
			nodeEndpoints: []nodeEndpoint{{nodeID: 2, host: "h", port: 9092, rack: &rack}},
		}
		raw := materialize(t, encodeFetchResponse(body, v, 0))
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(v)
		if err := resp.ReadFrom(raw); err != nil {
			t.Fatalf("v%d: kmsg cannot decode: %v", v, err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
			t.Fatalf("v%d: bad shape %+v", v, resp)
		}
		rt := resp.Topics[0]
		if v >= 13 && rt.TopicID != [16]byte{1, 2, 3} || v < 13 && rt.Topic != "t" {
			t.Fatalf("v%d: topic %q %v", v, rt.Topic, rt.TopicID)
		}
		a, b := rt.Partitions[0], rt.Partitions[1]
		if !bytes.Equal(a.RecordBatches, payload[10:30]) {
			t.Fatalf("v%d: records %q", v, a.RecordBatches)
		}
		if a.HighWatermark != 100 || a.LastStableOffset != 90 || (v >= 5 && a.LogStartOffset != 5) {
			t.Fatalf("v%d: offsets %+v", v, a)
		}
		if got := a.AbortedTransactions; len(got) != 2 || got[0].ProducerID != 7 || got[0].FirstOffset != 42 || got[1].ProducerID != 1<<40 || got[1].FirstOffset != 43 {
			t.Fatalf("v%d: aborted %+v", v, a.AbortedTransactions)
		}
		if b.ErrorCode != 6 || b.Partition != 3 || b.AbortedTransactions != nil {
			t.Fatalf("v%d: second partition %+v", v, b)
		}
		if c := rt.Partitions[2]; c.AbortedTransactions == nil || len(c.AbortedTransactions) != 0 {
			t.Fatalf("v%d: read_committed without aborted transactions: %#v, want an empty list", v, c.AbortedTransactions)
		}
		if v >= 12 && (b.CurrentLeader.LeaderID != 2 || b.CurrentLeader.LeaderEpoch != 9 || b.DivergingEpoch.Epoch != 4 || b.DivergingEpoch.EndOffset != 77) {
			t.Fatalf("v%d: tags %+v", v, b)
		}
		if v >= 7 && resp.SessionID != 1234 {
			t.Fatalf("v%d: session %d", v, resp.SessionID)
		}
		if v >= 16 && (len(resp.Brokers) != 1 || resp.Brokers[0].Host != "h" || *resp.Brokers[0].Rack != "r1") {
			t.Fatalf("v%d: endpoints %+v", v, resp.Brokers)
		}
	}
}
