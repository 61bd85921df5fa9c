package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Group workloads: how long a group of consumers takes to become stable,
// and how many offset commits the coordinator acknowledges per second.
// Both run every client with franz-go's defaults (session timeout 45 s,
// heartbeat 3 s, rebalance timeout 60 s, cooperative-sticky balancer,
// autocommit every 5 s), as an application would.

// API keys the request clock watches.
const (
	keyJoinGroup              = 11
	keySyncGroup              = 14
	keyConsumerGroupHeartbeat = 68
)

// describeEvery is how often the coordinator's view is polled once the
// members' callbacks say the assignment is complete.
const describeEvery = 10 * time.Millisecond

type groupStableResult struct {
	Protocol   string `json:"protocol"` // classic or consumer
	Assignor   string `json:"assignor"`
	Members    int    `json:"members"`
	Partitions int    `json:"partitions"`
	// Seconds runs from the first JoinGroup (classic) or
	// ConsumerGroupHeartbeat (consumer) any member issued to the reply
	// of the first describe that showed the group Stable with every
	// member holding exactly what its callbacks say it owns.
	Seconds float64 `json:"seconds"`
	// ClientsCompleteSeconds is when the last member's callback made the
	// assignment complete (same origin), for comparison.
	ClientsCompleteSeconds float64 `json:"clients_complete_seconds"`
	JoinGroupRequests      int64   `json:"join_group_requests"`
	SyncGroupRequests      int64   `json:"sync_group_requests"`
	HeartbeatRequests      int64   `json:"consumer_group_heartbeat_requests"`
	Describes              int     `json:"describes"`
	// GroupEpoch is the consumer group's epoch (consumer protocol only).
	GroupEpoch int32 `json:"group_epoch,omitempty"`
}

// requestClock is a kgo hook shared by every member's client: it notes
// when the first join request was issued and counts the group requests.
type requestClock struct {
	firstJoinNanos atomic.Int64 // 0 until the first join request
	joins          atomic.Int64
	syncs          atomic.Int64
	heartbeats     atomic.Int64
}

func (c *requestClock) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, writeWait, timeToWrite time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case keyJoinGroup:
		c.joins.Add(1)
	case keySyncGroup:
		c.syncs.Add(1)
		return
	case keyConsumerGroupHeartbeat:
		c.heartbeats.Add(1)
	default:
		return
	}
	// The request was issued when it was queued, not when its write ended.
	issued := time.Now().Add(-writeWait - timeToWrite).UnixNano()
	for {
		cur := c.firstJoinNanos.Load()
		if cur != 0 && cur <= issued {
			return
		}
		if c.firstJoinNanos.CompareAndSwap(cur, issued) {
			return
		}
	}
}

// ownership is what each member's OnPartitions* callbacks say it owns.
// Callbacks of different clients run on their clients' goroutines; mu
// guards every field, and changed (capacity 1) wakes the one waiter.
type ownership struct {
	mu         sync.Mutex
	partitions int
	owned      []map[int32]bool // by member index
	version    int              // bumped on every change
	completeAt time.Time        // when the last change left it complete; zero while incomplete
	changed    chan struct{}
}

func newOwnership(members, partitions int) *ownership {
	o := &ownership{partitions: partitions, owned: make([]map[int32]bool, members), changed: make(chan struct{}, 1)}
	for i := range o.owned {
		o.owned[i] = map[int32]bool{}
	}
	return o
}

func (o *ownership) update(member int, add, remove []int32) {
	o.mu.Lock()
	for _, p := range remove {
		delete(o.owned[member], p)
	}
	for _, p := range add {
		o.owned[member][p] = true
	}
	o.version++
	if o.completeLocked() {
		o.completeAt = time.Now()
	} else {
		o.completeAt = time.Time{}
	}
	o.mu.Unlock()
	select {
	case o.changed <- struct{}{}:
	default:
	}
}

