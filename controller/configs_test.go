package controller

import (
	"reflect"
	"testing"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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

// configsTestImage has broker 1 and topic t with one partition on it.
func configsTestImage(t *testing.T) *metadata.Image {
	t.Helper()
	id := protocol.RandomUUID()
	return imageOf(t,
		&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: 7},
		&metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1, IncarnationID: protocol.RandomUUID(), LogDirs: []protocol.UUID{protocol.RandomUUID()}},
		&metadata.TopicRecord{Name: "t", TopicID: id},
		&metadata.PartitionRecord{TopicID: id, Replicas: []int32{1}, ISR: []int32{1}, Leader: 1},
	)
}

func TestConfigDecisionsWithoutAQuorum(t *testing.T) {
	e := testEnv()
	e.schema = testSchema{}
	img := configsTestImage(t)
	topicT := metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "t"}

	req := alterReq(kmsg.ConfigResourceTypeTopic, "t", "retention.ms", opSet, strPtr("100"))
	req.Resources[0].Configs = append(req.Resources[0].Configs,
		kmsg.IncrementalAlterConfigsRequestResourceConfig{Name: "cleanup.policy", Op: kmsg.IncrementalAlterConfigOp(opAppend), Value: strPtr("compact")})
	missing := alterReq(kmsg.ConfigResourceTypeTopic, "missing", "retention.ms", opSet, strPtr("1")).Resources[0]
	twice := alterReq(kmsg.ConfigResourceTypeGroupConfig, "g", "consumer.session.timeout.ms", opSet, strPtr("50000")).Resources[0]
	nullValue := alterReq(kmsg.ConfigResourceTypeTopic, "t2", "retention.ms", opSet, nil).Resources[0]
	loggers := alterReq(kmsg.ConfigResourceTypeBrokerLogger, "1", "kafka", opSet, strPtr("DEBUG")).Resources[0]
	req.Resources = append(req.Resources, missing, twice, nullValue, twice, loggers)
	// Refused on admission, then refused on reading, then decided: each
	// group in request order.
	want := []struct {
		name string
		code int16
		msg  string
	}{
		{"g", kerr.InvalidRequest.Code, "Each resource must appear at most once."},
		{"1", kerr.InvalidRequest.Code, "BROKER_LOGGER resources are altered by the broker that owns the loggers, not by the controller."},
		{"t2", kerr.InvalidRequest.Code, "Null value not supported for : retention.ms"},
		{"t", 0, ""},
		{"missing", kerr.UnknownTopicOrPartition.Code, "The topic 'missing' does not exist."},
	}
	checkAnswer := func(what string, resp *kmsg.IncrementalAlterConfigsResponse) {
		t.Helper()
		if len(resp.Resources) != len(want) {
			t.Fatalf("%s: %+v", what, resp.Resources)
		}
		for i, w := range want {
			r := resp.Resources[i]
			if r.ResourceName != w.name || r.ErrorCode != w.code || (w.code == 0) != (r.ErrorMessage == nil) || w.code != 0 && *r.ErrorMessage != w.msg {
				t.Fatalf("%s: resource %d is %s %d %v, want %+v", what, i, r.ResourceName, r.ErrorCode, r.ErrorMessage, w)
			}
		}
	}

	req.ValidateOnly = true
	recs, resp, after := decideOn(t, e, img, (*env).incrementalAlterConfigs, req)
	checkAnswer("validate only", resp)
	if len(recs) != 0 || after.Configs[topicT] != nil {
		t.Fatalf("validate only wrote %v", recs)
	}

	req.ValidateOnly = false
	recs, resp, img = decideOn(t, e, img, (*env).incrementalAlterConfigs, req)
	checkAnswer("incremental", resp)
	if len(recs) != 2 || img.Configs[topicT]["retention.ms"] != "100" || img.Configs[topicT]["cleanup.policy"] != "delete,compact" {
		t.Fatalf("incremental: records %v, configs %v", recs, img.Configs[topicT])
	}

	// AlterConfigs replaces the set: one record sets the new key, one
	// removes each other key, in key order.
	legacy := kmsg.NewPtrAlterConfigsRequest()
	r := kmsg.NewAlterConfigsRequestResource()
	r.ResourceType, r.ResourceName = kmsg.ConfigResourceTypeTopic, "t"
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: "segment.bytes", Value: strPtr("1000")}}
	legacy.Resources = []kmsg.AlterConfigsRequestResource{r}
	lrecs, lresp, img := decideOn(t, e, img, (*env).alterConfigs, legacy)
	wantRecs := []metadata.Record{
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: "segment.bytes", Value: strPtr("1000")},
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: "cleanup.policy"},
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: "t", Name: "retention.ms"},
	}
	if len(lresp.Resources) != 1 || lresp.Resources[0].ErrorCode != 0 || !reflect.DeepEqual(lrecs, wantRecs) {
		t.Fatalf("alter configs: records %v, answer %+v", lrecs, lresp.Resources)
	}
	if got := img.Configs[topicT]; len(got) != 1 || got["segment.bytes"] != "1000" {
		t.Fatalf("configs after AlterConfigs: %v", got)
	}

	// Whether the answer shows unclean elections turned on, for the
	// Controller to have them checked at once.
	enable := alterReq(kmsg.ConfigResourceTypeTopic, "t", uncleanLeaderElectionConfig, opSet, strPtr("true"))
	if !incrementalConfigs.enablesUncleanElection(enable.Resources, map[metadata.ConfigResource]bool{topicT: true}) ||
		incrementalConfigs.enablesUncleanElection(enable.Resources, map[metadata.ConfigResource]bool{topicT: false}) {
		t.Fatal("unclean elections enabled only when the resource was altered")
	}
	r.Configs = []kmsg.AlterConfigsRequestResourceConfig{{Name: uncleanLeaderElectionConfig, Value: strPtr("false")}}
	if legacyConfigs.enablesUncleanElection([]kmsg.AlterConfigsRequestResource{r}, map[metadata.ConfigResource]bool{topicT: true}) {
		t.Fatal("false enables unclean elections")
	}

	// A commit failure answers every requested resource, duplicates
	// included, with its error.
	failed := incrementalAlterConfigsFailed(req, commitError(errNotController))
	lfailed := alterConfigsFailed(legacy, commitError(errNotController))
	if len(failed.Resources) != len(req.Resources) || len(lfailed.Resources) != 1 {
		t.Fatalf("failed commit: %+v %+v", failed.Resources, lfailed.Resources)
	}
	notController := func(code int16, msg *string) bool {
		return code == kerr.NotController.Code && msg != nil && *msg == errNotController.Error()
	}
	for _, r := range failed.Resources {
		if !notController(r.ErrorCode, r.ErrorMessage) {
			t.Fatalf("failed commit: %+v", failed.Resources)
		}
	}
	if r := lfailed.Resources[0]; !notController(r.ErrorCode, r.ErrorMessage) {
		t.Fatalf("failed AlterConfigs commit: %+v", r)
	}
}
