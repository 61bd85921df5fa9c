package decide

// CreateTopics, DeleteTopics and CreatePartitions, with Kafka 4.3's
// validation order, error codes and messages (ControllerApis plus
// ReplicationControlManager). Each is a decision (doc.go): ControllerApis'
// checks of the request itself (names given twice, the metadata log's
// name) are decided on the loop with the rest, so the answer comes whole
// from one function of the image. The requester's mutation quota
// (metadata.MutationQuotaOf) is charged topic by topic as the decision
// goes, validate_only included, as Kafka charges it. New partitions are
// placed by placement.go with the env's random source. When the records
// are not committed, every topic of the request is answered with that
// error. The broker fills CreateTopics' per-topic Configs in the response;
// the controller leaves them nil.

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	// maxRecordsPerOp is Kafka's MAX_RECORDS_PER_USER_OP: a larger
	// operation is refused as a whole.
	maxRecordsPerOp           = 10000
	clusterMetadataTopic      = "__cluster_metadata"
	excessivelyLargeOperation = "Unable to perform excessively large batch operation."
)

// validateTopicName applies Kafka's Topic.validate.
func validateTopicName(name string) *Error {
	if msg := metadata.TopicNameError(name); msg != "" {
		return &Error{err: kerr.InvalidTopicException, msg: msg}
	}
	return nil
}

func hasCollisionChars(name string) bool { return strings.ContainsAny(name, "._") }
func unifyCollisionChars(name string) string {
	return strings.ReplaceAll(name, ".", "_")
}

// collidingTopic returns an existing topic whose name differs from name
// only by '.' versus '_'.
func collidingTopic(img *metadata.Image, name string) (string, bool) {
	if !hasCollisionChars(name) {
		return "", false
	}
	unified := unifyCollisionChars(name)
	var found []string
	for existing := range img.Topics.All() {
		if existing != name && hasCollisionChars(existing) && unifyCollisionChars(existing) == unified {
			found = append(found, existing)
		}
	}
	if len(found) == 0 {
		return "", false
	}
	slices.Sort(found)
	return found[0], true
}

// CreateTopics decides a CreateTopics request. A name the request gives
// more than once, and the metadata log's own, are refused once each after
// the results of the other topics, as ControllerApis refuses them before
// ReplicationControlManager sees the rest.
func (e *Env) CreateTopics(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.CreateTopicsRequest) ([]metadata.Record, *kmsg.CreateTopicsResponse) {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	var toCreate []kmsg.CreateTopicsRequestTopic
	for _, t := range req.Topics {
		if count[t.Topic] == 1 && t.Topic != clusterMetadataTopic {
			toCreate = append(toCreate, t)
		}
	}
	records, results := e.createDistinctTopics(img, toCreate, metadata.MutationQuotaOf(ctx))
	resp.Topics = append(resp.Topics, results...)
	reported := map[string]bool{}
	for _, t := range req.Topics {
		if reported[t.Topic] {
			continue
		}
		switch {
		case count[t.Topic] > 1:
			reported[t.Topic] = true
			r := kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			r.ErrorCode = kerr.InvalidRequest.Code
			r.ErrorMessage = strPtr("Duplicate topic name.")
			resp.Topics = append(resp.Topics, r)
		case t.Topic == clusterMetadataTopic:
			reported[t.Topic] = true
			r := kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			r.ErrorCode = kerr.InvalidRequest.Code
			r.ErrorMessage = strPtr("Creation of internal topic " + clusterMetadataTopic + " is prohibited.")
			resp.Topics = append(resp.Topics, r)
		}
	}
	if req.ValidateOnly {
		return nil, resp
	}
	return records, resp
}

// CreateTopicsFailed answers every topic of the request with e; a failed
// topic reports no id, partition count or replication factor.
func CreateTopicsFailed(req *kmsg.CreateTopicsRequest, e *Error) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	for _, t := range req.Topics {
		r := kmsg.NewCreateTopicsResponseTopic()
		r.Topic = t.Topic
		r.ErrorCode, r.ErrorMessage = e.Code(), e.Message()
		resp.Topics = append(resp.Topics, r)
	}
	return resp
}

