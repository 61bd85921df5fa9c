package broker

// Metadata (key 3), versions 0-13.
//
// Answers from the metadata image, read once per request. Brokers are the
// unfenced registered brokers with an endpoint on the listener the request
// came in on, and, as a deliberate deviation, those this broker saw fenced
// (or unregistered) less than broker.session.timeout.ms ago
// (departedbrokers.go). Kafka fences a dead broker only once its session
// lapses and lists it until then; Gregor fences it within a second
// (controller/liveness.go), so a broker whose image lags can name it in
// FindCoordinator after the caught-up brokers have dropped it, and a client
// that resolves coordinators by node id through Metadata (kgo) would find
// no such broker and fail the request for good ("unknown broker", fatal to
// a transactional producer). Listed for the session timeout, the broker
// stays resolvable as long as Kafka would have kept it listed; no partition
// leader names it, so clients only fail to dial it and retry. A broker
// that started after the fencing does not list the fenced broker (it did
// not see the change happen). DescribeCluster is unchanged: it reports the
// image's brokers as they are (fenced ones only when asked, flagged so).
// ControllerId is this broker's own id: in KRaft, admin
// requests sent to a broker are forwarded to the active controller, and
// this broker is certainly alive (DESIGN.md §10: a dead or -1 controller id
// hangs admin clients). Topic IDs are real from v10; an unknown ID (v12+)
// is UNKNOWN_TOPIC_ID, an illegal name INVALID_TOPIC_EXCEPTION, and a name
// asked twice is answered once.
//
// Auto-creation, as Kafka 4.3's AutoTopicCreationManager: when the request
// allows it (v4+, always for v0-3) and auto.create.topics.enable is set, an
// unknown topic is sent to the controller for creation (a coordinator's
// internal topic with its spec) and not awaited. The answer that triggered
// it says UNKNOWN_TOPIC_OR_PARTITION without partitions, so a client that
// just deleted a topic does not see it back at once; clients retry on that
// error and find the topic once it is created. Unlike Kafka, a topic this
// broker is auto-creating is answered that way until its partitions are
// open here (for at most the creation's timeout), so that the client's
// first produce does not meet NOT_LEADER_OR_FOLLOWER.
//
// Authorization, as Kafka's handleTopicMetadataRequest: topics the
// principal may not DESCRIBE are left out of an all-topics answer and
// answered TOPIC_AUTHORIZATION_FAILED (without an id, whether they exist or
// not) when named; an unknown topic is auto-created only with CREATE on the
// cluster or on the topic (else TOPIC_AUTHORIZATION_FAILED), and the
// creation is authorized again by the controller for the client. The
// authorized operations (v8+) are computed per topic answered, and for the
// cluster (v8-10) only with DESCRIBE on it (else 0); with no authorizer
// they are every operation the resource supports.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// operationsOmitted is Kafka's "not requested" value of an authorized
// operations field.
const operationsOmitted int32 = -2147483648

// internalTopics are the topics Kafka marks internal.
func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state" || name == "__share_group_state"
}

