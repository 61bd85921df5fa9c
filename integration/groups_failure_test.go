package integration_test

// Consumer-group failure cases, black box: the built gregor
// binary, real franz-go members, and the coordinator's own view of the
// group (DescribeGroups / ConsumerGroupDescribe) checked against what the
// members believe they own.

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startNode starts gregor (integration/node) with the overrides; its output
// is logged when the test fails.
func startNode(t *testing.T, overrides ...string) *node.Node {
	t.Helper()
	n := node.Start(t, overrides...)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gregor's output:\n%s", n.Output())
		}
	})
	return n
}

// Short group timeouts so that the failure cases take seconds, not the
// defaults' minutes.
var fastGroups = []string{
	"group.min.session.timeout.ms=1000",
	"group.consumer.min.session.timeout.ms=2000",
	"group.consumer.session.timeout.ms=5000",
	"group.consumer.min.heartbeat.interval.ms=100",
	"group.consumer.heartbeat.interval.ms=300",
}

const classicSession = 5 * time.Second

func protocols(t *testing.T, fn func(t *testing.T, consumerProtocol bool)) {
	for _, consumer := range []bool{false, true} {
		name := "classic"
		if consumer {
			name = "consumer"
		}
		t.Run(name, func(t *testing.T) { fn(t, consumer) })
	}
}

func skipShort(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gregor and waits for group timeouts")
	}
}

// createTopic creates a topic and returns its id once it has leaders.
func createTopic(t testing.TB, cl *kgo.Client, name string, partitions int32) [16]byte {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	if err := kerr.ErrorForCode(resp.Topics[0].ErrorCode); err != nil {
		t.Fatalf("creating topic %s: %v", name, err)
	}
	var id [16]byte
	waitFor(t, 10*time.Second, "leaders of "+name, func() error {
		mreq := kmsg.NewPtrMetadataRequest()
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(name)
		mreq.Topics = append(mreq.Topics, mt)
		mresp, err := mreq.RequestWith(context.Background(), cl)
		if err != nil {
			return err
		}
		if len(mresp.Topics) != 1 || len(mresp.Topics[0].Partitions) != int(partitions) {
			return fmt.Errorf("metadata of %s is not complete yet", name)
		}
		for _, p := range mresp.Topics[0].Partitions {
			if p.Leader < 0 {
				return fmt.Errorf("partition %d has no leader", p.Partition)
			}
		}
		id = mresp.Topics[0].TopicID
		return nil
	})
	return id
}

// groupView is the coordinator's view of a group.
type groupView struct {
	state      string
	epoch      int32 // consumer groups: the group epoch
	assignment map[string][]int32
}

// describeGroup asks the coordinator, with the API of the group's type.
func describeGroup(cl *kgo.Client, group string, topicID [16]byte, consumerProtocol bool) (groupView, error) {
	v := groupView{assignment: map[string][]int32{}}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if consumerProtocol {
		req := kmsg.NewPtrConsumerGroupDescribeRequest()
		req.Groups = []string{group}
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return v, err
		}
		g := resp.Groups[0]
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return v, err
		}
		v.state, v.epoch = g.State, g.Epoch
		for _, m := range g.Members {
			parts := []int32{}
			for _, at := range m.Assignment.TopicPartitions {
				if at.TopicID == topicID {
					parts = append(parts, at.Partitions...)
				}
			}
			slices.Sort(parts)
			v.assignment[m.MemberID] = parts
		}
		return v, nil
	}
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return v, err
	}
	g := resp.Groups[0]
	if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
		return v, err
	}
	v.state = g.State
	for _, m := range g.Members {
		var a kmsg.ConsumerMemberAssignment
		parts := []int32{}
		if len(m.MemberAssignment) > 0 {
			if err := a.ReadFrom(m.MemberAssignment); err != nil {
				return v, fmt.Errorf("member %s has an undecodable assignment: %v", m.MemberID, err)
			}
			for _, at := range a.Topics {
				parts = append(parts, at.Partitions...)
			}
		}
		slices.Sort(parts)
		v.assignment[m.MemberID] = parts
	}
	return v, nil
}

