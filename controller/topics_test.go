package controller

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

func topicReq(name string, partitions int32, rf int16) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions = partitions
	t.ReplicationFactor = rf
	return t
}

func TestCreateTopicsErrors(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	if r := createTopic(t, c, "exists", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create: %+v", r)
	}
	if r := createTopic(t, c, "my_topic", 1, 1); r.ErrorCode != 0 {
		t.Fatalf("create: %+v", r)
	}
	withAssignment := func(name string, rf int16, parts int32, assign ...[]int32) kmsg.CreateTopicsRequestTopic {
		rt := topicReq(name, parts, rf)
		for i, a := range assign {
			rt.ReplicaAssignment = append(rt.ReplicaAssignment, kmsg.CreateTopicsRequestTopicReplicaAssignment{Partition: int32(i), Replicas: a})
		}
		return rt
	}
	withConfig := func(name, key string, value *string) kmsg.CreateTopicsRequestTopic {
		rt := topicReq(name, 1, 1)
		rt.Configs = append(rt.Configs, kmsg.CreateTopicsRequestTopicConfig{Name: key, Value: value})
		return rt
	}
	for _, tc := range []struct {
		name  string
		topic kmsg.CreateTopicsRequestTopic
		code  *kerr.Error
		msg   string
	}{
		{"empty name", topicReq("", 1, 1), kerr.InvalidTopicException, "Topic name is invalid: the empty string is not allowed"},
		{"dot", topicReq(".", 1, 1), kerr.InvalidTopicException, "Topic name is invalid: '.' is not allowed"},
		{"dotdot", topicReq("..", 1, 1), kerr.InvalidTopicException, "Topic name is invalid: '..' is not allowed"},
		{"too long", topicReq(strings.Repeat("a", 250), 1, 1), kerr.InvalidTopicException, "is longer than the max allowed length 249"},
		{"bad char", topicReq("a/b", 1, 1), kerr.InvalidTopicException, "Topic name is invalid: 'a/b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"},
		{"collision", topicReq("my.topic", 1, 1), kerr.InvalidTopicException, "Topic 'my.topic' collides with existing topic: my_topic"},
		{"exists", topicReq("exists", 1, 1), kerr.TopicAlreadyExists, "Topic 'exists' already exists."},
		{"zero partitions", topicReq("p0", 0, 1), kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."},
		{"negative partitions", topicReq("p1", -5, 1), kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value."},
		{"zero rf", topicReq("r0", 1, 0), kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value."},
		{"rf above brokers", topicReq("r3", 1, 3), kerr.InvalidReplicationFactor, "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot be reached because only 1 broker(s) are registered."},
		{"assignment with rf", withAssignment("a1", 1, -1, []int32{1}), kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1."},
		{"assignment with partitions", withAssignment("a2", -1, 1, []int32{1}), kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1."},
		{"assignment unknown broker", withAssignment("a3", -1, -1, []int32{9}), kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker 9, but no such broker is registered."},
		{"assignment duplicate broker", withAssignment("a4", -1, -1, []int32{1, 1}), kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker 1 more than once."},
		{"assignment empty", withAssignment("a5", -1, -1, []int32{}), kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list."},
		{"null config", withConfig("c1", "retention.ms", nil), kerr.InvalidConfig, "Null value not supported for topic configs: retention.ms"},
		{"bad config", withConfig("c2", "retention.ms", strPtr("abc")), kerr.InvalidConfig, "Invalid value abc for configuration retention.ms"},
		{"unknown config", withConfig("c3", "nope", strPtr("1")), kerr.InvalidConfig, "Unknown topic config name: nope"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrCreateTopicsRequest()
			req.Topics = append(req.Topics, tc.topic)
			resp := c.CreateTopics(ctxT(t), req)
			if len(resp.Topics) != 1 {
				t.Fatalf("%d results", len(resp.Topics))
			}
			r := resp.Topics[0]
			if r.ErrorCode != tc.code.Code {
				t.Fatalf("code %d (%v), want %s", r.ErrorCode, r.ErrorMessage, tc.code.Message)
			}
			if r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.msg) {
				t.Fatalf("message %v, want %q", r.ErrorMessage, tc.msg)
			}
			if r.NumPartitions != -1 || r.ReplicationFactor != -1 || r.TopicID != [16]byte{} {
				t.Fatalf("failed topic reports %d/%d/%x", r.NumPartitions, r.ReplicationFactor, r.TopicID)
			}
		})
	}
	if n := c.Image().Topics.Len(); n != 2 {
		t.Fatalf("%d topics after failed creates, want 2", n)
	}
}

func TestCreateTopicsSuccessAndDefaults(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys, func(cfg *Config) { cfg.DefaultPartitions = 3 })
	for id := int32(1); id <= 3; id++ {
		registerBroker(t, c, id)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	withCfg := topicReq("cfg", -1, -1)
	withCfg.Configs = []kmsg.CreateTopicsRequestTopicConfig{{Name: "retention.ms", Value: strPtr("5000")}}
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("d", -1, -1), topicReq("x", 12, 3), withCfg}
	resp := c.CreateTopics(ctxT(t), req)
	img := c.Image()
	for _, r := range resp.Topics {
		if r.ErrorCode != 0 {
			t.Fatalf("%s: %d %v", r.Topic, r.ErrorCode, r.ErrorMessage)
		}
		topic := img.Topic(r.Topic)
		if topic == nil || topic.ID != r.TopicID {
			t.Fatalf("%s: not in image with id %x", r.Topic, r.TopicID)
		}
		if r.TopicID[6]>>4 != 4 {
			t.Fatalf("topic id %x is not a v4 uuid", r.TopicID)
		}
		if int(r.NumPartitions) != topic.Partitions.Len() {
			t.Fatalf("%s: response says %d partitions, image has %d", r.Topic, r.NumPartitions, topic.Partitions.Len())
		}
		if r.Configs != nil {
			t.Fatalf("%s: controller filled configs", r.Topic)
		}
	}
	if resp.Topics[0].NumPartitions != 3 || resp.Topics[0].ReplicationFactor != 1 {
		t.Fatalf("defaults: %d partitions rf %d", resp.Topics[0].NumPartitions, resp.Topics[0].ReplicationFactor)
	}
	if got := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "cfg"}]["retention.ms"]; got != "5000" {
		t.Fatalf("creation config = %q", got)
	}
	// Striped placement: 12 partitions of RF 3 on 3 brokers: every broker
	// leads 4 and every partition has distinct replicas; leader = first
	// replica, epochs 0, ISR = replicas.
	leaders := map[int32]int{}
	for i, p := range img.Topic("x").Partitions.All() {
		if len(p.Replicas) != 3 || p.Replicas[0] == p.Replicas[1] || p.Replicas[1] == p.Replicas[2] || p.Replicas[0] == p.Replicas[2] {
			t.Fatalf("partition %d replicas %v", i, p.Replicas)
		}
		if p.Leader != p.Replicas[0] || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 || len(p.ISR) != 3 {
			t.Fatalf("partition %d: %+v", i, p)
		}
		leaders[p.Leader]++
	}
	for id := int32(1); id <= 3; id++ {
		if leaders[id] != 4 {
			t.Fatalf("leaders spread %v", leaders)
		}
	}
}

func TestCreateTopicsValidateOnlyAndDuplicates(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.ValidateOnly = true
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("v", 2, 1)}
	resp := c.CreateTopics(ctxT(t), req)
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[0].NumPartitions != 2 {
		t.Fatalf("validate only: %+v", resp.Topics[0])
	}
	if c.Image().Topic("v") != nil {
		t.Fatal("validate-only created the topic")
	}
	req = kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("dup", 1, 1), topicReq("dup", 1, 1), topicReq("ok", 1, 1), topicReq("__cluster_metadata", 1, 1)}
	resp = c.CreateTopics(ctxT(t), req)
	byName := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, r := range resp.Topics {
		if _, seen := byName[r.Topic]; seen {
			t.Fatalf("two results for %s", r.Topic)
		}
		byName[r.Topic] = r
	}
	if r := byName["dup"]; r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Duplicate topic name." {
		t.Fatalf("dup: %+v", r)
	}
	if r := byName["__cluster_metadata"]; r.ErrorCode != kerr.InvalidRequest.Code || *r.ErrorMessage != "Creation of internal topic __cluster_metadata is prohibited." {
		t.Fatalf("metadata topic: %+v", r)
	}
	if r := byName["ok"]; r.ErrorCode != 0 {
		t.Fatalf("ok: %+v", r)
	}
	if c.Image().Topic("dup") != nil {
		t.Fatal("duplicate topic was created")
	}
}

