package controller

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// fakeClock is a settable clock for session timeouts.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (f *fakeClock) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeClock) Add(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func registration(id int32, incarnation protocol.UUID) *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 3
	req.BrokerID = id
	req.ClusterID = "test-cluster"
	req.IncarnationID = incarnation
	req.LogDirs = [][16]byte{protocol.RandomUUID()}
	req.Features = []kmsg.BrokerRegistrationRequestFeature{{Name: metadata.MetadataVersionFeature, MinSupportedVersion: 7, MaxSupportedVersion: 30}, {Name: metadata.KRaftVersionFeature, MinSupportedVersion: 0, MaxSupportedVersion: 1}}
	return req
}

func heartbeat(t *testing.T, c *Controller, id int32, epoch int64, mutate ...func(*kmsg.BrokerHeartbeatRequest)) *kmsg.BrokerHeartbeatResponse {
	t.Helper()
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.BrokerID = id
	hb.BrokerEpoch = epoch
	hb.CurrentMetadataOffset = c.Image().Offset
	for _, m := range mutate {
		m(hb)
	}
	return c.BrokerHeartbeat(ctxT(t), hb)
}

func TestRegisterBrokerErrors(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	live := protocol.RandomUUID()
	resp := c.RegisterBroker(ctxT(t), registration(1, live))
	if resp.ErrorCode != 0 {
		t.Fatalf("register: %d", resp.ErrorCode)
	}
	if b := c.Image().Brokers[1]; b == nil || !b.Fenced || b.Epoch != resp.BrokerEpoch {
		t.Fatalf("new broker must start fenced with the returned epoch: %+v", b)
	}
	for _, tc := range []struct {
		name string
		req  func() *kmsg.BrokerRegistrationRequest
		code int16
	}{
		{"wrong cluster", func() *kmsg.BrokerRegistrationRequest {
			r := registration(2, protocol.RandomUUID())
			r.ClusterID = "other"
			return r
		}, kerr.InconsistentClusterID.Code},
		{"duplicate live id", func() *kmsg.BrokerRegistrationRequest { return registration(1, protocol.RandomUUID()) }, kerr.DuplicateBrokerRegistration.Code},
		{"zk broker", func() *kmsg.BrokerRegistrationRequest {
			r := registration(3, protocol.RandomUUID())
			r.IsMigratingZkBroker = true
			return r
		}, kerr.BrokerIDNotRegistered.Code},
		{"no log dirs", func() *kmsg.BrokerRegistrationRequest {
			r := registration(4, protocol.RandomUUID())
			r.LogDirs = nil
			return r
		}, kerr.InvalidRegistration.Code},
		{"reserved log dir", func() *kmsg.BrokerRegistrationRequest {
			r := registration(5, protocol.RandomUUID())
			r.LogDirs = [][16]byte{{}}
			return r
		}, kerr.InvalidRegistration.Code},
		{"unsupported metadata.version", func() *kmsg.BrokerRegistrationRequest {
			r := registration(6, protocol.RandomUUID())
			r.Features[0].MaxSupportedVersion = 20
			return r
		}, kerr.UnsupportedVersion.Code},
		{"no metadata.version range", func() *kmsg.BrokerRegistrationRequest {
			r := registration(7, protocol.RandomUUID())
			r.Features = r.Features[1:]
			return r
		}, kerr.UnsupportedVersion.Code},
		{"missing finalized kraft.version", func() *kmsg.BrokerRegistrationRequest {
			r := registration(8, protocol.RandomUUID())
			r.Features = r.Features[:1]
			return r
		}, kerr.UnsupportedVersion.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if r := c.RegisterBroker(ctxT(t), tc.req()); r.ErrorCode != tc.code {
				t.Fatalf("code %d, want %d", r.ErrorCode, tc.code)
			}
		})
	}
	// The same incarnation amends and keeps its epoch.
	again := c.RegisterBroker(ctxT(t), registration(1, live))
	if again.ErrorCode != 0 || again.BrokerEpoch != resp.BrokerEpoch {
		t.Fatalf("amend: %+v, want epoch %d", again, resp.BrokerEpoch)
	}
}

