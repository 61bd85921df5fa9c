package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/vfs"
)

func alterReq(t kmsg.ConfigResourceType, name, key string, op int8, value *string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType = t
	r.ResourceName = name
	r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Op: kmsg.IncrementalAlterConfigOp(op), Value: value}}
	req.Resources = append(req.Resources, r)
	return req
}

func TestIncrementalAlterConfigs(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	createTopic(t, c, "t", 1, 1)
	topicCfg := func() map[string]string {
		return c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}]
	}
	steps := []configStep{
		{"set", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("100")), 0, "",
			func() bool { return topicCfg()["retention.ms"] == "100" }},
		{"append to default", alterReq(kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy", opAppend, strPtr("compact")), 0, "",
			func() bool { return topicCfg()["cleanup.policy"] == "delete,compact" }},
		{"append existing", alterReq(kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy", opAppend, strPtr("delete")), 0, "",
			func() bool { return topicCfg()["cleanup.policy"] == "delete,compact" }},
		{"subtract", alterReq(kmsg.ConfigResourceTypeTopic, "t", "cleanup.policy", opSubtract, strPtr("delete")), 0, "",
			func() bool { return topicCfg()["cleanup.policy"] == "compact" }},
		{"append to non-list", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opAppend, strPtr("1")), kerr.InvalidConfig.Code,
			"Can't APPEND to key retention.ms because its type is not LIST.", nil},
		{"subtract from non-list", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSubtract, strPtr("1")), kerr.InvalidConfig.Code,
			"Can't SUBTRACT to key retention.ms because its type is not LIST.", nil},
		{"invalid value", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("-7")), kerr.InvalidConfig.Code,
			"Invalid value -7 for configuration retention.ms", func() bool { return topicCfg()["retention.ms"] == "100" }},
		{"unknown topic", alterReq(kmsg.ConfigResourceTypeTopic, "nope", "retention.ms", opSet, strPtr("1")), kerr.UnknownTopicOrPartition.Code,
			"The topic 'nope' does not exist.", nil},
		{"null value", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, nil), kerr.InvalidRequest.Code,
			"Null value not supported for : retention.ms", nil},
		{"bad op", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", 9, strPtr("1")), kerr.InvalidRequest.Code,
			"Unknown operations type 9", nil},
		{"unknown resource type", alterReq(kmsg.ConfigResourceType(99), "x", "a", opSet, strPtr("1")), kerr.UnsupportedVersion.Code,
			"Unknown resource type 99.", nil},
		{"delete", alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opDelete, nil), 0, "",
			func() bool { _, ok := topicCfg()["retention.ms"]; return !ok }},
		{"cluster default broker config", alterReq(kmsg.ConfigResourceTypeBroker, "", "log.retention.ms", opSet, strPtr("10")), 0, "",
			func() bool {
				return c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: ""}]["log.retention.ms"] == "10"
			}},
		{"per-broker config", alterReq(kmsg.ConfigResourceTypeBroker, "1", "num.io.threads", opSet, strPtr("4")), 0, "",
			func() bool {
				return c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: "1"}]["num.io.threads"] == "4"
			}},
		{"schema picks the code", alterReq(kmsg.ConfigResourceTypeBroker, "1", "num.io.threads", opSet, strPtr("0")), kerr.InvalidRequest.Code,
			"", nil},
		{"unknown broker", alterReq(kmsg.ConfigResourceTypeBroker, "42", "num.io.threads", opSet, strPtr("4")), kerr.BrokerIDNotRegistered.Code,
			"No node with id 42 found.", nil},
		{"bad broker name", alterReq(kmsg.ConfigResourceTypeBroker, "x", "num.io.threads", opSet, strPtr("4")), kerr.InvalidRequest.Code,
			"Invalid broker name x", nil},
	}
	runConfigSteps(t, c, steps)
}

// configStep is one IncrementalAlterConfigs request with the error it must
// get (msg "" checks only the code) and a check of the image after it.
type configStep struct {
	name  string
	req   *kmsg.IncrementalAlterConfigsRequest
	code  int16
	msg   string
	check func() bool
}

func runConfigSteps(t *testing.T, c *Controller, steps []configStep) {
	t.Helper()
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			resp := c.IncrementalAlterConfigs(ctxT(t), s.req)
			if len(resp.Resources) != 1 {
				t.Fatalf("%d results", len(resp.Resources))
			}
			r := resp.Resources[0]
			if r.ErrorCode != s.code {
				t.Fatalf("code %d %v, want %d", r.ErrorCode, r.ErrorMessage, s.code)
			}
			if s.msg != "" && (r.ErrorMessage == nil || *r.ErrorMessage != s.msg) {
				t.Fatalf("message %v, want %q", r.ErrorMessage, s.msg)
			}
			if s.code == 0 && r.ErrorMessage != nil {
				t.Fatalf("success with message %q", *r.ErrorMessage)
			}
			if s.check != nil && !s.check() {
				t.Fatalf("image configs %v", c.Image().Configs)
			}
		})
	}
}