func TestCreateTopicsNeedsUnfencedBroker(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	if r := createTopic(t, c, "a", 1, 1); r.ErrorCode != kerr.InvalidReplicationFactor.Code ||
		*r.ErrorMessage != "Unable to replicate the partition 1 time(s): All brokers are currently fenced." {
		t.Fatalf("no brokers: %d %v", r.ErrorCode, *r.ErrorMessage)
	}
}

func TestDeleteTopics(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	a := createTopic(t, c, "a", 1, 1)
	createTopic(t, c, "b", 1, 1)
	createTopic(t, c, "c", 1, 1)
	if err := c.IncrementalAlterConfigs(ctxT(t), alterReq(kmsg.ConfigResourceTypeTopic, "b", "retention.ms", 0, strPtr("1"))); err.Resources[0].ErrorCode != 0 {
		t.Fatal("alter config failed")
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.Version = 6
	req.Topics = []kmsg.DeleteTopicsRequestTopic{
		{Topic: strPtr("b")},
		{TopicID: a.TopicID},
		{Topic: strPtr("missing")},
		{TopicID: protocol.RandomUUID()},
		{Topic: strPtr("c"), TopicID: protocol.RandomUUID()},
		{},
		{Topic: strPtr("d1")}, {Topic: strPtr("d1")},
	}
	resp := c.DeleteTopics(ctxT(t), req)
	codes := map[string]int16{}
	for _, r := range resp.Topics {
		key := "<nil>"
		if r.Topic != nil {
			key = *r.Topic
		}
		if r.Topic == nil && r.TopicID != [16]byte{} {
			key = "id:" + protocol.UUID(r.TopicID).String()
		}
		codes[key] = r.ErrorCode
	}
	want := map[string]int16{
		"b":       0,
		"a":       0,
		"missing": kerr.UnknownTopicOrPartition.Code,
		"c":       kerr.InvalidRequest.Code,
		"<nil>":   kerr.InvalidRequest.Code,
		"d1":      kerr.InvalidRequest.Code,
	}
	for k, v := range want {
		if got, ok := codes[k]; !ok || got != v {
			t.Fatalf("%s: code %d (present %v), want %d; all %v", k, got, ok, v, codes)
		}
	}
	unknownID := 0
	for k, v := range codes {
		if strings.HasPrefix(k, "id:") && v == kerr.UnknownTopicID.Code {
			unknownID++
		}
	}
	if unknownID != 1 {
		t.Fatalf("unknown id results: %v", codes)
	}
	img := c.Image()
	if img.Topic("a") != nil || img.Topic("b") != nil || img.Topic("c") == nil {
		t.Fatalf("topics after delete: %v", img.Topics)
	}
	if _, ok := img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: "b"}]; ok {
		t.Fatal("deleted topic kept its configs")
	}
}

