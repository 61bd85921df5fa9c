package broker

// DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2 and
// IncrementalAlterConfigs (key 44) v0-1 (ListConfigResources, which lists
// what these describe, is in listconfigresources.go).
//
// DescribeConfigs answers from the static configuration and the dynamic
// configs in the metadata image: every key with its value, source, synonyms
// (v1+), type (v3+) and documentation (v3+) the way Kafka reports them
// (broker/config). Broker resources are this broker ("<node id>") or the
// cluster default (""); another id is INVALID_REQUEST as in Kafka. Group
// resources (KIP-848's group configs) report Kafka 4.3's group keys for any
// group id, existing or not. Broker logger resources report this node's
// logger levels (loggers.go). Client-metrics resources (KIP-714
// subscriptions) report their three keys for any name. Alter requests
// change metadata and go to the controller, after the broker's own checks
// of its BROKER resources (dynamicbroker.go), but for BROKER_LOGGER
// resources, which the broker answers itself (loggers.go).
//
// Authorization: DescribeConfigs needs DESCRIBE_CONFIGS on the cluster for
// BROKER, BROKER_LOGGER and CLIENT_METRICS resources, on the topic or group
// for theirs; a resource without it is answered CLUSTER_, TOPIC_ or
// GROUP_AUTHORIZATION_FAILED with the code's message and no configs, after
// the others.
// The alters are authorized by the controller (controllerauth.go).

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicResource(name string) metadata.ConfigResource {
	return metadata.ConfigResource{Type: metadata.ConfigResourceTopic, Name: name}
}

func (b *Broker) handleDescribeConfigs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := b.meta.Image()
	who := identityOf(r)
	var denied []kmsg.DescribeConfigsResponseResource
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		fail := func(err *kerr.Error, msg string) {
			rr.ErrorCode = err.Code
			rr.ErrorMessage = &msg
		}
		if e := b.describeConfigsDenied(who, res.ResourceType, res.ResourceName); e != nil {
			fail(e, kafkaMessage(e.Code))
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
			denied = append(denied, rr)
			continue
		}
		switch metadata.ConfigResourceType(res.ResourceType) {
		case metadata.ConfigResourceTopic:
			if msg := metadata.TopicNameError(res.ResourceName); msg != "" {
				fail(kerr.InvalidTopicException, msg)
			} else if img.Topic(res.ResourceName) == nil {
				fail(kerr.UnknownTopicOrPartition, "The topic '"+res.ResourceName+"' does not exist.")
			} else {
				rr.Configs = b.opts.Configs.DescribeTopic(img, res.ResourceName, res.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
			}
		case metadata.ConfigResourceBroker:
			id := int32(-1)
			if res.ResourceName != "" {
				n, err := strconv.ParseInt(res.ResourceName, 10, 32)
				if err != nil || int32(n) != b.opts.NodeID {
					fail(kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", b.opts.NodeID, res.ResourceName))
					break
				}
				id = int32(n)
			}
			rr.Configs = b.opts.Configs.DescribeBroker(img, id, res.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		case metadata.ConfigResourceGroup:
			// Any group id may be described, whether or not the group
			// exists; only the empty one is refused.
			if res.ResourceName == "" {
				fail(kerr.InvalidRequest, "Group name must not be empty")
				break
			}
			rr.Configs = b.opts.Configs.DescribeGroup(img, res.ResourceName, res.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		case metadata.ConfigResourceClientMetrics:
			// Any subscription name may be described, as for groups.
			if res.ResourceName == "" {
				fail(kerr.InvalidRequest, "Client metrics subscription name must not be empty")
				break
			}
			rr.Configs = b.opts.Configs.DescribeClientMetrics(img, res.ResourceName, res.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
		case metadata.ConfigResourceBrokerLogger:
			configs, e, msg := b.describeLoggers(res.ResourceName, res.ConfigNames)
			if e != nil {
				fail(e, msg)
				break
			}
			rr.Configs = configs
		default:
			fail(kerr.InvalidRequest, fmt.Sprintf("Unsupported resource type %d", res.ResourceType))
		}
		if rr.Configs == nil {
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	resp.Resources = append(resp.Resources, denied...)
	r.Respond(resp)
}

// describeConfigsDenied is the error for a resource whose configs the
// principal may not describe, nil when it may (ConfigHelper).
func (b *Broker) describeConfigsDenied(who identity, t kmsg.ConfigResourceType, name string) *kerr.Error {
	switch metadata.ConfigResourceType(t) {
	case metadata.ConfigResourceBroker, metadata.ConfigResourceBrokerLogger, metadata.ConfigResourceClientMetrics:
		if !b.clusterAllowed(who, kmsg.ACLOperationDescribeConfigs) {
			return kerr.ClusterAuthorizationFailed
		}
	case metadata.ConfigResourceTopic:
		if !b.allowed(who, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case metadata.ConfigResourceGroup:
		if !b.allowed(who, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	}
	return nil
}

func init() {
	register(api{
		key: kmsg.DescribeConfigs, min: 1, max: 4,
		listeners:    allListeners,
		authorizedAs: "DESCRIBE_CONFIGS on each resource",
		handle:       (*Broker).handleDescribeConfigs,
	})
}
