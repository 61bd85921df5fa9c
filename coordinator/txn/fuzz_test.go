package txn

import (
	"testing"

	"github.com/gregorbroker/gregor/protocol"
)

// FuzzReplay: arbitrary __transaction_state batches, keys and values
// never panic the replay; a value that decodes re-encodes to one that
// decodes to the same state.
func FuzzReplay(f *testing.F) {
	st := txnState{producerID: 7, prevProducerID: -1, nextProducerID: -1, epoch: 2, timeoutMs: 60000, state: StateOngoing,
		partitions: []TopicPartition{tp("a", 0), tp("b", 1)}, startMs: 10, updateMs: 20}
	for _, tv := range []int16{0, 1} {
		batch, err := recordBatch(encodeKey("id"), encodeValue(&st, tv), 1)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(batch, encodeKey("id"), encodeValue(&st, tv))
	}
	f.Add(protocol.EndTxnMarkerBatch(1, 0, true, 0, 1), []byte{0, 0}, []byte{0, 1, 0xff})
	f.Fuzz(func(t *testing.T, batch, key, value []byte) {
		s := &shard{txns: map[string]*txnMeta{}}
		var scratch []byte
		_ = replayBatch(batch, &scratch, s.replay)
		_ = s.replay(key, value)
		got, err := decodeValue(value)
		if err != nil {
			return
		}
		again, err := decodeValue(encodeValue(&got, 1))
		if err != nil {
			t.Fatalf("re-encoded value does not decode: %v", err)
		}
		if again.producerID != got.producerID || again.epoch != got.epoch || again.state != got.state || len(again.partitions) != len(got.partitions) {
			t.Fatalf("%+v became %+v", got, again)
		}
	})
}
