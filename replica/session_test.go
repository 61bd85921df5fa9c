package replica

import (
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestFollowerFetchSession walks a follower's fetch session through what
// KIP-227 asks of a client: a full fetch opens it, then only changed and
// new partitions are listed and the ones no longer wanted forgotten, an
// unchanged set sends none; a refused session is dropped and reopened by a
// full fetch, a sessionless answer keeps fetches full, and another error
// closes the session by naming it with epoch 0.
func TestFollowerFetchSession(t *testing.T) {
	topic := protocol.UUID{1}
	key := func(p int32) fetchPartKey { return fetchPartKey{topic, p} }
	at := func(offset int64) sessionPartition {
		return sessionPartition{topic: "t", leaderEpoch: 3, fetchOffset: offset, lastFetchedEpoch: 3, logStartOffset: 0, maxBytes: 1 << 20}
	}
	var c fetchSessionClient
	fetch := func(wanted map[fetchPartKey]sessionPartition) *kmsg.FetchRequest {
		req := kmsg.NewPtrFetchRequest()
		c.build(req, wanted)
		return req
	}
	listed := func(req *kmsg.FetchRequest) (parts, forgotten []int32) {
		for _, rt := range req.Topics {
			for _, rp := range rt.Partitions {
				parts = append(parts, rp.Partition)
			}
		}
		for _, ft := range req.ForgottenTopics {
			forgotten = append(forgotten, ft.Partitions...)
		}
		slices.Sort(parts)
		slices.Sort(forgotten)
		return parts, forgotten
	}
	expect := func(step string, req *kmsg.FetchRequest, id, epoch int32, parts, forgotten []int32) {
		t.Helper()
		gotParts, gotForgotten := listed(req)
		if req.SessionID != id || req.SessionEpoch != epoch || !slices.Equal(gotParts, parts) || !slices.Equal(gotForgotten, forgotten) {
			t.Fatalf("%s: session %d epoch %d, partitions %v, forgotten %v; want %d %d %v %v",
				step, req.SessionID, req.SessionEpoch, gotParts, gotForgotten, id, epoch, parts, forgotten)
		}
	}
	answer := func(code int16, session int32) bool {
		resp := kmsg.NewPtrFetchResponse()
		resp.ErrorCode, resp.SessionID = code, session
		return c.answered(resp)
	}

	wanted := map[fetchPartKey]sessionPartition{key(0): at(10), key(1): at(20), key(2): at(30)}
	expect("first fetch", fetch(wanted), 0, 0, []int32{0, 1, 2}, nil)
	answer(0, 7)
	expect("nothing changed", fetch(wanted), 7, 1, nil, nil)
	answer(0, 7)

	wanted = map[fetchPartKey]sessionPartition{key(0): at(15), key(1): at(20), key(3): at(0)}
	expect("0 moved, 2 gone, 3 new", fetch(wanted), 7, 2, []int32{0, 3}, []int32{2})
	answer(0, 7)
	expect("the leader holds the new set", fetch(wanted), 7, 3, nil, nil)

	if answer(kerr.FetchSessionIDNotFound.Code, 0) {
		t.Fatal("a session the leader does not know was taken as an answer")
	}
	expect("after FETCH_SESSION_ID_NOT_FOUND", fetch(wanted), 0, 0, []int32{0, 1, 3}, nil)
	answer(0, 0)
	expect("sessionless: full again", fetch(wanted), 0, 0, []int32{0, 1, 3}, nil)
	answer(0, 9)
	expect("a new session", fetch(wanted), 9, 1, nil, nil)
	if !answer(kerr.UnknownServerError.Code, 0) {
		t.Fatal("another error of the whole fetch was taken as the session's refusal")
	}
	expect("after another error: the session closed by a full fetch naming it", fetch(wanted), 9, 0, []int32{0, 1, 3}, nil)
	answer(0, 11)
	c.reset()
	expect("after a failed request", fetch(wanted), 0, 0, []int32{0, 1, 3}, nil)

	if nextSessionEpoch(1<<31-1) != 1 || nextSessionEpoch(5) != 6 {
		t.Fatal("epochs go 1 after the largest, else up by one")
	}
}
