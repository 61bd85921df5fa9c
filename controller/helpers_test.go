package controller

import (
	"github.com/gregorbroker/gregor/controller/decide/decidetest"

	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

const testDir = "/meta"

func testLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func formatTest(t testing.TB, fsys vfs.FS) {
	t.Helper()
	err := Format(fsys, testDir, FormatOptions{
		ClusterID:   "test-cluster",
		NodeID:      1,
		DirectoryID: protocol.RandomUUID(),
		Voters:      []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}}},
	})
	if err != nil {
		t.Fatalf("format: %v", err)
	}
}

func testConfig(fsys vfs.FS) Config {
	return Config{
		FS:                fsys,
		NodeID:            1,
		ClusterID:         "test-cluster",
		MetadataDir:       testDir,
		DefaultPartitions: 1,
		Schema:            decidetest.Schema{},
		SupportedFeatures: map[string][2]int16{
			metadata.MetadataVersionFeature: {7, 30},
			metadata.KRaftVersionFeature:    {0, 1},
			"group.version":                 {0, 1},
		},
		Logger:       testLogger(),
		TickInterval: 10 * time.Millisecond,
	}
}

// startTest formats (if needed) and starts a single-node controller.
func startTest(t testing.TB, fsys *vfs.MemFS, mutate ...func(*Config)) *Controller {
	t.Helper()
	if _, err := ReadFormat(fsys, testDir); err != nil {
		formatTest(t, fsys)
	}
	cfg := testConfig(fsys)
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// registerBroker registers and unfences a broker; it returns its epoch.
func registerBroker(t testing.TB, c *Controller, id int32) int64 {
	t.Helper()
	return registerBrokerAt(t, c, id, "localhost", uint16(9092+id))
}

// registerBrokerAt is registerBroker with the broker's one listener at
// host:port.
func registerBrokerAt(t testing.TB, c *Controller, id int32, host string, port uint16) int64 {
	t.Helper()
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 3
	req.BrokerID = id
	req.ClusterID = "test-cluster"
	req.IncarnationID = protocol.RandomUUID()
	req.LogDirs = [][16]byte{protocol.RandomUUID()}
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: host, Port: port}}
	req.Features = []kmsg.BrokerRegistrationRequestFeature{
		{Name: metadata.MetadataVersionFeature, MinSupportedVersion: 7, MaxSupportedVersion: 30},
		{Name: metadata.KRaftVersionFeature, MinSupportedVersion: 0, MaxSupportedVersion: 1},
	}
	resp := c.RegisterBroker(ctxT(t), req)
	if resp.ErrorCode != 0 {
		t.Fatalf("register broker %d: error %d", id, resp.ErrorCode)
	}
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID = id
	hb.BrokerEpoch = resp.BrokerEpoch
	hb.CurrentMetadataOffset = c.Image().Offset
	hr := c.BrokerHeartbeat(ctxT(t), hb)
	if hr.ErrorCode != 0 || hr.IsFenced || !hr.IsCaughtUp {
		t.Fatalf("heartbeat broker %d: %+v", id, hr)
	}
	if c.Image().Brokers[id].Fenced {
		t.Fatalf("broker %d still fenced in the image", id)
	}
	return resp.BrokerEpoch
}

func createTopic(t testing.TB, c *Controller, name string, partitions int32, rf int16) kmsg.CreateTopicsResponseTopic {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic = name
	rt.NumPartitions = partitions
	rt.ReplicationFactor = rf
	req.Topics = append(req.Topics, rt)
	resp := c.CreateTopics(ctxT(t), req)
	if len(resp.Topics) != 1 {
		t.Fatalf("create %s: %d results", name, len(resp.Topics))
	}
	return resp.Topics[0]
}

// The request codes and config names the tests write, as Kafka defines
// them (the decide package keeps its own).
const (
	// IncrementalAlterConfigs' operations.
	opSet      int8 = 0
	opDelete   int8 = 1
	opAppend   int8 = 2
	opSubtract int8 = 3
	// UpdateFeatures' upgrade types.
	upgradeTypeUpgrade       int8 = 1
	upgradeTypeSafeDowngrade int8 = 2
	// ElectLeaders' election types.
	electionPreferred int8 = 0
	electionUnclean   int8 = 1

	minInSyncReplicasConfig     = "min.insync.replicas"
	uncleanLeaderElectionConfig = "unclean.leader.election.enable"
)

func hasPreferredLeader(p metadata.Partition) bool {
	return len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
}

// containsAll reports whether s has every element of sub.
func containsAll(s, sub []int32) bool {
	for _, v := range sub {
		if !slices.Contains(s, v) {
			return false
		}
	}
	return true
}

// withoutAll is s without the elements of drop, in order.
func withoutAll(s, drop []int32) []int32 {
	return slices.DeleteFunc(slices.Clone(s), func(v int32) bool { return slices.Contains(drop, v) })
}

func wantPartition(t *testing.T, step string, got metadata.Partition, leader int32, isr, elr, lastKnown []int32) {
	t.Helper()
	if got.Leader != leader || !slices.Equal(got.ISR, isr) || !slices.Equal(got.ELR, elr) || !slices.Equal(got.LastKnownELR, lastKnown) {
		t.Fatalf("%s: leader %d ISR %v ELR %v LastKnownELR %v; want leader %d ISR %v ELR %v LastKnownELR %v",
			step, got.Leader, got.ISR, got.ELR, got.LastKnownELR, leader, isr, elr, lastKnown)
	}
}
