package controller

import (
	"testing"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	p := c.Image().Topics["t"].Partitions[0]
	if len(p.ISR) != 1 || p.ISR[0] != 2 || len(p.ELR) != 1 || p.ELR[0] != 1 || p.Leader != 2 {
		t.Fatalf("after broker 1 shut down: %+v", p)
	}
	// A new min.insync.replicas clears the ELR judged by the old one.
	if r := setConfig(t, c, kmsg.ConfigResourceTypeBroker, "", minInSyncReplicasConfig, opSet, strPtr("2")); r.ErrorCode != 0 {
		t.Fatalf("cluster min.insync.replicas: %d", r.ErrorCode)
	}
	if p := c.Image().Topics["t"].Partitions[0]; len(p.ELR) != 0 || len(p.ISR) != 1 {
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
	p := c.Image().Topics["t"].Partitions[0]
	offline, live = p.Replicas[0], p.Replicas[1]
	if _, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: img.Topics["t"].ID, Leader: metadata.NoLeaderChange, ISR: []int32{offline}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if r := heartbeat(t, c, offline, epochs[offline], func(h *kmsg.BrokerHeartbeatRequest) { h.WantFence = true }); !r.IsFenced {
		t.Fatalf("fence %d: %+v", offline, r)
	}
	if p := c.Image().Topics["t"].Partitions[0]; p.Leader != -1 || len(p.ISR) != 1 || p.ISR[0] != offline {
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
	waitFor(t, "the live broker elected leader", func() bool { return c.Image().Topics["t"].Partitions[0].Leader == live })
	if p := c.Image().Topics["t"].Partitions[0]; len(p.ISR) != 1 || p.ISR[0] != live {
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
	waitFor(t, "the live broker elected leader", func() bool { return c.Image().Topics["t"].Partitions[0].Leader == live })
}

func TestAutoLeaderRebalance(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.LeaderImbalanceCheckInterval = 20 * time.Millisecond })
	registerBroker(t, c, 1)
	registerBroker(t, c, 2)
	createTopic(t, c, "t", 2, 2)
	// Hand leadership of both partitions to their second replicas.
	if _, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		tp := img.Topics["t"]
		var recs []metadata.Record
		for i, p := range tp.Partitions {
			recs = append(recs, &metadata.PartitionChangeRecord{TopicID: tp.ID, PartitionID: int32(i), Leader: p.Replicas[1]})
		}
		return recs, nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every partition led by its preferred leader", func() bool {
		for _, p := range c.Image().Topics["t"].Partitions {
			if !hasPreferredLeader(p) {
				return false
			}
		}
		return true
	})
}

