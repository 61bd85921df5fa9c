package controller

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// startELRTest starts a controller formatted with eligible leader replicas
// on, as a Kafka 4.3 cluster is.
func startELRTest(t *testing.T, mutate ...func(*Config)) *Controller {
	t.Helper()
	fsys := vfs.NewMemFS()
	formatELRTest(t, fsys)
	return startTest(t, fsys, append([]func(*Config){withELRSupport}, mutate...)...)
}

// formatELRTest formats fsys with eligible leader replicas on.
func formatELRTest(t *testing.T, fsys vfs.FS) {
	t.Helper()
	err := Format(fsys, testDir, FormatOptions{
		ClusterID:   "test-cluster",
		NodeID:      1,
		DirectoryID: protocol.RandomUUID(),
		Voters:      []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}}},
		Features:    map[string]int16{metadata.EligibleLeaderReplicasFeature: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// registerELRBroker registers and unfences a broker that supports ELR.
func registerELRBroker(t *testing.T, c *Controller, id int32) int64 {
	t.Helper()
	req := registration(id, protocol.RandomUUID())
	req.Features = append(req.Features, kmsg.BrokerRegistrationRequestFeature{Name: metadata.EligibleLeaderReplicasFeature, MinSupportedVersion: 0, MaxSupportedVersion: 1})
	resp := c.RegisterBroker(ctxT(t), req)
	if resp.ErrorCode != 0 {
		t.Fatalf("register broker %d: error %d", id, resp.ErrorCode)
	}
	if r := heartbeat(t, c, id, resp.BrokerEpoch); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("heartbeat broker %d: %+v", id, r)
	}
	return resp.BrokerEpoch
}

func withELRSupport(cfg *Config) {
	cfg.SupportedFeatures[metadata.EligibleLeaderReplicasFeature] = [2]int16{0, 1}
}

func setConfig(t *testing.T, c *Controller, typ kmsg.ConfigResourceType, name, key string, op int8, value *string) *kmsg.IncrementalAlterConfigsResponseResource {
	t.Helper()
	resp := c.IncrementalAlterConfigs(ctxT(t), alterReq(typ, name, key, op, value))
	return &resp.Resources[0]
}

func clusterConfig(c *Controller) map[string]string {
	return c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker}]
}

func TestELRConfigRules(t *testing.T) {
	c := startELRTest(t)
	// Bootstrap with ELR sets a cluster-wide min.insync.replicas.
	if v := clusterConfig(c)[minInSyncReplicasConfig]; v != "1" {
		t.Fatalf("cluster min.insync.replicas %q after bootstrap", v)
	}
	e1 := registerELRBroker(t, c, 1)
	registerELRBroker(t, c, 2)
	if r := setConfig(t, c, kmsg.ConfigResourceTypeBroker, "1", minInSyncReplicasConfig, opSet, strPtr("2")); r.ErrorCode != kerr.InvalidConfig.Code || *r.ErrorMessage != "Broker-level min.insync.replicas cannot be altered while ELR is enabled." {
		t.Fatalf("broker-level min.insync.replicas: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	if r := setConfig(t, c, kmsg.ConfigResourceTypeBroker, "", minInSyncReplicasConfig, opDelete, nil); r.ErrorCode != kerr.InvalidConfig.Code || *r.ErrorMessage != "Cluster-level min.insync.replicas cannot be removed while ELR is enabled." {
		t.Fatalf("removing the cluster-level min.insync.replicas: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	createTopic(t, c, "t", 1, 2)
	if r := setConfig(t, c, kmsg.ConfigResourceTypeTopic, "t", minInSyncReplicasConfig, opSet, strPtr("2")); r.ErrorCode != 0 {
		t.Fatalf("topic min.insync.replicas: %d", r.ErrorCode)
	}
	// Broker 1 shuts down: the ISR falls below 2 and broker 1 goes to the
	// ELR.
	heartbeat(t, c, 1, e1, func(h *kmsg.BrokerHeartbeatRequest) { h.WantShutdown = true })
	p := *c.Image().Topic("t").Partitions.At(0)
	if len(p.ISR) != 1 || p.ISR[0] != 2 || len(p.ELR) != 1 || p.ELR[0] != 1 || p.Leader != 2 {
		t.Fatalf("after broker 1 shut down: %+v", p)
	}
	// A new min.insync.replicas clears the ELR judged by the old one.
	if r := setConfig(t, c, kmsg.ConfigResourceTypeBroker, "", minInSyncReplicasConfig, opSet, strPtr("2")); r.ErrorCode != 0 {
		t.Fatalf("cluster min.insync.replicas: %d", r.ErrorCode)
	}
	if p := *c.Image().Topic("t").Partitions.At(0); len(p.ELR) != 0 || len(p.ISR) != 1 {
		t.Fatalf("ELR not cleared: %+v", p)
	}
}

func TestEnablingELRMakesMinISRClusterWide(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, withELRSupport)
	if _, ok := clusterConfig(c)[minInSyncReplicasConfig]; ok {
		t.Fatal("cluster min.insync.replicas without ELR")
	}
	if r := setConfig(t, c, kmsg.ConfigResourceTypeBroker, "1", minInSyncReplicasConfig, opSet, strPtr("2")); r.ErrorCode != 0 {
		t.Fatalf("broker-level min.insync.replicas without ELR: %d", r.ErrorCode)
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version = 1
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature = metadata.EligibleLeaderReplicasFeature
	u.MaxVersionLevel = 1
	u.UpgradeType = upgradeTypeUpgrade
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{u}
	if resp := c.UpdateFeatures(ctxT(t), req); resp.ErrorCode != 0 {
		t.Fatalf("enable ELR: %d %v", resp.ErrorCode, resp.ErrorMessage)
	}
	img := c.Image()
	if img.Features[metadata.EligibleLeaderReplicasFeature] != 1 || img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker}][minInSyncReplicasConfig] != "1" {
		t.Fatalf("features %v, cluster configs %v", img.Features, img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker}])
	}
	if _, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: "1"}][minInSyncReplicasConfig]; ok {
		t.Fatal("broker-level min.insync.replicas kept")
	}
}