// A member that stops heartbeating (kill -9: no LeaveGroup) keeps its
// partitions until its session times out; then they move to the others.
func TestGroupSessionTimeoutMovesPartitions(t *testing.T) {
	skipShort(t)
	protocols(t, func(t *testing.T, consumer bool) {
		n := startNode(t, fastGroups...)
		admin := n.Client()
		const topic, parts = "session-timeout", 4
		topicID := createTopic(t, admin, topic, parts)
		spec := memberSpec{seeds: n.Addr(), group: "session-timeout-group", topic: topic, consumerProtocol: consumer, sessionTimeout: classicSession}
		a := startMember(t, "a", spec)
		b := startMember(t, "b", spec)

		waitFor(t, 60*time.Second, "both members to own partitions", func() error {
			pa, _ := a.own.snapshot()
			pb, _ := b.own.snapshot()
			if len(pa) == 0 || len(pb) == 0 {
				return fmt.Errorf("a owns %v, b owns %v", pa, pb)
			}
			return checkExactlyOnce(parts, map[string][]int32{"a": pa, "b": pb})
		})
		waitFor(t, 30*time.Second, "a stable group of two", func() error {
			v, err := describeGroup(admin, spec.group, topicID, consumer)
			if err != nil {
				return err
			}
			if v.state != "Stable" || len(v.assignment) != 2 {
				return fmt.Errorf("state %s with %d members", v.state, len(v.assignment))
			}
			return nil
		})

		b.kill()
		killed := time.Now()
		session := classicSession
		if consumer {
			session = 5 * time.Second // group.consumer.session.timeout.ms above
		}
		waitFor(t, session+20*time.Second, "a to own every partition", func() error {
			pa, _ := a.own.snapshot()
			if len(pa) != parts {
				return fmt.Errorf("a owns %v", pa)
			}
			return nil
		})
		moved := time.Since(killed)
		// The partitions must not move before the coordinator could know
		// that b is gone: that is only its session timeout (minus the
		// heartbeat interval b may have sent just before dying).
		if moved < session-time.Second {
			t.Errorf("partitions moved %s after the kill, before the %s session timeout", moved, session)
		}
		waitFor(t, 10*time.Second, "the coordinator to show one member", func() error {
			v, err := describeGroup(admin, spec.group, topicID, consumer)
			if err != nil {
				return err
			}
			if len(v.assignment) != 1 || v.state != "Stable" {
				return fmt.Errorf("state %s, assignment %v", v.state, v.assignment)
			}
			for _, p := range v.assignment {
				if len(p) != parts {
					return fmt.Errorf("the remaining member is assigned %v", p)
				}
			}
			return nil
		})
		t.Logf("partitions moved %s after kill -9 (session timeout %s); a saw: %s", moved.Round(time.Millisecond), session, a.own.history())
	})
}

