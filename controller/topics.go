package controller

// CreateTopics, DeleteTopics and CreatePartitions, with Kafka 4.3's
// validation order, error codes and messages (ControllerApis plus
// ReplicationControlManager). The broker fills CreateTopics' per-topic
// Configs in the response; the controller leaves them nil.

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
func validateTopicName(name string) *apiError {
	if msg := metadata.TopicNameError(name); msg != "" {
		return &apiError{err: kerr.InvalidTopicException, msg: msg}
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
	for existing := range img.Topics {
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

// CreateTopics creates topics.
func (c *Controller) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	// Duplicate names get one INVALID_REQUEST result and are not created.
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
	validateOnly := req.ValidateOnly
	quota := metadata.MutationQuotaOf(ctx)
	results, ok, err := submitTyped(c, ctx, func(img *metadata.Image, offset int64) ([]metadata.Record, []kmsg.CreateTopicsResponseTopic) {
		return c.createTopics(img, toCreate, validateOnly, quota)
	})
	if !ok {
		results = nil
		for _, t := range toCreate {
			r := kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			results = append(results, r)
		}
	}
	for i := range results {
		if results[i].ErrorCode == 0 && err != nil {
			failCreatedTopic(&results[i], err)
		}
	}
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
	return resp
}

func failCreatedTopic(r *kmsg.CreateTopicsResponseTopic, err error) {
	r.ErrorCode = errorCode(err)
	r.ErrorMessage = strPtr(err.Error())
	r.TopicID = [16]byte{}
	r.NumPartitions = -1
	r.ReplicationFactor = -1
	r.Configs = nil
}

// createTopics runs on the loop: validate every topic, build the records
// of those that pass.
func (c *env) createTopics(img *metadata.Image, topics []kmsg.CreateTopicsRequestTopic, validateOnly bool, quota metadata.MutationQuota) ([]metadata.Record, []kmsg.CreateTopicsResponseTopic) {
	errs := map[string]*apiError{}
	for _, t := range topics {
		if e := validateTopicName(t.Topic); e != nil {
			errs[t.Topic] = e
		}
		if existing, ok := collidingTopic(img, t.Topic); ok {
			errs[t.Topic] = newAPIError(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", t.Topic, existing)
		}
	}
	for _, t := range topics {
		if _, ok := img.Topics[t.Topic]; ok {
			errs[t.Topic] = newAPIError(kerr.TopicAlreadyExists, "Topic '%s' already exists.", t.Topic)
		}
	}
	placer := newStripedPlacer(img, c.rng)
	var records []metadata.Record
	successes := map[string]kmsg.CreateTopicsResponseTopic{}
	for _, t := range topics {
		if errs[t.Topic] != nil {
			continue
		}
		configs, e := c.creationConfigs(img, t)
		if e != nil {
			errs[t.Topic] = e
			continue
		}
		recs, result, e := c.createTopic(img, placer, t, configs)
		if e == nil {
			// The topic's partitions count against the client's
			// mutation quota once it is otherwise valid (Kafka's
			// createTopic), validate_only included.
			e = quotaRefuses(quota, partitionRecordCount(recs))
		}
		if e != nil {
			errs[t.Topic] = e
			continue
		}
		records = append(records, recs...)
		successes[t.Topic] = result
	}
	var results []kmsg.CreateTopicsResponseTopic
	// Kafka fails the whole request when it would write more than
	// maxRecordsPerOp records (or one topic alone would).
	tooLarge := len(records) > maxRecordsPerOp
	for _, e := range errs {
		if e.err == kerr.PolicyViolation && e.msg == excessivelyLargeOperation {
			tooLarge = true
		}
	}
	for _, t := range topics {
		if e := errs[t.Topic]; e != nil && !tooLarge {
			r := kmsg.NewCreateTopicsResponseTopic()
			r.Topic = t.Topic
			r.ErrorCode = e.code()
			r.ErrorMessage = e.message()
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
	if validateOnly || tooLarge {
		return nil, results
	}
	return records, results
}

// creationConfigs checks a new topic's configs and returns its config
// records.
func (c *env) creationConfigs(img *metadata.Image, t kmsg.CreateTopicsRequestTopic) ([]metadata.Record, *apiError) {
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
		return nil, newAPIError(kerr.InvalidConfig, "Null value not supported for topic configs: %s", strings.Join(nulls, ","))
	}
	if c.schema != nil {
		if err := c.schema.Validate(metadata.ConfigResourceTopic, t.Topic, values); err != nil {
			return nil, newAPIError(kerr.InvalidConfig, "%s", err.Error())
		}
	}
	var recs []metadata.Record
	for _, k := range slices.Sorted(maps.Keys(values)) {
		recs = append(recs, &metadata.ConfigRecord{ResourceType: metadata.ConfigResourceTopic, ResourceName: t.Topic, Name: k, Value: strPtr(values[k])})
	}
	return recs, nil
}

func (c *env) createTopic(img *metadata.Image, placer *stripedPlacer, t kmsg.CreateTopicsRequestTopic, configRecs []metadata.Record) ([]metadata.Record, kmsg.CreateTopicsResponseTopic, *apiError) {
	var result kmsg.CreateTopicsResponseTopic
	var assignments [][]int32
	if len(t.ReplicaAssignment) > 0 {
		if t.ReplicationFactor != -1 {
			return nil, result, newAPIError(kerr.InvalidRequest, "A manual partition assignment was specified, but replication factor was not set to -1.")
		}
		if t.NumPartitions != -1 {
			return nil, result, newAPIError(kerr.InvalidRequest, "A manual partition assignment was specified, but numPartitions was not set to -1.")
		}
		byPartition := map[int32][]int32{}
		rf := -1
		for _, a := range t.ReplicaAssignment {
			if _, dup := byPartition[a.Partition]; dup {
				return nil, result, newAPIError(kerr.InvalidReplicaAssignment, "Found multiple manual partition assignments for partition %d", a.Partition)
			}
			if e := validateManualAssignment(img, a.Replicas, rf); e != nil {
				return nil, result, e
			}
			rf = len(a.Replicas)
			if len(activeReplicas(img, a.Replicas)) == 0 {
				return nil, result, newAPIError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", a.Partition)
			}
			byPartition[a.Partition] = a.Replicas
		}
		for i := range int32(len(byPartition)) {
			replicas, ok := byPartition[i]
			if !ok {
				return nil, result, newAPIError(kerr.InvalidReplicaAssignment, "partitions should be a consecutive 0-based integer sequence")
			}
			assignments = append(assignments, slices.Clone(replicas))
		}
	} else if t.ReplicationFactor < -1 || t.ReplicationFactor == 0 {
		return nil, result, newAPIError(kerr.InvalidReplicationFactor, "Replication factor must be larger than 0, or -1 to use the default value.")
	} else if t.NumPartitions < -1 || t.NumPartitions == 0 {
		return nil, result, newAPIError(kerr.InvalidPartitions, "Number of partitions was set to an invalid non-positive value.")
	} else {
		numPartitions := t.NumPartitions
		if numPartitions == -1 {
			numPartitions = c.defaultPartitions
		}
		rf := t.ReplicationFactor
		if rf == -1 {
			rf = c.defaultReplicationFactor
		}
		if numPartitions > maxRecordsPerOp {
			return nil, result, newAPIError(kerr.PolicyViolation, excessivelyLargeOperation)
		}
		var err error
		assignments, err = placer.place(int(numPartitions), int(rf))
		if err != nil {
			return nil, result, newAPIError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): %s", rf, err.Error())
		}
		for _, replicas := range assignments {
			if len(activeReplicas(img, replicas)) == 0 {
				return nil, result, newAPIError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
			}
		}
	}
	id := protocol.RandomUUID()
	for img.TopicsByID[id] != nil {
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
func validateManualAssignment(img *metadata.Image, replicas []int32, rf int) *apiError {
	if len(replicas) == 0 {
		return newAPIError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes an empty replica list.")
	}
	sorted := sortedInt32s(replicas)
	for i, id := range sorted {
		if img.Brokers[id] == nil {
			return newAPIError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes broker %d, but no such broker is registered.", id)
		}
		if i > 0 && sorted[i-1] == id {
			return newAPIError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes the broker %d more than once.", id)
		}
	}
	if rf >= 0 && len(sorted) != rf {
		return newAPIError(kerr.InvalidReplicaAssignment, "The manual partition assignment includes a partition with %d replica(s), but this is not consistent with previous partitions, which have %d replica(s).", len(sorted), rf)
	}
	return nil
}

// DeleteTopics deletes topics by name or by id.
func (c *Controller) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	add := func(name *string, id [16]byte, e *apiError) {
		r := kmsg.NewDeleteTopicsResponseTopic()
		r.Topic = name
		r.TopicID = id
		r.ErrorCode = e.code()
		r.ErrorMessage = e.message()
		resp.Topics = append(resp.Topics, r)
	}
	if c.cfg.DisableTopicDeletion {
		// Kafka fails the whole request: INVALID_REQUEST before v3,
		// TOPIC_DELETION_DISABLED after.
		e := &apiError{err: kerr.TopicDeletionDisabled}
		if req.Version < 3 {
			e = newAPIError(kerr.InvalidRequest, "Topic deletion is disabled.")
		}
		for _, n := range req.TopicNames {
			add(strPtr(n), [16]byte{}, e)
		}
		for _, t := range req.Topics {
			add(t.Topic, t.TopicID, e)
		}
		return resp
	}
	// Collect names and ids, as ControllerApis.deleteTopics does.
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
			add(nil, [16]byte{}, newAPIError(kerr.InvalidRequest, "Neither topic name nor id were specified."))
		case t.Topic == nil:
			if idCount[t.TopicID] == 0 {
				ids = append(ids, t.TopicID)
			}
			idCount[t.TopicID]++
		case t.TopicID == [16]byte{}:
			addName(*t.Topic)
		default:
			add(t.Topic, t.TopicID, newAPIError(kerr.InvalidRequest, "You may not specify both topic name and topic id."))
		}
	}
	for _, n := range names {
		if nameCount[n] > 1 {
			add(strPtr(n), [16]byte{}, newAPIError(kerr.InvalidRequest, "Duplicate topic name."))
		}
	}
	for _, id := range ids {
		if idCount[id] > 1 {
			add(nil, id, newAPIError(kerr.InvalidRequest, "Duplicate topic id."))
		}
	}
	names = slices.DeleteFunc(names, func(n string) bool { return nameCount[n] > 1 })
	ids = slices.DeleteFunc(ids, func(id protocol.UUID) bool { return idCount[id] > 1 })

	type deleteResult struct {
		name *string
		id   protocol.UUID
		err  *apiError
	}
	quota := metadata.MutationQuotaOf(ctx)
	results, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, []deleteResult) {
		var out []deleteResult
		toDelete := map[protocol.UUID]string{}
		var order []protocol.UUID
		for _, id := range ids {
			if id == (protocol.UUID{}) {
				out = append(out, deleteResult{id: id, err: newAPIError(kerr.InvalidRequest, "Attempt to find topic with invalid topicId %s", id)})
				continue
			}
			t := img.TopicsByID[id]
			if t == nil {
				out = append(out, deleteResult{id: id, err: &apiError{err: kerr.UnknownTopicID}})
				continue
			}
			toDelete[id] = t.Name
			order = append(order, id)
		}
		for _, n := range names {
			t := img.Topics[n]
			if t == nil {
				out = append(out, deleteResult{name: strPtr(n), err: &apiError{err: kerr.UnknownTopicOrPartition}})
				continue
			}
			if _, dup := toDelete[t.ID]; dup {
				// The name maps to an id that was also given: refuse both.
				out = append(out, deleteResult{name: strPtr(n), id: t.ID, err: newAPIError(kerr.InvalidRequest, "The provided topic name maps to an ID that was already supplied.")})
				delete(toDelete, t.ID)
				order = slices.DeleteFunc(order, func(x protocol.UUID) bool { return x == t.ID })
				continue
			}
			toDelete[t.ID] = n
			order = append(order, t.ID)
		}
		var recs []metadata.Record
		for _, id := range order {
			if e := quotaRefuses(quota, len(img.TopicsByID[id].Partitions)); e != nil {
				out = append(out, deleteResult{name: strPtr(toDelete[id]), id: id, err: e})
				continue
			}
			recs = append(recs, &metadata.RemoveTopicRecord{TopicID: id})
			out = append(out, deleteResult{name: strPtr(toDelete[id]), id: id})
		}
		return recs, out
	})
	if !ok {
		for _, n := range names {
			add(strPtr(n), [16]byte{}, commitError(err))
		}
		for _, id := range ids {
			add(nil, id, commitError(err))
		}
		return resp
	}
	for _, r := range results {
		add(r.name, r.id, r.err)
	}
	return resp
}

