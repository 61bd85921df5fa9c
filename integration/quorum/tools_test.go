package quorum

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
)

// TestClusterAndFeatureTools: the stock 4.3.1 kafka-cluster and
// kafka-features against the lab layout. cluster-id names the cluster;
// unregister removes a stopped broker from the cluster (DescribeCluster
// no longer lists it, fenced or not); a transaction.version downgrade
// through one broker is seen through another and upgraded back.
func TestClusterAndFeatureTools(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes and runs the Java tools")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	tool := node.StockTool(ctx, t)
	_, brks := node.StartSplit(t, 3, 3, fmt.Sprintf("broker.session.timeout.ms=%d", sessionTimeout.Milliseconds()),
		"broker.heartbeat.interval.ms=500")
	waitUnfenced(ctx, t, brks)

	out := tool("ClusterTool", "cluster-id", "--bootstrap-server", brks[1].Addr())
	bm, err := kadm.NewClient(node.NewClient(t, []string{brks[0].Addr()})).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Cluster ID: "+bm.Cluster) {
		t.Fatalf("kafka-cluster cluster-id printed %q, want cluster %s", out, bm.Cluster)
	}

	if err := brks[2].Stop(); err != nil {
		t.Fatalf("stopping broker 3: %v", err)
	}
	out = tool("ClusterTool", "unregister", "--bootstrap-server", brks[0].Addr(), "--id", "3")
	if !strings.Contains(out, "Broker 3 is no longer registered.") {
		t.Fatalf("kafka-cluster unregister printed %q", out)
	}
	node.WaitFor(t, 10*time.Second, "broker 3 gone from DescribeCluster on both brokers", func() bool {
		for _, b := range brks[:2] {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
			if err != nil {
				t.Fatal(err)
			}
			req := kmsg.NewPtrDescribeClusterRequest()
			req.IncludeFencedBrokers = true
			resp, err := req.RequestWith(ctx, cl)
			cl.Close()
			if err != nil {
				return false
			}
			var ids []int32
			for _, br := range resp.Brokers {
				ids = append(ids, br.NodeID)
			}
			if slices.Contains(ids, 3) {
				return false
			}
		}
		return true
	})

	out = tool("FeatureCommand", "--bootstrap-server", brks[0].Addr(), "downgrade", "--feature", "transaction.version=1")
	if !strings.Contains(out, "transaction.version was downgraded to 1.") {
		t.Fatalf("kafka-features downgrade printed %q", out)
	}
	node.WaitFor(t, 10*time.Second, "transaction.version 1 through broker 2", func() bool {
		for _, line := range strings.Split(tool("FeatureCommand", "--bootstrap-server", brks[1].Addr(), "describe"), "\n") {
			if f := strings.Fields(line); len(f) >= 8 && f[1] == "transaction.version" && f[6] == "FinalizedVersionLevel:" {
				return f[7] == "1"
			}
		}
		return false
	})
	out = tool("FeatureCommand", "--bootstrap-server", brks[1].Addr(), "upgrade", "--feature", "transaction.version=2")
	if !strings.Contains(out, "transaction.version was upgraded to 2.") {
		t.Fatalf("kafka-features upgrade printed %q", out)
	}
}