// A static member (group.instance.id) that restarts within its session
// timeout gets its partitions back without a rebalance: the other member
// sees no callback and, for consumer groups, the group epoch does not move.
// Classic: the member is killed (static members never send LeaveGroup).
// Consumer protocol: the member closes, which sends the static leave
// (epoch -2) that keeps its assignment for the session timeout.
func TestGroupStaticMemberRestartKeepsAssignment(t *testing.T) {
	skipShort(t)
	protocols(t, func(t *testing.T, consumer bool) {
		n := startNode(t, fastGroups...)
		admin := n.Client()
		const topic, parts = "static-restart", 6
		topicID := createTopic(t, admin, topic, parts)
		base := memberSpec{seeds: n.Addr(), group: "static-group", topic: topic, consumerProtocol: consumer, sessionTimeout: 20 * time.Second}
		if consumer {
			// The consumer protocol's session timeout is the broker's:
			// give the restart room.
			n.Stop()
			n = startNode(t, append(fastGroups, "group.consumer.session.timeout.ms=20000", "group.consumer.max.session.timeout.ms=60000")...)
			admin = n.Client()
			topicID = createTopic(t, admin, topic, parts)
			base.seeds = n.Addr()
		}
		specA, specB := base, base
		specA.instanceID, specB.instanceID = "instance-a", "instance-b"
		a := startMember(t, "a", specA)
		b := startMember(t, "b", specB)

		var before groupView
		waitFor(t, 60*time.Second, "a stable group of two", func() error {
			pa, _ := a.own.snapshot()
			pb, _ := b.own.snapshot()
			if err := checkExactlyOnce(parts, map[string][]int32{"a": pa, "b": pb}); err != nil {
				return err
			}
			v, err := describeGroup(admin, base.group, topicID, consumer)
			if err != nil {
				return err
			}
			if v.state != "Stable" || len(v.assignment) != 2 {
				return fmt.Errorf("state %s with %d members", v.state, len(v.assignment))
			}
			before = v
			return nil
		})
		ownedA, eventsA := a.own.snapshot()
		ownedB, _ := b.own.snapshot()

		if consumer {
			b.stop()
		} else {
			b.kill()
		}
		b2 := startMember(t, "b-restarted", specB)
		waitFor(t, 30*time.Second, "the restarted member to own its partitions", func() error {
			p, _ := b2.own.snapshot()
			if !slices.Equal(p, ownedB) {
				v, err := describeGroup(admin, base.group, topicID, consumer)
				return fmt.Errorf("restarted b owns %v, b owned %v (coordinator before %+v, now %+v %v)", p, ownedB, before, v, err)
			}
			return nil
		})
		// Give a rebalance, if one was (wrongly) started, time to show.
		// That none comes is what is tested, so this is a sleep: there is
		// no condition to wait for.
		time.Sleep(2 * time.Second)
		nowA, nowEventsA := a.own.snapshot()
		if !slices.Equal(nowA, ownedA) || nowEventsA != eventsA {
			t.Errorf("the other member was disturbed: owned %v, now %v; callbacks: %s", ownedA, nowA, a.own.history())
		}
		after, err := describeGroup(admin, base.group, topicID, consumer)
		if err != nil {
			t.Fatal(err)
		}
		if after.state != "Stable" || len(after.assignment) != 2 {
			t.Errorf("after the restart: state %s, assignment %v", after.state, after.assignment)
		}
		if consumer && after.epoch != before.epoch {
			t.Errorf("group epoch moved from %d to %d: the restart caused a rebalance", before.epoch, after.epoch)
		}
		t.Logf("b owned %v before and after the restart; a's callbacks: %s", ownedB, a.own.history())
	})
}

