package group

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// blockingLog blocks ReadFrom until released, to observe a load.
type blockingLog struct {
	memLog
	release chan struct{}
}

func (l *blockingLog) ReadFrom(ctx context.Context, offset int64, fn func([]byte) error) error {
	<-l.release
	return l.memLog.ReadFrom(ctx, offset, fn)
}

func TestCoordinatorLoadStates(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OffsetsTopicNumPartitions = 1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c := New(cfg, newFakeTopics(map[string]int32{"foo": 1}))
	if _, code := c.CoordinatorFor("g"); code != kerr.NotCoordinator.Code {
		t.Fatalf("unloaded: %d", code)
	}
	wantCode(t, "heartbeat on unloaded", c.Heartbeat(context.Background(), &kmsg.HeartbeatRequest{Group: "g"}).ErrorCode, kerr.NotCoordinator)
	l := &blockingLog{release: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- c.Load(context.Background(), 0, l) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, code := c.CoordinatorFor("g")
		if code == kerr.CoordinatorLoadInProgress.Code {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("never loading: %d", code)
		}
		time.Sleep(time.Millisecond)
	}
	wantCode(t, "join while loading", c.JoinGroup(context.Background(), client, joinReq("g", "")).ErrorCode, kerr.CoordinatorLoadInProgress)
	if lg := c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 4}); lg.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while loading: %+v", lg)
	}
	close(l.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if p, code := c.CoordinatorFor("g"); code != 0 || p != 0 {
		t.Fatalf("loaded: %d %d", p, code)
	}
	if _, code := c.CoordinatorFor(""); code != kerr.InvalidRequest.Code {
		t.Fatalf("empty key: %d", code)
	}
}

// A partition prepared for loading answers COORDINATOR_LOAD_IN_PROGRESS
// before its Load has started: ListGroups must not return a listing that
// silently lacks its groups (a restarted node's clients would see groups
// vanish).
func TestPreparedPartitionIsLoading(t *testing.T) {
	cfg := DefaultConfig()
	cfg.OffsetsTopicNumPartitions = 1
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c := New(cfg, newFakeTopics(map[string]int32{"foo": 1}))
	c.Prepare(0)
	if _, code := c.CoordinatorFor("g"); code != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("prepared: CoordinatorFor %d, want COORDINATOR_LOAD_IN_PROGRESS", code)
	}
	if lg := c.ListGroups(context.Background(), &kmsg.ListGroupsRequest{Version: 4}); lg.ErrorCode != kerr.CoordinatorLoadInProgress.Code {
		t.Fatalf("list while prepared: %+v", lg)
	}
	c.Tick(context.Background()) // timers skip a shard that is not loaded
	if err := c.Load(context.Background(), 0, &memLog{}); err != nil {
		t.Fatal(err)
	}
	if _, code := c.CoordinatorFor("g"); code != 0 {
		t.Fatalf("loaded: %d", code)
	}
	c.Prepare(0) // a re-election keeps the loaded shard serving until Load
	if _, code := c.CoordinatorFor("g"); code != 0 {
		t.Fatalf("prepared again while loaded: %d", code)
	}
}

func TestUnloadAnswersParkedRequests(t *testing.T) {
	h := newHarness(t, nil)
	const g = "parked"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	recv(t, h.sync(g, a, 1, nil))
	_, bJoin := h.joinNew(joinReq(g, ""))
	h.waitMembers(g, 2)
	h.c.Unload(h.c.PartitionFor(g))
	wantCode(t, "parked join", recv(t, bJoin).ErrorCode, kerr.NotCoordinator)
	// Leadership comes back: the group is what the log says.
	if err := h.c.Load(context.Background(), h.c.PartitionFor(g), h.logFor(g)); err != nil {
		t.Fatal(err)
	}
	if st := h.classicState(g); st != "Stable" {
		t.Fatalf("state after reload %s", st)
	}
}

