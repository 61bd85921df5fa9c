package controller

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

func TestSingleNodeBecomesLeaderQuickly(t *testing.T) {
	fsys := vfs.NewMemFS()
	formatTest(t, fsys)
	start := time.Now()
	c, err := Start(context.Background(), testConfig(fsys))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	deadline := time.Now().Add(2 * time.Second)
	for c.Image().Features[metadata.MetadataVersionFeature] == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	elapsed := time.Since(start)
	img := c.Image()
	if img.LeaderID != 1 {
		t.Fatalf("leader = %d, want 1", img.LeaderID)
	}
	if got := img.Features[metadata.MetadataVersionFeature]; got != metadata.LatestMetadataVersion {
		t.Fatalf("metadata.version = %d, want %d", got, metadata.LatestMetadataVersion)
	}
	if got := img.Features[metadata.KRaftVersionFeature]; got != 1 {
		t.Fatalf("kraft.version = %d, want 1", got)
	}
	if _, ok := img.Features["group.version"]; ok {
		t.Fatalf("group.version must not be finalized by default: %v", img.Features)
	}
	if len(img.Voters) != 1 || img.Voters[0].ID != 1 {
		t.Fatalf("voters = %+v", img.Voters)
	}
	if elapsed > 100*time.Millisecond {
		t.Fatalf("became leader and bootstrapped after %v, want <= 100ms", elapsed)
	}
}

func TestStartRefusesUnformattedAndMismatchedIdentity(t *testing.T) {
	fsys := vfs.NewMemFS()
	if _, err := Start(context.Background(), testConfig(fsys)); !errors.Is(err, ErrNotFormatted) {
		t.Fatalf("unformatted start: %v", err)
	}
	formatTest(t, fsys)
	cfg := testConfig(fsys)
	cfg.ClusterID = "other"
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("start with another cluster id succeeded")
	}
	cfg = testConfig(fsys)
	cfg.NodeID = 2
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("start with another node id succeeded")
	}
	if err := Format(fsys, testDir, FormatOptions{ClusterID: "x", NodeID: 1, Voters: []metadata.Voter{{ID: 1}}}); !errors.Is(err, ErrAlreadyFormatted) {
		t.Fatalf("second format: %v", err)
	}
}

func TestFormatRoundTrip(t *testing.T) {
	fsys := vfs.NewMemFS()
	dir := protocol.RandomUUID()
	opts := FormatOptions{
		ClusterID: "abc", NodeID: 3, DirectoryID: dir,
		Voters:   []metadata.Voter{{ID: 3, DirectoryID: dir, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "h", Port: 1, SecurityProtocol: 0}}}},
		Features: map[string]int16{"group.version": 1},
	}
	if err := Format(fsys, "/d", opts); err != nil {
		t.Fatal(err)
	}
	info, err := ReadFormat(fsys, "/d")
	if err != nil {
		t.Fatal(err)
	}
	if info.ClusterID != "abc" || info.NodeID != 3 || info.DirectoryID != dir || len(info.Voters) != 1 || info.Voters[0].Endpoints[0].Host != "h" {
		t.Fatalf("info = %+v", info)
	}
	want := map[string]int16{"group.version": 1, metadata.MetadataVersionFeature: 30, metadata.KRaftVersionFeature: 1}
	for k, v := range want {
		if info.Features[k] != v {
			t.Fatalf("features = %v, want %v", info.Features, want)
		}
	}
	// A damaged file is refused.
	raw, _ := vfs.ReadFile(fsys, "/d/__cluster_metadata-0/bootstrap.checkpoint")
	raw[len(raw)-1] ^= 0xff
	if err := vfs.WriteFileAtomic(fsys, "/d/__cluster_metadata-0/bootstrap.checkpoint", raw); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFormat(fsys, "/d"); err == nil {
		t.Fatal("damaged format file accepted")
	}
}

func TestSubscribeDeliversEveryImageInOrder(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	var mu sync.Mutex
	var got []*metadata.Image
	cancel := c.Subscribe(func(prev, next *metadata.Image) {
		mu.Lock()
		defer mu.Unlock()
		if len(got) == 0 && prev != nil {
			t.Errorf("first delivery has prev %p", prev)
		}
		if len(got) > 0 && prev != got[len(got)-1] {
			t.Errorf("delivery %d: prev is not the previous next", len(got))
		}
		got = append(got, next)
	})
	defer cancel()
	registerBroker(t, c, 1)
	for i := range 5 {
		createTopic(t, c, "t"+string(rune('a'+i)), 1, 1)
	}
	want := c.Image()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		last := (*metadata.Image)(nil)
		if n > 0 {
			last = got[n-1]
		}
		mu.Unlock()
		if last == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("subscriber did not see the latest image (%d deliveries)", n)
		}
		time.Sleep(time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(got); i++ {
		if got[i].Offset < got[i-1].Offset {
			t.Fatalf("offsets go back: %d after %d", got[i].Offset, got[i-1].Offset)
		}
	}
}

func TestImageIsNotMutatedByLaterChanges(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	createTopic(t, c, "a", 2, 1)
	before := c.Image()
	snapshot := metadata.EncodeRecords(metadata.ImageRecords(before))
	createTopic(t, c, "b", 1, 1)
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = "a"
	r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Op: 0, Value: strPtr("1000")}}
	req.Resources = append(req.Resources, r)
	if resp := c.IncrementalAlterConfigs(ctxT(t), req); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter: %+v", resp.Resources[0])
	}
	if string(metadata.EncodeRecords(metadata.ImageRecords(before))) != string(snapshot) {
		t.Fatal("an older image changed after later records were applied")
	}
	if _, ok := before.Topics.Get("b"); ok {
		t.Fatal("older image sees a later topic")
	}
}

func TestStaleBrokerEpochIsRefused(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	epoch := registerBroker(t, c, 1)
	for _, tc := range []struct {
		name   string
		broker int32
		epoch  int64
	}{
		{"old epoch", 1, epoch - 1},
		{"unknown broker", 7, epoch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hb := kmsg.NewPtrBrokerHeartbeatRequest()
			hb.BrokerID = tc.broker
			hb.BrokerEpoch = tc.epoch
			if r := c.BrokerHeartbeat(ctxT(t), hb); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
				t.Fatalf("heartbeat: code %d, want STALE_BROKER_EPOCH", r.ErrorCode)
			}
			pid := kmsg.NewPtrAllocateProducerIDsRequest()
			pid.BrokerID = tc.broker
			pid.BrokerEpoch = tc.epoch
			if r := c.AllocateProducerIDs(ctxT(t), pid); r.ErrorCode != kerr.StaleBrokerEpoch.Code {
				t.Fatalf("allocate producer ids: code %d, want STALE_BROKER_EPOCH", r.ErrorCode)
			}
		})
	}
}

func TestAllocateProducerIDs(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	epoch := registerBroker(t, c, 1)
	var starts []int64
	for range 3 {
		req := kmsg.NewPtrAllocateProducerIDsRequest()
		req.BrokerID = 1
		req.BrokerEpoch = epoch
		resp := c.AllocateProducerIDs(ctxT(t), req)
		if resp.ErrorCode != 0 || resp.ProducerIDLen != 1000 {
			t.Fatalf("allocate: %+v", resp)
		}
		starts = append(starts, resp.ProducerIDStart)
	}
	if starts[0] != 0 || starts[1] != 1000 || starts[2] != 2000 {
		t.Fatalf("blocks start at %v", starts)
	}
	if c.Image().NextProducerID != 3000 {
		t.Fatalf("next producer id %d", c.Image().NextProducerID)
	}
}