func TestHeartbeatUnfencesWhenCaughtUp(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	resp := c.RegisterBroker(ctxT(t), registration(1, protocol.RandomUUID()))
	epoch := resp.BrokerEpoch
	r := heartbeat(t, c, 1, epoch, func(h *kmsg.BrokerHeartbeatRequest) { h.CurrentMetadataOffset = epoch - 1 })
	if r.ErrorCode != 0 || !r.IsFenced || r.IsCaughtUp {
		t.Fatalf("behind: %+v", r)
	}
	r = heartbeat(t, c, 1, epoch, func(h *kmsg.BrokerHeartbeatRequest) { h.WantFence = true })
	if !r.IsFenced || !r.IsCaughtUp {
		t.Fatalf("wants fence: %+v", r)
	}
	r = heartbeat(t, c, 1, epoch)
	if r.ErrorCode != 0 || r.IsFenced || !r.IsCaughtUp || r.ShouldShutdown {
		t.Fatalf("caught up: %+v", r)
	}
	if c.Image().Brokers[1].Fenced {
		t.Fatal("image still fenced")
	}
}

func TestSessionTimeoutFencesAndMovesLeadership(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := startTest(t, fsys, func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.BrokerSessionTimeout = 9 * time.Second
	})
	e1 := registerBroker(t, c, 1)
	e2 := registerBroker(t, c, 2)
	createTopic(t, c, "t", 4, 2)
	createTopic(t, c, "solo", 1, 1)
	// Broker 2 keeps heartbeating, broker 1 stops.
	for range 3 {
		clock.Add(4 * time.Second)
		if r := heartbeat(t, c, 2, e2); r.ErrorCode != 0 || r.IsFenced {
			t.Fatalf("heartbeat 2: %+v", r)
		}
	}
	waitFor(t, "broker 1 fenced", func() bool { return c.Image().Brokers[1].Fenced })
	img := c.Image()
	if img.Brokers[2].Fenced {
		t.Fatal("live broker was fenced")
	}
	for i, p := range img.Topic("t").Partitions.All() {
		if p.Leader != 2 || containsInt32(p.ISR, 1) {
			t.Fatalf("t-%d after fencing broker 1: %+v", i, p)
		}
	}
	solo := *img.Topic("solo").Partitions.At(0)
	if solo.Replicas[0] == 1 && (solo.Leader != -1 || len(solo.ISR) != 1 || solo.LeaderEpoch != 1) {
		t.Fatalf("offline partition: %+v", solo)
	}
	// Broker 1 comes back: its old epoch still works (fencing does not
	// change the epoch); unfencing makes it leader of its offline partition.
	if r := heartbeat(t, c, 1, e1); r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("heartbeat 1 after fencing: %+v", r)
	}
	solo = *c.Image().Topic("solo").Partitions.At(0)
	if solo.Leader == -1 {
		t.Fatalf("partition still offline after its replica returned: %+v", solo)
	}
}

// A broker fenced for a lapsed session comes back with the metadata it had
// when it was cut off: it stays fenced until its metadata has reached its
// fencing (and so the leadership moves that came with it), so that the
// answer to its heartbeat never lets it lead what its stale image still
// gives it.
func TestFencedBrokerIsUnfencedOnlyOnceCaughtUpWithItsFencing(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := startTest(t, fsys, func(cfg *Config) {
		cfg.Now = clock.Now
		cfg.BrokerSessionTimeout = 9 * time.Second
	})
	e1 := registerBroker(t, c, 1)
	e2 := registerBroker(t, c, 2)
	createTopic(t, c, "t", 2, 2)
	cutOff := c.Image().Offset
	for range 3 {
		clock.Add(4 * time.Second)
		if r := heartbeat(t, c, 2, e2); r.ErrorCode != 0 || r.IsFenced {
			t.Fatalf("heartbeat 2: %+v", r)
		}
	}
	waitFor(t, "broker 1 fenced", func() bool { return c.Image().Brokers[1].Fenced })
	fencedAt := c.Image().Offset
	r := heartbeat(t, c, 1, e1, func(h *kmsg.BrokerHeartbeatRequest) { h.CurrentMetadataOffset = cutOff })
	if r.ErrorCode != 0 || !r.IsFenced {
		t.Fatalf("heartbeat with the metadata of offset %d, from before the fencing at %d: %+v, want fenced", cutOff, fencedAt, r)
	}
	if !c.Image().Brokers[1].Fenced {
		t.Fatal("broker 1 unfenced by a heartbeat from before its fencing")
	}
	r = heartbeat(t, c, 1, e1, func(h *kmsg.BrokerHeartbeatRequest) { h.CurrentMetadataOffset = fencedAt })
	if r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("heartbeat caught up with the fencing at %d: %+v, want unfenced", fencedAt, r)
	}
}

