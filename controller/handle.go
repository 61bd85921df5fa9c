package controller

import (
	"context"
	"fmt"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Handle answers one metadata-changing request as the active controller:
// the requests a broker sends it (forwards from clients, and its own
// registration, heartbeats, producer-id allocations and partition
// leaders' ISR changes). Each is answered
// only after its change is committed. In a combined node the broker calls
// it directly while this controller is the active one; a broker elsewhere
// reaches it through this node's controller listener (directly, or in an
// Envelope carrying a client's request).
func (c *Controller) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	decide, ok := decisions[kmsg.Key(req.Key())]
	if !ok {
		return nil, fmt.Errorf("the controller does not handle %s", kmsg.NameForKey(req.Key()))
	}
	return decide(c, ctx, req)
}

// decisions are the requests Handle answers, by key: each decision's file
// registers its method (decides) at package initialisation; the map is
// read-only afterwards.
var decisions = map[kmsg.Key]func(c *Controller, ctx context.Context, req kmsg.Request) (kmsg.Response, error){}

// Decides reports whether Handle answers requests with key.
func Decides(key int16) bool {
	_, ok := decisions[kmsg.Key(key)]
	return ok
}

// decides registers method as the answer to its request type.
func decides[Req kmsg.Request, R any, P interface {
	*R
	kmsg.Response
}](method func(c *Controller, ctx context.Context, req Req) P) {
	var zero Req
	key := kmsg.Key(zero.Key())
	if _, dup := decisions[key]; dup {
		panic(fmt.Sprintf("the controller decides %s twice", key.Name()))
	}
	decisions[key] = func(c *Controller, ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
		return answered(method(c, ctx, req.(Req)))
	}
}

// answered turns a typed nil answer into metadata.ErrNoAnswer.
func answered[R any, P interface {
	*R
	kmsg.Response
}](resp P) (kmsg.Response, error) {
	if resp == nil {
		return nil, metadata.ErrNoAnswer
	}
	return resp, nil
}
