package integration

// MirrorMaker 2 (connect-mirror-maker.sh, Kafka 4.3.1's dedicated mode)
// between the target and a peer node the scenario starts: the disaster
// recovery drill. A consumer group reads part of a topic on one cluster
// and commits; MirrorMaker 2 copies the topic (as "<alias>.<topic>", the
// DefaultReplicationPolicy), its configs, the offset syncs and the
// group's checkpoints, and commits the translated offsets on the other
// cluster (sync.group.offsets.enabled); the group then fails over there
// and must find every record it had not read, re-reading only what the
// translation MirrorMaker 2 recorded lets it re-read. The drill runs
// both ways in one MirrorMaker 2: the group fails over from the target
// to the peer, then back. mirror/identity-acls runs one way of it under
// IdentityReplicationPolicy (the copy keeps the topic's name) between
// two nodes with an authorizer, and checks which topic ACLs MirrorMaker
// 2 copies.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const mainMirrorMaker = "org.apache.kafka.connect.mirror.MirrorMaker"

func mirrorScenarios() []Scenario {
	return []Scenario{{
		Name: "mirror/dr-drill",
		Doc: "MirrorMaker " + KafkaVersion + " (connect-mirror-maker.sh, DefaultReplicationPolicy, sync.group.offsets.enabled=true) between the target (A) and a node of the other flavor (B; beside a cluster target, a 3-node cluster, topics on 3 replicas), both flows in one MirrorMaker 2: " +
			"a 2-partition topic with retention.ms and max.message.bytes set is copied as <alias>.<topic> with every record and those configs; a group reads part of it on A and commits; " +
			"its checkpoint and translated offsets reach B; failed over, the group reads every record it had not read (no gap), re-reading only back to an offset sync MirrorMaker 2 recorded; " +
			"then the same drill from B's own topic back to A (fail back); offsets and re-read counts per direction in the note",
		Timeout: 10 * time.Minute,
		Run:     func(ctx context.Context, e *Env) error { return mirrorDrill(ctx, e, false) },
	}, {
		Name: "mirror/dr-drill-same-flavor",
		Doc: "mirror/dr-drill with a peer of the target's own flavor (Kafka↔Kafka on the kafka target, Gregor↔Gregor on gregor): " +
			"the baseline whose duplicates the cross-flavor drill's are compared with",
		Timeout: 10 * time.Minute,
		Run:     func(ctx context.Context, e *Env) error { return mirrorDrill(ctx, e, true) },
	}, {
		Name: "mirror/identity-acls",
		Doc: "MirrorMaker " + KafkaVersion + " (IdentityReplicationPolicy, sync.topic.acls.enabled=true, sync.group.offsets.enabled=true), only A→B, between two nodes it starts with StandardAuthorizer (beside a cluster target, two 3-node clusters, topics on 3 replicas): " +
			"A of the target's flavor, B of the other; a 2-partition topic with retention.ms and max.message.bytes set arrives on B under its own name with every record and those configs; " +
			"of its ACLs made with kafka-acls on A, B ends up (kafka-acls --list) with exactly the ones MirrorSourceConnector copies: the literal ones but ALLOW WRITE, ALLOW ALL as ALLOW READ, DENY as it is; " +
			"not the prefixed one, nor those of an unmirrored topic or a group; a group's checkpoint and synced offsets reach B under the topic's own name, and failed over it reads every record it had not read, " +
			"re-reading only back to an offset sync; B's ACLs and the re-read counts in the note",
		Timeout:  10 * time.Minute,
		OwnNodes: true,
		Run:      mirrorIdentityACLs,
	}}
}

// The drill's sizes. Committed offsets are chosen off any multiple of
// offset.lag.max (100) so that translation has to fall back to an earlier
// offset sync, which is where duplicates come from.
const (
	mirrorPartitions = 2
	// mirrorRecords are produced into each partition: the first half
	// before MirrorMaker 2 starts (copied in a burst), the rest while it
	// runs (copied as it comes).
	mirrorRecords = 2000
	mirrorWait    = 3 * time.Minute
)

// mirrorCommitted is how many records of each partition the group reads
// on the primary cluster before it fails over.
var mirrorCommitted = [mirrorPartitions]int64{1234, 777}

// mirrorSide is one cluster as MirrorMaker 2 knows it.
type mirrorSide struct {
	alias     string
	flavor    string
	bootstrap string
	replicas  int // of every topic created on it
}

// createTopic creates topic on the side with its replication factor.
func (s mirrorSide) createTopic(ctx context.Context, topic string, partitions int32, configs map[string]*string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(s.bootstrap, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, int16(s.replicas), configs, topic)
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return fmt.Errorf("creating %s on %s: %w", topic, s.alias, err)
	}
	return nil
}

