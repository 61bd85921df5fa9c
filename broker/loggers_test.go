package broker

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/controller"
	"github.com/gregorbroker/gregor/internal/loglevel"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// startLoggersNode is a combined node (its broker fronting its own
// controller, with an authorizer that allows what no ACL names) whose
// loggers are root, replica and storage, all at INFO.
func startLoggersNode(t *testing.T) (*testNode, *loglevel.Registry) {
	t.Helper()
	levels := loglevel.New(slog.LevelInfo, "replica", "storage")
	n := startTestNodeWithOptions(t, nil, map[string]int16{"group.version": 1}, nil, nil, func(o *Options) {
		o.LocalController = o.Metadata.(*controller.Controller)
		o.Authorizer = &authz.Options{AllowEveryoneIfNoACLFound: true}
		o.LogLevels = levels
	})
	return n, levels
}

func describeLoggersReq(name string, keys ...string) *kmsg.DescribeConfigsRequest {
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.SetVersion(4)
	req.IncludeDocumentation = true
	req.IncludeSynonyms = true
	res := kmsg.NewDescribeConfigsRequestResource()
	res.ResourceType, res.ResourceName, res.ConfigNames = kmsg.ConfigResourceTypeBrokerLogger, name, keys
	req.Resources = append(req.Resources, res)
	return req
}

func TestBrokerLoggersDescribed(t *testing.T) {
	n, levels := startLoggersNode(t)
	levels.Set("replica", loglevel.LevelTrace)
	resp := call[*kmsg.DescribeConfigsResponse](t, n.addr, describeLoggersReq("1"))
	r := resp.Resources[0]
	if r.ErrorCode != 0 {
		t.Fatalf("describe: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	want := map[string]string{"root": "INFO", "replica": "TRACE", "storage": "INFO"}
	if len(r.Configs) != len(want) {
		t.Fatalf("%d loggers, want %d: %+v", len(r.Configs), len(want), r.Configs)
	}
	for _, c := range r.Configs {
		// As Kafka's ConfigHelper fills them: no type, no documentation.
		if c.Value == nil || *c.Value != want[c.Name] || c.Source != kmsg.ConfigSourceDynamicBrokerLoggerConfig ||
			c.ReadOnly || c.IsSensitive || len(c.ConfigSynonyms) != 0 || c.ConfigType != 0 || c.Documentation != nil {
			t.Errorf("logger %+v, want value %s", c, want[c.Name])
		}
	}
	// Named configs filter; a name that is no logger is left out.
	r = call[*kmsg.DescribeConfigsResponse](t, n.addr, describeLoggersReq("1", "storage", "kafka.server")).Resources[0]
	if len(r.Configs) != 1 || r.Configs[0].Name != "storage" {
		t.Fatalf("filtered describe: %+v", r.Configs)
	}
	for name, msg := range map[string]string{
		"":  "Broker id must not be empty",
		"x": "Broker id must be an integer, but it is: x",
		"2": "Unexpected broker id, expected 1 but received 2",
	} {
		r := call[*kmsg.DescribeConfigsResponse](t, n.addr, describeLoggersReq(name)).Resources[0]
		if r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil || *r.ErrorMessage != msg || len(r.Configs) != 0 {
			t.Errorf("describe %q: %v %v %d configs, want %q", name, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, len(r.Configs), msg)
		}
	}
}

func loggerOp(op kmsg.IncrementalAlterConfigOp, name string, value *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Op, c.Name, c.Value = op, name, value
	return c
}

func loggersResource(name string, ops ...kmsg.IncrementalAlterConfigsRequestResourceConfig) kmsg.IncrementalAlterConfigsRequestResource {
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName, r.Configs = kmsg.ConfigResourceTypeBrokerLogger, name, ops
	return r
}

func alterLoggersReq(validateOnly bool, res ...kmsg.IncrementalAlterConfigsRequestResource) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.SetVersion(1)
	req.ValidateOnly = validateOnly
	req.Resources = res
	return req
}

// answer is one resource's expected answer; msg "-" expects none.
type answer struct {
	name string
	code int16
	msg  string
}

func checkAlterAnswers(t *testing.T, what string, got []kmsg.IncrementalAlterConfigsResponseResource, want ...answer) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d answers, want %d: %+v", what, len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		msgOK := w.msg == "-" && g.ErrorMessage == nil || g.ErrorMessage != nil && *g.ErrorMessage == w.msg || w.msg == "" && g.ErrorCode == 0
		if g.ResourceName != w.name || g.ErrorCode != w.code || !msgOK {
			t.Errorf("%s: answer %d is %s %v %v; want %s %v %q", what, i, g.ResourceName, kerr.ErrorForCode(g.ErrorCode), g.ErrorMessage, w.name, kerr.ErrorForCode(w.code), w.msg)
		}
	}
}