func TestSyncAppendFailure(t *testing.T) {
	h := newHarness(t, nil)
	const g = "sync-fail"
	a, aJoin := h.joinNew(joinReq(g, ""))
	recv(t, aJoin)
	h.logFor(g).setFail(errInjected)
	wantCode(t, "leader sync with failing log", recv(t, h.sync(g, a, 1, nil)).ErrorCode, kerr.NotCoordinator)
	h.logFor(g).setFail(nil)
	// The failed generation was never stored: the member must rejoin.
	wantCode(t, "heartbeat", h.heartbeat(g, a, 1), kerr.UnknownMemberID)
	id, ch := h.joinNew(joinReq(g, ""))
	ja := recv(t, ch)
	wantCode(t, "rejoin", ja.ErrorCode, nil)
	recv(t, h.sync(g, id, ja.Generation, nil))
	if st := h.classicState(g); st != "Stable" {
		t.Fatalf("state %s", st)
	}
}

func TestGroupMetadataRecordIsKafkaReadable(t *testing.T) {
	h := newHarness(t, nil)
	const g = "formatter"
	r := staticJoin(g, "", "inst")
	ja := recv(t, async(func() *kmsg.JoinGroupResponse { return h.c.JoinGroup(context.Background(), client, r) }))
	recv(t, h.sync(g, ja.MemberID, 1, map[string][]byte{ja.MemberID: []byte("assignment")}))
	recs := h.logFor(g).records(t)
	var key kmsg.GroupMetadataKey
	var val kmsg.GroupMetadataValue
	if err := key.ReadFrom(recs[len(recs)-1].key); err != nil || key.Version != 2 || key.Group != g {
		t.Fatalf("key %+v %v", key, err)
	}
	if err := val.ReadFrom(recs[len(recs)-1].value); err != nil {
		t.Fatal(err)
	}
	m := val.Members[0]
	if val.Version != 3 || val.ProtocolType != "consumer" || *val.Protocol != "range" || val.Generation != 1 || *val.Leader != ja.MemberID ||
		*m.InstanceID != "inst" || m.ClientID != client.ID || m.SessionTimeoutMillis != 10000 || m.RebalanceTimeoutMillis != 30000 || string(m.Assignment) != "assignment" {
		t.Fatalf("value %+v", val)
	}
}

func TestDescribeGroupsVersions(t *testing.T) {
	h := newHarness(t, nil)
	for _, v := range []int16{5, 6} {
		d := h.c.DescribeGroups(context.Background(), &kmsg.DescribeGroupsRequest{Version: v, Groups: []string{"missing"}}).Groups[0]
		if d.State != "Dead" {
			t.Fatalf("v%d: %+v", v, d)
		}
		if v >= 6 && d.ErrorCode != kerr.GroupIDNotFound.Code || v < 6 && d.ErrorCode != 0 {
			t.Fatalf("v%d error %d", v, d.ErrorCode)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		tweak func(*Config)
	}{
		{"no partitions", func(c *Config) { c.OffsetsTopicNumPartitions = 0 }},
		{"min above max session", func(c *Config) { c.MinSessionTimeoutMs = c.MaxSessionTimeoutMs + 1 }},
		{"unknown assignor", func(c *Config) { c.ConsumerAssignors = []string{"sticky"} }},
		{"heartbeat above session", func(c *Config) {
			c.ConsumerHeartbeatIntervalMs = 15000
			c.ConsumerSessionTimeoutMs = 45000
			c.ConsumerMaxHeartbeatInterval = 50000
		}},
		{"bad migration policy", func(c *Config) { c.ConsumerMigrationPolicy = "sideways" }},
		{"consumer session outside bounds", func(c *Config) { c.ConsumerSessionTimeoutMs = 1000 }},
	}
	cfg := DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range tests {
		cfg := DefaultConfig()
		tc.tweak(&cfg)
		if tc.name == "heartbeat above session" {
			cfg.ConsumerHeartbeatIntervalMs = 45000
		}
		if err := cfg.Validate(); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	cfg.ConsumerAssignors = []string{"org.apache.kafka.coordinator.group.assignor.RangeAssignor"}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("class name: %v", err)
	}
}
