package bench

// The security benchmark: what TLS and authorization cost on one combined
// node, Gregor against Apache Kafka. Each round starts, for each target in
// turn, three fresh nodes one after the other, all with the same listeners
// (PLAINTEXT and SSL for clients, INTERNAL and CONTROLLER over SSL with
// client certificates required, so that the node's own principal is its
// certificate's subject):
//
//   - "PLAINTEXT": no authorizer; the load connects on PLAINTEXT;
//   - "SSL": no authorizer; the load connects on SSL (server certificate
//     only, checked against the test CA);
//   - the authorizer node: StandardAuthorizer, super.users naming the
//     node's own principal, allow.everyone.if.no.acl.found=false; the load
//     connects on PLAINTEXT as User:ANONYMOUS, allowed to write its topic by
//     one literal ACL among ACLs others (other principals and topics).
//
// The first two run produce throughput, produce latency at a fixed rate,
// consume throughput and end-to-end latency at a fixed rate; the
// authorizer node runs the first two, which the PLAINTEXT node ran in the
// same order on an equally fresh node. A round's ratios (SSL over
// PLAINTEXT, authorizer on over off) compare nodes of the same broker in
// the same round.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SecurityConfig is one run of the security benchmark.
type SecurityConfig struct {
	Root    string
	Targets []string // "gregor" and/or "kafka", in alternation order
	Rounds  int
	// Records is how many records each throughput workload moves.
	Records int
	// Rate records/s for LatencyTime make each latency workload.
	Rate        int
	LatencyTime time.Duration
	// ACLs is how many ACLs besides the producer's exist on the
	// authorizer node.
	ACLs int
	// BrokerCPU and LoadCPU are taskset lists for the node and for the
	// load generator ("" runs unpinned).
	BrokerCPU, LoadCPU string
	Log                *slog.Logger
}

const (
	standardAuthorizer = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
	// brokerPrincipal is from the subject of the node's certificate
	// (integration.NewPKIWithServer), its principal on INTERNAL and
	// CONTROLLER, and so the super user.
	brokerPrincipal = "User:CN=broker,O=Gregor"
	anonymous       = "User:ANONYMOUS"
	secPartitions   = 16
	e2ePartitions   = 4
	aclChunk        = 200 // creations per CreateAcls request
	aclLoadLimit    = time.Minute
)

// secNode is one of the three nodes of a target's round.
type secNode struct {
	label      string // in figure names
	listener   string // the listener the load connects to
	authorizer bool
}

func secNodes(acls int) []secNode {
	return []secNode{
		{label: "PLAINTEXT", listener: "PLAINTEXT"},
		{label: "SSL", listener: "SSL"},
		{label: authLabel(acls), listener: "PLAINTEXT", authorizer: true},
	}
}

func authLabel(acls int) string {
	return fmt.Sprintf("PLAINTEXT, StandardAuthorizer, %s ACLs", thousands(acls+1))
}

// thousands prints n with commas, as the report's prose does.
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// Security figure names. Units are part of the name.
func figSecProduce(label string) string {
	return fmt.Sprintf("produce 1 KiB lz4 acks=all, %d partitions, franz-go, %s", secPartitions, label)
}

func figSecConsume(label string) string {
	return fmt.Sprintf("consume 1 KiB lz4, %d partitions, franz-go, %s", secPartitions, label)
}

func figSecProduceLatency(rate int, label string) string {
	return fmt.Sprintf("produce latency at %d records/s, acks=all, %d partitions, franz-go, %s (ms)", rate, secPartitions, label)
}

func figSecE2E(rate int, label string) string {
	return fmt.Sprintf("end-to-end latency at %d records/s, acks=all, %d partitions, franz-go, %s (ms)", rate, e2ePartitions, label)
}

func figSecCPU(label string) string {
	return "broker CPU seconds per GB produced and consumed, " + label
}

// A ratio row: num's figure over den's, each round's own, then the median.
type secRatio struct{ name, num, den string }

