package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ListOffsets with the max-timestamp special timestamp (-3) answers as
// Kafka does (UnifiedLog.fetchOffsetByTimestamp, then the
// lastFetchableOffset filter in ReplicaManager.fetchOffset): the record
// with the largest timestamp of the whole log is found, and when it lies
// at or above the high watermark a consumer gets -1/-1; it is not replaced
// by the largest timestamp below the high watermark.
func TestListOffsetsMaxTimestampBelowHighWatermark(t *testing.T) {
	base := time.Now().Add(-time.Hour).UnixMilli()
	tests := []struct {
		name       string
		committed  []int64 // timestamps produced (below the high watermark)
		above      int64   // timestamp appended above the high watermark
		wantOffset int64
		wantTs     int64
	}{
		{"the max is above the high watermark", []int64{base, base + 1000}, base + 5000, -1, -1},
		{"the max is below the high watermark", []int64{base + 3000, base + 1000}, base + 2000, 0, base + 3000},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := startTestNode(t, nil)
			topic := fmt.Sprintf("maxts%d", i)
			createTopic(t, n, topic, 1, nil)
			for j, ts := range tc.committed {
				bb := protocol.NewBatchBuilder(protocol.CodecNone)
				bb.Add([]byte(fmt.Sprint(j)), []byte("v"), nil, ts)
				batch, _ := bb.Build()
				if code := produceRaw(t, n, topic, 0, batch); code != 0 {
					t.Fatalf("produce: error %d", code)
				}
			}
			// A record the high watermark does not cover yet: appended
			// to the log directly, as a leader's log holds records its
			// followers have not fetched.
			l, ok := n.logs.Get(storage.TopicPartition{Topic: topic, Partition: 0})
			if !ok {
				t.Fatal("no log")
			}
			bb := protocol.NewBatchBuilder(protocol.CodecNone)
			bb.Add([]byte("above"), []byte("v"), nil, tc.above)
			batch, _ := bb.Build()
			if _, _, err := l.Append(batch, 0, storage.AppendClient); err != nil {
				t.Fatal(err)
			}
			if l.HighWatermark() != int64(len(tc.committed)) {
				t.Fatalf("high watermark %d, want %d", l.HighWatermark(), len(tc.committed))
			}
			c := dialRaw(t, n.addr)
			req := kmsg.NewPtrListOffsetsRequest()
			req.SetVersion(8)
			req.ReplicaID = -1
			req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: topic, Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, CurrentLeaderEpoch: -1, Timestamp: -3}}}}
			c.send(req, 1)
			resp := kmsg.NewPtrListOffsetsResponse()
			resp.SetVersion(8)
			c.recv(resp)
			p := resp.Topics[0].Partitions[0]
			if p.ErrorCode != 0 || p.Offset != tc.wantOffset || p.Timestamp != tc.wantTs {
				t.Fatalf("max timestamp: offset %d timestamp %d (error %d), want offset %d timestamp %d", p.Offset, p.Timestamp, p.ErrorCode, tc.wantOffset, tc.wantTs)
			}
		})
	}
}