// CreatePartitions adds partitions to topics.
func (c *Controller) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
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
	validateOnly := req.ValidateOnly
	quota := metadata.MutationQuotaOf(ctx)
	results, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, []kmsg.CreatePartitionsResponseTopic) {
		placer := newStripedPlacer(img, c.rng)
		var recs []metadata.Record
		var out []kmsg.CreatePartitionsResponseTopic
		for _, t := range topics {
			r := kmsg.NewCreatePartitionsResponseTopic()
			r.Topic = t.Topic
			more, e := c.createPartitions(img, placer, t)
			if e == nil {
				e = quotaRefuses(quota, partitionRecordCount(more))
			}
			if e != nil {
				r.ErrorCode = e.code()
				r.ErrorMessage = e.message()
			} else {
				recs = append(recs, more...)
			}
			out = append(out, r)
		}
		if len(recs) > maxRecordsPerOp {
			for i := range out {
				if out[i].ErrorCode == 0 {
					out[i].ErrorCode = kerr.PolicyViolation.Code
					out[i].ErrorMessage = strPtr(excessivelyLargeOperation)
				}
			}
			return nil, out
		}
		if validateOnly {
			return nil, out
		}
		return recs, out
	})
	if !ok {
		results = nil
		for _, t := range topics {
			r := kmsg.NewCreatePartitionsResponseTopic()
			r.Topic = t.Topic
			results = append(results, r)
		}
	}
	for i := range results {
		if results[i].ErrorCode == 0 && err != nil {
			results[i].ErrorCode = errorCode(err)
			results[i].ErrorMessage = strPtr(err.Error())
		}
	}
	resp.Topics = append(resp.Topics, results...)
	return resp
}