// TestElectLeadersDecisionWithoutAQuorum: ElectLeaders decided on an image:
// a preferred election of every partition writes the elections that can
// happen and leaves out the partitions that need none; named partitions
// get an answer each; an unknown election type refuses the request.
func TestElectLeadersDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	recs := brokersAndTopics(3)
	recs = append(recs, topicRecords("a", protocol.RandomUUID(),
		metadata.PartitionRecord{Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, Leader: 2},
		metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 1})...)
	recs = append(recs, topicRecords("b", protocol.RandomUUID(),
		metadata.PartitionRecord{Replicas: []int32{3, 2}, ISR: []int32{2}, Leader: 2})...)
	img := imageOf(t, recs...)

	all := kmsg.NewPtrElectLeadersRequest()
	all.Version = 2
	all.ElectionType = electionPreferred
	recs, resp, next := decideOn(t, e, img, (*env).electLeaders, all)
	if len(recs) != 1 || resp.ErrorCode != 0 || len(resp.Topics) != 2 {
		t.Fatalf("records %v, response %+v", recs, resp)
	}
	if a := resp.Topics[0]; a.Topic != "a" || len(a.Partitions) != 1 || a.Partitions[0].Partition != 0 || a.Partitions[0].ErrorCode != 0 || a.Partitions[0].ErrorMessage != nil {
		t.Fatalf("topic a: %+v", a)
	}
	if b := resp.Topics[1]; b.Topic != "b" || len(b.Partitions) != 1 || b.Partitions[0].ErrorCode != kerr.PreferredLeaderNotAvailable.Code ||
		*b.Partitions[0].ErrorMessage != kerr.PreferredLeaderNotAvailable.Description {
		t.Fatalf("topic b: %+v", b)
	}
	if p := next.Topics["a"].Partitions[0]; p.Leader != 1 || p.LeaderEpoch != 1 {
		t.Fatalf("a-0 after the election: %+v", p)
	}

	named := kmsg.NewPtrElectLeadersRequest()
	named.Version = 2
	named.ElectionType = electionPreferred
	named.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: []int32{0, 1, 5}}, {Topic: "nope", Partitions: []int32{0}}}
	recs, resp, _ = decideOn(t, e, next, (*env).electLeaders, named)
	if len(recs) != 0 || len(resp.Topics) != 2 {
		t.Fatalf("named: records %v, response %+v", recs, resp)
	}
	a, nope := resp.Topics[0].Partitions, resp.Topics[1].Partitions
	if len(a) != 3 || a[0].ErrorCode != kerr.ElectionNotNeeded.Code || a[1].ErrorCode != kerr.ElectionNotNeeded.Code ||
		a[2].ErrorCode != kerr.UnknownTopicOrPartition.Code || *a[2].ErrorMessage != "No such partition as a-5" {
		t.Fatalf("named a: %+v", a)
	}
	if len(nope) != 1 || nope[0].ErrorCode != kerr.UnknownTopicOrPartition.Code || *nope[0].ErrorMessage != "No such topic as nope" {
		t.Fatalf("named nope: %+v", nope)
	}

	named.ElectionType = 5
	recs, resp, _ = decideOn(t, e, next, (*env).electLeaders, named)
	if len(recs) != 0 || resp.ErrorCode != kerr.InvalidRequest.Code || len(resp.Topics) != 2 ||
		resp.Topics[0].Partitions[2].ErrorCode != kerr.InvalidRequest.Code || *resp.Topics[0].Partitions[2].ErrorMessage != "Unknown election type 5" {
		t.Fatalf("unknown election type: records %v, response %+v", recs, resp)
	}

	failed := electLeadersFailed(named, commitError(errNotController))
	if failed.ErrorCode != kerr.NotController.Code || len(failed.Topics) != 2 || len(failed.Topics[0].Partitions) != 3 {
		t.Fatalf("failed commit: %+v", failed)
	}
	for _, rt := range failed.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != kerr.NotController.Code || *rp.ErrorMessage != errNotController.Error() {
				t.Fatalf("failed commit: %+v", failed.Topics)
			}
		}
	}
}

// TestElectLeadersTooManyElections: more elections than one operation may
// write refuse the whole request, as Kafka's bounded record list does,
// instead of answering elections that were not written.
func TestElectLeadersTooManyElections(t *testing.T) {
	parts := make([]metadata.PartitionRecord, maxRecordsPerOp+1)
	for i := range parts {
		parts[i] = metadata.PartitionRecord{Replicas: []int32{1, 2}, ISR: []int32{1, 2}, Leader: 2}
	}
	img := imageOf(t, append(brokersAndTopics(2), topicRecords("a", protocol.RandomUUID(), parts...)...)...)
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	recs, resp, _ := decideOn(t, testEnv(), img, (*env).electLeaders, req)
	if len(recs) != 0 || resp.ErrorCode != kerr.PolicyViolation.Code || len(resp.Topics) != 0 {
		t.Fatalf("%d records, error %d, %d topics", len(recs), resp.ErrorCode, len(resp.Topics))
	}
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "a", Partitions: make([]int32, maxRecordsPerOp+1)}}
	for i := range req.Topics[0].Partitions {
		req.Topics[0].Partitions[i] = int32(i)
	}
	_, resp, _ = decideOn(t, testEnv(), img, (*env).electLeaders, req)
	if rp := resp.Topics[0].Partitions[0]; resp.ErrorCode != kerr.PolicyViolation.Code || rp.ErrorCode != kerr.PolicyViolation.Code || *rp.ErrorMessage != excessivelyLargeOperation {
		t.Fatalf("named: error %d, first partition %+v", resp.ErrorCode, rp)
	}
}