func mirrorDrill(ctx context.Context, e *Env, sameFlavor bool) error {
	own := FlavorOf(e.Target.Name())
	if own == "" {
		return Skipf("the harness cannot start a peer for the %s target", e.Target.Name())
	}
	peerFlavor := map[string]string{"gregor": "kafka", "kafka": "gregor"}[own]
	if sameFlavor {
		peerFlavor = own
	}
	// The peer has the target's shape: a single node, or beside a
	// cluster target a three-node cluster (combined nodes, the cluster
	// targets' layout), with every topic on three replicas.
	var peerBootstrap string
	replicas := 1
	if e.Target.Topology().Cluster() {
		c, err := StartCluster(ctx, e.Tools, peerFlavor, Combined3, filepath.Join(e.Dir, "peer"), 0)
		if err != nil {
			return fmt.Errorf("starting the %s peer cluster: %w", peerFlavor, err)
		}
		e.cleanups = append(e.cleanups, func() { _ = c.Stop() })
		peerBootstrap, replicas = c.Bootstrap(), 3
	} else {
		n, err := e.StartNodeOf(ctx, peerFlavor, NodeSpec{})
		if err != nil {
			return fmt.Errorf("starting the %s peer: %w", peerFlavor, err)
		}
		peerBootstrap = n.Bootstrap()
	}
	a := mirrorSide{alias: "A", flavor: own, bootstrap: e.Bootstrap(), replicas: replicas}
	b := mirrorSide{alias: "B", flavor: peerFlavor, bootstrap: peerBootstrap, replicas: replicas}
	forth := mirrorFlow{src: a, dst: b, topic: e.Name("drill-a"), group: e.Name("drill-a-group")}
	back := mirrorFlow{src: b, dst: a, topic: e.Name("drill-b"), group: forth.group}
	for _, f := range []*mirrorFlow{&forth, &back} {
		if err := f.createAndProduce(ctx, 0, mirrorRecords/2); err != nil {
			return err
		}
	}
	mm, err := startMirrorMaker(ctx, e, a, b, []mirrorFlow{forth, back}, nil)
	if err != nil {
		return err
	}
	defer mm.Stop(30 * time.Second)
	for _, f := range []*mirrorFlow{&forth, &back} {
		if err := f.produce(ctx, mirrorRecords/2, mirrorRecords); err != nil {
			return err
		}
	}
	// One application, one group: it fails over to B, runs there (on
	// B's own topic, as its producers would write after a failover) and
	// fails back to A. Its position on A.<topic> at B does not come back:
	// MirrorMaker 2 translates only offsets of topics it copies (B→A
	// never copies A.<topic>, a cycle), so the way back is B's own
	// topic, copied to A as B.<topic>.
	var notes []string
	for _, f := range []*mirrorFlow{&forth, &back} {
		if err := f.consumeAndCommit(ctx); err != nil {
			return err
		}
		if err := f.drill(ctx, mm); err != nil {
			return fmt.Errorf("%s→%s (%s→%s): %w", f.src.alias, f.dst.alias, f.src.flavor, f.dst.flavor, err)
		}
		notes = append(notes, f.note())
	}
	e.Notef("%s", strings.Join(notes, "; "))
	return nil
}

const identityReplicationPolicy = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

