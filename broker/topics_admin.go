package broker

// CreateTopics (key 19) v2-7, DeleteTopics (key 20) v1-6 and
// CreatePartitions (key 37) v0-3.
//
// These change metadata, so they go to the controller (in combined mode
// the local one; the request and response types are Kafka's, so a broker
// can forward them unchanged once controllers are remote). The controller
// validates, commits and answers after the change is applied. The broker
// adds what only it knows: CreateTopics v5+ per-topic configs, and
// DeleteTopics' TOPIC_DELETION_DISABLED when delete.topic.enable=false.
// The controller's answer is awaited off the connection's reader goroutine.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleCreateTopics(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.CreateTopicsRequest)
	r.goAsync(func() {
		resp := b.ctrl.CreateTopics(ctx, req)
		if resp == nil {
			r.closeConnection() // shutting down
			return
		}
		img := b.ctrl.Image()
		b.replicas.WaitApplied(ctx, img.Offset, topicOpenWait)
		if r.version() >= 5 {
			for i := range resp.Topics {
				t := &resp.Topics[i]
				if t.ErrorCode != 0 {
					continue
				}
				overrides := requestedConfigs(req, t.Topic)
				if topic := img.Topics[t.Topic]; topic != nil {
					overrides = img.Configs[topicResource(t.Topic)]
				}
				t.Configs = b.opts.Configs.CreateTopicConfigs(img, t.Topic, overrides)
			}
		}
		r.respond(resp)
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

func (b *Broker) handleDeleteTopics(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.DeleteTopicsRequest)
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
		r.respond(resp)
		return
	}
	r.goAsync(func() {
		if resp := b.ctrl.DeleteTopics(ctx, req); resp != nil {
			r.respond(resp)
		} else {
			r.closeConnection()
		}
	})
}

func (b *Broker) handleCreatePartitions(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.CreatePartitionsRequest)
	r.goAsync(func() {
		if resp := b.ctrl.CreatePartitions(ctx, req); resp != nil {
			b.replicas.WaitApplied(ctx, b.ctrl.Image().Offset, topicOpenWait)
			r.respond(resp)
		} else {
			r.closeConnection()
		}
	})
}