// createDistinctTopics validates topics, each named once, and builds the
// records of those that pass, with a result per topic in order; the
// records are nil when the creation is too large to be made at all.
func (e *Env) createDistinctTopics(img *metadata.Image, topics []kmsg.CreateTopicsRequestTopic, quota metadata.MutationQuota) ([]metadata.Record, []kmsg.CreateTopicsResponseTopic) {
	refusals := map[string]*Error{}
	for _, t := range topics {
		if refusal := validateTopicName(t.Topic); refusal != nil {
			refusals[t.Topic] = refusal
		}
		if existing, ok := collidingTopic(img, t.Topic); ok {
			refusals[t.Topic] = NewError(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", t.Topic, existing)
		}
	}
	for _, t := range topics {
		if _, ok := img.Topics.Get(t.Topic); ok {
			refusals[t.Topic] = NewError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Topic)
		}
	}
	placer := newStripedPlacer(img, e.Rand)
	var records []metadata.Record
	successes := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, t := range topics {
		if refusals[t.Topic] != nil {
			continue
		}
		configs, refusal := e.creationConfigs(img, t)
		if refusal != nil {
			refusals[t.Topic] = refusal
			continue
		}
		recs, result, refusal := e.createTopic(img, placer, t, configs)
		if refusal == nil {
			// The topic's partitions count against the client's
			// mutation quota once it is otherwise valid (Kafka's
			// createTopic), validate_only included.
			refusal = quotaRefuses(quota, partitionRecordCount(recs))
		}
		if refusal != nil {
			refusals[t.Topic] = refusal
			continue
		}
		records = append(records, recs...)
		successes[t.Topic] = result
	}
	var results []kmsg.CreateTopicsResponseTopic
	// Kafka fails the whole request when it would write more than
	// maxRecordsPerOp records (or one topic alone would).
	tooLarge := len(records) > maxRecordsPerOp
	for _, refusal := range refusals {
		if refusal.err == kerr.PolicyViolation && refusal.msg == excessivelyLargeOperation {
			tooLarge = true
		}
	}
	for _, t := range topics {
		if refusal := refusals[t.Topic]; refusal != nil && !tooLarge {
			r := kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			r.ErrorCode = refusal.Code()
			r.ErrorMessage = refusal.Message()
			results = append(results, r)
			continue
		}
		r := successes[t.Topic]
		if tooLarge {
			r = kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			r.ErrorCode = kerr.PolicyViolation.Code
			r.ErrorMessage = strPtr(excessivelyLargeOperation)
		}
		results = append(results, r)
	}
	if tooLarge {
		return nil, results
	}
	return records, results
}

// creationConfigs checks a new topic's configs and returns its config
// records.
func (e *Env) creationConfigs(img *metadata.Image, t kmsg.CreateTopicsRequestTopic) ([]metadata.Record, *Error) {
	if len(t.Configs) == 0 {
		return nil, nil
	}
	values := map[string]string{}
	var nulls []string
	for _, cfg := range t.Configs {
		if cfg.Value == nil {
			nulls = append(nulls, cfg.Name)
			continue
		}
		values[cfg.Name] = *cfg.Value
	}
	if len(nulls) > 0 {
		return nil, NewError(kerr.InvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	if e.Schema != nil {
		if err := e.Schema.Validate(metadata.ConfigResourceTopic, t.Topic, values); err != nil {
			return nil, NewError(kerr.InvalidConfig, "%s", err.Error())
		}
	}
	var recs []metadata.Record
	for _, k := range slices.Sorted(maps.Keys(values)) {
		recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: t.Topic, Name: k, Value: strPtr(values[k])})
	}
	return recs, nil
}