// tlsFigures are the TLS table's rows: each node's figures, then the
// ratios of SSL to PLAINTEXT.
func tlsFigures(rate int) ([]string, []secRatio) {
	// Each figure of the PLAINTEXT node beside the SSL node's.
	var figs []string
	for _, f := range []func(l string) string{
		func(l string) string { return figSecProduce(l) + " records/s" },
		func(l string) string { return figSecProduce(l) + " MB/s" },
		func(l string) string { return figSecConsume(l) + " records/s" },
		func(l string) string { return figSecConsume(l) + " MB/s" },
		func(l string) string { return figSecProduceLatency(rate, l) + " p50" },
		func(l string) string { return figSecProduceLatency(rate, l) + " p99" },
		func(l string) string { return figSecE2E(rate, l) + " p50" },
		func(l string) string { return figSecE2E(rate, l) + " p99" },
		figSecCPU,
	} {
		figs = append(figs, f("PLAINTEXT"), f("SSL"))
	}
	ratios := []secRatio{
		{"SSL / PLAINTEXT: produce records/s", figSecProduce("SSL") + " records/s", figSecProduce("PLAINTEXT") + " records/s"},
		{"SSL / PLAINTEXT: consume records/s", figSecConsume("SSL") + " records/s", figSecConsume("PLAINTEXT") + " records/s"},
		{"SSL / PLAINTEXT: end-to-end latency p50", figSecE2E(rate, "SSL") + " p50", figSecE2E(rate, "PLAINTEXT") + " p50"},
		{"SSL / PLAINTEXT: end-to-end latency p99", figSecE2E(rate, "SSL") + " p99", figSecE2E(rate, "PLAINTEXT") + " p99"},
		{"SSL / PLAINTEXT: broker CPU seconds per GB", figSecCPU("SSL"), figSecCPU("PLAINTEXT")},
	}
	for _, r := range ratios {
		figs = append(figs, r.name)
	}
	return figs, ratios
}

// authFigures are the authorization table's rows: the PLAINTEXT node's
// produce figures (no authorizer), the authorizer node's, and the ratios
// of on to off.
func authFigures(rate, acls int) ([]string, []secRatio) {
	on := authLabel(acls)
	figs := []string{
		figSecProduce("PLAINTEXT") + " records/s", figSecProduce(on) + " records/s",
		figSecProduceLatency(rate, "PLAINTEXT") + " p50", figSecProduceLatency(rate, on) + " p50",
		figSecProduceLatency(rate, "PLAINTEXT") + " p99", figSecProduceLatency(rate, on) + " p99",
	}
	ratios := []secRatio{
		{"authorizer on / off: produce records/s", figSecProduce(on) + " records/s", figSecProduce("PLAINTEXT") + " records/s"},
		{"authorizer on / off: produce latency p50", figSecProduceLatency(rate, on) + " p50", figSecProduceLatency(rate, "PLAINTEXT") + " p50"},
		{"authorizer on / off: produce latency p99", figSecProduceLatency(rate, on) + " p99", figSecProduceLatency(rate, "PLAINTEXT") + " p99"},
	}
	for _, r := range ratios {
		figs = append(figs, r.name)
	}
	return figs, ratios
}

// addRatios puts into figures each ratio whose two figures it has.
func addRatios(figures map[string]float64, ratios []secRatio) {
	for _, r := range ratios {
		num, ok1 := figures[r.num]
		den, ok2 := figures[r.den]
		if ok1 && ok2 && den > 0 {
			figures[r.name] = num / den
		}
	}
}

// SecurityRun is what a security benchmark run measured.
type SecurityRun struct {
	Config SecurityConfig
	runInfo
	Payload string
	// Commands are the load generator's command lines of the first
	// round, "workload\n    command line".
	Commands []string
	// NoAuthorizer says, per target, why its authorizer node measured
	// nothing: the broker at this commit has no authorizer (CreateAcls
	// answered SECURITY_DISABLED). Not a failure: the rows say so.
	NoAuthorizer map[string]string
	// TLS is, per target, what a Go client negotiated with its SSL
	// listener: version and cipher suite.
	TLS map[string]string
}