// completeLocked: every partition owned by exactly one member, and every
// member owns at least one.
func (o *ownership) completeLocked() bool {
	count := make([]int, o.partitions)
	for _, ps := range o.owned {
		if len(ps) == 0 {
			return false
		}
		for p := range ps {
			if p < 0 || int(p) >= o.partitions {
				return false
			}
			count[p]++
		}
	}
	for _, n := range count {
		if n != 1 {
			return false
		}
	}
	return true
}

type ownershipSnapshot struct {
	version    int
	completeAt time.Time
	owned      [][]int32 // sorted partitions by member index
}

func (o *ownership) snapshot() ownershipSnapshot {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := ownershipSnapshot{version: o.version, completeAt: o.completeAt, owned: make([][]int32, len(o.owned))}
	for i, ps := range o.owned {
		for p := range ps {
			s.owned[i] = append(s.owned[i], p)
		}
		slices.Sort(s.owned[i])
	}
	return s
}

func (s ownershipSnapshot) summary() string {
	holders, held := 0, 0
	for _, ps := range s.owned {
		if len(ps) > 0 {
			holders++
		}
		held += len(ps)
	}
	return fmt.Sprintf("%d of %d members own partitions, %d partition assignments held", holders, len(s.owned), held)
}

// waitTopicReady waits until Metadata shows topic with every partition led,
// and returns its topic ID.
func waitTopicReady(ctx context.Context, cl *kgo.Client, topic string, partitions int) ([16]byte, error) {
	var last error
	for {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl)
		if err == nil && len(resp.Topics) == 1 {
			t := resp.Topics[0]
			err = kerr.ErrorForCode(t.ErrorCode)
			led := 0
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader >= 0 {
					led++
				}
			}
			if err == nil && led == partitions {
				return t.TopicID, nil
			}
			if err == nil {
				err = fmt.Errorf("%d of %d partitions have a leader", led, partitions)
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return [16]byte{}, fmt.Errorf("waiting for %s: %w (last: %v)", topic, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitCoordinator asks FindCoordinator for group until it names a
// coordinator, so that creating __consumer_offsets is not timed.
func waitCoordinator(ctx context.Context, cl *kgo.Client, group string) error {
	var last error
	for {
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorKey = group
		req.CoordinatorKeys = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err == nil {
			code := resp.ErrorCode
			if len(resp.Coordinators) > 0 {
				code = resp.Coordinators[0].ErrorCode
			}
			if err = kerr.ErrorForCode(code); err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("finding the coordinator of %s: %w (last: %v)", group, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// groupStable starts members consumers of group on a fresh topic at once
// and measures how long the group takes to become stable with every
// partition owned exactly once.
func groupStable(ctx context.Context, bootstrap, topic, group string, members, partitions int, protocol string) (groupStableResult, error) {
	res := groupStableResult{Protocol: protocol, Members: members, Partitions: partitions}
	switch protocol {
	case "classic":
		res.Assignor = "cooperative-sticky (franz-go's default balancer, client side)"
	case "consumer":
		// franz-go maps its default cooperative-sticky balancer to the
		// broker's "uniform" assignor under KIP-848.
		res.Assignor = "uniform (server side; franz-go's cooperative-sticky default maps to it)"
	default:
		return res, fmt.Errorf("unknown protocol %q (want classic or consumer)", protocol)
	}
	if members < 1 || members > partitions {
		return res, fmt.Errorf("need 1 <= members (%d) <= partitions (%d) for every member to get an assignment", members, partitions)
	}
	admin, err := newClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return res, err
	}
	defer admin.Close()
	if err := createTopic(ctx, admin, topic, partitions); err != nil {
		return res, err
	}
	if _, err := waitTopicReady(ctx, admin, topic, partitions); err != nil {
		return res, err
	}
	if err := waitCoordinator(ctx, admin, group); err != nil {
		return res, err
	}

	own := newOwnership(members, partitions)
	clock := &requestClock{}
	clients := make([]*kgo.Client, 0, members)
	defer func() { closeAll(clients) }()
	onlyTopic := func(m map[string][]int32) []int32 { return m[topic] }
	for i := 0; i < members; i++ {
		opts := []kgo.Opt{kgo.SeedBrokers(bootstrap), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.WithHooks(clock),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.update(i, onlyTopic(m), nil) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.update(i, nil, onlyTopic(m)) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { own.update(i, nil, onlyTopic(m)) }),
		}
		if protocol == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := newClient(opts...)
		if err != nil {
			return res, err
		}
		clients = append(clients, cl)
	}
	// Members poll as an application's consumers do (the topic is empty,
	// so these are long polls).
	pollCtx, stopPolling := context.WithCancel(ctx)
	var polling sync.WaitGroup
	for _, cl := range clients {
		polling.Add(1)
		go func() {
			defer polling.Done()
			for pollCtx.Err() == nil {
				cl.PollFetches(pollCtx)
			}
		}()
	}
	defer func() {
		stopPolling()
		polling.Wait()
	}()

	stableAt, complete, describes, groupEpoch, err := waitStable(ctx, admin, clients, own, group, topic, protocol)
	res.Describes = describes
	first := clock.firstJoinNanos.Load()
	if err != nil {
		return res, err
	}
	if first == 0 {
		return res, errors.New("no join request was seen by the hooks")
	}
	res.Seconds = stableAt.Sub(time.Unix(0, first)).Seconds()
	res.ClientsCompleteSeconds = complete.Sub(time.Unix(0, first)).Seconds()
	res.JoinGroupRequests, res.SyncGroupRequests, res.HeartbeatRequests = clock.joins.Load(), clock.syncs.Load(), clock.heartbeats.Load()
	res.GroupEpoch = groupEpoch
	return res, nil
}

// closeAll closes the clients concurrently (each leaves the group).
func closeAll(clients []*kgo.Client) {
	var wg sync.WaitGroup
	for _, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl.Close()
		}()
	}
	wg.Wait()
}

// waitStable waits for the members' callbacks to say the assignment is
// complete, then describes the group every describeEvery until the
// coordinator shows it Stable with exactly that assignment. It returns
// when that describe's reply arrived and when the callbacks completed.
func waitStable(ctx context.Context, admin *kgo.Client, clients []*kgo.Client, own *ownership, group, topic, protocol string) (stableAt, complete time.Time, describes int, groupEpoch int32, err error) {
	var lastView string
	for {
		select {
		case <-own.changed:
		case <-ctx.Done():
			return stableAt, complete, describes, 0, fmt.Errorf("group never became stable: %s; last describe: %s: %w", own.snapshot().summary(), lastView, ctx.Err())
		}
		for {
			snap := own.snapshot()
			if snap.completeAt.IsZero() {
				break
			}
			want := map[string][]int32{}
			for i, cl := range clients {
				id, _ := cl.GroupMetadata()
				want[id] = snap.owned[i]
			}
			got, state, epoch, derr := describeGroup(ctx, admin, group, topic, protocol)
			describes++
			if derr != nil {
				lastView = derr.Error()
			} else {
				lastView = fmt.Sprintf("state %s, %d members", state, len(got))
			}
			if derr == nil && state == "Stable" && sameAssignment(want, got) && own.snapshot().version == snap.version {
				return time.Now(), snap.completeAt, describes, epoch, nil
			}
			select {
			case <-time.After(describeEvery):
			case <-own.changed:
			case <-ctx.Done():
				return stableAt, complete, describes, 0, fmt.Errorf("group never became stable: %s; last describe: %s: %w", own.snapshot().summary(), lastView, ctx.Err())
			}
		}
	}
}

func sameAssignment(want, got map[string][]int32) bool {
	if len(want) != len(got) {
		return false
	}
	for id, ps := range want {
		g, ok := got[id]
		if !ok || !slices.Equal(ps, g) {
			return false
		}
	}
	return true
}

// describeGroup returns the coordinator's view: member id -> sorted
// partitions of topic, the group state, and (consumer protocol) the
// group epoch.
func describeGroup(ctx context.Context, admin *kgo.Client, group, topic, protocol string) (map[string][]int32, string, int32, error) {
	members := map[string][]int32{}
	if protocol == "classic" {
		req := kmsg.NewPtrDescribeGroupsRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, admin)
		if err != nil {
			return nil, "", 0, fmt.Errorf("DescribeGroups: %w", err)
		}
		if len(resp.Groups) != 1 {
			return nil, "", 0, fmt.Errorf("DescribeGroups: %d groups in the reply", len(resp.Groups))
		}
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, "", 0, fmt.Errorf("DescribeGroups: %w", err)
		}
		for _, m := range g.Members {
			var a kmsg.ConsumerMemberAssignment
			if len(m.MemberAssignment) > 0 {
				if err := a.ReadFrom(m.MemberAssignment); err != nil {
					return nil, "", 0, fmt.Errorf("DescribeGroups: member %s: undecodable assignment: %w", m.MemberID, err)
				}
			}
			var ps []int32
			for _, t := range a.Topics {
				if t.Topic == topic {
					ps = append(ps, t.Partitions...)
				}
			}
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			members[m.MemberID] = ps
		}
		return members, g.State, 0, nil
	}
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return nil, "", 0, fmt.Errorf("ConsumerGroupDescribe: %w", err)
	}
	if len(resp.Groups) != 1 {
		return nil, "", 0, fmt.Errorf("ConsumerGroupDescribe: %d groups in the reply", len(resp.Groups))
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return nil, "", 0, fmt.Errorf("ConsumerGroupDescribe: %w", err)
	}
	for _, m := range g.Members {
		var ps []int32
		for _, t := range m.Assignment.TopicPartitions {
			if t.Topic == topic {
				ps = append(ps, t.Partitions...)
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		members[m.MemberID] = ps
	}
	return members, g.State, g.Epoch, nil
}

type commitResult struct {
	Committers         int     `json:"committers"`
	PartitionsEach     int     `json:"partitions_each"`
	Commits            int64   `json:"commits"` // acknowledged OffsetCommit requests
	Seconds            float64 `json:"seconds"`
	CommitsPerSec      float64 `json:"commits_per_sec"`
	PartitionsPerSec   float64 `json:"partition_offsets_per_sec"`
	P50Ms              float64 `json:"p50_ms"`
	P99Ms              float64 `json:"p99_ms"`
	MaxMs              float64 `json:"max_ms"`
	CommitRequestShape string  `json:"request_shape"`
}

// commits runs committers standalone consumers of one group (as a Java
// consumer with assign() and commitSync(): generation -1, no member id),
// each committing its own partitions of topic in a loop, one request in
// flight per committer, for dur. Every partition's error must be NONE.
func commits(ctx context.Context, bootstrap, topic, group string, committers, each int, dur time.Duration) (commitResult, error) {
	res := commitResult{Committers: committers, PartitionsEach: each,
		CommitRequestShape: fmt.Sprintf("OffsetCommit, group %q, generation -1, empty member id, 1 topic (name and id), %d partitions, metadata \"\"", group, each)}
	if committers < 1 || each < 1 {
		return res, errors.New("need at least one committer and one partition each")
	}
	admin, err := newClient(kgo.SeedBrokers(bootstrap))
	if err != nil {
		return res, err
	}
	defer admin.Close()
	partitions := committers * each
	if err := createTopic(ctx, admin, topic, partitions); err != nil {
		return res, err
	}
	topicID, err := waitTopicReady(ctx, admin, topic, partitions)
	if err != nil {
		return res, err
	}
	if err := waitCoordinator(ctx, admin, group); err != nil {
		return res, err
	}

	type committer struct {
		cl  *kgo.Client
		req *kmsg.OffsetCommitRequest
		lat []float64 // ms, one per acknowledged commit
	}
	cs := make([]*committer, committers)
	var clients []*kgo.Client
	defer func() { closeAll(clients) }()
	for i := range cs {
		cl, err := newClient(kgo.SeedBrokers(bootstrap))
		if err != nil {
			return res, err
		}
		clients = append(clients, cl)
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation, req.MemberID = group, -1, ""
		t := kmsg.NewOffsetCommitRequestTopic()
		t.Topic, t.TopicID = topic, topicID
		empty := ""
		for p := 0; p < each; p++ {
			tp := kmsg.NewOffsetCommitRequestTopicPartition()
			tp.Partition = int32(i*each + p)
			tp.Metadata = &empty
			t.Partitions = append(t.Partitions, tp)
		}
		req.Topics = []kmsg.OffsetCommitRequestTopic{t}
		cs[i] = &committer{cl: cl, req: req, lat: make([]float64, 0, 1<<16)}
	}
	commit := func(ctx context.Context, c *committer, offset int64) error {
		for i := range c.req.Topics[0].Partitions {
			c.req.Topics[0].Partitions[i].Offset = offset
		}
		resp, err := c.req.RequestWith(ctx, c.cl)
		if err != nil {
			return err
		}
		n := 0
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				n++
			}
		}
		if n != each {
			return fmt.Errorf("reply covers %d partitions, want %d", n, each)
		}
		return nil
	}
	// Warm up: connection to the coordinator, version negotiation.
	for _, c := range cs {
		if err := commit(ctx, c, 0); err != nil {
			return res, fmt.Errorf("warm-up commit: %w", err)
		}
	}

	var total atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(dur)
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for offset := int64(1); time.Now().Before(deadline); offset++ {
				t0 := time.Now()
				if err := commit(ctx, c, offset); err != nil {
					failed.CompareAndSwap(nil, &err)
					return
				}
				c.lat = append(c.lat, float64(time.Since(t0))/1e6)
				total.Add(1)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := failed.Load(); e != nil {
		return res, fmt.Errorf("commit: %w", *e)
	}
	// Every acknowledged commit must have taken: the committed offset of
	// each partition is its committer's last acknowledged one.
	want := map[int32]int64{}
	var lat []float64
	for i, c := range cs {
		lat = append(lat, c.lat...)
		for p := 0; p < each; p++ {
			want[int32(i*each+p)] = int64(len(c.lat))
		}
	}
	if err := checkCommitted(ctx, admin, group, topic, topicID, want); err != nil {
		return res, err
	}
	if len(lat) == 0 {
		return res, errors.New("no commit acknowledged")
	}
	sort.Float64s(lat)
	q := func(p float64) float64 { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	res.Commits = total.Load()
	res.Seconds = elapsed.Seconds()
	res.CommitsPerSec = float64(res.Commits) / res.Seconds
	res.PartitionsPerSec = res.CommitsPerSec * float64(each)
	res.P50Ms, res.P99Ms, res.MaxMs = q(0.50), q(0.99), lat[len(lat)-1]
	return res, nil
}

// checkCommitted fetches group's offsets for topic and compares them with
// want (partition -> offset).
func checkCommitted(ctx context.Context, admin *kgo.Client, group, topic string, topicID [16]byte, want map[int32]int64) error {
	req := kmsg.NewPtrOffsetFetchRequest()
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	t := kmsg.NewOffsetFetchRequestGroupTopic()
	t.Topic, t.TopicID = topic, topicID
	for p := range want {
		t.Partitions = append(t.Partitions, p)
	}
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{t}
	req.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp, err := req.RequestWith(ctx, admin)
	if err != nil {
		return fmt.Errorf("OffsetFetch: %w", err)
	}
	if len(resp.Groups) != 1 {
		return fmt.Errorf("OffsetFetch: %d groups in the reply", len(resp.Groups))
	}
	if err := kerr.ErrorForCode(resp.Groups[0].ErrorCode); err != nil {
		return fmt.Errorf("OffsetFetch: %w", err)
	}
	seen := 0
	for _, rt := range resp.Groups[0].Topics {
		for _, rp := range rt.Partitions {
			if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
				return fmt.Errorf("OffsetFetch partition %d: %w", rp.Partition, err)
			}
			w, ok := want[rp.Partition]
			if !ok {
				continue
			}
			if rp.Offset != w {
				return fmt.Errorf("partition %d: committed offset %d, but the last acknowledged commit was %d", rp.Partition, rp.Offset, w)
			}
			seen++
		}
	}
	if seen != len(want) {
		return fmt.Errorf("OffsetFetch answered %d of %d partitions", seen, len(want))
	}
	return nil
}
