package integration_test

// The cluster launcher against a real three-node cluster: topics spread
// over every broker, records survive the round trip, and the quorum elects
// a new leader when the active controller is killed.
//
// CLUSTER_TARGET picks the implementation: gregor (the default,
// ./cmd/gregor given the properties files) or kafka (Apache Kafka 4.3.1
// from the harness's Maven jars, which proves the test).

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// electionBound is how long a new quorum leader may take after the old one
// is killed: a few times what KRaft's defaults allow for noticing a dead
// leader (controller.quorum.fetch.timeout.ms, 2 s) and running an election
// (controller.quorum.election.timeout.ms, 1 s, plus backoff). It bounds a
// hang; it measures nothing.
const electionBound = 15 * time.Second

func TestClusterCombined3FailsOverController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	flavor := os.Getenv("CLUSTER_TARGET")
	switch flavor {
	case "":
		flavor = "gregor"
	case "kafka", "gregor":
	default:
		t.Fatalf("CLUSTER_TARGET=%s: want kafka or gregor", flavor)
	}
	if flavor == "kafka" {
		if _, err := exec.LookPath("java"); err != nil {
			t.Skip("java not found: the Apache Kafka cluster needs a JDK")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tools := integration.NewTools(root)
	if flavor == "kafka" {
		// A first fetch of the jars takes a while and needs Maven.
		if _, err := tools.MavenLibs(ctx, integration.SetKafka); err != nil {
			t.Skipf("Apache Kafka jars unavailable: %v", err)
		}
	}
	cl, err := integration.StartCluster(ctx, tools, flavor, integration.Combined3, t.TempDir(), 3*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Stop(); err != nil {
			t.Errorf("stopping the cluster: %v", err)
		}
	})
	t.Logf("started %s; bootstrap %s", cl.Describe, cl.Bootstrap())

	client := newClusterClient(t, cl.Bootstrap())
	adm := kadm.NewClient(client)

	// Six partitions with one replica each are spread over all brokers.
	topic := "cluster-spread"
	createClusterTopic(ctx, t, adm, topic, 6)
	leaders := waitLeaders(ctx, t, adm, topic, 6)
	var brokerIDs []int32
	for _, b := range cl.Brokers() {
		brokerIDs = append(brokerIDs, int32(b.ID))
	}
	for _, id := range brokerIDs {
		if leaders[id] == 0 {
			t.Fatalf("no partition of %s led by broker %d: leaders per broker %v", topic, id, leaders)
		}
	}

	produceConsumeAll(ctx, t, client, cl.Bootstrap(), topic, 1000)

	// Kill the active controller; the other two voters elect a new one.
	before := describeQuorum(ctx, t, client)
	killed := int(before.LeaderID)
	if cl.Node(killed) == nil || !cl.Node(killed).IsController() {
		t.Fatalf("quorum leader %d is not one of the cluster's controllers", killed)
	}
	t.Logf("active controller is node %d (epoch %d); killing it", killed, before.LeaderEpoch)
	if err := cl.Kill(killed); err != nil {
		t.Fatal(err)
	}
	var survivors []string
	for _, b := range cl.Brokers() {
		if b.ID != killed {
			survivors = append(survivors, b.Addr())
		}
	}
	client.Close()
	client = newClusterClient(t, strings.Join(survivors, ","))
	adm = kadm.NewClient(client)
	start := time.Now()
	var after kmsg.DescribeQuorumResponseTopicPartition
	for {
		qctx, qcancel := context.WithTimeout(ctx, 3*time.Second)
		p, err := tryDescribeQuorum(qctx, client)
		qcancel()
		if err == nil && p.LeaderID >= 0 && int(p.LeaderID) != killed && p.LeaderEpoch > before.LeaderEpoch {
			after = p
			break
		}
		if time.Since(start) > electionBound {
			t.Fatalf("no new quorum leader %s after killing node %d (last: leader %d epoch %d, err %v)", electionBound, killed, p.LeaderID, p.LeaderEpoch, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("node %d leads the quorum at epoch %d, %s after the kill", after.LeaderID, after.LeaderEpoch, time.Since(start).Round(time.Millisecond))

	// The new controller takes metadata changes.
	createClusterTopic(ctx, t, adm, "cluster-after-failover", 3)

	// The killed node comes back on its own data and ports and rejoins.
	if err := cl.Restart(ctx, killed); err != nil {
		t.Fatal(err)
	}
	client.Close()
	client = newClusterClient(t, cl.Bootstrap())
	adm = kadm.NewClient(client)
	waitBrokers(ctx, t, adm, brokerIDs)
	createClusterTopic(ctx, t, adm, "cluster-after-restart", 3)
}

func newClusterClient(t *testing.T, bootstrap string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createClusterTopic creates a topic with one replica per partition, retrying
// while the cluster reports a retriable error (a controller that is still
// being elected, or brokers that have not all registered).
func createClusterTopic(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := adm.CreateTopic(ctx, partitions, 1, nil, topic)
		if err == nil {
			err = res.Err
		}
		if err == nil {
			return
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			return // an earlier attempt went through; its answer was lost
		}
		if !kerr.IsRetriable(err) && !errors.Is(err, context.DeadlineExceeded) || time.Now().After(deadline) {
			t.Fatalf("creating %s: %v", topic, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitLeaders waits until every partition of topic has a leader and
// returns how many partitions each broker leads.
func waitLeaders(ctx context.Context, t *testing.T, adm *kadm.Client, topic string, partitions int) map[int32]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			td := md.Topics[topic]
			leaders := map[int32]int{}
			led := 0
			for _, p := range td.Partitions {
				if p.Err == nil && p.Leader >= 0 {
					leaders[p.Leader]++
					led++
				}
			}
			if td.Err == nil && len(td.Partitions) == partitions && led == partitions {
				return leaders
			}
			err = fmt.Errorf("%d of %d partitions led (%v)", led, partitions, td.Err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("leaders of %s: %v", topic, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// waitBrokers waits until the metadata lists exactly the brokers ids.
func waitBrokers(ctx context.Context, t *testing.T, adm *kadm.Client, ids []int32) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		md, err := adm.Metadata(ctx)
		if err == nil {
			got := md.Brokers.NodeIDs()
			if fmt.Sprint(got) == fmt.Sprint(ids) {
				return
			}
			err = fmt.Errorf("brokers %v, want %v", got, ids)
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for the restarted broker: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// produceConsumeAll produces n keyed records to topic (spread over its
// partitions by key) and reads every one back exactly once.
func produceConsumeAll(ctx context.Context, t *testing.T, client *kgo.Client, bootstrap, topic string, n int) {
	t.Helper()
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "v%d", i)})
	}
	if err := client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records: %v", n, err)
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	seen := map[string]int{}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for len(seen) < n {
		fs := consumer.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consumed %d of %d distinct records: %v", len(seen), n, cctx.Err())
		}
		if err := fs.Err(); err != nil {
			t.Fatalf("consuming: %v", err)
		}
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for i := range n {
		if c := seen[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Fatalf("record v%d read %d times, want once", i, c)
		}
	}
}

func describeQuorum(ctx context.Context, t *testing.T, client *kgo.Client) kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	p, err := tryDescribeQuorum(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryDescribeQuorum asks a broker (which forwards to the active
// controller) for the metadata partition's quorum.
func tryDescribeQuorum(ctx context.Context, client *kgo.Client) (kmsg.DescribeQuorumResponseTopicPartition, error) {
	req := kmsg.NewPtrDescribeQuorumRequest()
	rt := kmsg.NewDescribeQuorumRequestTopic()
	rt.Topic = "__cluster_metadata"
	rp := kmsg.NewDescribeQuorumRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, client)
	none := kmsg.DescribeQuorumResponseTopicPartition{LeaderID: -1}
	if err != nil {
		return none, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return none, fmt.Errorf("DescribeQuorum: %w", err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return none, fmt.Errorf("DescribeQuorum: %d topics in the answer, want the metadata partition", len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return none, fmt.Errorf("DescribeQuorum partition: %w", err)
	}
	return p, nil
}
