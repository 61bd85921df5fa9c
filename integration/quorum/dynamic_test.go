package quorum

// Dynamic quorum membership (KIP-853) with the stock tool: the lab layout
// grows from three voters to four with `kafka-metadata-quorum
// add-controller`, keeps committing with one of the old voters dead, and
// shrinks back to three with `remove-controller`.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/gregorbroker/gregor/protocol"
)

// describeQuorum asks a broker (forwarded to the active controller).
func describeQuorum(ctx context.Context, t *testing.T, brk *node.Node) (*kmsg.DescribeQuorumResponseTopicPartition, error) {
	t.Helper()
	// Its own client, closed at once: callers poll.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brk.Addr()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeQuorumRequest()
	req.Topics = []kmsg.DescribeQuorumRequestTopic{{Topic: "__cluster_metadata", Partitions: []kmsg.DescribeQuorumRequestTopicPartition{{Partition: 0}}}}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return nil, fmt.Errorf("describe quorum: %+v", resp)
	}
	p := resp.Topics[0].Partitions[0]
	if p.ErrorCode != 0 {
		return nil, fmt.Errorf("describe quorum: error %d", p.ErrorCode)
	}
	return &p, nil
}

func ids(rs []kmsg.DescribeQuorumResponseTopicPartitionReplicaState) []int32 {
	var out []int32
	for _, r := range rs {
		out = append(out, r.ReplicaID)
	}
	slices.Sort(out)
	return out
}

// waitQuorum polls DescribeQuorum until ok says yes.
func waitQuorum(ctx context.Context, t *testing.T, brk *node.Node, what string, ok func(*kmsg.DescribeQuorumResponseTopicPartition) bool) *kmsg.DescribeQuorumResponseTopicPartition {
	t.Helper()
	var last *kmsg.DescribeQuorumResponseTopicPartition
	var lastErr error
	for ctx.Err() == nil {
		p, err := describeQuorum(ctx, t, brk)
		if err == nil && ok(p) {
			return p
		}
		last, lastErr = p, err
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: last %+v, %v", what, last, lastErr)
	return nil
}

func TestAddAndRemoveControllerWithTheStockTool(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a cluster of gregor processes and runs the Java tools")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := node.StockTool(ctx, t)
	quorumTool := func(args ...string) string {
		t.Helper()
		return run("MetadataQuorumCommand", args...)
	}

	ctrls, brks := node.StartSplit(t, 3, 3, fmt.Sprintf("broker.session.timeout.ms=%d", sessionTimeout.Milliseconds()),
		"broker.heartbeat.interval.ms=500")
	bootstrapController := ctrls[0].CtrlAddr()
	waitQuorum(ctx, t, brks[0], "three voters", func(p *kmsg.DescribeQuorumResponseTopicPartition) bool {
		return slices.Equal(ids(p.CurrentVoters), []int32{101, 102, 103})
	})

	// A fourth controller, formatted with --no-initial-controllers,
	// follows as an observer until it is caught up.
	joiner := node.StartJoiningController(t, ctrls[0], 104)
	waitQuorum(ctx, t, brks[0], "controller 104 observing, caught up", func(p *kmsg.DescribeQuorumResponseTopicPartition) bool {
		for _, o := range p.Observers {
			if o.ReplicaID == 104 && o.LastCaughtUpTimestamp > 0 {
				return true
			}
		}
		return false
	})

	props := filepath.Join(t.TempDir(), "controller.properties")
	body := strings.Join([]string{
		"node.id=104",
		"process.roles=controller",
		"controller.listener.names=CONTROLLER",
		"listeners=CONTROLLER://" + joiner.CtrlAddr(),
		"advertised.listeners=CONTROLLER://" + joiner.CtrlAddr(),
		"log.dirs=" + joiner.Dir,
		joiner.Quorum,
	}, "\n") + "\n"
	if err := os.WriteFile(props, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	out := quorumTool("--bootstrap-controller", bootstrapController, "--command-config", props, "add-controller")
	dir := node.MetaProperty(t, joiner, "directory.id")
	if want := fmt.Sprintf("Added controller 104 with directory id %s and endpoints: CONTROLLER://%s", dir, joiner.CtrlAddr()); !strings.Contains(out, want) {
		t.Fatalf("add-controller printed %q, want %q", out, want)
	}
	p := waitQuorum(ctx, t, brks[0], "four voters", func(p *kmsg.DescribeQuorumResponseTopicPartition) bool {
		return slices.Equal(ids(p.CurrentVoters), []int32{101, 102, 103, 104})
	})
	if status := quorumTool("--bootstrap-controller", bootstrapController, "describe", "--status"); !strings.Contains(status, `"id": 104`) {
		t.Fatalf("describe --status does not list voter 104:\n%s", status)
	}
	if repl := quorumTool("--bootstrap-controller", bootstrapController, "describe", "--replication"); !strings.Contains(repl, dir) {
		t.Fatalf("describe --replication does not list 104's directory %s:\n%s", dir, repl)
	}

	// Kill one of the old voters (not the active one): three of four
	// still commit.
	var victim *node.Node
	for _, c := range ctrls {
		if c.ID != p.LeaderID && c != ctrls[0] {
			victim = c
			break
		}
	}
	var victimDir protocol.UUID
	for _, v := range p.CurrentVoters {
		if v.ReplicaID == victim.ID {
			victimDir = v.ReplicaDirectoryID
		}
	}
	victim.Kill()
	adm := kadm.NewClient(node.NewClient(t, node.Addrs(brks)))
	res, err := adm.CreateTopic(ctx, 1, 1, nil, "with-one-voter-down")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("creating a topic with one of four voters down: %v", err)
	}

	quorumTool("--bootstrap-controller", bootstrapController, "remove-controller",
		"--controller-id", fmt.Sprint(victim.ID), "--controller-directory-id", victimDir.String())
	want := slices.DeleteFunc([]int32{101, 102, 103, 104}, func(id int32) bool { return id == victim.ID })
	waitQuorum(ctx, t, brks[0], "three voters again", func(p *kmsg.DescribeQuorumResponseTopicPartition) bool {
		return slices.Equal(ids(p.CurrentVoters), want)
	})
	res, err = adm.CreateTopic(ctx, 1, 1, nil, "after-remove")
	if err == nil {
		err = res.Err
	}
	if err != nil {
		t.Fatalf("creating a topic after the removal: %v", err)
	}
}
