package replica

// A follower fetcher's incremental fetch session (KIP-227), the client side
// of broker/fetchsession.go, as Kafka's FetchSessionHandler keeps it for
// each replica fetcher thread:
//
//   - With no session, a full fetch (SessionId 0, epoch 0) lists every
//     partition the fetcher wants; an answer with a SessionId opens the
//     session at epoch 1, one with 0 (the leader's cache is full) leaves the
//     fetcher sessionless, and the next fetch tries again.
//   - In a session, a fetch names it and its next epoch and lists only the
//     partitions that are new or whose position changed (fetch offset, last
//     fetched epoch, log start offset, leader epoch, max bytes); those no
//     longer wanted (moved away, backing off, throttled) are forgotten. The
//     leader reads every partition of the session and answers those with
//     news.
//   - A refused session (FETCH_SESSION_ID_NOT_FOUND: evicted, or the leader
//     restarted; INVALID_FETCH_SESSION_EPOCH) is dropped and the next fetch
//     opens a new one at once; any other error of the whole fetch closes it
//     (the next full fetch names it with epoch 0), as does a failed request
//     (reset).
//
// The fetcher's goroutine owns its session: no lock.

import (
	"errors"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionPartition is what a fetch says of one partition, and what the
// leader's session holds of it once sent.
type sessionPartition struct {
	topic            string
	leaderEpoch      int32
	fetchOffset      int64
	lastFetchedEpoch int32
	logStartOffset   int64
	maxBytes         int32
}

type fetchSessionClient struct {
	// id is the leader's session id (0: none); epoch the epoch of the next
	// fetch in it (0: the next fetch is full and opens one).
	id    int32
	epoch int32
	// held is what the leader's session holds, as of the last answered
	// fetch; pending what the fetch in flight will make it.
	held    map[fetchPartKey]sessionPartition
	pending map[fetchPartKey]sessionPartition
	// full: the fetch in flight is full.
	full bool
}

// reset forgets the session: the next fetch is full and opens a new one.
func (c *fetchSessionClient) reset() {
	*c = fetchSessionClient{}
}

// build fills req's session fields, partitions and forgotten topics for
// the partitions wanted now.
func (c *fetchSessionClient) build(req *kmsg.FetchRequest, wanted map[fetchPartKey]sessionPartition) {
	c.pending = wanted
	c.full = c.id == 0 || c.epoch == 0
	req.SessionID, req.SessionEpoch = c.id, c.epoch
	topics := map[protocol.UUID]int{}
	if c.full {
		req.SessionEpoch = 0
		for k, sp := range wanted {
			addFetchPartition(req, topics, k, sp)
		}
		return
	}
	for k, sp := range wanted {
		if c.held[k] != sp {
			addFetchPartition(req, topics, k, sp)
		}
	}
	var forgotten map[protocol.UUID]int
	for k, sp := range c.held {
		if _, ok := wanted[k]; ok {
			continue
		}
		if forgotten == nil {
			forgotten = map[protocol.UUID]int{}
		}
		ti, ok := forgotten[k.topicID]
		if !ok {
			ti = len(req.ForgottenTopics)
			forgotten[k.topicID] = ti
			ft := kmsg.NewFetchRequestForgottenTopic()
			ft.Topic, ft.TopicID = sp.topic, k.topicID
			req.ForgottenTopics = append(req.ForgottenTopics, ft)
		}
		req.ForgottenTopics[ti].Partitions = append(req.ForgottenTopics[ti].Partitions, k.partition)
	}
}

// addFetchPartition lists one partition in req, under its topic (topics
// indexes req.Topics by topic id).
func addFetchPartition(req *kmsg.FetchRequest, topics map[protocol.UUID]int, k fetchPartKey, sp sessionPartition) {
	ti, ok := topics[k.topicID]
	if !ok {
		ti = len(req.Topics)
		topics[k.topicID] = ti
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = sp.topic, k.topicID
		req.Topics = append(req.Topics, t)
	}
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = k.partition
	rp.CurrentLeaderEpoch = sp.leaderEpoch
	rp.FetchOffset = sp.fetchOffset
	rp.LastFetchedEpoch = sp.lastFetchedEpoch
	rp.LogStartOffset = sp.logStartOffset
	rp.PartitionMaxBytes = sp.maxBytes
	req.Topics[ti].Partitions = append(req.Topics[ti].Partitions, rp)
}

// answered takes the leader's answer to the fetch built last. It reports
// false when the leader refused the session itself (the caller drops the
// answer and fetches again at once, full); any other error of the whole
// fetch closes the session and is the caller's to handle.
func (c *fetchSessionClient) answered(resp *kmsg.FetchResponse) bool {
	switch err := kerr.ErrorForCode(resp.ErrorCode); {
	case err == nil:
	case errors.Is(err, kerr.FetchSessionIDNotFound), errors.Is(err, kerr.InvalidFetchSessionEpoch), errors.Is(err, kerr.FetchSessionTopicIDError):
		c.reset()
		return false
	default:
		// Kafka's nextCloseExisting: the next fetch names the session
		// with epoch 0, closing it and opening another.
		c.epoch, c.held, c.pending = 0, nil, nil
		return true
	}
	switch {
	case c.full && resp.SessionID == 0:
		// Sessionless (the leader's cache is full): full again next time.
		c.id, c.epoch, c.held = 0, 0, nil
	case c.full:
		c.id, c.epoch, c.held = resp.SessionID, 1, c.pending
	default:
		c.held = c.pending
		c.epoch = nextSessionEpoch(c.epoch)
	}
	c.pending = nil
	return true
}

// nextSessionEpoch is the epoch after e: 1 after the largest, skipping the
// initial and final epochs (Kafka's FetchMetadata.nextEpoch).
func nextSessionEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}