func TestControlledShutdown(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	e1 := registerBroker(t, c, 1)
	e2 := registerBroker(t, c, 2)
	createTopic(t, c, "t", 4, 2)
	wantShutdown := func(h *kmsg.BrokerHeartbeatRequest) { h.WantShutdown = true }
	r := heartbeat(t, c, 1, e1, wantShutdown)
	if r.ErrorCode != 0 || r.IsFenced {
		t.Fatalf("controlled shutdown heartbeat: %+v", r)
	}
	img := c.Image()
	if !img.Brokers[1].InControlledShutdown {
		t.Fatal("broker 1 not in controlled shutdown")
	}
	for i, p := range img.Topic("t").Partitions.All() {
		if p.Leader == 1 {
			t.Fatalf("t-%d still led by the broker shutting down: %+v", i, p)
		}
	}
	heartbeat(t, c, 2, e2)
	// No leadership left and the other broker has caught up: shut down now.
	r = heartbeat(t, c, 1, e1, wantShutdown)
	if !r.ShouldShutdown || !r.IsFenced {
		t.Fatalf("second heartbeat: %+v", r)
	}
	if !c.Image().Brokers[1].Fenced {
		t.Fatal("broker not fenced after shutdown")
	}
}

func TestSingleBrokerShutdownIsImmediateWithoutLeaders(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	e1 := registerBroker(t, c, 1)
	r := heartbeat(t, c, 1, e1, func(h *kmsg.BrokerHeartbeatRequest) { h.WantShutdown = true })
	if !r.ShouldShutdown {
		t.Fatalf("broker with no leadership: %+v", r)
	}
}

// waitFor polls cond until it holds, failing the test after 5 s with what
// it waited for (cond saw it not hold).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 5s for %s; it never held", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestElectLeaders(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := startTest(t, fsys, func(cfg *Config) { cfg.Now = clock.Now })
	e1 := registerBroker(t, c, 1)
	e2 := registerBroker(t, c, 2)
	createTopic(t, c, "t", 2, 2)
	elect := func(typ int8, topics []kmsg.ElectLeadersRequestTopic) *kmsg.ElectLeadersResponse {
		req := kmsg.NewPtrElectLeadersRequest()
		req.Version = 2
		req.ElectionType = typ
		req.Topics = topics
		return c.ElectLeaders(ctxT(t), req)
	}
	// Preferred leaders already lead.
	resp := elect(electionPreferred, []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0, 1, 7}}, {Topic: "nope", Partitions: []int32{0}}})
	codes := []int16{resp.Topics[0].Partitions[0].ErrorCode, resp.Topics[0].Partitions[1].ErrorCode, resp.Topics[0].Partitions[2].ErrorCode, resp.Topics[1].Partitions[0].ErrorCode}
	want := []int16{kerr.ElectionNotNeeded.Code, kerr.ElectionNotNeeded.Code, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("codes %v, want %v", codes, want)
		}
	}
	// Null topics: partitions needing no election are left out.
	if resp := elect(electionPreferred, nil); len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("all partitions: %+v", resp.Topics)
	}
	// Move leadership away from the preferred replica by a controlled
	// shutdown of one broker, bring it back, and elect it again.
	img := c.Image()
	var moved int32 = -1
	for i, p := range img.Topic("t").Partitions.All() {
		if p.Replicas[0] == 2 {
			moved = int32(i)
		}
	}
	heartbeat(t, c, 2, e2, func(h *kmsg.BrokerHeartbeatRequest) { h.WantShutdown = true })
	if p := *c.Image().Topic("t").Partitions.At(int(moved)); p.Leader == 2 {
		t.Fatalf("leader did not move: %+v", p)
	}
	// Broker 2 re-registers (new incarnation), catches up and rejoins.
	reg := c.RegisterBroker(ctxT(t), registration(2, protocol.RandomUUID()))
	if reg.ErrorCode != 0 {
		// Its session is still valid: wait it out, in steps shorter than
		// the session timeout with broker 1 heartbeating after each, so
		// that the controller's session check (every tick) never finds
		// broker 1's session lapsed and fences it: broker 1 leads the
		// moved partition, and the elections below need that leader.
		for range 2 {
			clock.Add(c.cfg.BrokerSessionTimeout/2 + time.Second)
			heartbeat(t, c, 1, e1)
		}
		reg = c.RegisterBroker(ctxT(t), registration(2, protocol.RandomUUID()))
	}
	if reg.ErrorCode != 0 {
		t.Fatalf("re-register: %d", reg.ErrorCode)
	}
	heartbeat(t, c, 2, reg.BrokerEpoch)
	// Broker 2 is not in the ISR any more, so it cannot lead yet.
	resp = elect(electionPreferred, []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{moved}}})
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.PreferredLeaderNotAvailable.Code {
		t.Fatalf("preferred election with preferred out of ISR: %d", code)
	}
	// Unclean election on a partition that has a leader is not needed.
	resp = elect(electionUnclean, []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{moved}}})
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.ElectionNotNeeded.Code {
		t.Fatalf("unclean election with a leader: %d", code)
	}
	if r := elect(5, []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}); r.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown election type: %d", r.ErrorCode)
	}
}