// mirrorIdentityACLs runs one flow, A→B, under IdentityReplicationPolicy
// with ACL sync on, between two nodes with StandardAuthorizer (the
// shared target has none, and ACL sync needs one on both sides).
func mirrorIdentityACLs(ctx context.Context, e *Env) error {
	own := FlavorOf(e.Target.Name())
	if own == "" {
		return Skipf("the harness cannot start a node like the %s target", e.Target.Name())
	}
	peerFlavor := map[string]string{"gregor": "kafka", "kafka": "gregor"}[own]
	// Every client here, MirrorMaker 2 included, connects as
	// User:ANONYMOUS: a super user, so that the ACLs under test govern
	// no one and only their copying is checked.
	authorizer := func() NodeSpec {
		return NodeSpec{Properties: map[string]string{
			"authorizer.class.name": standardAuthorizer,
			"super.users":           "User:ANONYMOUS",
		}}
	}
	// Beside a cluster target, A and B are 3-node clusters (combined
	// nodes, every topic on 3 replicas), as for the drill.
	// The target's kind, not its topology: this scenario (OwnNodes) may
	// run before the shared lane has started the target.
	_, clusterTarget := e.Target.(interface{ Cluster() *Cluster })
	start := func(flavor, name string) (mirrorSide, error) {
		if clusterTarget {
			var props []string
			for k, v := range authorizer().Properties {
				props = append(props, k+"="+v)
			}
			slices.Sort(props)
			c, err := StartClusterWith(ctx, e.Tools, flavor, Combined3, filepath.Join(e.Dir, "cluster-"+name), 0, ClusterOptions{Properties: props})
			if err != nil {
				return mirrorSide{}, fmt.Errorf("starting %s (a %s cluster): %w", name, flavor, err)
			}
			e.cleanups = append(e.cleanups, func() { _ = c.Stop() })
			return mirrorSide{alias: name, flavor: flavor, bootstrap: c.Bootstrap(), replicas: 3}, nil
		}
		n, err := e.StartNodeOf(ctx, flavor, authorizer())
		if err != nil {
			return mirrorSide{}, fmt.Errorf("starting %s (%s): %w", name, flavor, err)
		}
		return mirrorSide{alias: name, flavor: flavor, bootstrap: n.Bootstrap(), replicas: 1}, nil
	}
	a, err := start(own, "A")
	if err != nil {
		return err
	}
	b, err := start(peerFlavor, "B")
	if err != nil {
		return err
	}
	f := mirrorFlow{src: a, dst: b, topic: e.Name("ident"), group: e.Name("ident-group"), identity: true}
	if err := f.createAndProduce(ctx, 0, mirrorRecords/2); err != nil {
		return err
	}
	unmirrored := e.Name("unmirrored")
	if err := a.createTopic(ctx, unmirrored, 1, nil); err != nil {
		return err
	}

	// The grants on A, made before MirrorMaker 2 starts, and what Kafka
	// 4.3.1's MirrorSourceConnector.syncTopicAcls makes of them: it asks
	// A for every TOPIC binding, keeps the LITERAL ones of topics its
	// filter replicates (shouldReplicateTopic) but ALLOW WRITE
	// (shouldReplicateAcl: only MirrorMaker 2 should write a copy), and
	// creates each on the copy's name with ALLOW ALL turned into ALLOW
	// READ (targetAclBinding); host and principal stay, DENY stays as
	// it is.
	grants := [][]string{
		// Copied as is on the topic; the same grant on the unmirrored
		// topic and on the group is not.
		{"--allow-principal", "User:alice", "--operation", "Read", "--topic", f.topic, "--topic", unmirrored, "--group", f.group},
		// ALLOW ALL arrives as ALLOW READ; ALLOW WRITE does not arrive.
		{"--allow-principal", "User:bob", "--operation", "All", "--operation", "Write", "--topic", f.topic},
		// A host other than *.
		{"--allow-principal", "User:dave", "--allow-host", "10.0.0.1", "--operation", "Describe", "--topic", f.topic},
		// DENY WRITE and DENY ALL arrive unchanged.
		{"--deny-principal", "User:eve", "--operation", "Write", "--operation", "All", "--topic", f.topic},
		// A PREFIXED pattern, though its prefix is the topic's whole name,
		// is not copied.
		{"--allow-principal", "User:frank", "--operation", "Read", "--topic", f.topic, "--resource-pattern-type", "prefixed"},
	}
	for _, g := range grants {
		if _, err := e.KafkaOn(ctx, a.bootstrap, "", mainACLs, append([]string{"--add"}, g...)...); err != nil {
			return fmt.Errorf("on A: %w", err)
		}
	}
	binding := func(resource, principal, host, op, perm string) string {
		return fmt.Sprintf("%s (principal=%s, host=%s, operation=%s, permissionType=%s)", resource, principal, host, op, perm)
	}
	topic, prefixed := "TOPIC:LITERAL:"+f.topic, "TOPIC:PREFIXED:"+f.topic
	// A holds every grant, so that each one missing on B was left out
	// by MirrorMaker 2, not by the tool or A.
	onA := []string{
		binding(topic, "User:alice", "*", "READ", "ALLOW"),
		binding("TOPIC:LITERAL:"+unmirrored, "User:alice", "*", "READ", "ALLOW"),
		binding("GROUP:LITERAL:"+f.group, "User:alice", "*", "READ", "ALLOW"),
		binding(topic, "User:bob", "*", "ALL", "ALLOW"),
		binding(topic, "User:bob", "*", "WRITE", "ALLOW"),
		binding(topic, "User:dave", "10.0.0.1", "DESCRIBE", "ALLOW"),
		binding(topic, "User:eve", "*", "WRITE", "DENY"),
		binding(topic, "User:eve", "*", "ALL", "DENY"),
		binding(prefixed, "User:frank", "*", "READ", "ALLOW"),
	}
	slices.Sort(onA)
	// (On Kafka a broker learns of a new ACL from the metadata log, an
	// instant after the tool's CreateAcls is answered.)
	err = until(ctx, 30*time.Second, 500*time.Millisecond, func() (bool, error) {
		got, err := aclBindingsOn(ctx, a.bootstrap)
		if err != nil {
			return false, err
		}
		if !slices.Equal(got, onA) {
			return false, fmt.Errorf("A's ACLs (DescribeAcls):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(onA, "\n"))
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	want := []string{
		binding(topic, "User:alice", "*", "READ", "ALLOW"),
		binding(topic, "User:bob", "*", "READ", "ALLOW"),
		binding(topic, "User:dave", "10.0.0.1", "DESCRIBE", "ALLOW"),
		binding(topic, "User:eve", "*", "WRITE", "DENY"),
		binding(topic, "User:eve", "*", "ALL", "DENY"),
	}
	slices.Sort(want)

	mm, err := startMirrorMaker(ctx, e, a, b, []mirrorFlow{f}, [][2]string{
		{"replication.policy.class", identityReplicationPolicy},
		{"sync.topic.acls.enabled", "true"},
		{"sync.topic.acls.interval.seconds", "1"},
	})
	if err != nil {
		return err
	}
	defer mm.Stop(30 * time.Second)
	if err := f.produce(ctx, mirrorRecords/2, mirrorRecords); err != nil {
		return err
	}

	// B starts with no ACL at all, so every binding it holds is one
	// MirrorMaker 2 created.
	err = until(ctx, mirrorWait, time.Second, func() (bool, error) {
		if exited, err := mm.Exited(); exited {
			return false, fmt.Errorf("MirrorMaker 2 exited (%v): %s", err, mm.LogTail(8))
		}
		got, err := aclBindingsOn(ctx, b.bootstrap)
		if err != nil {
			return false, err
		}
		if !slices.Equal(got, want) {
			return false, fmt.Errorf("B's ACLs (DescribeAcls):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		return true, nil
	})
	if err != nil {
		return err
	}

	if err := f.consumeAndCommit(ctx); err != nil {
		return err
	}
	if err := f.drill(ctx, mm); err != nil {
		return fmt.Errorf("%s→%s (%s→%s): %w", f.src.alias, f.dst.alias, f.src.flavor, f.dst.flavor, err)
	}

	// By now MirrorMaker 2 has synced the ACLs every second for the
	// whole drill: the stock tool must still list exactly the copies,
	// each once (a sync that re-created an existing binding as a new
	// one would show here).
	out, err := e.KafkaOn(ctx, b.bootstrap, "", mainACLs, "--list")
	if err != nil {
		return fmt.Errorf("on B: %w", err)
	}
	got, err := parseACLList(out.Stdout)
	if err != nil {
		return fmt.Errorf("kafka-acls --list on B: %w", err)
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("kafka-acls --list on B lists:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(b.bootstrap, ",")...))
	if err != nil {
		return err
	}
	defer cl.Close()
	topics, err := kadm.NewClient(cl).ListTopics(ctx)
	if err != nil {
		return err
	}
	if topics.Has(unmirrored) {
		return fmt.Errorf("%s, not in A->B.topics, was copied to B", unmirrored)
	}

	var listed []string
	for _, g := range got {
		listed = append(listed, strings.TrimPrefix(g, topic+" "))
	}
	e.Notef("B's ACLs on %s: %s; %s", f.topic, strings.Join(listed, " "), f.note())
	return nil
}

// aclBindingsOn is every ACL binding the cluster at bootstrap holds
// (DescribeAcls with every filter field ANY), each as parseACLList
// writes it, sorted.
func aclBindingsOn(ctx context.Context, bootstrap string) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = kmsg.ACLResourceTypeAny
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeAny
	req.Operation = kmsg.ACLOperationAny
	req.PermissionType = kmsg.ACLPermissionTypeAny
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, fmt.Errorf("DescribeAcls: %w", err)
	}
	var out []string
	for _, r := range resp.Resources {
		for _, a := range r.ACLs {
			out = append(out, fmt.Sprintf("%s:%s:%s (principal=%s, host=%s, operation=%s, permissionType=%s)",
				r.ResourceType, r.ResourcePatternType, r.ResourceName, a.Principal, a.Host, a.Operation, a.PermissionType))
		}
	}
	slices.Sort(out)
	return out, nil
}

// parseACLList reads kafka-acls --list's output, blocks of
//
//	Current ACLs for resource `ResourcePattern(resourceType=T, name=N, patternType=P)`:
//		(principal=..., host=..., operation=..., permissionType=...)
//
// into one "T:P:N (principal=...)" line per binding, sorted. A line of
// any other shape is an error, so that nothing the tool lists is missed.
func parseACLList(out string) ([]string, error) {
	const head, tail = "Current ACLs for resource `ResourcePattern(", ")`:"
	var bindings []string
	resource := ""
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.TrimSpace(line) == "":
			resource = ""
		case strings.HasPrefix(line, head) && strings.HasSuffix(line, tail):
			fields := map[string]string{}
			for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, head), tail), ", ") {
				k, v, _ := strings.Cut(kv, "=")
				fields[k] = v
			}
			resource = fields["resourceType"] + ":" + fields["patternType"] + ":" + fields["name"]
		case resource != "" && strings.HasPrefix(strings.TrimSpace(line), "(principal="):
			bindings = append(bindings, resource+" "+strings.TrimSpace(line))
		default:
			return nil, fmt.Errorf("unexpected line %q in:\n%s", line, out)
		}
	}
	slices.Sort(bindings)
	return bindings, nil
}

// startMirrorMaker runs connect-mirror-maker.sh's main class with the
// flows' directions enabled, every interval that the drill waits on cut
// to a second or two, and extra's properties on top.
func startMirrorMaker(ctx context.Context, e *Env, a, b mirrorSide, flows []mirrorFlow, extra [][2]string) (*Proc, error) {
	rf := strconv.Itoa(a.replicas)
	props := [][2]string{
		{"clusters", a.alias + "," + b.alias},
		{a.alias + ".bootstrap.servers", a.bootstrap},
		{b.alias + ".bootstrap.servers", b.bootstrap},
	}
	// Only the flows' directions are enabled (a direction is off unless
	// set), each copying only its own topic.
	var groups []string
	for _, f := range flows {
		pair := f.src.alias + "->" + f.dst.alias
		props = append(props, [2]string{pair + ".enabled", "true"}, [2]string{pair + ".topics", f.topic})
		if !slices.Contains(groups, f.group) {
			groups = append(groups, f.group)
		}
	}
	props = append(props, [][2]string{
		{"groups", strings.Join(groups, ",")},
		// Every topic MirrorMaker 2 creates, its own and the copies, has
		// as many replicas as the clusters have brokers (1 or 3).
		{"replication.factor", rf},
		{"offset-syncs.topic.replication.factor", rf},
		{"checkpoints.topic.replication.factor", rf},
		{"heartbeats.topic.replication.factor", rf},
		{"config.storage.replication.factor", rf},
		{"offset.storage.replication.factor", rf},
		{"status.storage.replication.factor", rf},
		{"sync.group.offsets.enabled", "true"},
		{"sync.group.offsets.interval.seconds", "1"},
		{"emit.checkpoints.interval.seconds", "1"},
		// The groups commit after MirrorMaker 2 has started, and are
		// checkpointed only once a refresh has found them.
		{"refresh.groups.interval.seconds", "2"},
		{"refresh.topics.interval.seconds", "2"},
		{"sync.topic.configs.interval.seconds", "2"},
		// A sync not due yet is sent at the next offset flush (60 s by
		// default); the drill waits for the last record's. A worker
		// setting, so it goes to each herder by its target's alias:
		// MirrorMakerConfig.workerConfig passes on only a few top-level
		// prefixes (offset.storage, task, worker, ...), and a top-level
		// offset.flush.interval.ms is ignored.
		{a.alias + ".offset.flush.interval.ms", "1000"},
		{b.alias + ".offset.flush.interval.ms", "1000"},
		// ACL sync needs an authorizer on both clusters; the shared
		// target runs without one.
		{"sync.topic.acls.enabled", "false"},
	}...)
	// extra overrides a key set above in place (a properties file's
	// later duplicate would win too, but would leave the file saying
	// two things).
	for _, kv := range extra {
		if i := slices.IndexFunc(props, func(p [2]string) bool { return p[0] == kv[0] }); i >= 0 {
			props[i] = kv
		} else {
			props = append(props, kv)
		}
	}
	dir := filepath.Join(e.Dir, "mm2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "mm2.properties")
	if err := WriteProperties(path, props); err != nil {
		return nil, err
	}
	logCfg, err := e.Tools.Log4jConfig(true)
	if err != nil {
		return nil, err
	}
	c, err := e.Tools.javaCmdLogging(ctx, SetConnect, "", logCfg, mainMirrorMaker, path)
	if err != nil {
		return nil, err
	}
	// Two Connect herders, each with producers, consumers and admin
	// clients for both clusters: more than the tools' 256 MiB.
	c.Args = slices.DeleteFunc(c.Args, func(s string) bool { return s == "-Xmx256M" })
	c.Args = append([]string{"-Djava.io.tmpdir=" + dir, "-Xmx512M"}, c.Args...)
	c.Dir = dir
	return Start(c, filepath.Join(dir, "mm2.log"))
}

// mirrorFlow is one direction of the drill: topic and group live on src
// and fail over to dst.
type mirrorFlow struct {
	src, dst     mirrorSide
	topic, group string
	// identity is set when MirrorMaker 2 runs IdentityReplicationPolicy,
	// which keeps a copy's name; DefaultReplicationPolicy prefixes it
	// with the source's alias.
	identity bool

	committed  [mirrorPartitions]int64 // the group's offsets on src
	translated [mirrorPartitions]int64 // its checkpoint's offsets on dst
	resumed    [mirrorPartitions]int64 // the first record read on dst
	syncBelow  [mirrorPartitions]int64 // the offset sync the translation used
	newest     [mirrorPartitions]int64 // the newest offset sync's upstream offset
}

// remote is the name of the topic's copy on dst.
func (f *mirrorFlow) remote() string {
	if f.identity {
		return f.topic
	}
	return f.src.alias + "." + f.topic
}

func (f *mirrorFlow) createAndProduce(ctx context.Context, from, to int) error {
	retention, maxBytes := "7777777", "2000000"
	err := f.src.createTopic(ctx, f.topic, mirrorPartitions,
		map[string]*string{"retention.ms": &retention, "max.message.bytes": &maxBytes})
	if err != nil {
		return err
	}
	return f.produce(ctx, from, to)
}

// produce writes records from..to-1 into each partition; each value is
// its index, which is also its offset on src.
func (f *mirrorFlow) produce(ctx context.Context, from, to int) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.src.bootstrap, ",")...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(f.topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	var recs []*kgo.Record
	for p := range int32(mirrorPartitions) {
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("producing into %s on %s: %w", f.topic, f.src.alias, err)
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, f.topic)
	if err != nil {
		return err
	}
	for p := range int32(mirrorPartitions) {
		if o, ok := ends.Lookup(f.topic, p); !ok || o.Offset != int64(to) {
			return fmt.Errorf("%s-%d on %s ends at %d after %d records", f.topic, p, f.src.alias, o.Offset, to)
		}
	}
	return nil
}

// consumeAndCommit is the application on src: a group member that reads
// mirrorCommitted[p] records of each partition, commits exactly past
// them, and leaves (MirrorMaker 2 syncs a group's offsets only while it
// has no member on dst, and the drill's group is then gone from both).
func (f *mirrorFlow) consumeAndCommit(ctx context.Context) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.src.bootstrap, ",")...),
		kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(f.topic), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var read [mirrorPartitions]int64
	err = until(ctx, time.Minute, 0, func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		fs := cl.PollFetches(pctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return false, fe.Err
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == read[r.Partition] && read[r.Partition] < mirrorCommitted[r.Partition] {
				read[r.Partition]++
			}
		})
		return read == mirrorCommitted, nil
	})
	if err != nil {
		return fmt.Errorf("group %s on %s read %v of %v: %w", f.group, f.src.alias, read, mirrorCommitted, err)
	}
	offsets := map[string]map[int32]kgo.EpochOffset{f.topic: {}}
	for p, o := range mirrorCommitted {
		offsets[f.topic][int32(p)] = kgo.EpochOffset{Epoch: -1, Offset: o}
	}
	var commitErr error
	cl.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		commitErr = err
		if err != nil {
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && commitErr == nil {
					commitErr = fmt.Errorf("%s-%d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	if commitErr != nil {
		return fmt.Errorf("group %s committing on %s: %w", f.group, f.src.alias, commitErr)
	}
	f.committed = mirrorCommitted
	return nil
}

// drill waits for MirrorMaker 2's copy, configs, offset syncs and
// checkpoint, then fails the group over to dst and checks what it reads.
func (f *mirrorFlow) drill(ctx context.Context, mm *Proc) error {
	dst, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.dst.bootstrap, ",")...))
	if err != nil {
		return err
	}
	defer dst.Close()
	dstAdm := kadm.NewClient(dst)
	alive := func() error {
		if exited, err := mm.Exited(); exited {
			return fmt.Errorf("MirrorMaker 2 exited (%v): %s", err, mm.LogTail(8))
		}
		return nil
	}

	remote := f.remote()
	err = until(ctx, mirrorWait, 500*time.Millisecond, func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		ends, err := dstAdm.ListEndOffsets(ctx, remote)
		if err != nil {
			return false, err
		}
		for p := range int32(mirrorPartitions) {
			if o, ok := ends.Lookup(remote, p); !ok || o.Err != nil || o.Offset < mirrorRecords {
				return false, fmt.Errorf("%s on %s: partition %d not copied yet (%+v)", remote, f.dst.alias, p, o)
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	copied, err := readTopic(ctx, f.dst.bootstrap, remote)
	if err != nil {
		return err
	}
	for p := range int32(mirrorPartitions) {
		if len(copied[p]) != mirrorRecords {
			return fmt.Errorf("%s-%d on %s holds %d records, want %d", remote, p, f.dst.alias, len(copied[p]), mirrorRecords)
		}
		for i, r := range copied[p] {
			if string(r.Value) != strconv.Itoa(i) {
				return fmt.Errorf("%s-%d on %s: offset %d holds %q, want %d", remote, p, f.dst.alias, r.Offset, r.Value, i)
			}
		}
	}

	err = until(ctx, mirrorWait, 500*time.Millisecond, func() (bool, error) {
		rc, err := dstAdm.DescribeTopicConfigs(ctx, remote)
		if err != nil {
			return false, err
		}
		got := map[string]string{}
		for _, c := range rc {
			for _, kv := range c.Configs {
				got[kv.Key] = kv.MaybeValue()
			}
		}
		if got["retention.ms"] != "7777777" || got["max.message.bytes"] != "2000000" {
			return false, fmt.Errorf("%s on %s has retention.ms=%q max.message.bytes=%q, want the source's 7777777 and 2000000",
				remote, f.dst.alias, got["retention.ms"], got["max.message.bytes"])
		}
		return true, nil
	})
	if err != nil {
		return err
	}

	// The offset syncs of this flow are on src
	// (offset-syncs.topic.location=source). One task's producer writes
	// a partition's syncs in order, so once the last record's sync is
	// there no sync at or below a committed offset is still to come.
	syncsTopic := "mm2-offset-syncs." + f.dst.alias + ".internal"
	var syncs [mirrorPartitions][]mirrorOffsetSync
	err = until(ctx, mirrorWait, time.Second, func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		recs, err := readTopic(ctx, f.src.bootstrap, syncsTopic)
		if err != nil {
			return false, err
		}
		syncs = [mirrorPartitions][]mirrorOffsetSync{}
		for _, r := range recs[0] {
			s, err := parseOffsetSync(r.Key, r.Value)
			if err != nil {
				return false, fmt.Errorf("%s at %d: %w", syncsTopic, r.Offset, err)
			}
			if s.topic == f.topic && s.partition >= 0 && s.partition < mirrorPartitions {
				syncs[s.partition] = append(syncs[s.partition], s)
			}
		}
		for p, ss := range syncs {
			if !slices.ContainsFunc(ss, func(s mirrorOffsetSync) bool { return s.upstream == mirrorRecords-1 }) {
				return false, fmt.Errorf("no offset sync of %s-%d's last record yet in %s", f.topic, p, syncsTopic)
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	// MirrorMaker 2 translates a committed offset only from a sync at or
	// below it; with none (its task can drop syncs: a restart, or more
	// in flight than it allows) it emits no checkpoint for the partition
	// and commits nothing there, and the group resumes by its
	// auto.offset.reset.
	var translatable [mirrorPartitions]bool
	for p, ss := range syncs {
		f.newest[p], f.syncBelow[p] = -1, -1
		for _, s := range ss {
			f.newest[p] = max(f.newest[p], s.upstream)
			translatable[p] = translatable[p] || s.upstream <= f.committed[p]
		}
	}

	// The checkpoint for exactly the committed offsets, then the same
	// offsets committed on dst for the group.
	checkpoints := f.src.alias + ".checkpoints.internal"
	err = until(ctx, mirrorWait, time.Second, func() (bool, error) {
		if err := alive(); err != nil {
			return false, err
		}
		recs, err := readTopic(ctx, f.dst.bootstrap, checkpoints)
		if err != nil {
			return false, err
		}
		missing := false
		var last [mirrorPartitions]string
		for p := range f.translated {
			f.translated[p] = -1
		}
		for _, r := range recs[0] {
			cp, err := parseCheckpoint(r.Key, r.Value)
			if err != nil {
				return false, fmt.Errorf("%s at %d: %w", checkpoints, r.Offset, err)
			}
			if cp.group != f.group || cp.topic != remote || cp.partition < 0 || cp.partition >= mirrorPartitions {
				continue
			}
			last[cp.partition] = fmt.Sprintf("%d→%d", cp.upstream, cp.downstream)
			if cp.upstream == f.committed[cp.partition] {
				f.translated[cp.partition] = cp.downstream
			}
		}
		for p := range f.translated {
			if translatable[p] && f.translated[p] < 0 {
				missing = true
			}
			if !translatable[p] && f.translated[p] >= 0 {
				return false, fmt.Errorf("%s-%d: a checkpoint translates %d to %d, though no offset sync is at or below %d", remote, p, f.committed[p], f.translated[p], f.committed[p])
			}
		}
		if missing {
			return false, fmt.Errorf("no checkpoint of group %s on %s at %v yet in %s (%d records; the group's last per partition: %q)",
				f.group, remote, f.committed, checkpoints, len(recs[0]), last)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%w; offset syncs: %s", err, f.syncsSummary(ctx))
	}
	err = until(ctx, mirrorWait, 500*time.Millisecond, func() (bool, error) {
		got, err := dstAdm.FetchOffsets(ctx, f.group)
		if err != nil {
			return false, err
		}
		for p := range int32(mirrorPartitions) {
			o, ok := got.Lookup(remote, p)
			switch {
			case !translatable[p] && ok && o.Err == nil && o.At >= 0:
				return false, fmt.Errorf("group %s on %s: %s-%d committed at %d, which no checkpoint gives", f.group, f.dst.alias, remote, p, o.At)
			case translatable[p] && (!ok || o.Err != nil || o.At != f.translated[p]):
				return false, fmt.Errorf("group %s on %s: %s-%d committed at %+v, the checkpoint says %d", f.group, f.dst.alias, remote, p, o, f.translated[p])
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}

	// MirrorMaker 2's promise: the translated offset is that of an
	// offset sync at or below the committed offset, one past it when
	// the sync is below.
	for p, ss := range syncs {
		if !translatable[p] {
			continue
		}
		for _, s := range ss {
			want := s.downstream
			if s.upstream < f.committed[p] {
				want++
			}
			if s.upstream <= f.committed[p] && want == f.translated[p] {
				f.syncBelow[p] = s.upstream
			}
		}
		if f.syncBelow[p] < 0 {
			return fmt.Errorf("%s-%d: the checkpoint translates %d to %d, which no offset sync in %s at or below %d gives",
				remote, p, f.committed[p], f.translated[p], syncsTopic, f.committed[p])
		}
	}

	// Failover: the group, on dst, with auto.offset.reset=earliest, what
	// a failed-over consumer needs where nothing was translated (checked
	// above: a partition with a checkpoint has its offset committed).
	cons, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(f.dst.bootstrap, ",")...),
		kgo.ConsumerGroup(f.group), kgo.ConsumeTopics(remote), kgo.DisableAutoCommit(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	defer cons.Close()
	var seen [mirrorPartitions][]int64
	err = until(ctx, time.Minute, 0, func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		fs := cons.PollFetches(pctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return false, fe.Err
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			i, _ := strconv.ParseInt(string(r.Value), 10, 64)
			seen[r.Partition] = append(seen[r.Partition], i)
		})
		for p := range seen {
			if len(seen[p]) == 0 || seen[p][len(seen[p])-1] != mirrorRecords-1 {
				return false, fmt.Errorf("failed over to %s, the group has read %d records of %s-%d, not yet the last", f.dst.alias, len(seen[p]), remote, p)
			}
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		return fmt.Errorf("committing on %s after failover: %w", f.dst.alias, err)
	}
	for p := range seen {
		first := seen[p][0]
		f.resumed[p] = first
		if first > f.committed[p] {
			return fmt.Errorf("%s-%d: failed over, the group resumed at record %d, past its commit at %d: records %d..%d lost",
				remote, p, first, f.committed[p], f.committed[p], first-1)
		}
		for k, i := range seen[p] {
			if i != first+int64(k) {
				return fmt.Errorf("%s-%d: after failover the group read %d where %d was next", remote, p, i, first+int64(k))
			}
		}
	}
	return nil
}

// syncsSummary lists the flow's offset syncs per partition, for a
// failure's message.
func (f *mirrorFlow) syncsSummary(ctx context.Context) string {
	topic := "mm2-offset-syncs." + f.dst.alias + ".internal"
	recs, err := readTopic(ctx, f.src.bootstrap, topic)
	if err != nil {
		return fmt.Sprintf("reading %s: %v", topic, err)
	}
	var per [mirrorPartitions][]string
	for _, r := range recs[0] {
		s, err := parseOffsetSync(r.Key, r.Value)
		if err == nil && s.topic == f.topic && s.partition >= 0 && s.partition < mirrorPartitions {
			per[s.partition] = append(per[s.partition], fmt.Sprintf("%d→%d", s.upstream, s.downstream))
		}
	}
	return fmt.Sprintf("%v", per)
}

// note is the flow's numbers for the report.
func (f *mirrorFlow) note() string {
	var dups []string
	for p := range f.committed {
		how := fmt.Sprintf("translated %d (sync at %d)", f.translated[p], f.syncBelow[p])
		if f.translated[p] < 0 {
			how = "no sync at or below it, no checkpoint, earliest"
		}
		dups = append(dups, fmt.Sprintf("p%d committed %d, %s, newest sync %d, re-read %d",
			p, f.committed[p], how, f.newest[p], f.committed[p]-f.resumed[p]))
	}
	return fmt.Sprintf("%s→%s (%s→%s): no gap; %s", f.src.alias, f.dst.alias, f.src.flavor, f.dst.flavor, strings.Join(dups, ", "))
}

// readTopic reads every partition of topic from the start to the end
// offsets it has when called.
func readTopic(ctx context.Context, bootstrap, topic string) (map[int32][]*kgo.Record, error) {
	seeds := kgo.SeedBrokers(strings.Split(bootstrap, ",")...)
	cl, err := kgo.NewClient(seeds)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	if err := ends.Error(); err != nil {
		return nil, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	want := map[int32]int64{}
	parts := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			parts[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	out := map[int32][]*kgo.Record{}
	if len(want) == 0 {
		return out, nil
	}
	rd, err := kgo.NewClient(seeds, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	err = until(ctx, time.Minute, 0, func() (bool, error) {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		fs := rd.PollFetches(pctx)
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) {
				return false, fe.Err
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < want[r.Partition] {
				out[r.Partition] = append(out[r.Partition], r)
			}
		})
		for p, end := range want {
			if n := len(out[p]); n == 0 || out[p][n-1].Offset < end-1 {
				return false, fmt.Errorf("reading %s-%d: not at its end %d yet", topic, p, end)
			}
		}
		return true, nil
	})
	return out, err
}

// mirrorCheckpoint is one record of a checkpoints topic: Kafka's
// protocol Struct encoding, a key (group, topic: int16-length strings;
// partition: int32) and a value with an int16 version header before
// upstream offset, downstream offset (int64) and metadata.
type mirrorCheckpoint struct {
	group, topic         string
	partition            int32
	upstream, downstream int64
}

func parseCheckpoint(key, value []byte) (mirrorCheckpoint, error) {
	var cp mirrorCheckpoint
	r := structReader{b: key}
	cp.group, cp.topic, cp.partition = r.str(), r.str(), r.i32()
	v := structReader{b: value}
	if version := v.i16(); version != 0 && v.err == nil {
		return cp, fmt.Errorf("checkpoint value version %d", version)
	}
	cp.upstream, cp.downstream = v.i64(), v.i64()
	_ = v.str()
	return cp, errors.Join(r.err, v.err)
}

// mirrorOffsetSync is one record of an offset-syncs topic: key (topic,
// partition), value (upstream offset, downstream offset), no header.
type mirrorOffsetSync struct {
	topic                string
	partition            int32
	upstream, downstream int64
}

func parseOffsetSync(key, value []byte) (mirrorOffsetSync, error) {
	var s mirrorOffsetSync
	r := structReader{b: key}
	s.topic, s.partition = r.str(), r.i32()
	v := structReader{b: value}
	s.upstream, s.downstream = v.i64(), v.i64()
	return s, errors.Join(r.err, v.err)
}

// structReader reads big-endian fields, remembering the first short read.
type structReader struct {
	b   []byte
	err error
}

func (r *structReader) take(n int) []byte {
	if r.err != nil || len(r.b) < n {
		if r.err == nil {
			r.err = fmt.Errorf("%d bytes left where %d were needed", len(r.b), n)
		}
		return make([]byte, n)
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *structReader) i16() int16 { return int16(binary.BigEndian.Uint16(r.take(2))) }
func (r *structReader) i32() int32 { return int32(binary.BigEndian.Uint32(r.take(4))) }
func (r *structReader) i64() int64 { return int64(binary.BigEndian.Uint64(r.take(8))) }
func (r *structReader) str() string {
	n := r.i16()
	if n < 0 {
		return ""
	}
	return string(r.take(int(n)))
}
