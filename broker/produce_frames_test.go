package broker

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce frames go back to the server's pool after their append (see
// conn.releaseFrame) and the next frames are read into them. Pipelined
// produces of distinct large batches on one connection, then a fetch of
// all of them, show that no record was read from a recycled buffer; under
// -race a handler still reading a frame while the next is read into it
// would be reported.
func TestPipelinedProducesKeepTheirRecords(t *testing.T) {
	n := startTestNode(t, nil)
	createTopic(t, n, "frames", 2, nil)
	c := dialRaw(t, n.addr)
	const requests = 24
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 40<<10) }
	for i := range requests {
		bb := protocol.NewBatchBuilder(protocol.CodecNone)
		for r := range 3 {
			bb.Add([]byte(fmt.Sprintf("req-%d-%d", i, r)), value(i), nil, time.Now().UnixMilli())
		}
		batch, err := bb.Build()
		if err != nil {
			t.Fatal(err)
		}
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks = int16(1 - 2*(i%2)) // acks=1 and acks=-1 alike
		req.TimeoutMillis = 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "frames", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: int32(i % 2), Records: batch}}}}
		c.send(req, int32(i))
	}
	for i := range requests {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		if corr := c.recv(resp); corr != int32(i) {
			t.Fatalf("response %d for request %d", corr, i)
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Fatalf("request %d: error %d", i, code)
		}
	}

	got := 0
	for p := int32(0); p < 2; p++ {
		fetch := kmsg.NewPtrFetchRequest()
		fetch.SetVersion(12)
		fetch.ReplicaID = -1
		fetch.MaxBytes = 64 << 20
		fetch.SessionEpoch = -1
		fetch.Topics = []kmsg.FetchRequestTopic{{Topic: "frames", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: p, PartitionMaxBytes: 64 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
		c.send(fetch, 100+p)
		resp := kmsg.NewPtrFetchResponse()
		resp.SetVersion(12)
		c.recv(resp)
		data := resp.Topics[0].Partitions[0].RecordBatches
		for i := int(p); len(data) > 0; i += 2 {
			batch, rest, _, err := protocol.NextBatch(data)
			if err != nil || !protocol.CheckBatchCRC(batch) {
				t.Fatalf("partition %d, batch of request %d: %v", p, i, err)
			}
			r := 0
			err = protocol.ForEachRecord(batch, nil, func(rec *protocol.Record) error {
				if string(rec.Key) != fmt.Sprintf("req-%d-%d", i, r) || !bytes.Equal(rec.Value, value(i)) {
					return fmt.Errorf("record %d of request %d holds key %q", r, i, rec.Key)
				}
				r++
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			got++
			data = rest
		}
	}
	if got != requests {
		t.Fatalf("fetched %d batches, want %d", got, requests)
	}
}
