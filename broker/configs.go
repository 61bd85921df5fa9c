package broker

// DescribeConfigs (key 32) v1-4, AlterConfigs (key 33) v0-2 and
// IncrementalAlterConfigs (key 44) v0-1.
//
// DescribeConfigs answers from the static configuration and the dynamic
// configs in the metadata image: every key with its value, source, synonyms
// (v1+), type (v3+) and documentation (v3+) the way Kafka reports them
// (broker/config). Broker resources are this broker ("<node id>") or the
// cluster default (""); another id is INVALID_REQUEST as in Kafka. Broker
// logger resources report the logger levels. Alter requests change
// metadata and go to the controller.

import (
	"context"
	"fmt"
	"strconv"

	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func topicResource(name string) controller.ConfigResource {
	return controller.ConfigResource{Type: controller.ConfigResourceTopic, Name: name}
}

func (b *Broker) handleDescribeConfigs(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	img := b.meta.Image()
	for _, res := range req.Resources {
		rr := kmsg.NewDescribeConfigsResponseResource()
		rr.ResourceType, rr.ResourceName = res.ResourceType, res.ResourceName
		fail := func(err *kerr.Error, msg string) {
			rr.ErrorCode = err.Code
			rr.ErrorMessage = &msg
		}
		switch controller.ConfigResourceType(res.ResourceType) {
		case controller.ConfigResourceTopic:
			if msg := controller.TopicNameError(res.ResourceName); msg != "" {
				fail(kerr.InvalidTopicException, msg)
			} else if img.Topics[res.ResourceName] == nil {
				fail(kerr.UnknownTopicOrPartition, "The topic '"+res.ResourceName+"' does not exist.")
			} else {
				rr.Configs = b.opts.Configs.DescribeTopic(img, res.ResourceName, res.ConfigNames, req.IncludeSynonyms, req.IncludeDocumentation)
			}
		case controller.ConfigResourceBroker:
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
		case controller.ConfigResourceBrokerLogger:
			if res.ResourceName != strconv.Itoa(int(b.opts.NodeID)) {
				fail(kerr.InvalidRequest, fmt.Sprintf("Unexpected broker id, expected %d but received %s", b.opts.NodeID, res.ResourceName))
				break
			}
			rr.Configs = b.describeLoggers(res.ConfigNames)
		default:
			fail(kerr.InvalidRequest, fmt.Sprintf("Unsupported resource type %d", res.ResourceType))
		}
		if rr.Configs == nil {
			rr.Configs = []kmsg.DescribeConfigsResponseResourceConfig{}
		}
		resp.Resources = append(resp.Resources, rr)
	}
	r.respond(resp)
}

// describeLoggers reports logger levels for BROKER_LOGGER resources: Gregor
// has one logger hierarchy, reported as Kafka's root logger.
func (b *Broker) describeLoggers(names []string) []kmsg.DescribeConfigsResponseResourceConfig {
	level := "INFO"
	if b.log.Enabled(context.Background(), -4) {
		level = "DEBUG"
	}
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = "root"
	c.Value = &level
	c.Source = 6 // DYNAMIC_BROKER_LOGGER_CONFIG
	c.ConfigType = 2
	if names != nil {
		found := false
		for _, n := range names {
			found = found || n == "root"
		}
		if !found {
			return nil
		}
	}
	return []kmsg.DescribeConfigsResponseResourceConfig{c}
}

func (b *Broker) handleAlterConfigs(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, r *request) {
	b.forwardRequest(ctx, r, nil)
}