func (c *env) createPartitions(img *metadata.Image, placer *stripedPlacer, t kmsg.CreatePartitionsRequestTopic) ([]metadata.Record, *apiError) {
	topic := img.Topics[t.Topic]
	if topic == nil {
		return nil, &apiError{err: kerr.UnknownTopicOrPartition}
	}
	have := int32(len(topic.Partitions))
	if t.Count == have {
		return nil, newAPIError(kerr.InvalidPartitions, "Topic already has %d partition(s).", have)
	}
	if t.Count < have {
		return nil, newAPIError(kerr.InvalidPartitions, "The topic %s currently has %d partition(s); %d would not be an increase.", t.Topic, have, t.Count)
	}
	additional := t.Count - have
	if t.Assignment != nil && len(t.Assignment) != int(additional) {
		return nil, newAPIError(kerr.InvalidReplicaAssignment, "Attempted to add %d additional partition(s), but only %d assignment(s) were specified.", additional, len(t.Assignment))
	}
	if additional > maxRecordsPerOp {
		return nil, newAPIError(kerr.PolicyViolation, excessivelyLargeOperation)
	}
	if have == 0 {
		return nil, newAPIError(kerr.UnknownServerError, "Invalid state: topic %s appears to have no partitions.", t.Topic)
	}
	rf := len(topic.Partitions[0].Replicas)
	var assignments [][]int32
	if t.Assignment != nil {
		for i, a := range t.Assignment {
			if e := validateManualAssignment(img, a.Replicas, rf); e != nil {
				return nil, e
			}
			if len(activeReplicas(img, a.Replicas)) == 0 {
				return nil, newAPIError(kerr.InvalidReplicaAssignment, "All brokers specified in the manual partition assignment for partition %d are fenced or in controlled shutdown.", int(have)+i)
			}
			assignments = append(assignments, slices.Clone(a.Replicas))
		}
	} else {
		var err error
		assignments, err = placer.placeFrom(int(have), int(additional), rf)
		if err != nil {
			return nil, newAPIError(kerr.InvalidReplicationFactor, "%s", err.Error())
		}
	}
	var recs []metadata.Record
	for i, replicas := range assignments {
		isr := activeReplicas(img, replicas)
		if len(isr) == 0 {
			return nil, newAPIError(kerr.InvalidReplicationFactor, "Unable to replicate the partition %d time(s): All brokers are currently fenced or in controlled shutdown.", rf)
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

func init() {
	decides((*Controller).CreateTopics)
	decides((*Controller).DeleteTopics)
	decides((*Controller).CreatePartitions)
}