// ExecuteSecurity runs the security benchmark. It returns what it
// measured even when ctx ends early.
func ExecuteSecurity(ctx context.Context, cfg SecurityConfig) (*SecurityRun, error) {
	lb, err := prepareLoadBench(ctx, cfg.Root, "security", cfg.Targets)
	if err != nil {
		return nil, err
	}
	pki, server, err := integration.NewPKIWithServer(filepath.Join(lb.workDir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("creating the test PKI: %w", err)
	}
	run := &SecurityRun{Config: cfg, runInfo: newRunInfo(), Payload: lb.payloadDesc, NoAuthorizer: map[string]string{}, TLS: map[string]string{}}
	run.describeSingleNodes(cfg.Targets)
	var commands commandLog
	err = run.alternate(ctx, cfg.Log, "security bench", cfg.Targets, cfg.Rounds, func(round int, t string) Round {
		sr := &secRound{cfg: cfg, run: run, tools: lb.tools, commands: &commands, loadgen: lb.loadgen, payloadFile: lb.payloadFile,
			pki: pki, server: server, rd: Round{Target: t, Round: round, Figures: map[string]float64{}}}
		sr.execute(ctx, filepath.Join(lb.workDir, fmt.Sprintf("%s-round%d", t, round)))
		return sr.rd
	})
	run.Commands = commands.lines
	return run, err
}

// secRound is one target's round: three fresh nodes, one after the other.
type secRound struct {
	cfg         SecurityConfig
	run         *SecurityRun
	tools       *integration.Tools
	commands    *commandLog
	loadgen     string
	payloadFile string
	pki         *integration.PKI
	server      *integration.KeyPair
	rd          Round
}

func (sr *secRound) fail(format string, args ...any) {
	sr.rd.Errors = append(sr.rd.Errors, oneLine(fmt.Sprintf(format, args...)))
}

// execute runs the three nodes, in reverse order on even rounds so that
// drift within a round touches each node alike over the run.
func (sr *secRound) execute(ctx context.Context, dir string) {
	nodes := secNodes(sr.cfg.ACLs)
	if sr.rd.Round%2 == 0 {
		slices.Reverse(nodes)
	}
	for i, n := range nodes {
		if ctx.Err() != nil {
			return
		}
		if n.authorizer && sr.run.NoAuthorizer[sr.rd.Target] != "" {
			continue
		}
		sr.node(ctx, n, filepath.Join(dir, fmt.Sprintf("node%d", i+1)))
	}
	_, tlsRatios := tlsFigures(sr.cfg.Rate)
	_, authRatios := authFigures(sr.cfg.Rate, sr.cfg.ACLs)
	addRatios(sr.rd.Figures, append(tlsRatios, authRatios...))
}

// nodeSpec is every node's layout; authorizer adds StandardAuthorizer.
func (sr *secRound) nodeSpec(authorizer bool) integration.NodeSpec {
	props := map[string]string{"inter.broker.listener.name": "INTERNAL"}
	for _, l := range []string{"SSL", "INTERNAL", "CONTROLLER"} {
		for k, v := range sr.pki.ListenerSSL(l, sr.server) {
			props[k] = v
		}
	}
	props["listener.name.internal.ssl.client.auth"] = "required"
	props["listener.name.controller.ssl.client.auth"] = "required"
	if authorizer {
		props["authorizer.class.name"] = standardAuthorizer
		props["super.users"] = brokerPrincipal
		props["allow.everyone.if.no.acl.found"] = "false"
	}
	return integration.NodeSpec{
		Listeners:          []integration.NodeListener{{Name: "SSL", Protocol: "SSL"}, {Name: "INTERNAL", Protocol: "SSL"}},
		ControllerProtocol: "SSL",
		Properties:         props,
		ReadyWait:          2 * time.Minute,
		CPUList:            sr.cfg.BrokerCPU,
	}
}

// node starts one fresh node, runs its workloads and stops it.
func (sr *secRound) node(ctx context.Context, sn secNode, dir string) {
	n, err := integration.StartNode(ctx, sr.tools, sr.rd.Target, dir, sr.nodeSpec(sn.authorizer))
	if err != nil {
		if sn.authorizer && refusesAuthorizer(err.Error()) {
			sr.run.NoAuthorizer[sr.rd.Target] = fmt.Sprintf("%v: the node refused to start with authorizer.class.name=%s: %s", errNoAuthorizer, standardAuthorizer, oneLine(err.Error()))
			return
		}
		sr.fail("%s node did not start: %v", sn.label, err)
		return
	}
	defer func() {
		if err := n.Stop(); err != nil {
			sr.fail("stopping the %s node: %v", sn.label, err)
		}
	}()
	if sn.authorizer && sr.run.Properties == "" {
		if b, err := os.ReadFile(n.PropsFile); err == nil {
			sr.run.Properties = string(b)
		}
	}
	admin, err := sr.adminClient(n)
	if err != nil {
		sr.fail("%s: %v", sn.label, err)
		return
	}
	defer admin.Close()

	round := sr.rd.Round
	produceTopic := fmt.Sprintf("bench-sec-produce-%d", round)
	e2eTopic := fmt.Sprintf("bench-sec-e2e-%d", round)
	deniedTopic := fmt.Sprintf("bench-sec-denied-%d", round)
	topics := map[string]int32{produceTopic: secPartitions}
	if sn.authorizer {
		topics[deniedTopic] = 1
	} else {
		topics[e2eTopic] = e2ePartitions
	}
	for topic, parts := range topics {
		if err := createTopicOn(ctx, admin.SeedBrokers()[0], 1, rf1(topic, parts), 30*time.Second, false); err != nil {
			sr.fail("%s: %v", sn.label, err)
			return
		}
	}
	if sn.listener == "SSL" {
		if v, err := negotiated(ctx, n.Addr("SSL"), sr.pki); err != nil {
			sr.fail("%s: %v", sn.label, err)
		} else {
			sr.run.TLS[sr.rd.Target] = v
		}
	}
	if sn.authorizer {
		err := sr.authorize(ctx, admin, n, produceTopic, deniedTopic)
		if errors.Is(err, errNoAuthorizer) {
			sr.run.NoAuthorizer[sr.rd.Target] = err.Error()
			return
		}
		if err != nil {
			sr.fail("%s: %v", sn.label, err)
			return
		}
	}

	addr := n.Addr(sn.listener)
	var tlsArgs []string
	if sn.listener == "SSL" {
		tlsArgs = []string{"-tls-ca", sr.pki.CAFile}
	}
	// cpu is the node's CPU seconds over the throughput workloads.
	var cpu float64
	cpuOK := true
	throughput := func(name, mode string, args ...string) {
		c0, err0 := cpuSeconds(n.Pid())
		res, err := runJSON[throughputResult](ctx, sr.loadgenCmd(name, 5*time.Minute, mode, addr, tlsArgs, args...))
		c1, err1 := cpuSeconds(n.Pid())
		if err != nil {
			sr.fail("%s: %v", name, oneLine(err.Error()))
			cpuOK = false
			return
		}
		if err0 != nil || err1 != nil {
			cpuOK = false
		}
		cpu += c1 - c0
		sr.rd.Figures[name+" records/s"] = res.RecordsPerSec
		sr.rd.Figures[name+" MB/s"] = res.MBPerSec
	}
	records := strconv.Itoa(sr.cfg.Records)
	throughput(figSecProduce(sn.label), "produce", "-topic", produceTopic, "-partitions", strconv.Itoa(secPartitions), "-records", records,
		"-acks", "all", "-payloads", sr.payloadFile, "-create=false")
	sr.latency(ctx, figSecProduceLatency(sr.cfg.Rate, sn.label), "produce-latency", addr, tlsArgs, produceTopic, secPartitions)
	if sn.authorizer {
		return
	}
	throughput(figSecConsume(sn.label), "consume", "-topic", produceTopic, "-records", records)
	if cpuOK {
		sr.rd.Figures[figSecCPU(sn.label)] = cpu / (2 * float64(sr.cfg.Records) * 1024 / 1e9)
	}
	sr.latency(ctx, figSecE2E(sr.cfg.Rate, sn.label), "e2e", addr, tlsArgs, e2eTopic, e2ePartitions)
	if err := n.Alive(); err != nil {
		sr.fail("%s: at the end of its workloads: %v", sn.label, err)
	}
}

// latency runs a fixed-rate loadgen mode (e2e or produce-latency) and
// keeps its p50 and p99 under name.
func (sr *secRound) latency(ctx context.Context, name, mode, addr string, tlsArgs []string, topic string, partitions int) {
	c := sr.loadgenCmd(strings.TrimSuffix(name, " (ms)"), sr.cfg.LatencyTime+2*time.Minute, mode, addr, tlsArgs, "-topic", topic,
		"-partitions", strconv.Itoa(partitions), "-rate", strconv.Itoa(sr.cfg.Rate), "-duration", sr.cfg.LatencyTime.String(),
		"-payloads", sr.payloadFile, "-create=false")
	lat, err := runJSON[latencyResult](ctx, c)
	if err != nil {
		sr.fail("%s: %v", name, oneLine(err.Error()))
		return
	}
	sr.rd.Figures[name+" p50"] = lat.P50Ms
	sr.rd.Figures[name+" p99"] = lat.P99Ms
}

// loadgenCmd is loadgen in mode against addr, pinned to the load core,
// noted for the report under workload.
func (sr *secRound) loadgenCmd(workload string, timeout time.Duration, mode, addr string, tlsArgs []string, args ...string) integration.Cmd {
	all := append([]string{mode, "-bootstrap", addr}, args...)
	all = append(all, tlsArgs...)
	c := taskset(sr.cfg.LoadCPU, integration.Cmd{Name: sr.loadgen, Args: all, Timeout: timeout})
	sr.commands.note(workload, c)
	return c
}

// adminClient is a franz-go client on the node's INTERNAL listener with
// the node's own certificate: the super user when the authorizer is on.
// It creates the topics and the ACLs.
func (sr *secRound) adminClient(n *integration.SingleNode) (*kgo.Client, error) {
	cfg, err := clientTLS(sr.pki, sr.server)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.Addr("INTERNAL")), kgo.DialTLSConfig(cfg), kgo.RequestTimeoutOverhead(30*time.Second))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return cl, nil
}

