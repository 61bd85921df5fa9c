package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// slowSyncFS delays the next SyncDir of one directory once armed: the log
// dir's sync after a batch of new partition dirs, so that opening the
// partitions takes that long.
type slowSyncFS struct {
	vfs.FS
	mu    sync.Mutex
	dir   string
	delay time.Duration
}

func (s *slowSyncFS) arm(dir string, delay time.Duration) {
	s.mu.Lock()
	s.dir, s.delay = dir, delay
	s.mu.Unlock()
}

func (s *slowSyncFS) SyncDir(dir string) error {
	s.mu.Lock()
	var delay time.Duration
	if dir == s.dir {
		delay, s.delay = s.delay, 0
	}
	s.mu.Unlock()
	time.Sleep(delay)
	return s.FS.SyncDir(dir)
}

func startSlowNode(t *testing.T, overrides map[string]string) (*testNode, *slowSyncFS) {
	t.Helper()
	slow := &slowSyncFS{FS: vfs.OSFS{}}
	return startTestNodeWithLogFS(t, overrides, 1, nil, slow), slow
}

func createTopicsRequest(name string, partitions, timeoutMs int32) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(7)
	req.TimeoutMillis = timeoutMs
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, partitions, 1
	req.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	return req
}

// produceAllRaw sends one record to each of the topic's partitions in one
// Produce v9 (acks=-1) and returns each partition's error code.
func produceAllRaw(t *testing.T, c *rawConn, topic string, partitions int32, corr int32) map[int32]int16 {
	t.Helper()
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	bb.Add(nil, []byte("first"), nil, time.Now().UnixMilli())
	batch, err := bb.Build()
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.ProduceRequestTopic{Topic: topic}
	for p := range partitions {
		rt.Partitions = append(rt.Partitions, kmsg.ProduceRequestTopicPartition{Partition: p, Records: append([]byte(nil), batch...)})
	}
	req.Topics = []kmsg.ProduceRequestTopic{rt}
	c.send(req, corr)
	resp := kmsg.NewPtrProduceResponse()
	resp.SetVersion(9)
	c.recv(resp)
	out := map[int32]int16{}
	for _, p := range resp.Topics[0].Partitions {
		out[p.Partition] = p.ErrorCode
	}
	return out
}

func requireAllAccepted(t *testing.T, topic string, partitions int32, codes map[int32]int16) {
	t.Helper()
	if len(codes) != int(partitions) {
		t.Fatalf("%s: %d answers for %d partitions", topic, len(codes), partitions)
	}
	for p, code := range codes {
		if code != 0 {
			t.Fatalf("%s-%d: the first produce right after the creation answered %v", topic, p, kerr.ErrorForCode(code))
		}
	}
}

// Concurrent CreateTopics are answered only once every partition they
// created accepts a produce, even when opening the partitions takes longer
// than the fixed 2 s the broker used to wait: the produce sent right after
// each answer meets no NOT_LEADER_OR_FOLLOWER.
func TestCreateTopicsAnswersOnceEveryPartitionAcceptsAProduce(t *testing.T) {
	n, slow := startSlowNode(t, nil)
	slow.arm(n.dir, 2500*time.Millisecond)
	const topics, partitions = 5, 40
	conns := make([]*rawConn, topics)
	for i := range conns {
		conns[i] = dialRaw(t, n.addr)
		conns[i].send(createTopicsRequest(fmt.Sprintf("burst-%d", i), partitions, 30000), 1)
	}
	for i, c := range conns {
		resp := kmsg.NewPtrCreateTopicsResponse()
		resp.SetVersion(7)
		c.recv(resp)
		if code := resp.Topics[0].ErrorCode; code != 0 {
			t.Fatalf("creating burst-%d: %v", i, kerr.ErrorForCode(code))
		}
		name := fmt.Sprintf("burst-%d", i)
		requireAllAccepted(t, name, partitions, produceAllRaw(t, c, name, partitions, 2))
	}
}

// When the partitions take longer to open than the request's timeout, the
// committed creation is answered at the timeout as a success (as Kafka
// answers it), and the partitions appear shortly after.
func TestCreateTopicsAnswersAtItsTimeoutWhenPartitionsAreSlow(t *testing.T) {
	n, slow := startSlowNode(t, nil)
	slow.arm(n.dir, 3*time.Second)
	c := dialRaw(t, n.addr)
	c.send(createTopicsRequest("slow", 3, 300), 1)
	resp := kmsg.NewPtrCreateTopicsResponse()
	resp.SetVersion(7)
	c.recv(resp)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("creating slow: %v", kerr.ErrorForCode(code))
	}
	if n.b.replicas.Hosts(replica.TopicPartition{Topic: "slow"}) {
		t.Fatal("answered after the partitions opened: the timeout did not bound the wait")
	}
	deadline := time.Now().Add(20 * time.Second)
	for !n.b.replicas.Hosts(replica.TopicPartition{Topic: "slow", Partition: 2}) {
		if time.Now().After(deadline) {
			t.Fatal("the partitions never opened")
		}
		time.Sleep(10 * time.Millisecond)
	}
	requireAllAccepted(t, "slow", 3, produceAllRaw(t, c, "slow", 3, 2))
}

// CreatePartitions, too, answers once the new partitions accept a produce.
func TestCreatePartitionsAnswersOnceTheyAcceptAProduce(t *testing.T) {
	n, slow := startSlowNode(t, nil)
	createTopic(t, n, "grow", 2, nil)
	slow.arm(n.dir, 2500*time.Millisecond)
	c := dialRaw(t, n.addr)
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.SetVersion(3)
	req.TimeoutMillis = 30000
	req.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "grow", Count: 30}}
	c.send(req, 1)
	resp := kmsg.NewPtrCreatePartitionsResponse()
	resp.SetVersion(3)
	c.recv(resp)
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("CreatePartitions: %v", kerr.ErrorForCode(code))
	}
	requireAllAccepted(t, "grow", 30, produceAllRaw(t, c, "grow", 30, 2))
}

// A topic auto-created by Metadata is shown only once its partitions are
// open here: the produce that follows the first Metadata answer naming it
// is accepted.
func TestAutoCreatedTopicShownOnceItAcceptsAProduce(t *testing.T) {
	n, slow := startSlowNode(t, map[string]string{"auto.create.topics.enable": "true", "num.partitions": "8"})
	slow.arm(n.dir, 1500*time.Millisecond)
	c := dialRaw(t, n.addr)
	name := "auto"
	deadline := time.Now().Add(20 * time.Second)
	for corr := int32(1); ; corr++ {
		req := kmsg.NewPtrMetadataRequest()
		req.SetVersion(12)
		req.AllowAutoTopicCreation = true
		req.Topics = []kmsg.MetadataRequestTopic{{Topic: &name}}
		c.send(req, corr)
		resp := kmsg.NewPtrMetadataResponse()
		resp.SetVersion(12)
		c.recv(resp)
		if resp.Topics[0].ErrorCode == 0 {
			if len(resp.Topics[0].Partitions) != 8 {
				t.Fatalf("%d partitions", len(resp.Topics[0].Partitions))
			}
			break
		}
		if code := resp.Topics[0].ErrorCode; code != kerr.UnknownTopicOrPartition.Code {
			t.Fatalf("Metadata while creating: %v", kerr.ErrorForCode(code))
		}
		if time.Now().After(deadline) {
			t.Fatal("the auto-created topic never appeared")
		}
		time.Sleep(10 * time.Millisecond)
	}
	requireAllAccepted(t, name, 8, produceAllRaw(t, c, name, 8, 1000))
}