// kill -9 of gregor loses no acknowledged commit and no group: offsets
// (with their metadata) and groups of both types are rebuilt from
// __consumer_offsets on restart.
func TestGroupsSurviveKill9(t *testing.T) {
	skipShort(t)
	n := startNode(t, fastGroups...)
	admin := n.Client()
	const topic, parts = "kill9", 3
	topicID := createTopic(t, admin, topic, parts)
	producer := n.Client(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := range 30 {
		r := &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: []byte(strconv.Itoa(i))}
		if err := producer.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("producing: %v", err)
		}
	}

	// A classic and a consumer-protocol group, consumed and committed by
	// real members that then leave (the groups stay, Empty).
	for _, consumer := range []bool{false, true} {
		group := "kill9-classic"
		if consumer {
			group = "kill9-consumer"
		}
		spec := memberSpec{seeds: n.Addr(), group: group, topic: topic, consumerProtocol: consumer, sessionTimeout: classicSession}
		cl := n.Client(append(groupMemberOpts(spec, func(string, []int32) {}), kgo.DisableAutoCommit())...)
		consumed := 0
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		for consumed < 30 && ctx.Err() == nil {
			consumed += cl.PollFetches(ctx).NumRecords()
		}
		cancel()
		if consumed < 30 {
			t.Fatalf("%s consumed %d of 30 records", group, consumed)
		}
		if err := cl.CommitUncommittedOffsets(context.Background()); err != nil {
			t.Fatalf("%s: committing: %v", group, err)
		}
		cl.Close()
	}

	// A "simple" group (commits without membership), committed in a
	// tight loop; the last acknowledged commit must survive the kill that
	// follows it immediately.
	commit := func(offset int64) error {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group = "kill9-simple"
		req.Generation = -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic, rt.TopicID = topic, topicID // v10 addresses topics by id
		for p := range int32(parts) {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, offset
			rp.Metadata = kmsg.StringPtr("meta-" + strconv.FormatInt(offset, 10))
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(context.Background(), admin)
		if err != nil {
			return err
		}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				if err := kerr.ErrorForCode(rp.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var lastAcked int64
	for off := int64(1); off <= 200; off++ {
		if err := commit(off); err != nil {
			t.Fatalf("commit %d: %v", off, err)
		}
		lastAcked = off
	}

	before := groupsSnapshot(t, admin)
	n.Kill()
	n.Restart()
	admin = n.Client()

	var after map[string]string
	waitFor(t, 30*time.Second, "the groups to be served again", func() error {
		var err error
		after, err = groupsSnapshotErr(admin)
		return err
	})
	for _, group := range []string{"kill9-classic", "kill9-consumer", "kill9-simple"} {
		if before[group] == "" {
			t.Errorf("group %s was not listed before the kill", group)
		}
		if after[group] != before[group] {
			t.Errorf("group %s:\nbefore the kill: %s\nafter:           %s", group, before[group], after[group])
		}
	}
	want := fmt.Sprintf("offset %d meta-%d", lastAcked, lastAcked)
	if strings.Count(after["kill9-simple"], want) != parts {
		t.Errorf("kill9-simple after restart: %s; want every partition at %q", after["kill9-simple"], want)
	}
	t.Logf("after kill -9 and restart: %v", after)
}

func groupsSnapshot(t testing.TB, cl *kgo.Client) map[string]string {
	t.Helper()
	snap, err := groupsSnapshotErr(cl)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// groupsSnapshotErr describes every listed group as one line: type, state
// and each committed offset with its metadata.
func groupsSnapshotErr(cl *kgo.Client) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	lreq := kmsg.NewPtrListGroupsRequest()
	shards := cl.RequestSharded(ctx, lreq)
	out := map[string]string{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, sh.Err
		}
		resp := sh.Resp.(*kmsg.ListGroupsResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		for _, lg := range resp.Groups {
			freq := kmsg.NewPtrOffsetFetchRequest()
			rg := kmsg.NewOffsetFetchRequestGroup()
			rg.Group = lg.Group // all topics
			freq.Groups = append(freq.Groups, rg)
			fresp, err := freq.RequestWith(ctx, cl)
			if err != nil {
				return nil, err
			}
			if len(fresp.Groups) != 1 {
				return nil, fmt.Errorf("fetching offsets of %s: %d groups in the answer", lg.Group, len(fresp.Groups))
			}
			fg := fresp.Groups[0]
			if err := kerr.ErrorForCode(fg.ErrorCode); err != nil {
				return nil, fmt.Errorf("fetching offsets of %s: %w", lg.Group, err)
			}
			line := fmt.Sprintf("type %s state %s:", lg.GroupType, lg.GroupState)
			for _, ft := range fg.Topics {
				for _, fp := range ft.Partitions {
					if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
						return nil, fmt.Errorf("fetching offsets of %s: partition %d: %w", lg.Group, fp.Partition, err)
					}
					meta := ""
					if fp.Metadata != nil {
						meta = *fp.Metadata
					}
					line += fmt.Sprintf(" %s%x-%d offset %d %s;", ft.Topic, ft.TopicID, fp.Partition, fp.Offset, meta)
				}
			}
			out[lg.Group] = line
		}
	}
	return out, nil
}

// 20 members joining and leaving at the same time converge: every
// partition owned by exactly one live member, none orphaned, and the
// members agree with the coordinator.
func TestGroupChurnConverges(t *testing.T) {
	skipShort(t)
	protocols(t, func(t *testing.T, consumer bool) {
		n := startNode(t, fastGroups...)
		admin := n.Client()
		const topic, parts = "churn", 24
		topicID := createTopic(t, admin, topic, parts)
		spec := memberSpec{seeds: n.Addr(), group: "churn-group", topic: topic, consumerProtocol: consumer, sessionTimeout: classicSession}

		type member struct {
			cl     *kgo.Client
			own    *ownership
			cancel context.CancelFunc
			done   chan struct{}
		}
		var mu sync.Mutex
		members := map[string]*member{}
		join := func(name string) {
			m := &member{own: newOwnership(), done: make(chan struct{})}
			cl, err := kgo.NewClient(groupMemberOpts(spec, m.own.apply)...)
			if err != nil {
				t.Error(err)
				return
			}
			m.cl = cl
			var ctx context.Context
			ctx, m.cancel = context.WithCancel(context.Background())
			go func() {
				defer close(m.done)
				for ctx.Err() == nil {
					cl.PollFetches(ctx)
				}
			}()
			mu.Lock()
			members[name] = m
			mu.Unlock()
		}
		leave := func(name string) {
			mu.Lock()
			m := members[name]
			delete(members, name)
			mu.Unlock()
			m.cancel()
			<-m.done
			m.cl.Close()
		}
		t.Cleanup(func() {
			mu.Lock()
			names := make([]string, 0, len(members))
			for n := range members {
				names = append(names, n)
			}
			mu.Unlock()
			for _, n := range names {
				leave(n)
			}
		})
		concurrently := func(names []string, fn func(string)) {
			var wg sync.WaitGroup
			for _, n := range names {
				wg.Add(1)
				go func() {
					defer wg.Done()
					fn(n)
				}()
			}
			wg.Wait()
		}
		converged := func(live int) func() error {
			return func() error {
				mu.Lock()
				clientView := map[string][]int32{}
				for name, m := range members {
					clientView[name], _ = m.own.snapshot()
				}
				mu.Unlock()
				if len(clientView) != live {
					return fmt.Errorf("%d members, want %d", len(clientView), live)
				}
				if err := checkExactlyOnce(parts, clientView); err != nil {
					return fmt.Errorf("members' view: %w", err)
				}
				v, err := describeGroup(admin, spec.group, topicID, consumer)
				if err != nil {
					return err
				}
				if v.state != "Stable" || len(v.assignment) != live {
					return fmt.Errorf("coordinator: state %s with %d members, want Stable with %d", v.state, len(v.assignment), live)
				}
				if err := checkExactlyOnce(parts, v.assignment); err != nil {
					return fmt.Errorf("coordinator's view: %w", err)
				}
				return nil
			}
		}

		var first []string
		for i := range 20 {
			first = append(first, fmt.Sprintf("m%02d", i))
		}
		start := time.Now()
		concurrently(first, join)
		waitFor(t, 90*time.Second, "20 members to converge", converged(20))
		t.Logf("20 members converged in %s", time.Since(start).Round(time.Millisecond))

		// Half leave while five new members join, all at once.
		var churn []string
		for i := range 10 {
			churn = append(churn, "leave:"+first[i*2])
		}
		for i := range 5 {
			churn = append(churn, fmt.Sprintf("join:n%02d", i))
		}
		concurrently(churn, func(op string) {
			if name, ok := strings.CutPrefix(op, "leave:"); ok {
				leave(name)
			} else if name, ok := strings.CutPrefix(op, "join:"); ok {
				join(name)
			}
		})
		start = time.Now()
		waitFor(t, 90*time.Second, "15 members to converge after the churn", converged(15))
		v, _ := describeGroup(admin, spec.group, topicID, consumer)
		t.Logf("15 members converged %s after the churn; coordinator: %s %v", time.Since(start).Round(time.Millisecond), v.state, v.assignment)
	})
}