// clientTLS trusts the PKI's CA and, with kp, presents kp's certificate.
func clientTLS(pki *integration.PKI, kp *integration.KeyPair) (*tls.Config, error) {
	roots := x509.NewCertPool()
	roots.AddCert(pki.CA)
	cfg := &tls.Config{RootCAs: roots}
	if kp != nil {
		pair, err := tls.X509KeyPair([]byte(kp.ChainPEM), []byte(kp.KeyPEM))
		if err != nil {
			return nil, fmt.Errorf("the node's key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// negotiated dials addr over TLS as the load generator does (the CA
// trusted, no client certificate) and names the version and cipher
// suite agreed.
func negotiated(ctx context.Context, addr string, pki *integration.PKI) (string, error) {
	cfg, err := clientTLS(pki, nil)
	if err != nil {
		return "", err
	}
	d := tls.Dialer{Config: cfg}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	defer c.Close()
	st := c.(*tls.Conn).ConnectionState()
	return tls.VersionName(st.Version) + ", " + tls.CipherSuiteName(st.CipherSuite), nil
}

// errNoAuthorizer marks a node started with authorizer.class.name that
// answers CreateAcls as a broker without an authorizer.
var errNoAuthorizer = errors.New("no authorizer")

// refusesAuthorizer reports whether a node's start-up failure (its error
// and log tail) is a broker that does not know the authorizer: one that
// names authorizer.class.name. Any other failure is the round's.
func refusesAuthorizer(startErr string) bool {
	return strings.Contains(startErr, "authorizer.class.name")
}

// authorize creates the producer's ACL and cfg.ACLs others through admin,
// then waits until the node enforces them: DescribeAcls lists them all,
// and User:ANONYMOUS, on PLAINTEXT, is allowed to describe produceTopic
// and refused deniedTopic.
func (sr *secRound) authorize(ctx context.Context, admin *kgo.Client, n *integration.SingleNode, produceTopic, deniedTopic string) error {
	creations := append(otherACLs(sr.cfg.ACLs), producerACL(produceTopic))
	for start := 0; start < len(creations); start += aclChunk {
		req := kmsg.NewPtrCreateACLsRequest()
		req.Creations = creations[start:min(start+aclChunk, len(creations))]
		resp, err := requestWithin(ctx, admin, req, time.Minute)
		if err != nil {
			return fmt.Errorf("CreateAcls: %w", err)
		}
		for i, r := range resp.(*kmsg.CreateACLsResponse).Results {
			if r.ErrorCode == kerr.SecurityDisabled.Code {
				return fmt.Errorf("%w: the node, started with authorizer.class.name=%s, answered CreateAcls with SECURITY_DISABLED", errNoAuthorizer, standardAuthorizer)
			}
			if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
				return fmt.Errorf("CreateAcls %+v: %w (%s)", req.Creations[i], err, strOr(r.ErrorMessage))
			}
		}
	}
	anon, err := kgo.NewClient(kgo.SeedBrokers(n.Bootstrap()))
	if err != nil {
		return err
	}
	defer anon.Close()
	wctx, cancel := context.WithTimeout(ctx, aclLoadLimit)
	defer cancel()
	var last error
	_, err = pollUntil(wctx, func() error {
		last = aclsInForce(wctx, admin, anon, len(creations), produceTopic, deniedTopic)
		return last
	})
	if err != nil {
		return fmt.Errorf("the ACLs were not in force within %s: %v", aclLoadLimit, last)
	}
	return nil
}

// aclsInForce says why the node does not yet enforce the ACLs: nil once
// DescribeAcls lists want bindings and anon's Metadata is allowed
// produceTopic and refused deniedTopic.
func aclsInForce(ctx context.Context, admin, anon *kgo.Client, want int, produceTopic, deniedTopic string) error {
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	d.Operation, d.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp, err := requestWithin(ctx, admin, d, 10*time.Second)
	if err != nil {
		return fmt.Errorf("DescribeAcls: %w", err)
	}
	dr := resp.(*kmsg.DescribeACLsResponse)
	if err := kerr.ErrorForCode(dr.ErrorCode); err != nil {
		return fmt.Errorf("DescribeAcls: %w", err)
	}
	got := 0
	for _, r := range dr.Resources {
		got += len(r.ACLs)
	}
	if got != want {
		return fmt.Errorf("DescribeAcls lists %d ACLs, want %d", got, want)
	}
	m := kmsg.NewPtrMetadataRequest()
	for _, t := range []string{produceTopic, deniedTopic} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(t)
		m.Topics = append(m.Topics, rt)
	}
	resp, err = requestWithin(ctx, anon, m, 10*time.Second)
	if err != nil {
		return fmt.Errorf("Metadata as %s: %w", anonymous, err)
	}
	codes := map[string]int16{}
	for _, t := range resp.(*kmsg.MetadataResponse).Topics {
		if t.Topic != nil {
			codes[*t.Topic] = t.ErrorCode
		}
	}
	if c, ok := codes[produceTopic]; !ok || c != 0 {
		return fmt.Errorf("Metadata as %s: %s answered with error code %d (listed: %v)", anonymous, produceTopic, c, ok)
	}
	if c := codes[deniedTopic]; c != kerr.TopicAuthorizationFailed.Code {
		return fmt.Errorf("Metadata as %s: %s, which no ACL allows, answered with error code %d, not TOPIC_AUTHORIZATION_FAILED", anonymous, deniedTopic, c)
	}
	return nil
}

func requestWithin(ctx context.Context, cl *kgo.Client, req kmsg.Request, limit time.Duration) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	return cl.Request(ctx, req)
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// producerACL allows User:ANONYMOUS to write topic (which implies
// describing it): a literal topic ACL, all the producer needs (Kafka lets
// WRITE on any topic stand for IDEMPOTENT_WRITE on the cluster in
// InitProducerId).
func producerACL(topic string) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, topic, kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host = anonymous, "*"
	c.Operation, c.PermissionType = kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	return c
}

// otherACLs are n topic ACLs none of which applies to the producer: 100
// principals User:app-000 to app-099 (ACL i belongs to app-(i mod 100)),
// and in turn a literal topic orders-NNNN, a prefix team-NNNN-, a literal
// topic bench-other-NNNN and a prefix bench-NNNN- (the last two sort
// beside the producer's topic, bench-sec-produce-N, and share its first
// characters); operations WRITE, READ, DESCRIBE in turn; every tenth
// DENY, the rest ALLOW; host *.
func otherACLs(n int) []kmsg.CreateACLsRequestCreation {
	out := make([]kmsg.CreateACLsRequestCreation, 0, n)
	ops := []kmsg.ACLOperation{kmsg.ACLOperationWrite, kmsg.ACLOperationRead, kmsg.ACLOperationDescribe}
	for i := range n {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType = kmsg.ACLResourceTypeTopic
		switch i % 4 {
		case 0:
			c.ResourceName, c.ResourcePatternType = fmt.Sprintf("orders-%04d", i), kmsg.ACLResourcePatternTypeLiteral
		case 1:
			c.ResourceName, c.ResourcePatternType = fmt.Sprintf("team-%04d-", i), kmsg.ACLResourcePatternTypePrefixed
		case 2:
			c.ResourceName, c.ResourcePatternType = fmt.Sprintf("bench-other-%04d", i), kmsg.ACLResourcePatternTypeLiteral
		case 3:
			c.ResourceName, c.ResourcePatternType = fmt.Sprintf("bench-%04d-", i), kmsg.ACLResourcePatternTypePrefixed
		}
		c.Principal, c.Host = fmt.Sprintf("User:app-%03d", i%100), "*"
		c.Operation = ops[i%len(ops)]
		c.PermissionType = kmsg.ACLPermissionTypeAllow
		if i%10 == 9 {
			c.PermissionType = kmsg.ACLPermissionTypeDeny
		}
		out = append(out, c)
	}
	return out
}
