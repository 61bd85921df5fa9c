package broker

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/coordinator/group"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// metadataFor asks Metadata v12 for topics, allowing auto-creation.
func metadataFor(t *testing.T, n *testNode, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	req.AllowAutoTopicCreation = true
	for _, name := range topics {
		req.Topics = append(req.Topics, kmsg.MetadataRequestTopic{Topic: kmsg.StringPtr(name)})
	}
	c.send(req, 1)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	c.recv(resp)
	return resp
}

func topicIn(t *testing.T, resp *kmsg.MetadataResponse, name string) kmsg.MetadataResponseTopic {
	t.Helper()
	for _, mt := range resp.Topics {
		if mt.Topic != nil && *mt.Topic == name {
			return mt
		}
	}
	t.Fatalf("topic %s missing from %+v", name, resp.Topics)
	return kmsg.MetadataResponseTopic{}
}

// waitMetadataTopic asks Metadata until the topic has partitions.
func waitMetadataTopic(t *testing.T, n *testNode, name string) kmsg.MetadataResponseTopic {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mt := topicIn(t, metadataFor(t, n, name), name)
		if mt.ErrorCode == 0 && len(mt.Partitions) > 0 {
			return mt
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared in Metadata: %+v", name, mt)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Auto-creation on Metadata answers as Kafka 4.3 does
// (AutoTopicCreationManager): the request that triggers the creation
// sees UNKNOWN_TOPIC_OR_PARTITION without partitions, the creation is not
// awaited, and a later Metadata finds the topic. An illegal name is
// INVALID_TOPIC_EXCEPTION whether or not auto-creation is enabled.
func TestMetadataAutoCreationAnswersUnknownFirst(t *testing.T) {
	n := startTestNode(t, map[string]string{"num.partitions": "2", "offsets.topic.num.partitions": "3"})

	first := topicIn(t, metadataFor(t, n, "fresh"), "fresh")
	if first.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(first.Partitions) != 0 || first.IsInternal {
		t.Fatalf("the Metadata that triggers the creation: %+v, want UNKNOWN_TOPIC_OR_PARTITION and no partitions", first)
	}
	if mt := waitMetadataTopic(t, n, "fresh"); len(mt.Partitions) != 2 {
		t.Fatalf("created with %d partitions, want num.partitions 2", len(mt.Partitions))
	}

	bad := topicIn(t, metadataFor(t, n, "bad name"), "bad name")
	if bad.ErrorCode != kerr.InvalidTopicException.Code || len(bad.Partitions) != 0 {
		t.Fatalf("an illegal name: %+v, want INVALID_TOPIC_EXCEPTION", bad)
	}

	// The offsets topic as Metadata creates it: internal, with the
	// offsets.topic.* settings.
	off := topicIn(t, metadataFor(t, n, group.OffsetsTopic), group.OffsetsTopic)
	if off.ErrorCode != kerr.UnknownTopicOrPartition.Code || !off.IsInternal {
		t.Fatalf("%s on first use: %+v, want UNKNOWN_TOPIC_OR_PARTITION, internal", group.OffsetsTopic, off)
	}
	if mt := waitMetadataTopic(t, n, group.OffsetsTopic); len(mt.Partitions) != 3 || !mt.IsInternal {
		t.Fatalf("%s created as %+v, want 3 internal partitions", group.OffsetsTopic, mt)
	}

	// A deleted topic is not back in the answer that recreates it.
	c := dialRaw(t, n.addr)
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(5)
	del.TimeoutMillis = 5000
	del.TopicNames = []string{"fresh"}
	c.send(del, 1)
	dresp := kmsg.NewPtrDeleteTopicsResponse()
	dresp.SetVersion(5)
	c.recv(dresp)
	if code := dresp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("deleting: %v", kerr.ErrorForCode(code))
	}
	again := topicIn(t, metadataFor(t, n, "fresh"), "fresh")
	if again.ErrorCode != kerr.UnknownTopicOrPartition.Code || len(again.Partitions) != 0 {
		t.Fatalf("Metadata right after the delete: %+v, want UNKNOWN_TOPIC_OR_PARTITION", again)
	}
}

func TestMetadataIllegalNameWithoutAutoCreation(t *testing.T) {
	n := startTestNode(t, map[string]string{"auto.create.topics.enable": "false"})
	for _, name := range []string{"bad name", "..", "ok-but-missing"} {
		want := kerr.InvalidTopicException.Code
		if name == "ok-but-missing" {
			want = kerr.UnknownTopicOrPartition.Code
		}
		if mt := topicIn(t, metadataFor(t, n, name), name); mt.ErrorCode != want {
			t.Fatalf("%q: %v, want %v", name, kerr.ErrorForCode(mt.ErrorCode), kerr.ErrorForCode(want))
		}
	}
}

// fakeController answers CreateTopics with an error after release closes.
type fakeController struct {
	mu      sync.Mutex
	calls   [][]string
	release chan struct{}
}

func (f *fakeController) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	ct := req.(*kmsg.CreateTopicsRequest)
	var names []string
	for _, t := range ct.Topics {
		names = append(names, t.Topic)
	}
	f.mu.Lock()
	f.calls = append(f.calls, names)
	f.mu.Unlock()
	<-f.release
	resp := ct.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, name := range names {
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic, rt.ErrorCode = name, kerr.InvalidReplicationFactor.Code
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (f *fakeController) callCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// A creation in flight is not sent again; a failed one is forgotten, so
// the next Metadata asks again (Kafka's inflightTopics).
func TestAutoCreationInFlightAndFailure(t *testing.T) {
	fc := &fakeController{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &Broker{ctrl: fc, log: discardLogger(), runCtx: ctx, autoCreating: map[string]bool{}}
	b.autoCreateTopics([]string{"a", "b"}, nil)
	b.autoCreateTopics([]string{"a", "b", "c"}, nil)
	deadline := time.Now().Add(5 * time.Second)
	for fc.callCount() < 2 {
		if time.Now().After(deadline) {
			fc.mu.Lock()
			t.Fatalf("waiting for two creations to reach the controller: calls %v", fc.calls)
		}
		time.Sleep(time.Millisecond)
	}
	fc.mu.Lock()
	got := fmt.Sprint(fc.calls)
	fc.mu.Unlock()
	// The two creations run on their own goroutines, in either order.
	if got != "[[a b] [c]]" && got != "[[c] [a b]]" {
		t.Fatalf("creations sent: %s, want [a b] and then only [c]", got)
	}
	close(fc.release)
	b.bg.Wait()
	b.autoCreateTopics([]string{"a"}, nil)
	b.bg.Wait()
	if n := fc.callCount(); n != 3 {
		t.Fatalf("%d creations; a failed one must be sent again", n)
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