func (b *Broker) handleMetadata(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.MetadataRequest)
	v := r.Version()
	img := b.meta.Image()
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	who := identityOf(r)

	resp.Brokers = b.metadataBrokers(img, r.Listener())
	resp.ClusterID = &img.ClusterID
	resp.ControllerID = b.opts.NodeID
	resp.AuthorizedOperations = operationsOmitted
	if req.IncludeClusterAuthorizedOperations && v >= 8 && v <= 10 {
		resp.AuthorizedOperations = b.clusterAuthorizedOperations(who)
	}
	includeOps := req.IncludeTopicAuthorizedOperations && v >= 8
	answer := func(mt kmsg.MetadataResponseTopic) {
		if includeOps {
			mt.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeTopic, *mt.Topic)
		}
		resp.Topics = append(resp.Topics, mt)
	}

	allTopics := req.Topics == nil || (v == 0 && len(req.Topics) == 0)
	if allTopics {
		names := b.sortedTopics.of(img)
		resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(names))
		for _, name := range names {
			if b.allowedQuiet(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
				answer(metadataTopic(img, img.Topic(name)))
			}
		}
		r.Respond(resp)
		return
	}

	autoCreate := b.opts.AutoCreateTopics && (v < 4 || req.AllowAutoTopicCreation)
	clusterCreate := autoCreate && b.authz != nil && b.allowedQuiet(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
	var toCreate []string
	var unknownIDs, deniedCreate, deniedDescribe []kmsg.MetadataResponseTopic
	seen := map[string]bool{}
	for _, rt := range req.Topics {
		if rt.Topic == nil {
			// Lookup by topic ID (v12+).
			t := img.TopicByID(protocol.UUID(rt.TopicID))
			if t == nil {
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = rt.TopicID
				mt.ErrorCode = kerr.UnknownTopicID.Code
				mt.AuthorizedOperations = operationsOmitted
				unknownIDs = append(unknownIDs, mt)
				continue
			}
			if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Name) {
				// Topic ids are not secret: the id is answered.
				mt := kmsg.NewMetadataResponseTopic()
				mt.TopicID = t.ID
				mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
				mt.AuthorizedOperations = operationsOmitted
				deniedDescribe = append(deniedDescribe, mt)
				continue
			}
			answer(metadataTopic(img, t))
			continue
		}
		name := *rt.Topic
		if seen[name] {
			continue // Kafka answers each name once
		}
		seen[name] = true
		if !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			mt := kmsg.NewMetadataResponseTopic()
			mt.Topic = &name
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			mt.AuthorizedOperations = operationsOmitted
			deniedDescribe = append(deniedDescribe, mt)
			continue
		}
		if t := img.Topic(name); t != nil && !b.autoCreatePending(name) {
			answer(metadataTopic(img, t))
			continue
		}
		mt := kmsg.NewMetadataResponseTopic()
		mt.Topic = &name
		mt.IsInternal = isInternalTopic(name)
		mt.AuthorizedOperations = operationsOmitted
		mt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if autoCreate && img.Topic(name) == nil && b.authz != nil && !clusterCreate &&
			!b.allowed(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name) {
			mt.ErrorCode = kerr.TopicAuthorizationFailed.Code
			deniedCreate = append(deniedCreate, mt)
			continue
		}
		switch {
		case metadata.TopicNameError(name) != "":
			mt.ErrorCode = kerr.InvalidTopicException.Code
		case autoCreate:
			toCreate = append(toCreate, name)
		}
		answer(mt)
	}
	if len(toCreate) > 0 {
		b.autoCreateTopics(toCreate, &who)
	}
	resp.Topics = append(append(append(unknownIDs, resp.Topics...), deniedCreate...), deniedDescribe...)
	r.Respond(resp)
}

// autoCreationTimeout is Kafka's request.timeout.ms, the CreateTopics
// timeout AutoTopicCreationManager sends.
const autoCreationTimeout = 30 * time.Second

// autoCreateTopics asks the controller to create topics with the broker
// defaults (a coordinator's internal topic with its spec), in the
// background: Kafka 4.3's AutoTopicCreationManager does not wait for the
// creation, and does not send a topic whose creation is already in flight.
// A failure is logged; the client's next Metadata tries again. who, when
// set, is the client the creation is for: the controller authorizes it for
// them, as Kafka forwards the creation with the client's principal.
func (b *Broker) autoCreateTopics(names []string, who *identity) {
	specs := make([]kmsg.CreateTopicsRequestTopic, 0, len(names))
	for _, name := range names {
		t := kmsg.NewCreateTopicsRequestTopic()
		t.Topic, t.NumPartitions, t.ReplicationFactor = name, -1, -1
		if spec, ok := b.internalTopic(name); ok {
			t = spec
		}
		specs = append(specs, t)
	}
	b.createInBackground(specs, who, nil)
}

