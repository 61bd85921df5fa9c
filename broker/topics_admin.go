package broker

// CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6 and
// CreatePartitions (key 37) v0-3.
//
// These change metadata, so they go to the active controller
// (forwardRequest in broker.go: in combined mode the local one; the request
// and response types are Kafka's, so they are forwarded unchanged once
// controllers are remote). The controller validates, commits and answers
// after the change is applied. The broker adds what only it knows:
// CreateTopics v5+ per-topic configs, DeleteTopics' TOPIC_DELETION_DISABLED
// when delete.topic.enable=false, and for creations a wait until its
// replica manager has opened the new partitions, so that a produce right
// after does not meet NOT_LEADER_OR_FOLLOWER (Kafka answers once the
// controller has committed, before the partitions are ready). The wait is
// bounded by the request's timeout, counted from its arrival; past it the
// committed creation is answered as a success, as Kafka answers it, and
// the partitions appear shortly. The controller's answer is awaited off
// the connection's reader goroutine.

import (
	"context"
	"time"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleCreateTopics(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.CreateTopicsRequest)
	arrived := time.Now()
	b.forwardRequest(ctx, r, func(answer kmsg.Response) {
		resp := answer.(*kmsg.CreateTopicsResponse)
		// The image after the change: read once, when it is committed.
		img := b.meta.Image()
		created := false
		for _, t := range resp.Topics {
			created = created || t.ErrorCode == 0
		}
		if created && !req.ValidateOnly {
			b.awaitPartitions(ctx, img.Offset, arrived, req.TimeoutMillis)
		}
		if r.Version() < 5 {
			return
		}
		for i := range resp.Topics {
			t := &resp.Topics[i]
			if t.ErrorCode != 0 || t.ConfigErrorCode != 0 {
				// Not created, or created by a principal that may
				// not see its configs (controllerauth.go).
				continue
			}
			overrides := requestedConfigs(req, t.Topic)
			if topic := img.Topic(t.Topic); topic != nil {
				overrides = img.Configs[topicResource(t.Topic)]
			}
			t.Configs = b.opts.Configs.CreateTopicConfigs(img, t.Topic, overrides)
		}
	})
}

// requestedConfigs is the config overrides a CreateTopics request names
// for topic (used for validate-only answers).
func requestedConfigs(req *kmsg.CreateTopicsRequest, topic string) map[string]string {
	out := map[string]string{}
	for _, t := range req.Topics {
		if t.Topic != topic {
			continue
		}
		for _, c := range t.Configs {
			if c.Value != nil {
				out[c.Name] = *c.Value
			}
		}
	}
	return out
}

func (b *Broker) handleDeleteTopics(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DeleteTopicsRequest)
	if !b.opts.DeleteTopicEnable {
		resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			rt.ErrorCode = kerr.TopicDeletionDisabled.Code
			resp.Topics = append(resp.Topics, rt)
		}
		for _, name := range req.TopicNames {
			rt := kmsg.NewDeleteTopicsResponseTopic()
			n := name
			rt.Topic = &n
			rt.ErrorCode = kerr.TopicDeletionDisabled.Code
			resp.Topics = append(resp.Topics, rt)
		}
		r.Respond(resp)
		return
	}
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleCreatePartitions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.CreatePartitionsRequest)
	arrived := time.Now()
	b.forwardRequest(ctx, r, func(answer kmsg.Response) {
		created := false
		for _, t := range answer.(*kmsg.CreatePartitionsResponse).Topics {
			created = created || t.ErrorCode == 0
		}
		if created && !req.ValidateOnly {
			b.awaitPartitions(ctx, b.meta.Image().Offset, arrived, req.TimeoutMillis)
		}
	})
}

// awaitPartitions waits until this broker's partitions reflect the image
// at offset (the logs of the partitions it created here are open), for at
// most the request's timeout since it arrived (none: no wait).
func (b *Broker) awaitPartitions(ctx context.Context, offset int64, arrived time.Time, timeoutMs int32) {
	if timeoutMs <= 0 || b.replicas == nil {
		// No wait, or no partitions here (a controller-only node,
		// answering a broker's own request on its listener).
		return
	}
	ctx, cancel := context.WithDeadline(ctx, arrived.Add(time.Duration(timeoutMs)*time.Millisecond))
	defer cancel()
	if !b.replicas.WaitApplied(ctx, offset) {
		b.log.Info("answering a committed creation before its partitions are open here", "offset", offset, "timeoutMs", timeoutMs)
	}
}

func init() {
	register(api{
		key: kmsg.CreateTopics, min: 2, max: 7,
		listeners:           allListeners,
		authorizedAs:        "CREATE on the cluster or each topic, DESCRIBE_CONFIGS for its configs",
		controllerAuthorize: authorizedBy(controllerFront.createTopics),
		errorAnswer: errorAnswerOf(func(r *kmsg.CreateTopicsRequest, out *kmsg.CreateTopicsResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.NewCreateTopicsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, e.code, e.msg
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.CreateTopicsRequest).TimeoutMillis }},
		quota:   quotaTreatment{mutates: true, strictSince: 6},
		handle:  (*Broker).handleCreateTopics,
	})
	register(api{
		key: kmsg.DeleteTopics, min: 1, max: 6,
		listeners:           allListeners,
		authorizedAs:        "DESCRIBE and DELETE on each topic",
		controllerAuthorize: authorizedBy(controllerFront.deleteTopics),
		errorAnswer: errorAnswerOf(func(r *kmsg.DeleteTopicsRequest, out *kmsg.DeleteTopicsResponse, e apiErr) {
			for _, name := range r.TopicNames {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.ErrorCode = kmsg.StringPtr(name), e.code
				out.Topics = append(out.Topics, rt)
			}
			for _, t := range r.Topics {
				rt := kmsg.NewDeleteTopicsResponseTopic()
				rt.Topic, rt.TopicID, rt.ErrorCode = t.Topic, t.TopicID, e.code
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.DeleteTopicsRequest).TimeoutMillis }},
		quota:   quotaTreatment{mutates: true, strictSince: 5},
		handle:  (*Broker).handleDeleteTopics,
	})
	register(api{
		key: kmsg.CreatePartitions, min: 0, max: 3,
		listeners:           allListeners,
		authorizedAs:        "ALTER on each topic",
		controllerAuthorize: authorizedBy(controllerFront.createPartitions),
		errorAnswer: errorAnswerOf(func(r *kmsg.CreatePartitionsRequest, out *kmsg.CreatePartitionsResponse, e apiErr) {
			for _, t := range r.Topics {
				rt := kmsg.NewCreatePartitionsResponseTopic()
				rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, e.code, e.msg
				out.Topics = append(out.Topics, rt)
			}
		}),
		forward: &forwarding{timeoutMillis: func(req kmsg.Request) int32 { return req.(*kmsg.CreatePartitionsRequest).TimeoutMillis }},
		quota:   quotaTreatment{mutates: true, strictSince: 3},
		handle:  (*Broker).handleCreatePartitions,
	})
}