func TestIncrementalAlterConfigsValidateOnlyAndDuplicates(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	createTopic(t, c, "t", 1, 1)
	req := alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("5"))
	req.ValidateOnly = true
	if r := c.IncrementalAlterConfigs(ctxT(t), req); r.Resources[0].ErrorCode != 0 {
		t.Fatalf("validate only: %+v", r.Resources[0])
	}
	if _, ok := c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}]; ok {
		t.Fatal("validate-only changed the config")
	}
	req = alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("5"))
	req.Resources = append(req.Resources, req.Resources[0])
	resp := c.IncrementalAlterConfigs(ctxT(t), req)
	if len(resp.Resources) != 1 || resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("duplicate resources: %+v", resp.Resources)
	}
	req = alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("5"))
	req.Resources[0].Configs = append(req.Resources[0].Configs, req.Resources[0].Configs[0])
	resp = c.IncrementalAlterConfigs(ctxT(t), req)
	if resp.Resources[0].ErrorCode != kerr.InvalidRequest.Code || *resp.Resources[0].ErrorMessage != "Error due to duplicate config keys" {
		t.Fatalf("duplicate keys: %+v", resp.Resources[0])
	}
	// One bad resource does not stop a good one.
	req = alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("7"))
	bad := alterReq(kmsg.ConfigResourceTypeTopic, "missing", "retention.ms", opSet, strPtr("7"))
	req.Resources = append(req.Resources, bad.Resources...)
	resp = c.IncrementalAlterConfigs(ctxT(t), req)
	if resp.Resources[0].ErrorCode != 0 || resp.Resources[1].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("mixed: %+v", resp.Resources)
	}
	if c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}]["retention.ms"] != "7" {
		t.Fatal("good resource not applied")
	}
}

func TestAlterConfigsReplacesWholeSet(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	createTopic(t, c, "t", 1, 1)
	if r := c.IncrementalAlterConfigs(ctxT(t), alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("5"))); r.Resources[0].ErrorCode != 0 {
		t.Fatal(r.Resources[0].ErrorCode)
	}
	req := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeTopic
	r.ResourceName = "t"
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.bytes", Value: strPtr("1000")}}
	req.Resources = []kmsg.AlterConfigsRequestResource{r}
	resp := c.AlterConfigs(ctxT(t), req)
	if resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter configs: %+v", resp.Resources[0])
	}
	got := c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}]
	if len(got) != 1 || got["segment.bytes"] != "1000" {
		t.Fatalf("configs after replace: %v", got)
	}
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "bogus", Value: strPtr("1")}}
	req.Resources = []kmsg.AlterConfigsRequestResource{r}
	if resp := c.AlterConfigs(ctxT(t), req); resp.Resources[0].ErrorCode != kerr.InvalidConfig.Code {
		t.Fatalf("invalid replace: %+v", resp.Resources[0])
	}
}

// Group configs are metadata: ConfigRecords with resource type GROUP that
// the image (and a restart) shows. The group need not exist; the schema's
// verdict picks the error.
func TestGroupConfigs(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	groupCfg := func(c *Controller) map[string]string {
		return c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceGroup, Name: "g"}]
	}
	const (
		hb      = "consumer.heartbeat.interval.ms"
		session = "consumer.session.timeout.ms"
	)
	validateOnly := alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", hb, opSet, strPtr("6000"))
	validateOnly.ValidateOnly = true
	steps := []configStep{
		{"validate only", validateOnly, 0, "", func() bool { return groupCfg(c) == nil }},
		{"set on a group that does not exist", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", hb, opSet, strPtr("6000")), 0, "",
			func() bool { return groupCfg(c)[hb] == "6000" }},
		{"second key", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", session, opSet, strPtr("50000")), 0, "",
			func() bool { return groupCfg(c)[hb] == "6000" && groupCfg(c)[session] == "50000" }},
		{"invalid value", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", hb, opSet, strPtr("100")), kerr.InvalidConfig.Code,
			"Invalid value 100 for configuration consumer.heartbeat.interval.ms", func() bool { return groupCfg(c)[hb] == "6000" }},
		{"unknown key", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", "group.max.size", opSet, strPtr("3")), kerr.InvalidConfig.Code,
			"Unknown group config name: group.max.size", nil},
		{"append to non-list", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", hb, opAppend, strPtr("1")), kerr.InvalidConfig.Code,
			"Can't APPEND to key consumer.heartbeat.interval.ms because its type is not LIST.", nil},
		{"default group", alterReq(kmsg.ConfigResourceTypeGroupConfig, "", hb, opSet, strPtr("6000")), kerr.InvalidRequest.Code, "", nil},
		{"delete", alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", session, opDelete, nil), 0, "",
			func() bool { _, ok := groupCfg(c)[session]; return !ok && groupCfg(c)[hb] == "6000" }},
	}
	runConfigSteps(t, c, steps)

	// AlterConfigs replaces the group's whole set, as for any resource.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	r.ResourceName = "g"
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: session, Value: strPtr("55000")}}
	legacy.Resources = []kmsg.AlterConfigsRequestResource{r}
	if resp := c.AlterConfigs(ctxT(t), legacy); resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("alter configs: %+v", resp.Resources[0])
	}
	if got := groupCfg(c); len(got) != 1 || got[session] != "55000" {
		t.Fatalf("after AlterConfigs: %v", got)
	}

	// The committed records replay after a restart.
	c.Close()
	c = startTest(t, fsys)
	waitFor(t, "the group's session timeout at 55000", func() bool { return groupCfg(c)[session] == "55000" })
	if r := c.IncrementalAlterConfigs(ctxT(t), alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", session, opDelete, nil)).Resources[0]; r.ErrorCode != 0 {
		t.Fatalf("delete after restart: %+v", r)
	}
	if _, ok := c.Image().Configs[metadata.ConfigResource{Type: metadata.ConfigResourceGroup, Name: "g"}]; ok {
		t.Fatal("a group without configs stays in the image")
	}
}