// createTopic validates one topic's partitions and replicas and builds
// its records and its successful result.
func (e *Env) createTopic(img *metadata.Image, placer *stripedPlacer, t kmsg.CreateTopicsRequestTopic, configRecs []metadata.Record) ([]metadata.Record, kmsg.CreateTopicsResponseTopic, *Error) {
	var result kmsg.CreateTopicsResponseTopic
	var assignments [][]int32
	if len(t.ReplicaAssignment) > 0 {
		if t.ReplicationFactor != -1 {
			return nil, result, NewError(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if t.NumPartitions != -1 {
			return nil, result, NewError(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		byPartition := map[int32][]int32{}
		rf := -1
		for _, a := range t.ReplicaAssignment {
			if _, dup := byPartition[a.Partition]; dup {
				return nil, result, NewError(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
			}
			if refusal := validateManualAssignment(img, a.Replicas, rf); refusal != nil {
				return nil, result, refusal
			}
			rf = len(a.Replicas)
			if len(activeReplicas(img, a.Replicas)) == 0 {
				return nil, result, NewError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", a.Partition)
			}
			byPartition[a.Partition] = a.Replicas
		}
		for i := range int32(len(byPartition)) {
			replicas, ok := byPartition[i]
			if !ok {
				return nil, result, NewError(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			assignments = append(assignments, slices.Clone(replicas))
		}
	} else if t.ReplicationFactor < -1 || t.ReplicationFactor == 0 {
		return nil, result, NewError(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	} else if t.NumPartitions < -1 || t.NumPartitions == 0 {
		return nil, result, NewError(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	} else {
		numPartitions := t.NumPartitions
		if numPartitions == -1 {
			numPartitions = e.DefaultPartitions
		}
		rf := t.ReplicationFactor
		if rf == -1 {
			rf = e.DefaultReplicationFactor
		}
		if numPartitions > maxRecordsPerOp {
			return nil, result, NewError(kerr.PolicyViolation, excessivelyLargeOperation)
		}
		var err error
		assignments, err = placer.place(int(numPartitions), int(rf))
		if err != nil {
			return nil, result, NewError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): %s", rf, err.Error())
		}
		for _, replicas := range assignments {
			if len(activeReplicas(img, replicas)) == 0 {
				return nil, result, NewError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
			}
		}
	}
	id := protocol.RandomUUID()
	for img.TopicByID(id) != nil {
		id = protocol.RandomUUID()
	}
	recs := []metadata.Record{&metadata.TopicRecord{Name: t.Topic, TopicID: id}}
	recs = append(recs, configRecs...)
	for i, replicas := range assignments {
		isr := activeReplicas(img, replicas)
		recs = append(recs, &metadata.PartitionRecord{
			PartitionID:    int32(i),
			TopicID:        id,
			Replicas:       replicas,
			ISR:            isr,
			Leader:         isr[0],
			LeaderEpoch:    0,
			PartitionEpoch: 0,
		})
	}
	result = kmsg.NewCreateTopicsResponseTopic()
	result.Topic = t.Topic
	result.TopicID = id
	result.NumPartitions = int32(len(assignments))
	result.ReplicationFactor = int16(len(assignments[0]))
	result.ConfigErrorCode = 0
	return recs, result, nil
}

// activeReplicas are the replicas that may be in the ISR of a new
// partition: registered, unfenced and not shutting down.
func activeReplicas(img *metadata.Image, replicas []int32) []int32 {
	var out []int32
	for _, r := range replicas {
		if b := img.Brokers[r]; b != nil && !b.Fenced && !b.InControlledShutdown {
			out = append(out, r)
		}
	}
	return out
}

// validateManualAssignment is Kafka's validateManualPartitionAssignment;
// rf < 0 means no replication factor to match.
func validateManualAssignment(img *metadata.Image, replicas []int32, rf int) *Error {
	if len(replicas) == 0 {
		return NewError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := sortedInt32s(replicas)
	for i, id := range sorted {
		if img.Brokers[id] == nil {
			return NewError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return NewError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	if rf >= 0 && len(sorted) != rf {
		return NewError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(sorted), rf)
	}
	return nil
}

// DeleteTopics decides a DeleteTopics request. The request's own mistakes
// (neither or both of name and id, a name or id given twice) are answered
// first, as ControllerApis.deleteTopics refuses them before looking the
// topics up; then each topic looked up, ids before names.
func (e *Env) DeleteTopics(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.DeleteTopicsRequest) ([]metadata.Record, *kmsg.DeleteTopicsResponse) {
	if e.DisableTopicDeletion {
		// Kafka fails the whole request: INVALID_REQUEST before v3,
		// TOPIC_DELETION_DISABLED after.
		refusal := &Error{err: kerr.TopicDeletionDisabled}
		if req.Version < 3 {
			refusal = NewError(kerr.InvalidRequest, "Topic deletion is disabled.")
		}
		return nil, DeleteTopicsFailed(req, refusal)
	}
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	add := func(name *string, id [16]byte, refusal *Error) {
		resp.Topics = append(resp.Topics, deleteTopicsResult(name, id, refusal))
	}
	var names []string
	nameCount := map[string]int{}
	var ids []protocol.UUID
	idCount := map[protocol.UUID]int{}
	addName := func(n string) {
		if nameCount[n] == 0 {
			names = append(names, n)
		}
		nameCount[n]++
	}
	for _, n := range req.TopicNames {
		addName(n)
	}
	for _, t := range req.Topics {
		switch {
		case t.Topic == nil && t.TopicID == [16]byte{}:
			add(nil, [16]byte{}, NewError(kerr.InvalidRequest, "Neither topic name nor id were specified."))
		case t.Topic == nil:
			if idCount[t.TopicID] == 0 {
				ids = append(ids, t.TopicID)
			}
			idCount[t.TopicID]++
		case t.TopicID == [16]byte{}:
			addName(*t.Topic)
		default:
			add(t.Topic, t.TopicID, NewError(kerr.InvalidRequest, "You may not specify both topic name and topic id."))
		}
	}
	for _, n := range names {
		if nameCount[n] > 1 {
			add(strPtr(n), [16]byte{}, NewError(kerr.InvalidRequest, "Duplicate topic name."))
		}
	}
	for _, id := range ids {
		if idCount[id] > 1 {
			add(nil, id, NewError(kerr.InvalidRequest, "Duplicate topic id."))
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return nameCount[n] > 1 })
	ids = slices.DeleteFunc(ids, func(id protocol.UUID) bool { return idCount[id] > 1 })

	toDelete := map[protocol.UUID]string{}
	var order []protocol.UUID
	for _, id := range ids {
		if id == (protocol.UUID{}) {
			add(nil, id, NewError(kerr.InvalidRequest, "Attempt to find topic with invalid topicId %s", id))
			continue
		}
		t := img.TopicByID(id)
		if t == nil {
			add(nil, id, &Error{err: kerr.UnknownTopicID})
			continue
		}
		toDelete[id] = t.Name
		order = append(order, id)
	}
	for _, n := range names {
		t := img.Topic(n)
		if t == nil {
			add(strPtr(n), [16]byte{}, &Error{err: kerr.UnknownTopicOrPartition})
			continue
		}
		if _, dup := toDelete[t.ID]; dup {
			// The name maps to an id that was also given: refuse both.
			add(strPtr(n), t.ID, NewError(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied."))
			delete(toDelete, t.ID)
			order = slices.DeleteFunc(order, func(x protocol.UUID) bool { return x == t.ID })
			continue
		}
		toDelete[t.ID] = n
		order = append(order, t.ID)
	}
	quota := metadata.MutationQuotaOf(ctx)
	var recs []metadata.Record
	for _, id := range order {
		if refusal := quotaRefuses(quota, img.TopicByID(id).Partitions.Len()); refusal != nil {
			add(strPtr(toDelete[id]), id, refusal)
			continue
		}
		recs = append(recs, &metadata.RemoveTopicRecord{TopicID: id})
		add(strPtr(toDelete[id]), id, nil)
	}
	return recs, resp
}

// DeleteTopicsFailed answers every topic of the request, by the name or id
// it was given, with e.
func DeleteTopicsFailed(req *kmsg.DeleteTopicsRequest, e *Error) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	for _, n := range req.TopicNames {
		resp.Topics = append(resp.Topics, deleteTopicsResult(strPtr(n), [16]byte{}, e))
	}
	for _, t := range req.Topics {
		resp.Topics = append(resp.Topics, deleteTopicsResult(t.Topic, t.TopicID, e))
	}
	return resp
}

// deleteTopicsResult is one topic's result; e nil is success.
func deleteTopicsResult(name *string, id [16]byte, e *Error) kmsg.DeleteTopicsResponseTopic {
	r := kmsg.NewDeleteTopicsResponseTopic()
	r.Topic = name
	r.TopicID = id
	r.ErrorCode = e.Code()
	r.ErrorMessage = e.Message()
	return r
}

// CreatePartitions decides a CreatePartitions request. A topic the request
// names more than once is refused once, before the results of the others.
func (e *Env) CreatePartitions(ctx context.Context, img *metadata.Image, _ int64, req *kmsg.CreatePartitionsRequest) ([]metadata.Record, *kmsg.CreatePartitionsResponse) {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	reported := map[string]bool{}
	var topics []kmsg.CreatePartitionsRequestTopic
	for _, t := range req.Topics {
		if count[t.Topic] > 1 {
			if !reported[t.Topic] {
				reported[t.Topic] = true
				r := kmsg.NewCreatePartitionsResponseTopic()
				r.Topic = t.Topic
				r.ErrorCode = kerr.InvalidRequest.Code
				r.ErrorMessage = strPtr("Duplicate topic name.")
				resp.Topics = append(resp.Topics, r)
			}
			continue
		}
		topics = append(topics, t)
	}
	quota := metadata.MutationQuotaOf(ctx)
	placer := newStripedPlacer(img, e.Rand)
	var recs []metadata.Record
	var results []kmsg.CreatePartitionsResponseTopic
	for _, t := range topics {
		r := kmsg.NewCreatePartitionsResponseTopic()
		r.Topic = t.Topic
		more, refusal := e.addPartitions(img, placer, t)
		if refusal == nil {
			refusal = quotaRefuses(quota, partitionRecordCount(more))
		}
		if refusal != nil {
			r.ErrorCode = refusal.Code()
			r.ErrorMessage = refusal.Message()
		} else {
			recs = append(recs, more...)
		}
		results = append(results, r)
	}
	if len(recs) > maxRecordsPerOp {
		for i := range results {
			if results[i].ErrorCode == 0 {
				results[i].ErrorCode = kerr.PolicyViolation.Code
				results[i].ErrorMessage = strPtr(excessivelyLargeOperation)
			}
		}
		recs = nil
	}
	resp.Topics = append(resp.Topics, results...)
	if req.ValidateOnly {
		return nil, resp
	}
	return recs, resp
}

// CreatePartitionsFailed answers every topic of the request with e.
func CreatePartitionsFailed(req *kmsg.CreatePartitionsRequest, e *Error) *kmsg.CreatePartitionsResponse {
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	for _, t := range req.Topics {
		r := kmsg.NewCreatePartitionsResponseTopic()
		r.Topic = t.Topic
		r.ErrorCode, r.ErrorMessage = e.Code(), e.Message()
		resp.Topics = append(resp.Topics, r)
	}
	return resp
}

// addPartitions validates the new partitions of one topic and builds
// their records.
func (e *Env) addPartitions(img *metadata.Image, placer *stripedPlacer, t kmsg.CreatePartitionsRequestTopic) ([]metadata.Record, *Error) {
	topic := img.Topic(t.Topic)
	if topic == nil {
		return nil, &Error{err: kerr.UnknownTopicOrPartition}
	}
	have := int32(topic.Partitions.Len())
	if t.Count == have {
		return nil, NewError(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	}
	if t.Count < have {
		return nil, NewError(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", t.Topic, have, t.Count)
	}
	additional := t.Count - have
	if t.Assignment != nil && len(t.Assignment) != int(additional) {
		return nil, NewError(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(t.Assignment))
	}
	if additional > maxRecordsPerOp {
		return nil, NewError(kerr.PolicyViolation, excessivelyLargeOperation)
	}
	if have == 0 {
		return nil, NewError(kerr.UnknownServerError, "Invalid state: topic %s appears to have no partitions.", t.Topic)
	}
	rf := len(topic.Partitions.At(0).Replicas)
	var assignments [][]int32
	if t.Assignment != nil {
		for i, a := range t.Assignment {
			if refusal := validateManualAssignment(img, a.Replicas, rf); refusal != nil {
				return nil, refusal
			}
			if len(activeReplicas(img, a.Replicas)) == 0 {
				return nil, NewError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", int(have)+i)
			}
			assignments = append(assignments, slices.Clone(a.Replicas))
		}
	} else {
		var err error
		assignments, err = placer.placeFrom(int(have), int(additional), rf)
		if err != nil {
			return nil, NewError(kerr.InvalidReplicationFactor, "%s", err.Error())
		}
	}
	var recs []metadata.Record
	for i, replicas := range assignments {
		isr := activeReplicas(img, replicas)
		if len(isr) == 0 {
			return nil, NewError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
		}
		recs = append(recs, &metadata.PartitionRecord{
			PartitionID: have + int32(i),
			TopicID:     topic.ID,
			Replicas:    replicas,
			ISR:         isr,
			Leader:      isr[0],
		})
	}
	return recs, nil
}
