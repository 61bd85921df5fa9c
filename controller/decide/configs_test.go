package decide

import (
	"github.com/gregorbroker/gregor/controller/decide/decidetest"

	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

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
	e.Schema = decidetest.Schema{}
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
	recs, resp, after := decideOn(t, e, img, (*Env).IncrementalAlterConfigs, req)
	checkAnswer("validate only", resp)
	if len(recs) != 0 || after.Configs[topicT] != nil {
		t.Fatalf("validate only wrote %v", recs)
	}

	req.ValidateOnly = false
	recs, resp, img = decideOn(t, e, img, (*Env).IncrementalAlterConfigs, req)
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
	lrecs, lresp, img := decideOn(t, e, img, (*Env).AlterConfigs, legacy)
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
	failed := IncrementalAlterConfigsFailed(req, commitError(errNotController))
	lfailed := AlterConfigsFailed(legacy, commitError(errNotController))
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