func TestBrokerLoggersAltered(t *testing.T) {
	n, levels := startLoggersNode(t)
	createTopic(t, n, "loggers", 1, nil)
	level := func(name string) string {
		l, ok := levels.Level(name)
		if !ok {
			t.Fatalf("no logger %s", name)
		}
		return loglevel.LevelName(l)
	}
	alter := func(validateOnly bool, res ...kmsg.IncrementalAlterConfigsRequestResource) []kmsg.IncrementalAlterConfigsResponseResource {
		return call[*kmsg.IncrementalAlterConfigsResponse](t, n.addr, alterLoggersReq(validateOnly, res...)).Resources
	}
	set, del := kmsg.IncrementalAlterConfigOpSet, kmsg.IncrementalAlterConfigOpDelete
	str := kmsg.StringPtr

	// validateOnly checks and changes nothing.
	checkAlterAnswers(t, "validate only", alter(true, loggersResource("1", loggerOp(set, "replica", str("DEBUG")))), answer{"1", 0, ""})
	if level("replica") != "INFO" {
		t.Fatal("validateOnly changed the level")
	}
	// A topic resource in the same request goes on to the controller;
	// the answers keep the request's order.
	topic := kmsg.NewIncrementalAlterConfigsRequestResource()
	topic.ResourceType, topic.ResourceName = kmsg.ConfigResourceTypeTopic, "loggers"
	topic.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{loggerOp(set, "retention.ms", str("1000"))}
	checkAlterAnswers(t, "set", alter(false, loggersResource("1", loggerOp(set, "replica", str("DEBUG")), loggerOp(set, "root", str("WARN"))), topic),
		answer{"1", 0, ""}, answer{"loggers", 0, ""})
	if level("replica") != "DEBUG" || level("root") != "WARN" || level("storage") != "WARN" {
		t.Fatalf("after SET: replica %s, root %s, storage %s", level("replica"), level("root"), level("storage"))
	}
	if n.ctrl.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "loggers"}]["retention.ms"] != "1000" {
		t.Fatal("the topic resource was not applied")
	}

	refusals := []struct {
		what string
		res  kmsg.IncrementalAlterConfigsRequestResource
		want answer
	}{
		{"unknown logger", loggersResource("1", loggerOp(set, "kafka.server", str("DEBUG"))),
			answer{"1", kerr.InvalidConfig.Code, "Logger kafka.server does not exist!"}},
		{"lower-case level", loggersResource("1", loggerOp(set, "storage", str("debug"))),
			answer{"1", kerr.InvalidConfig.Code, "Cannot set the log level of storage to debug as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"}},
		{"OFF", loggersResource("1", loggerOp(set, "storage", str("OFF"))),
			answer{"1", kerr.InvalidConfig.Code, "Cannot set the log level of storage to OFF as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN"}},
		{"delete root", loggersResource("1", loggerOp(del, "root", nil)),
			answer{"1", kerr.InvalidRequest.Code, "Removing the log level of the root logger is not allowed"}},
		{"delete unknown", loggersResource("1", loggerOp(del, "nope", nil)),
			answer{"1", kerr.InvalidConfig.Code, "Logger nope does not exist!"}},
		// A valid SET before a refused operation is not applied either.
		{"append", loggersResource("1", loggerOp(set, "storage", str("ERROR")), loggerOp(kmsg.IncrementalAlterConfigOpAppend, "replica", str("INFO"))),
			answer{"1", kerr.InvalidRequest.Code, "APPEND operation is not allowed for the BROKER_LOGGER resource"}},
		{"subtract", loggersResource("1", loggerOp(kmsg.IncrementalAlterConfigOpSubtract, "replica", str("INFO"))),
			answer{"1", kerr.InvalidRequest.Code, "SUBTRACT operation is not allowed for the BROKER_LOGGER resource"}},
		{"unknown operation", loggersResource("1", loggerOp(7, "replica", str("INFO"))),
			answer{"1", kerr.UnknownServerError.Code, "-"}},
		{"duplicate keys", loggersResource("1", loggerOp(set, "replica", str("INFO")), loggerOp(del, "replica", nil)),
			answer{"1", kerr.InvalidRequest.Code, "Error due to duplicate config keys"}},
		{"null values", loggersResource("1", loggerOp(set, "replica", nil), loggerOp(set, "storage", nil)),
			answer{"1", kerr.InvalidRequest.Code, "Null value not supported for : replica, storage"}},
		{"not a number", loggersResource("x", loggerOp(set, "replica", str("INFO"))),
			answer{"x", kerr.InvalidRequest.Code, "Node id must be an integer, but it is: x"}},
		// Kafka's message names its own id twice.
		{"another node", loggersResource("2", loggerOp(set, "replica", str("INFO"))),
			answer{"2", kerr.InvalidRequest.Code, "Unexpected node id. Expected 1, but received 1"}},
	}
	for _, r := range refusals {
		checkAlterAnswers(t, r.what, alter(false, r.res), r.want)
	}
	if level("replica") != "DEBUG" || level("storage") != "WARN" {
		t.Fatalf("a refused request changed levels: replica %s, storage %s", level("replica"), level("storage"))
	}
	// A resource named twice is refused, each time it is named.
	dup := loggersResource("1", loggerOp(set, "replica", str("INFO")))
	checkAlterAnswers(t, "twice", alter(false, dup, dup),
		answer{"1", kerr.InvalidRequest.Code, "Each resource must appear at most once."}, answer{"1", kerr.InvalidRequest.Code, "Each resource must appear at most once."})

	// DELETE: the logger goes back to root's level.
	checkAlterAnswers(t, "delete", alter(false, loggersResource("1", loggerOp(del, "replica", nil))), answer{"1", 0, ""})
	if level("replica") != "WARN" {
		t.Fatalf("after DELETE replica is %s", level("replica"))
	}

	// Legacy AlterConfigs knows no BROKER_LOGGER resources.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	legacy.SetVersion(2)
	lr := kmsg.NewAlterConfigsRequestResource()
	lr.ResourceType, lr.ResourceName = kmsg.ConfigResourceTypeBrokerLogger, "1"
	lc := kmsg.NewAlterConfigsRequestResourceConfig()
	lc.Name, lc.Value = "replica", str("DEBUG")
	lr.Configs = append(lr.Configs, lc)
	legacy.Resources = append(legacy.Resources, lr)
	lresp := call[*kmsg.AlterConfigsResponse](t, n.addr, legacy)
	if len(lresp.Resources) != 1 || lresp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || lresp.Resources[0].ErrorMessage == nil ||
		*lresp.Resources[0].ErrorMessage != "Unknown resource type 8" {
		t.Fatalf("legacy AlterConfigs: %+v", lresp.Resources)
	}
	if level("replica") != "WARN" {
		t.Fatal("legacy AlterConfigs changed a level")
	}
}