// createInBackground sends one CreateTopics to the controller for the
// topics of specs not being created already, without waiting for it;
// done, when set, is told each topic's outcome.
func (b *Broker) createInBackground(specs []kmsg.CreateTopicsRequestTopic, who *identity, done func(kmsg.CreateTopicsResponseTopic)) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = int32(autoCreationTimeout / time.Millisecond)
	b.autoCreateMu.Lock()
	if b.autoCreating == nil || b.runCtx == nil {
		b.autoCreateMu.Unlock()
		return // shutting down, or not started
	}
	for _, t := range specs {
		if b.autoCreating[t.Topic] {
			continue
		}
		b.autoCreating[t.Topic] = true
		req.Topics = append(req.Topics, t)
	}
	if len(req.Topics) == 0 {
		b.autoCreateMu.Unlock()
		return
	}
	b.bg.Add(1)
	b.autoCreateMu.Unlock()
	go func() {
		defer b.bg.Done()
		defer func() {
			b.autoCreateMu.Lock()
			for _, t := range req.Topics {
				delete(b.autoCreating, t.Topic)
			}
			b.autoCreateMu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(b.runCtx, autoCreationTimeout)
		defer cancel()
		if who != nil {
			ctx = withIdentity(ctx, *who)
		}
		answer, err := b.forward(ctx, req)
		if err != nil {
			if b.runCtx.Err() == nil {
				b.log.Warn("auto topic creation failed", "err", err)
			}
			if done != nil {
				for _, t := range req.Topics {
					r := kmsg.NewCreateTopicsResponseTopic()
					r.Topic, r.ErrorCode, r.ErrorMessage = t.Topic, kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
					done(r)
				}
			}
			return
		}
		created := false
		for _, t := range answer.(*kmsg.CreateTopicsResponse).Topics {
			if done != nil {
				done(t)
			}
			if t.ErrorCode != 0 && t.ErrorCode != kerr.TopicAlreadyExists.Code {
				b.log.Info("auto topic creation failed", "topic", t.Topic, "err", errFromCode(t.ErrorCode))
			}
			created = created || t.ErrorCode == 0
		}
		// Metadata keeps answering UNKNOWN_TOPIC_OR_PARTITION for these
		// names (autoCreatePending) until the partitions are open here.
		if created && !b.replicas.WaitApplied(ctx, b.meta.Image().Offset) && b.runCtx.Err() == nil {
			b.log.Info("auto-created topics answered before their partitions are open here")
		}
	}()
}

// autoCreatePending reports whether this broker is auto-creating name.
func (b *Broker) autoCreatePending(name string) bool {
	b.autoCreateMu.Lock()
	defer b.autoCreateMu.Unlock()
	return b.autoCreating[name]
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
	answer, err := b.forward(ctx, req)
	if err != nil {
		return fmt.Errorf("creating %s: %w", t.Topic, err)
	}
	resp := answer.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return fmt.Errorf("creating %s: %d results", t.Topic, len(resp.Topics))
	}
	if code := resp.Topics[0].ErrorCode; code != 0 && code != kerr.TopicAlreadyExists.Code {
		return fmt.Errorf("creating %s: %w", t.Topic, errFromCode(code))
	}
	return nil
}

// metadataBrokers lists the unfenced brokers with an endpoint on
// listenerName, and those this broker saw leave within the linger window
// (departedbrokers.go), in id order.
func (b *Broker) metadataBrokers(img *metadata.Image, listenerName string) []kmsg.MetadataResponseBroker {
	b.departed.observe(img)
	regs := b.departed.lingering(img)
	for id, br := range img.Brokers {
		if listed(br) {
			regs[id] = br
		}
	}
	ids := slices.Sorted(maps.Keys(regs))
	var out []kmsg.MetadataResponseBroker
	for _, id := range ids {
		br := regs[id]
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

// endpointFor returns a broker's endpoint on a listener; ok is false when
// the broker registered none there (a request on the controller listener,
// or a listener only some brokers have): callers leave that broker out, as
// Kafka leaves out brokers without the listener.
func endpointFor(br *metadata.Broker, listenerName string) (metadata.Endpoint, bool) {
	for _, ep := range br.Endpoints {
		if ep.Name == listenerName {
			return ep, true
		}
	}
	return metadata.Endpoint{}, false
}

func metadataTopic(img *metadata.Image, t *metadata.Topic) kmsg.MetadataResponseTopic {
	mt := kmsg.NewMetadataResponseTopic()
	name := t.Name
	mt.Topic = &name
	mt.TopicID = t.ID
	mt.IsInternal = isInternalTopic(t.Name)
	mt.AuthorizedOperations = operationsOmitted
	mt.Partitions = make([]kmsg.MetadataResponseTopicPartition, 0, t.Partitions.Len())
	for i, p := range t.Partitions.All() {
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

func init() {
	register(api{
		key: kmsg.Metadata, min: 0, max: 13,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each topic (hidden when denied), CREATE to auto-create, authorized operations",
		handle:       (*Broker).handleMetadata,
	})
}

// sortedTopicNames caches the sorted topic names of the latest image asked
// for: Metadata for all topics and DescribeTopicPartitions list topics in
// name order, and sorting 100,000 names took a third of such a request.
// Images are immutable, so a pointer identifies the names.
type sortedTopicNames struct {
	mu    sync.Mutex
	img   *metadata.Image
	names []string
}

// of returns img's topic names, sorted; the slice is shared: read only.
func (c *sortedTopicNames) of(img *metadata.Image) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.img != img {
		names := make([]string, 0, img.Topics.Len())
		for name := range img.Topics.All() {
			names = append(names, name)
		}
		sort.Strings(names)
		c.img, c.names = img, names
	}
	return c.names
}
