package decide

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
)

func TestAllocateProducerIDsDecisionWithoutAQuorum(t *testing.T) {
	img := imageOf(t, &metadata.RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 7})
	req := kmsg.NewPtrAllocateProducerIDsRequest()
	req.BrokerID, req.BrokerEpoch = 2, 7
	recs, resp, img := decideOn(t, testEnv(), img, (*Env).AllocateProducerIDs, req)
	want := &metadata.ProducerIdsRecord{BrokerID: 2, BrokerEpoch: 7, NextProducerID: ProducerIDBlockSize}
	if len(recs) != 1 || *recs[0].(*metadata.ProducerIdsRecord) != *want || resp.ErrorCode != 0 ||
		resp.ProducerIDStart != 0 || resp.ProducerIDLen != ProducerIDBlockSize || img.NextProducerID != ProducerIDBlockSize {
		t.Fatalf("first block: records %v, answer %+v, next %d", recs, resp, img.NextProducerID)
	}
	if _, resp, img = decideOn(t, testEnv(), img, (*Env).AllocateProducerIDs, req); resp.ProducerIDStart != ProducerIDBlockSize ||
		img.NextProducerID != 2*ProducerIDBlockSize {
		t.Fatalf("second block: answer %+v, next %d", resp, img.NextProducerID)
	}

	stale := kmsg.NewPtrAllocateProducerIDsRequest()
	stale.BrokerID, stale.BrokerEpoch = 2, 6
	if recs, resp, _ := decideOn(t, testEnv(), img, (*Env).AllocateProducerIDs, stale); len(recs) != 0 ||
		resp.ErrorCode != kerr.StaleBrokerEpoch.Code || resp.ProducerIDLen != 0 {
		t.Fatalf("stale epoch: records %v, answer %+v", recs, resp)
	}
	stale.BrokerID = 3
	if recs, resp, _ := decideOn(t, testEnv(), img, (*Env).AllocateProducerIDs, stale); len(recs) != 0 || resp.ErrorCode != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("unregistered broker: records %v, answer %+v", recs, resp)
	}
	exhausted := imageOf(t, &metadata.RegisterBrokerRecord{BrokerID: 2, BrokerEpoch: 7},
		&metadata.ProducerIdsRecord{BrokerID: 2, BrokerEpoch: 7, NextProducerID: math.MaxInt64 - ProducerIDBlockSize + 1})
	if recs, resp, _ := decideOn(t, testEnv(), exhausted, (*Env).AllocateProducerIDs, req); len(recs) != 0 || resp.ErrorCode != kerr.UnknownServerError.Code {
		t.Fatalf("exhausted: records %v, answer %+v", recs, resp)
	}

	if r := AllocateProducerIDsFailed(req, commitError(errNotController)); r.ErrorCode != kerr.NotController.Code || r.ProducerIDLen != 0 {
		t.Fatalf("failed commit: %+v", r)
	}
}
