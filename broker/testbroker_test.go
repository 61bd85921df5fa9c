package broker

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/config"
	"github.com/gregorbroker/gregor/broker/listeners"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/replica"
	"github.com/gregorbroker/gregor/storage"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testNode is a combined controller+broker running in the test process on
// a temp dir and ephemeral 127.0.0.1 ports.
type testNode struct {
	addr string
	b    *Broker
	ctrl *controller.Controller
	logs *storage.Manager
	dir  string
}

// startTestNode starts a node with config overrides on a fresh format.
func startTestNode(t testing.TB, overrides map[string]string) *testNode {
	t.Helper()
	return startTestNodeWithGroupVersion(t, overrides, 1)
}

// startTestNodeWithGroupVersion also chooses the group.version finalized
// at format (0 turns the KIP-848 consumer protocol off).
func startTestNodeWithGroupVersion(t testing.TB, overrides map[string]string, groupVersion int16) *testNode {
	t.Helper()
	return startTestNodeWithServer(t, overrides, groupVersion, nil)
}

// startTestNodeWithServer lets the test adjust the server options (those
// no config key sets) after the config has filled them in.
func startTestNodeWithServer(t testing.TB, overrides map[string]string, groupVersion int16, adjust func(*network.ServerOptions)) *testNode {
	t.Helper()
	return startTestNodeWithLogFS(t, overrides, groupVersion, adjust, nil)
}

// startTestNodeWithLogFS also gives the log manager its filesystem (nil:
// the real one), so that a test can slow or fail partition I/O.
func startTestNodeWithLogFS(t testing.TB, overrides map[string]string, groupVersion int16, adjust func(*network.ServerOptions), logFS vfs.FS) *testNode {
	t.Helper()
	return startTestNodeWithFeatures(t, overrides, map[string]int16{"group.version": groupVersion}, adjust, logFS)
}

// startTestNodeWithFeatures formats the node with the given finalized
// feature levels (transaction.version 2 turns on KIP-890 part 2).
func startTestNodeWithFeatures(t testing.TB, overrides map[string]string, finalized map[string]int16, adjust func(*network.ServerOptions), logFS vfs.FS) *testNode {
	t.Helper()
	return startTestNodeWithOptions(t, overrides, finalized, adjust, logFS, nil)
}