func TestElectLeadersPreferredAfterReturn(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	registerBroker(t, c, 2)
	createTopic(t, c, "t", 1, 2)
	p := *c.Image().Topic("t").Partitions.At(0)
	preferred, other := p.Replicas[0], p.Replicas[1]
	// Hand leadership to the other replica directly (as an ISR change
	// would), then elect the preferred one back.
	_, err := c.submit(ctxT(t), func(img *metadata.Image, _ int64) ([]metadata.Record, any) {
		return []metadata.Record{&metadata.PartitionChangeRecord{TopicID: img.Topic("t").ID, PartitionID: 0, Leader: other}}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrElectLeadersRequest()
	req.Version = 2
	req.Topics = []kmsg.ElectLeadersRequestTopic{{Topic: "t", Partitions: []int32{0}}}
	resp := c.ElectLeaders(ctxT(t), req)
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 {
		t.Fatalf("preferred election: %d", code)
	}
	p = *c.Image().Topic("t").Partitions.At(0)
	if p.Leader != preferred || p.LeaderEpoch != 2 {
		t.Fatalf("after preferred election: %+v", p)
	}
	// Null partitions: nothing needs an election now.
	req.Topics = nil
	if resp := c.ElectLeaders(ctxT(t), req); len(resp.Topics[0].Partitions) != 0 {
		t.Fatalf("null topics: %+v", resp.Topics)
	}
}

func TestNewIncarnationLeavesISRsAndUnregister(t *testing.T) {
	fsys := vfs.NewMemFS()
	clock := &fakeClock{now: time.Unix(1000, 0)}
	c := startTest(t, fsys, func(cfg *Config) { cfg.Now = clock.Now })
	registerBroker(t, c, 1)
	e2 := registerBroker(t, c, 2)
	createTopic(t, c, "t", 4, 2)
	// Broker 1 restarts without a controlled shutdown (new incarnation,
	// after its old session expired); broker 2 keeps heartbeating, in
	// steps shorter than the session timeout so that the controller's
	// session check (every tick) never finds broker 2's lapsed.
	for range 2 {
		clock.Add(c.cfg.BrokerSessionTimeout/2 + time.Second)
		heartbeat(t, c, 2, e2)
	}
	reg := c.RegisterBroker(ctxT(t), registration(1, protocol.RandomUUID()))
	if reg.ErrorCode != 0 {
		t.Fatalf("re-register: %d", reg.ErrorCode)
	}
	img := c.Image()
	if b := img.Brokers[1]; !b.Fenced || b.Epoch != reg.BrokerEpoch {
		t.Fatalf("new incarnation: %+v", b)
	}
	for i, p := range img.Topic("t").Partitions.All() {
		if p.Leader == 1 || containsInt32(p.ISR, 1) {
			t.Fatalf("t-%d still has the old incarnation: %+v", i, p)
		}
	}
	ur := kmsg.NewPtrUnregisterBrokerRequest()
	ur.BrokerID = 9
	if r := c.UnregisterBroker(ctxT(t), ur); r.ErrorCode != kerr.BrokerIDNotRegistered.Code || *r.ErrorMessage != "Broker ID 9 is not currently registered" {
		t.Fatalf("unregister unknown: %+v", r)
	}
	ur.BrokerID = 1
	if r := c.UnregisterBroker(ctxT(t), ur); r.ErrorCode != 0 {
		t.Fatalf("unregister: %+v", r)
	}
	if c.Image().Brokers[1] != nil {
		t.Fatal("broker still registered")
	}
}

func TestTopicDeletionDisabled(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.DisableTopicDeletion = true })
	registerBroker(t, c, 1)
	createTopic(t, c, "t", 1, 1)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 4
	req.TopicNames = []string{"t"}
	if r := c.DeleteTopics(ctxT(t), req); r.Topics[0].ErrorCode != kerr.TopicDeletionDisabled.Code {
		t.Fatalf("v4: %+v", r.Topics[0])
	}
	req.Version = 2
	if r := c.DeleteTopics(ctxT(t), req); r.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("v2: %+v", r.Topics[0])
	}
	if c.Image().Topic("t") == nil {
		t.Fatal("topic deleted")
	}
}
