package broker

// Metadata (key 3), versions 0-13.
//
// Answers from the current metadata image. Brokers are the unfenced
// registered brokers with an endpoint on the listener the request came in
// on. ControllerId is this broker's own id: in KRaft, admin requests sent
// to a broker are forwarded to the active controller, and this broker is
// certainly alive (DESIGN.md §10: a dead or -1 controller id hangs admin
// clients). Topic IDs are real from v10. Unknown topics are created when
// the request allows it (v4+, always for v0-3) and auto.create.topics.enable
// is set; creation goes through the controller and the new topic's
// metadata is returned at once. Authorized operations: there is no
// authorizer, so every operation the resource supports is reported.

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Operations bitfields reported when no authorizer is configured.
const (
	topicOperations   int32 = 1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11
	clusterOperations int32 = 1<<4 | 1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12
	// operationsOmitted is Kafka's "not requested" value.
	operationsOmitted int32 = -2147483648
)

// topicOpenWait bounds how long topic creation waits for this broker to
// open the new partitions before answering.
const topicOpenWait = 2 * time.Second

// internalTopics are the topics Kafka marks internal.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state"
}

func (b *Broker) handleMetadata(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.MetadataRequest)
	v := r.version()
	img := b.ctrl.Image()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)

	resp.Brokers = b.metadataBrokers(img, r.conn.listener.Name)
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = b.opts.NodeID
	resp.AuthorizedOperations = operationsOmitted
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterOperations
	}

	allTopics := req.Topics == nil || (v == 0 && len(req.Topics) == 0)
	if allTopics {
		names := make([]string, 0, len(img.Topics))
		for name := range img.Topics {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			resp.Topics = append(resp.Topics, b.metadataTopic(img.Topics[name], req.IncludeTopicAuthorizedOperations))
		}
		r.respond(resp)
		return
	}

	autoCreate := b.opts.AutoCreateTopics && (v < 4 || req.AllowAutoTopicCreation)
	var toCreate []string
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// Lookup by topic ID (v12+).
			t := img.TopicsByID[controller.UUID(rt.TopicID)]
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.AuthorizedOperations = operationsOmitted
				resp.Topics = append(resp.Topics, mt)
				continue
			}
			resp.Topics = append(resp.Topics, b.metadataTopic(t, req.IncludeTopicAuthorizedOperations))
			continue
		}
		name := *rt.Topic
		if t := img.Topics[name]; t != nil {
			resp.Topics = append(resp.Topics, b.metadataTopic(t, req.IncludeTopicAuthorizedOperations))
			continue
		}
		if autoCreate && !slices.Contains(toCreate, name) {
			toCreate = append(toCreate, name)
		}
	}

	created := map[string]int16{}
	if len(toCreate) > 0 {
		created = b.autoCreateTopics(ctx, toCreate)
		img = b.ctrl.Image()
		b.replicas.WaitApplied(ctx, img.Offset, topicOpenWait)
	}
	for _, rt := range req.Topics {
		if rt.Topic == nil || hasTopic(resp.Topics, *rt.Topic) {
			continue
		}
		name := *rt.Topic
		if t := img.Topics[name]; t != nil {
			resp.Topics = append(resp.Topics, b.metadataTopic(t, req.IncludeTopicAuthorizedOperations))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.AuthorizedOperations = operationsOmitted
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if code, ok := created[name]; ok && code != 0 {
			mt.ErrorCode = code
		}
		resp.Topics = append(resp.Topics, mt)
	}
	r.respond(resp)
}

func hasTopic(topics []kmsg.MetadataResponseTopic, name string) bool {
	for _, t := range topics {
		if t.Topic != nil && *t.Topic == name {
			return true
		}
	}
	return false
}