// Altering loggers needs ALTER_CONFIGS on the cluster from clients (Kafka's
// broker then sends no message), CLUSTER_ACTION on a controller listener
// (where Kafka's controller sends one); describing them needs
// DESCRIBE_CONFIGS.
func TestBrokerLoggersAuthorized(t *testing.T) {
	n, levels := startLoggersNode(t)
	ctrlAddr := n.b.Addrs()["CONTROLLER"]
	req := alterLoggersReq(false, loggersResource("1", loggerOp(kmsg.IncrementalAlterConfigOpSet, "storage", kmsg.StringPtr("DEBUG"))))

	// The controller listener alters this node's loggers too.
	checkAlterAnswers(t, "controller listener", call[*kmsg.IncrementalAlterConfigsResponse](t, ctrlAddr, req).Resources, answer{"1", 0, ""})
	if l, _ := levels.Level("storage"); l != slog.LevelDebug {
		t.Fatalf("storage is %v after an alter on the controller listener", l)
	}
	levels.Unset("storage")

	setACLs(t, n,
		deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationAlterConfigs),
		deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction),
		deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationDescribeConfigs))
	checkAlterAnswers(t, "client listener", call[*kmsg.IncrementalAlterConfigsResponse](t, n.addr, req).Resources,
		answer{"1", kerr.ClusterAuthorizationFailed.Code, "-"})
	checkAlterAnswers(t, "controller listener", call[*kmsg.IncrementalAlterConfigsResponse](t, ctrlAddr, req).Resources,
		answer{"1", kerr.ClusterAuthorizationFailed.Code, kafkaMessage(kerr.ClusterAuthorizationFailed.Code)})
	if l, _ := levels.Level("storage"); l != slog.LevelInfo {
		t.Fatalf("a refused alter set storage to %v", l)
	}
	r := call[*kmsg.DescribeConfigsResponse](t, n.addr, describeLoggersReq("1")).Resources[0]
	if r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(r.Configs) != 0 {
		t.Fatalf("describe without DESCRIBE_CONFIGS: %v, %d configs", kerr.ErrorForCode(r.ErrorCode), len(r.Configs))
	}
}

// The request logger logs each request at DEBUG, only once its level lets
// DEBUG through.
func TestRequestLoggerFollowsItsLevel(t *testing.T) {
	var out syncWriter
	levels := loglevel.New(slog.LevelInfo, "request")
	reqLog := slog.New(levels.Handler(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: loglevel.LevelTrace}))).With("component", "request")
	n := startTestNodeWithOptions(t, nil, map[string]int16{"group.version": 1}, func(s *network.ServerOptions) {
		s.RequestLogger = reqLog
	}, nil, nil)
	md := kmsg.NewPtrMetadataRequest()
	md.SetVersion(12)
	call[*kmsg.MetadataResponse](t, n.addr, md)
	if strings.Contains(out.String(), "api=Metadata") {
		t.Fatalf("logged at INFO:\n%s", out.String())
	}
	levels.Set("request", slog.LevelDebug)
	call[*kmsg.MetadataResponse](t, n.addr, md)
	if got := out.String(); !strings.Contains(got, "level=DEBUG msg=request component=request api=Metadata version=12 correlation_id=1") ||
		!strings.Contains(got, "principal=User:ANONYMOUS") || !strings.Contains(got, "listener=PLAINTEXT") {
		t.Fatalf("not logged at DEBUG:\n%s", got)
	}
}

// syncWriter is a buffer the connections' goroutines write to.
type syncWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
