package broker

// DescribeCluster (key 60) v0-2 and DescribeTopicPartitions (key 75) v0.
//
// DescribeCluster on a client listener describes the brokers (endpoint
// type 1) and names this broker as the controller id, like Metadata; on a
// controller listener it describes the controller quorum (endpoint type 2,
// for --bootstrap-controller). Asking a listener for the other kind is
// UNSUPPORTED_ENDPOINT_TYPE, as in Kafka. Fenced brokers are listed only
// when asked (v2).
//
// DescribeTopicPartitions (KIP-966) pages through partitions of the named
// topics (all topics when none are named) in topic-name order, at most
// min(ResponsePartitionLimit, 2000) partitions per answer, with a cursor
// for the next page.
//
// Authorization: DescribeCluster on a controller listener needs ALTER on
// the cluster (as Kafka's controller requires); its cluster authorized
// operations are 0 without DESCRIBE on the cluster. DescribeTopicPartitions
// leaves out the topics the principal may not DESCRIBE, or, when they were
// named, answers them TOPIC_AUTHORIZATION_FAILED (after the others, with no
// id, whether they exist or not), and fills each answered topic's
// authorized operations.

import (
	"context"
	"slices"
	"sort"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	endpointTypeBroker     = 1
	endpointTypeController = 2
	// maxDescribePartitions is Kafka's max.request.partition.size.limit.
	maxDescribePartitions = 2000
)

func (b *Broker) handleDescribeCluster(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeClusterRequest)
	who := identityOf(r)
	if r.ControllerListener() && !b.clusterAllowed(who, kmsg.ACLOperationAlter) {
		r.Respond(errorResponse(req, clusterDenied(who, kmsg.ACLOperationAlter)))
		return
	}
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	img := b.meta.Image()
	resp.ClusterID = img.ClusterID
	resp.ClusterAuthorizedOperations = operationsOmitted
	want := int8(endpointTypeBroker)
	if r.Version() >= 1 {
		want = req.EndpointType
	}
	resp.EndpointType = want
	onController := r.ControllerListener()
	if (onController && want != endpointTypeController) || (!onController && want != endpointTypeBroker) {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		msg := "The request was sent to an endpoint of type " + endpointKind(onController) + ", but we wanted an endpoint of type " + endpointKind(want == endpointTypeController)
		resp.ErrorMessage = &msg
		resp.ControllerID = -1
		r.Respond(resp)
		return
	}
	if req.IncludeClusterAuthorizedOperations {
		resp.ClusterAuthorizedOperations = b.clusterAuthorizedOperations(who)
	}
	if onController {
		resp.ControllerID = img.LeaderID
		for _, v := range img.Voters {
			for _, ep := range v.Endpoints {
				if ep.Name != r.Listener() {
					continue
				}
				br := kmsg.NewDescribeClusterResponseBroker()
				br.NodeID, br.Host, br.Port = v.ID, ep.Host, ep.Port
				resp.Brokers = append(resp.Brokers, br)
			}
		}
		r.Respond(resp)
		return
	}
	resp.ControllerID = b.opts.NodeID
	ids := make([]int32, 0, len(img.Brokers))
	for id, br := range img.Brokers {
		if !br.Fenced || req.IncludeFencedBrokers {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		br := img.Brokers[id]
		ep, ok := endpointFor(br, r.Listener())
		if !ok {
			continue
		}
		rb := kmsg.NewDescribeClusterResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack, rb.IsFenced = id, ep.Host, ep.Port, br.Rack, br.Fenced
		resp.Brokers = append(resp.Brokers, rb)
	}
	r.Respond(resp)
}