// startTestNodeWithOptions also lets the test adjust the broker's options
// (a LocalController, to serve the controller listener's own APIs).
func startTestNodeWithOptions(t testing.TB, overrides map[string]string, finalized map[string]int16, adjust func(*network.ServerOptions), logFS vfs.FS, adjustBroker func(*Options)) *testNode {
	t.Helper()
	dir := t.TempDir()
	props := config.EmbeddedDefaults()
	props["listeners"] = "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"
	props["controller.quorum.bootstrap.servers"] = "127.0.0.1:9093"
	props["log.dirs"] = dir
	cfg, _, err := config.Load(props, overrides)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.Default()
	}
	fsys := vfs.OSFS{}
	clusterID := protocol.RandomUUID().String()
	voters := []metadata.Voter{{ID: 1, DirectoryID: protocol.RandomUUID(), Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "127.0.0.1", Port: 9093}}}}
	if err := storage.WriteMetaProperties(fsys, dir, storage.MetaProperties{Version: 1, ClusterID: clusterID, NodeID: 1, DirectoryID: voters[0].DirectoryID.String()}); err != nil {
		t.Fatal(err)
	}
	features := map[string][2]int16{
		metadata.MetadataVersionFeature: {7, metadata.LatestMetadataVersion},
		metadata.KRaftVersionFeature:    {0, metadata.LatestKRaftVersion},
		"group.version":                 {0, 1},
		"transaction.version":           {0, 2},
		"share.version":                 {0, 1},
		"streams.version":               {0, 1},
	}
	if err := controller.Format(fsys, dir, controller.FormatOptions{ClusterID: clusterID, NodeID: 1, DirectoryID: voters[0].DirectoryID, Voters: voters,
		Features: finalized}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ctrl, err := controller.Start(ctx, controller.Config{
		FS: fsys, NodeID: 1, ClusterID: clusterID, DirectoryID: voters[0].DirectoryID, MetadataDir: dir, Voters: voters,
		DefaultPartitions: cfg.NumPartitions, DefaultReplicationFactor: 1, Schema: config.NewControllerSchema(cfg),
		SupportedFeatures:    features,
		Logger:               log,
		TickInterval:         10 * time.Millisecond,
		BrokerSessionTimeout: time.Duration(cfg.Int("broker.session.timeout.ms")) * time.Millisecond,
		DelegationTokens: metadata.DelegationTokenConfig{
			SecretKey:           cfg.String(config.TokenSecretKey),
			MaxLifetime:         time.Duration(cfg.Long("delegation.token.max.lifetime.ms")) * time.Millisecond,
			ExpiryTime:          time.Duration(cfg.Long("delegation.token.expiry.time.ms")) * time.Millisecond,
			ExpiryCheckInterval: time.Duration(cfg.Long("delegation.token.expiry.check.interval.ms")) * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if logFS == nil {
		logFS = fsys
	}
	logs, err := storage.OpenManager(storage.ManagerOptions{FS: logFS, Dirs: []string{dir}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	groups := cfg.GroupCoordinatorConfig(log)
	txns := cfg.TransactionCoordinatorConfig(log)
	shares := cfg.ShareCoordinatorConfig(log)
	configs := config.NewProvider(cfg, log)
	replicas := replica.NewManager(replica.Options{NodeID: 1, Logs: logs, Configs: configs, Logger: log})
	// As cmd/gregor's settings fill them in, on this test's listeners.
	keys, err := listeners.New(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	server := keys.ServerOptions()
	server.Listeners = []network.ListenerSpec{
		{Name: "PLAINTEXT", Host: "127.0.0.1", SecurityProtocol: "PLAINTEXT"},
		{Name: "CONTROLLER", Host: "127.0.0.1", SecurityProtocol: "PLAINTEXT", Controller: true},
	}
	if adjust != nil {
		adjust(&server)
	}
	opts := Options{
		NodeID:                        1,
		Server:                        server,
		Advertised:                    []metadata.Endpoint{{Name: "PLAINTEXT", Host: "127.0.0.1"}},
		AutoCreateTopics:              cfg.AutoCreateTopicsEnable,
		NumPartitions:                 cfg.NumPartitions,
		DefaultReplicationFactor:      1,
		DeleteTopicEnable:             true,
		OffsetsTopicPartitions:        cfg.OffsetsTopicNumPartitions,
		OffsetsTopicReplicationFactor: 1,
		SupportedFeatures:             features,
		Groups:                        &groups,
		Transactions:                  &txns,
		ShareCoordinator:              &shares,
		TransactionVerification:       cfg.TransactionPartitionVerificationEnable,
		LogDirIDs:                     []protocol.UUID{voters[0].DirectoryID},
		Metadata:                      ctrl,
		Controller:                    ctrl,
		Replicas:                      replicas,
		Configs:                       configs,
		HeartbeatInterval:             time.Duration(cfg.BrokerHeartbeatIntervalMs) * time.Millisecond,
		SessionTimeout:                time.Duration(cfg.BrokerSessionTimeoutMs) * time.Millisecond,
		DelegationTokenSecret:         cfg.String(config.TokenSecretKey),
		Logger:                        log,
	}
	if adjustBroker != nil {
		adjustBroker(&opts)
	}
	b := New(opts)
	if err := b.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}
	n := &testNode{addr: b.Addrs()["PLAINTEXT"], b: b, ctrl: ctrl, logs: logs, dir: dir}
	t.Cleanup(func() {
		b.Shutdown()
		logs.Close()
		ctrl.Close()
	})
	return n
}

// rawConn is a hand-driven client connection for wire-level tests.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// send writes a request frame for req with the given correlation id.
func (c *rawConn) send(req kmsg.Request, corr int32) {
	c.t.Helper()
	c.writeFrame(requestBody(req, corr))
}

// requestBody is req with its header, as a frame carries it.
func requestBody(req kmsg.Request, corr int32) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	if req.IsFlexible() {
		b = append(b, 0)
	}
	return req.AppendTo(b)
}

func (c *rawConn) writeFrame(body []byte) {
	c.t.Helper()
	frame := binary.BigEndian.AppendUint32(nil, uint32(len(body)))
	if _, err := c.nc.Write(append(frame, body...)); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads one response into resp (whose version must be set) and
// returns its correlation id.
func (c *rawConn) recv(resp kmsg.Response) int32 {
	c.t.Helper()
	frame, err := protocol.ReadFrame(c.br, 1<<30, nil)
	if err != nil {
		c.t.Fatalf("reading response: %v", err)
	}
	corr := int32(binary.BigEndian.Uint32(frame))
	body := frame[4:]
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		c.t.Fatalf("decoding %T: %v", resp, err)
	}
	return corr
}

// expectClosed asserts that the broker closes the connection.
func (c *rawConn) expectClosed() {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.br.ReadByte(); err == nil {
		c.t.Fatal("connection still open")
	}
}
