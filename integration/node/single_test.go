package node_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kadm"
)

// StartSingle brings up a node of GREGOR_TEST_FLAVOR (gregor by default)
// with an extra listener and extra properties, each listener answering,
// and Stop kills it and removes its data.
func TestStartSingleWithExtraListener(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	n := node.StartSingle(ctx, t, node.Flavor(), integration.NodeSpec{
		Listeners:  []integration.NodeListener{{Name: "Extra", Protocol: "PLAINTEXT"}},
		Properties: map[string]string{"num.partitions": "3"},
	})
	for _, name := range []string{"PLAINTEXT", "EXTRA"} {
		if n.Addr(name) == "" {
			t.Fatalf("no address for listener %s: %v", name, n.Addrs)
		}
		if _, err := integration.ProbeApiVersions(ctx, n.Addr(name)); err != nil {
			t.Errorf("listener %s at %s: %v", name, n.Addr(name), err)
		}
	}
	// The extra property holds: a topic created with the default
	// partition count has num.partitions of them.
	adm := kadm.NewClient(node.NewClient(t, []string{n.Addr("extra")}))
	created, err := adm.CreateTopic(ctx, -1, -1, nil, "defaults")
	if err != nil || created.Err != nil {
		t.Fatalf("creating a topic: %v %v", err, created.Err)
	}
	if created.NumPartitions != 3 {
		t.Errorf("a topic with the default partition count has %d partitions, want num.partitions=3", created.NumPartitions)
	}
	if err := n.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(n.LogDir); !os.IsNotExist(err) {
		t.Errorf("the node's data is still there after Stop: %v", err)
	}
	if n.Alive() == nil {
		t.Error("the node is alive after Stop")
	}
}