// clusterAuthorizedOperations is what a response reports as the cluster's
// authorized operations when asked: none without DESCRIBE on the cluster.
func (b *Broker) clusterAuthorizedOperations(who identity) int32 {
	if !b.clusterAllowed(who, kmsg.ACLOperationDescribe) {
		return 0
	}
	return b.authorizedOperations(who, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
}

func endpointKind(controller bool) string {
	if controller {
		return "CONTROLLER"
	}
	return "BROKER"
}

func (b *Broker) handleDescribeTopicPartitions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeTopicPartitionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTopicPartitionsResponse)
	img := b.meta.Image()
	who := identityOf(r)

	startTopic, startPartition := "", int32(0)
	if req.Cursor != nil {
		startTopic, startPartition = req.Cursor.Topic, req.Cursor.Partition
	}
	// All topics: the image's names in order (cached per image), from
	// the cursor on, each authorized as the page reaches it; a page
	// costs its own topics, not every topic's authorization and a sort.
	all := len(req.Topics) == 0
	var names, denied []string
	if all {
		names = b.sortedTopics.of(img)
		names = names[sort.SearchStrings(names, startTopic):]
	} else {
		seen := make(map[string]bool, len(req.Topics))
		for _, t := range req.Topics {
			if seen[t.Topic] {
				continue
			}
			seen[t.Topic] = true
			if b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, t.Topic) {
				names = append(names, t.Topic)
			} else {
				denied = append(denied, t.Topic)
			}
		}
		sort.Strings(names)
	}

	limit := int(req.ResponsePartitionLimit)
	if limit <= 0 || limit > maxDescribePartitions {
		limit = maxDescribePartitions
	}
	for _, name := range names {
		if name < startTopic {
			continue
		}
		if all && !b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name) {
			continue
		}
		first := int32(0)
		if name == startTopic {
			first = startPartition
		}
		t := img.Topic(name)
		if t != nil && limit == 0 {
			resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: first}
			break
		}
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		n := name
		rt.Topic = &n
		rt.AuthorizedOperations = b.authorizedOperations(who, kmsg.ACLResourceTypeTopic, name)
		if t == nil {
			rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
			if metadata.TopicNameError(name) != "" {
				rt.ErrorCode = kerr.InvalidTopicException.Code
			}
			resp.Topics = append(resp.Topics, rt)
			continue
		}
		rt.TopicID = t.ID
		rt.IsInternal = isInternalTopic(name)
		for i := first; int(i) < t.Partitions.Len(); i++ {
			if limit == 0 {
				resp.NextCursor = &kmsg.DescribeTopicPartitionsResponseNextCursor{Topic: name, Partition: i}
				break
			}
			rt.Partitions = append(rt.Partitions, describePartition(i, *t.Partitions.At(int(i))))
			limit--
		}
		resp.Topics = append(resp.Topics, rt)
		if resp.NextCursor != nil {
			break
		}
	}
	for _, name := range denied {
		rt := kmsg.NewDescribeTopicPartitionsResponseTopic()
		rt.Topic = kmsg.StringPtr(name)
		rt.ErrorCode = kerr.TopicAuthorizationFailed.Code
		rt.AuthorizedOperations = operationsOmitted
		resp.Topics = append(resp.Topics, rt)
	}
	r.Respond(resp)
}

func describePartition(index int32, p metadata.Partition) kmsg.DescribeTopicPartitionsResponseTopicPartition {
	dp := kmsg.NewDescribeTopicPartitionsResponseTopicPartition()
	dp.Partition = index
	dp.LeaderID, dp.LeaderEpoch = p.Leader, p.LeaderEpoch
	dp.Replicas, dp.ISR = nonNil(p.Replicas), nonNil(p.ISR)
	dp.EligibleLeaderReplicas, dp.LastKnownELR = nonNil(p.ELR), nonNil(p.LastKnownELR)
	dp.OfflineReplicas = []int32{}
	if p.Leader < 0 {
		dp.ErrorCode = kerr.LeaderNotAvailable.Code
	}
	return dp
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return s
}

func init() {
	register(api{
		key: kmsg.DescribeCluster, min: 0, max: 2,
		listeners:    allListeners,
		authorizedAs: "DESCRIBE on the cluster (authorized operations); ALTER on a controller listener",
		errorAnswer: errorAnswerOf(func(_ *kmsg.DescribeClusterRequest, out *kmsg.DescribeClusterResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
		}),
		handle: (*Broker).handleDescribeCluster,
	})
	register(api{
		key: kmsg.DescribeTopicPartitions, min: 0, max: 0,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE on each topic, authorized operations",
		handle:       (*Broker).handleDescribeTopicPartitions,
	})
}