// offlineWithLiveReplica leaves topic "t" (RF 2, brokers 1 and 2) with no
// leader, its ISR the fenced broker alone and the other replica live.
func offlineWithLiveReplica(t *testing.T, c *Controller, epochs map[int32]int64) (offline, live int32) {
	t.Helper()
	createTopic(t, c, "t", 1, 2)
	p := *c.Image().Topic("t").Partitions.At(0)
	offline, live = p.Replicas[0], p.Replicas[1]
	if _, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: img.Topic("t").ID, Leader: metadata.NoLeaderChange, ISR: []int32{offline}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := heartbeat(t, c, offline, epochs[offline], func(h *kmsg.BrokerHeartbeatRequest) { h.WantFence = true }); !r.IsFenced {
		t.Fatalf("fence %d: %+v", offline, r)
	}
	if p := *c.Image().Topic("t").Partitions.At(0); p.Leader != -1 || len(p.ISR) != 1 || p.ISR[0] != offline {
		t.Fatalf("partition not offline: %+v", p)
	}
	return offline, live
}

func TestUncleanElectionRunsWhenEnabled(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	epochs := map[int32]int64{1: registerBroker(t, c, 1), 2: registerBroker(t, c, 2)}
	_, live := offlineWithLiveReplica(t, c, epochs)
	// Turning unclean elections on for the topic elects at once, not after
	// unclean.leader.election.interval.ms.
	if r := setConfig(t, c, kmsg.ConfigResourceTypeTopic, "t", uncleanLeaderElectionConfig, opSet, strPtr("true")); r.ErrorCode != 0 {
		t.Fatalf("enable unclean: %d", r.ErrorCode)
	}
	waitFor(t, "the live broker elected leader", func() bool { return c.Image().Topic("t").Partitions.At(0).Leader == live })
	if p := *c.Image().Topic("t").Partitions.At(0); len(p.ISR) != 1 || p.ISR[0] != live {
		t.Fatalf("after the unclean election: %+v", p)
	}
}

func TestPeriodicUncleanElection(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.UncleanLeaderElectionCheckInterval = 20 * time.Millisecond })
	epochs := map[int32]int64{1: registerBroker(t, c, 1), 2: registerBroker(t, c, 2)}
	_, live := offlineWithLiveReplica(t, c, epochs)
	// A cluster-wide value written as a bare record (as an earlier active
	// controller may have left it) is found by the periodic check.
	if _, err := c.submit(ctxT(t), func(*metadata.Image, int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceBroker, Name: uncleanLeaderElectionConfig, Value: strPtr("true")}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the live broker elected leader", func() bool { return c.Image().Topic("t").Partitions.At(0).Leader == live })
}

func TestAutoLeaderRebalance(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.LeaderImbalanceCheckInterval = 20 * time.Millisecond })
	registerBroker(t, c, 1)
	registerBroker(t, c, 2)
	createTopic(t, c, "t", 2, 2)
	// Hand leadership of both partitions to their second replicas.
	if _, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		tp := img.Topic("t")
		var recs []metadata.Record
		for i, p := range tp.Partitions.All() {
			recs = append(recs, &metadata.PartitionChangeRecord{TopicID: tp.ID, PartitionID: int32(i), Leader: p.Replicas[1]})
		}
		return recs, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every partition led by its preferred leader", func() bool {
		for _, p := range c.Image().Topic("t").Partitions.All() {
			if !hasPreferredLeader(*p) {
				return false
			}
		}
		return true
	})
}
