package integration_test

// Group members that run as child processes (this test binary re-executed),
// so that a test can kill one with SIGKILL: a member that dies sends no
// LeaveGroup and stops heartbeating, which is what the session timeout
// exists for. The child prints one line per rebalance callback ("assigned
// 0,3", "revoked 0", "lost 3"); the parent replays them to know what the
// child owns.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration/node"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const memberEnv = "GREGOR_TEST_GROUP_MEMBER"

func TestMain(m *testing.M) {
	if os.Getenv(memberEnv) != "" {
		os.Exit(runGroupMember())
	}
	os.Exit(node.Main(m))
}

// memberSpec describes one member.
type memberSpec struct {
	seeds, group, topic string
	consumerProtocol    bool   // KIP-848 instead of classic
	instanceID          string // static membership when set
	sessionTimeout      time.Duration
}

func (s memberSpec) env() []string {
	return append(os.Environ(),
		memberEnv+"=1",
		"MEMBER_SEEDS="+s.seeds,
		"MEMBER_GROUP="+s.group,
		"MEMBER_TOPIC="+s.topic,
		"MEMBER_CONSUMER_PROTOCOL="+strconv.FormatBool(s.consumerProtocol),
		"MEMBER_INSTANCE_ID="+s.instanceID,
		"MEMBER_SESSION_MS="+strconv.FormatInt(s.sessionTimeout.Milliseconds(), 10),
	)
}

// groupMemberOpts are the client options of a test member: eager range in
// the classic protocol (a rebalance shows as a revocation of everything),
// range on the server side for KIP-848, and fast heartbeats.
func groupMemberOpts(s memberSpec, events func(kind string, parts []int32)) []kgo.Opt {
	callback := func(kind string) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			events(kind, m[s.topic])
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(s.seeds),
		kgo.ConsumerGroup(s.group),
		kgo.ConsumeTopics(s.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.Balancers(kgo.RangeBalancer()),
		kgo.OnPartitionsAssigned(callback("assigned")),
		kgo.OnPartitionsRevoked(callback("revoked")),
		kgo.OnPartitionsLost(callback("lost")),
	}
	if s.consumerProtocol {
		opts = append(opts, kgo.ServerSideBalancer())
	} else if s.sessionTimeout > 0 {
		opts = append(opts, kgo.SessionTimeout(s.sessionTimeout))
	}
	if s.instanceID != "" {
		opts = append(opts, kgo.InstanceID(s.instanceID))
	}
	return opts
}

// runGroupMember is the child: it consumes until SIGTERM or until its
// parent goes away (stdin closes), then closes the client, which leaves
// the group the way the protocol says for its kind of member.
func runGroupMember() int {
	ms, _ := strconv.Atoi(os.Getenv("MEMBER_SESSION_MS"))
	spec := memberSpec{
		seeds:            os.Getenv("MEMBER_SEEDS"),
		group:            os.Getenv("MEMBER_GROUP"),
		topic:            os.Getenv("MEMBER_TOPIC"),
		consumerProtocol: os.Getenv("MEMBER_CONSUMER_PROTOCOL") == "true",
		instanceID:       os.Getenv("MEMBER_INSTANCE_ID"),
		sessionTimeout:   time.Duration(ms) * time.Millisecond,
	}
	var outMu sync.Mutex
	events := func(kind string, parts []int32) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, "%s %s\n", kind, formatParts(parts))
	}
	cl, err := kgo.NewClient(groupMemberOpts(spec, events)...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "creating client:", err)
		return 1
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	go func() {
		io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	for ctx.Err() == nil {
		cl.PollFetches(ctx)
	}
	memberID, _ := cl.GroupMetadata()
	cl.Close()
	if spec.consumerProtocol && spec.instanceID != "" {
		// franz-go 1.22.3 sends the static leave (epoch -2) without
		// the InstanceId that Kafka (and gregor) require, and gets
		// INVALID_REQUEST; send it the way the Java consumer does.
		if err := staticLeave(spec, memberID); err != nil {
			fmt.Fprintln(os.Stderr, "static leave:", err)
			return 1
		}
	}
	return 0
}