func TestCreatePartitions(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	registerBroker(t, c, 2)
	createTopic(t, c, "t", 2, 2)
	cp := func(name string, count int32, assign ...[]int32) kmsg.CreatePartitionsRequestTopic {
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic = name
		rt.Count = count
		for _, a := range assign {
			rt.Assignment = append(rt.Assignment, kmsg.CreatePartitionsRequestTopicAssignment{Replicas: a})
		}
		return rt
	}
	for _, tc := range []struct {
		name  string
		topic kmsg.CreatePartitionsRequestTopic
		code  int16
		msg   string
	}{
		{"same count", cp("t", 2), kerr.InvalidPartitions.Code, "Topic already has 2 partition(s)."},
		{"decrease", cp("t", 1), kerr.InvalidPartitions.Code, "The topic t currently has 2 partition(s); 1 would not be an increase."},
		{"unknown", cp("nope", 3), kerr.UnknownTopicOrPartition.Code, ""},
		{"assignment count", cp("t", 4, []int32{1, 2}), kerr.InvalidReplicaAssignment.Code, "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."},
		{"assignment rf", cp("t", 3, []int32{1}), kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."},
		{"assignment unknown broker", cp("t", 3, []int32{1, 5}), kerr.InvalidReplicaAssignment.Code, "The manual partition assignment includes broker 5, but no such broker is registered."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := kmsg.NewPtrCreatePartitionsRequest()
			req.Topics = []kmsg.CreatePartitionsRequestTopic{tc.topic}
			resp := c.CreatePartitions(ctxT(t), req)
			r := resp.Topics[0]
			if r.ErrorCode != tc.code {
				t.Fatalf("code %d %v, want %d", r.ErrorCode, r.ErrorMessage, tc.code)
			}
			if tc.msg != "" && (r.ErrorMessage == nil || *r.ErrorMessage != tc.msg) {
				t.Fatalf("message %v, want %q", r.ErrorMessage, tc.msg)
			}
		})
	}
	// Validate-only changes nothing; a real request adds partitions, one
	// with an explicit assignment.
	req := kmsg.NewPtrCreatePartitionsRequest()
	req.ValidateOnly = true
	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 5)}
	if r := c.CreatePartitions(ctxT(t), req); r.Topics[0].ErrorCode != 0 || c.Image().Topic("t").Partitions.Len() != 2 {
		t.Fatalf("validate only: %+v", r.Topics[0])
	}
	req.ValidateOnly = false
	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 3, []int32{2, 1})}
	if r := c.CreatePartitions(ctxT(t), req); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create partitions: %+v", r.Topics[0])
	}
	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 5)}
	if r := c.CreatePartitions(ctxT(t), req); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create partitions: %+v", r.Topics[0])
	}
	parts := c.Image().Topic("t").Partitions.Slice()
	if len(parts) != 5 || parts[2].Replicas[0] != 2 || parts[2].Leader != 2 {
		t.Fatalf("partitions: %+v", parts)
	}
	for i, p := range parts {
		if len(p.Replicas) != 2 {
			t.Fatalf("partition %d has rf %d", i, len(p.Replicas))
		}
	}
	// Duplicate topic names in one request.
	req.Topics = []kmsg.CreatePartitionsRequestTopic{cp("t", 9), cp("t", 9)}
	resp := c.CreatePartitions(ctxT(t), req)
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code || *resp.Topics[0].ErrorMessage != "Duplicate topic name." {
		t.Fatalf("duplicates: %+v", resp.Topics)
	}
}

func TestCreateTopicsExcessivelyLarge(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq("big", 20000, 1), topicReq("small", 1, 1)}
	resp := c.CreateTopics(ctxT(t), req)
	for _, r := range resp.Topics {
		if r.ErrorCode != kerr.PolicyViolation.Code || *r.ErrorMessage != "Unable to perform excessively large batch operation." {
			t.Fatalf("%s: %d %v", r.Topic, r.ErrorCode, r.ErrorMessage)
		}
	}
	if c.Image().Topics.Len() != 0 {
		t.Fatal("topics created")
	}
}