// autoCreateTopics creates topics with the broker defaults and returns the
// error code per topic (INVALID_TOPIC_EXCEPTION for illegal names, as Kafka
// reports them in Metadata).
func (b *Broker) autoCreateTopics(ctx context.Context, names []string) map[string]int16 {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for _, name := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic = name
		t.NumPartitions = -1
		t.ReplicationFactor = -1
		if spec, ok := b.internalTopic(name); ok {
			t = spec
		}
		req.Topics = append(req.Topics, t)
	}
	resp := b.ctrl.CreateTopics(ctx, req)
	out := map[string]int16{}
	if resp == nil {
		for _, name := range names {
			out[name] = kerr.LeaderNotAvailable.Code
		}
		return out
	}
	for _, t := range resp.Topics {
		switch t.ErrorCode {
		case 0, kerr.TopicAlreadyExists.Code:
			out[t.Topic] = 0
		case kerr.InvalidTopicException.Code:
			out[t.Topic] = t.ErrorCode
		default:
			out[t.Topic] = kerr.LeaderNotAvailable.Code
		}
	}
	return out
}

// internalTopic is how a coordinator's internal topic is created (Kafka's
// AutoTopicCreationManager.creatableTopic), when name is one.
func (b *Broker) internalTopic(name string) (kmsg.CreateTopicsRequestTopic, bool) {
	if b.groups != nil {
		if spec := b.groups.runtime.Topic(); spec.Name == name {
			return spec.CreateTopic(), true
		}
	}
	return kmsg.CreateTopicsRequestTopic{}, false
}

// createInternalTopic asks the controller to create a coordinator's topic
// (runtime.Options.CreateTopic); a topic that already exists is fine.
func (b *Broker) createInternalTopic(ctx context.Context, t kmsg.CreateTopicsRequestTopic) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	req.Topics = append(req.Topics, t)
	resp := b.ctrl.CreateTopics(ctx, req)
	if resp == nil || len(resp.Topics) != 1 {
		return fmt.Errorf("creating %s: no answer from the controller", t.Topic)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		return fmt.Errorf("creating %s: %w", t.Topic, errFromCode(code))
	}
	return nil
}

// metadataBrokers lists unfenced brokers with an endpoint on listenerName.
func (b *Broker) metadataBrokers(img *controller.Image, listenerName string) []kmsg.MetadataResponseBroker {
	ids := make([]int32, 0, len(img.Brokers))
	for id, br := range img.Brokers {
		if !br.Fenced {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var out []kmsg.MetadataResponseBroker
	for _, id := range ids {
		br := img.Brokers[id]
		ep, ok := endpointFor(br, listenerName)
		if !ok {
			continue
		}
		mb := kmsg.NewMetadataResponseBroker()
		mb.NodeID, mb.Host, mb.Port, mb.Rack = id, ep.Host, ep.Port, br.Rack
		out = append(out, mb)
	}
	return out
}

// endpointFor returns a broker's endpoint on a listener. A request on a
// listener the broker did not register (the controller listener) falls
// back to the broker's first endpoint.
func endpointFor(br *controller.Broker, listenerName string) (controller.Endpoint, bool) {
	for _, ep := range br.Endpoints {
		if ep.Name == listenerName {
			return ep, true
		}
	}
	return controller.Endpoint{}, false
}

func (b *Broker) metadataTopic(t *controller.Topic, includeOps bool) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = operationsOmitted
	if includeOps {
		mt.AuthorizedOperations = topicOperations
	}
	img := b.ctrl.Image()
	for i, p := range t.Partitions {
		mp := kmsg.NewMetadataResponseTopicPartition()
		mp.Partition = int32(i)
		mp.Leader = p.Leader
		mp.LeaderEpoch = p.LeaderEpoch
		mp.Replicas = p.Replicas
		mp.ISR = p.ISR
		mp.OfflineReplicas = []int32{}
		if p.Leader < 0 {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		} else if br := img.Brokers[p.Leader]; br == nil || br.Fenced {
			mp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		mt.Partitions = append(mt.Partitions, mp)
	}
	return mt
}