func staticLeave(spec memberSpec, memberID string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(spec.seeds))
	if err != nil {
		return err
	}
	defer cl.Close()
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group, req.MemberID, req.MemberEpoch = spec.group, memberID, -2
	req.InstanceID = kmsg.StringPtr(spec.instanceID)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	return kerr.ErrorForCode(resp.ErrorCode)
}

func formatParts(parts []int32) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(int(p))
	}
	return strings.Join(s, ",")
}

func parseParts(s string) []int32 {
	var out []int32
	for _, f := range strings.Split(s, ",") {
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err == nil {
			out = append(out, int32(n))
		}
	}
	return out
}

// ownership replays rebalance callbacks into the set of partitions a
// member owns. It is shared by child-process members and in-process ones.
type ownership struct {
	mu     sync.Mutex
	owned  map[int32]bool
	events []string
}

func newOwnership() *ownership { return &ownership{owned: map[int32]bool{}} }

func (o *ownership) apply(kind string, parts []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, kind+" "+formatParts(parts))
	for _, p := range parts {
		switch kind {
		case "assigned":
			o.owned[p] = true
		case "revoked", "lost":
			delete(o.owned, p)
		}
	}
}

// snapshot returns the owned partitions (sorted) and the number of
// callbacks seen so far.
func (o *ownership) snapshot() ([]int32, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]int32, 0, len(o.owned))
	for p := range o.owned {
		out = append(out, p)
	}
	slices.Sort(out)
	return out, len(o.events)
}

func (o *ownership) history() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return strings.Join(o.events, "; ")
}

// lockedBuffer collects a child's stderr (written by exec's copying
// goroutine, read by the test).
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// memberProc is a running child member.
type memberProc struct {
	t     testing.TB
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	own   *ownership
	done  chan struct{}
	err   *lockedBuffer
}

func startMember(t testing.TB, name string, spec memberSpec) *memberProc {
	t.Helper()
	m := &memberProc{t: t, name: name, own: newOwnership(), done: make(chan struct{}), err: &lockedBuffer{}}
	m.cmd = exec.Command(os.Args[0], "-test.run=^$")
	m.cmd.Env = spec.env()
	m.cmd.Stderr = m.err
	stdout, err := m.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if m.stdin, err = m.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("starting member %s: %v", name, err)
	}
	go func() {
		defer close(m.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			kind, parts, _ := strings.Cut(sc.Text(), " ")
			m.own.apply(kind, parseParts(parts))
		}
		m.cmd.Wait()
	}()
	t.Cleanup(m.kill)
	return m
}

// kill is kill -9.
func (m *memberProc) kill() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cmd.Process.Kill()
	<-m.done
}

// stop asks the member to close its client and waits for it.
func (m *memberProc) stop() {
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		m.t.Errorf("member %s did not stop within 30s; stderr:\n%s", m.name, m.err.String())
		m.kill()
	}
}

// waitFor polls cond until it returns nil or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting %s for %s: %v", timeout, what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkExactlyOnce says whether the owners' partitions cover 0..n-1 with
// each partition owned by exactly one owner.
func checkExactlyOnce(n int32, owners map[string][]int32) error {
	seen := map[int32]string{}
	for name, parts := range owners {
		for _, p := range parts {
			if other, dup := seen[p]; dup {
				return fmt.Errorf("partition %d is owned by both %s and %s", p, other, name)
			}
			if p < 0 || p >= n {
				return fmt.Errorf("%s owns partition %d of a %d-partition topic", name, p, n)
			}
			seen[p] = name
		}
	}
	if int32(len(seen)) != n {
		var missing []int32
		for p := int32(0); p < n; p++ {
			if _, ok := seen[p]; !ok {
				missing = append(missing, p)
			}
		}
		return fmt.Errorf("partitions %v are owned by nobody (owners %v)", missing, sortedOwners(owners))
	}
	return nil
}

func sortedOwners(owners map[string][]int32) string {
	names := make([]string, 0, len(owners))
	for n := range owners {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s=%v ", n, owners[n])
	}
	return strings.TrimSpace(b.String())
}
