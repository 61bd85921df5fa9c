package broker

// The broker's own checks of an AlterConfigs or IncrementalAlterConfigs
// before it forwards the request to the controller (Kafka's
// ConfigAdminManager.preprocess for BROKER resources). A BROKER resource
// names the cluster default ("") or this broker: another id is
// INVALID_REQUEST ("Unexpected broker id, ..."), as the admin client sends
// a broker's resource to that broker. The dynamic configs this broker
// would end up with must pass Options.ValidateBrokerConfigs: what only
// the broker itself can vouch for, such as a new keystore for one of its
// SSL listeners (it must load, and keep the certificate's subject and
// names). A resource refused here is answered here with INVALID_REQUEST
// and the check's message; the others are forwarded, and the answers are
// put back together in the request's order. BROKER_LOGGER resources are
// answered here too (loggers.go). Requests on a controller listener go to
// the controller as they are (Kafka's ControllerApis does no such
// preprocessing) but for their BROKER_LOGGER resources, which Kafka's
// controller applies to its own loggers.

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// resourceKey names a config resource of a request.
type resourceKey struct {
	typ  kmsg.ConfigResourceType
	name string
}

// refusal is a resource answered before forwarding: refused (a BROKER
// resource the broker's checks fail, INVALID_REQUEST), or a BROKER_LOGGER
// resource, which the broker answers itself (loggers.go). code is the
// answer's error, 0 for none.
type refusal struct {
	resourceKey
	code int16
	msg  *string
}

// checkBrokerResource checks one BROKER resource whose dynamic configs
// would become next(current) (computed only for this broker's own).
func (b *Broker) checkBrokerResource(name string, next func(current map[string]string) map[string]string) string {
	if name == "" {
		// Cluster defaults: the controller refuses listener keys there.
		return ""
	}
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil {
		return "Node id must be an integer, but it is: " + name
	}
	if int32(id) != b.opts.NodeID {
		return "Unexpected broker id, expected " + strconv.Itoa(int(b.opts.NodeID)) + ", but received " + name
	}
	if b.opts.ValidateBrokerConfigs == nil {
		return ""
	}
	var current map[string]string
	if img := b.meta.Image(); img != nil {
		current = img.Configs[metadata.ConfigResource{Type: metadata.ConfigResourceBroker, Name: name}]
	}
	if err := b.opts.ValidateBrokerConfigs(next(current)); err != nil {
		// Kafka's DynamicBrokerConfig wraps every such failure so.
		return "Invalid value " + err.Error() + " for configuration Invalid dynamic configuration"
	}
	return ""
}

// refuseBrokerResources checks the BROKER resources among keys (next
// gives resource i's resulting configs) and returns the refused ones.
func (b *Broker) refuseBrokerResources(keys []resourceKey, next func(i int, current map[string]string) map[string]string) []refusal {
	var refused []refusal
	for i, k := range keys {
		if metadata.ConfigResourceType(k.typ) != metadata.ConfigResourceBroker {
			continue
		}
		if msg := b.checkBrokerResource(k.name, func(cur map[string]string) map[string]string { return next(i, cur) }); msg != "" {
			refused = append(refused, refusal{resourceKey: k, code: kerr.InvalidRequest.Code, msg: &msg})
		}
	}
	return refused
}

// mergeAnswers puts the refusals and the controller's answers back in the
// request's order.
func mergeAnswers[A any](order []resourceKey, refused []refusal, forwarded []A, key func(A) resourceKey, refuse func(refusal) A) []A {
	var out []A
	for _, k := range order {
		if i := slices.IndexFunc(refused, func(r refusal) bool { return r.resourceKey == k }); i >= 0 {
			out = append(out, refuse(refused[i]))
			continue
		}
		if i := slices.IndexFunc(forwarded, func(a A) bool { return key(a) == k }); i >= 0 {
			out = append(out, forwarded[i])
			forwarded = slices.Delete(forwarded, i, i+1)
		}
	}
	return out
}

// handleIncrementalAlterConfigs forwards after the broker's own checks.
func (b *Broker) handleIncrementalAlterConfigs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.IncrementalAlterConfigsRequest)
	alterConfigsAfterBrokerChecks(b, ctx, r, configAlteration[kmsg.IncrementalAlterConfigsRequestResource, kmsg.IncrementalAlterConfigsResponseResource]{
		resources: &req.Resources,
		key: func(res kmsg.IncrementalAlterConfigsRequestResource) resourceKey {
			return resourceKey{res.ResourceType, res.ResourceName}
		},
		next: func(res kmsg.IncrementalAlterConfigsRequestResource, current map[string]string) map[string]string {
			return applyIncremental(current, res.Configs)
		},
		loggers: func(order []resourceKey) []refusal {
			return b.incrementalLoggerAnswers(r, req, order)
		},
		answerKey: func(a kmsg.IncrementalAlterConfigsResponseResource) resourceKey {
			return resourceKey{a.ResourceType, a.ResourceName}
		},
		refused: func(f refusal) kmsg.IncrementalAlterConfigsResponseResource {
			a := kmsg.NewIncrementalAlterConfigsResponseResource()
			a.ResourceType, a.ResourceName, a.ErrorCode, a.ErrorMessage = f.typ, f.name, f.code, f.msg
			return a
		},
		answers: func(resp kmsg.Response) *[]kmsg.IncrementalAlterConfigsResponseResource {
			return &resp.(*kmsg.IncrementalAlterConfigsResponse).Resources
		},
	})
}

// handleAlterConfigs forwards after the broker's own checks; a legacy
// AlterConfigs replaces the resource's whole set.
func (b *Broker) handleAlterConfigs(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.AlterConfigsRequest)
	alterConfigsAfterBrokerChecks(b, ctx, r, configAlteration[kmsg.AlterConfigsRequestResource, kmsg.AlterConfigsResponseResource]{
		resources: &req.Resources,
		key: func(res kmsg.AlterConfigsRequestResource) resourceKey {
			return resourceKey{res.ResourceType, res.ResourceName}
		},
		next: func(res kmsg.AlterConfigsRequestResource, _ map[string]string) map[string]string {
			next := map[string]string{}
			for _, c := range res.Configs {
				if c.Value != nil {
					next[c.Name] = *c.Value
				}
			}
			return next
		},
		loggers: func(order []resourceKey) []refusal {
			if r.ControllerListener() {
				// Kafka's controller refuses them itself.
				return nil
			}
			return legacyLoggerAnswers(order)
		},
		answerKey: func(a kmsg.AlterConfigsResponseResource) resourceKey {
			return resourceKey{a.ResourceType, a.ResourceName}
		},
		refused: func(f refusal) kmsg.AlterConfigsResponseResource {
			a := kmsg.NewAlterConfigsResponseResource()
			a.ResourceType, a.ResourceName, a.ErrorCode, a.ErrorMessage = f.typ, f.name, f.code, f.msg
			return a
		},
		answers: func(resp kmsg.Response) *[]kmsg.AlterConfigsResponseResource {
			return &resp.(*kmsg.AlterConfigsResponse).Resources
		},
	})
}

// configAlteration is what differs between AlterConfigs and
// IncrementalAlterConfigs on their way through the broker: the request's
// resources, the configs each would leave, and the answers' type.
type configAlteration[Res, Answer any] struct {
	resources *[]Res
	key       func(Res) resourceKey
	// next is a resource's dynamic configs once altered, from current.
	next func(res Res, current map[string]string) map[string]string
	// loggers answers the BROKER_LOGGER resources among the request's
	// (in order) that are answered here.
	loggers   func(order []resourceKey) []refusal
	answerKey func(Answer) resourceKey
	refused   func(refusal) Answer
	answers   func(resp kmsg.Response) *[]Answer
}

// alterConfigsAfterBrokerChecks forwards an alter request after this
// broker's own checks of its BROKER resources and its answers to the
// BROKER_LOGGER ones: those are taken out and answered beside the
// controller's answers, in the request's order. A controller listener
// forwards the others as they are.
func alterConfigsAfterBrokerChecks[Res, Answer any](b *Broker, ctx context.Context, r *network.Request, a configAlteration[Res, Answer]) {
	resources := *a.resources
	order := make([]resourceKey, len(resources))
	for i, res := range resources {
		order[i] = a.key(res)
	}
	var refused []refusal
	if !r.ControllerListener() {
		refused = b.refuseBrokerResources(order, func(i int, current map[string]string) map[string]string {
			return a.next(resources[i], current)
		})
	}
	refused = append(refused, a.loggers(order)...)
	if len(refused) == 0 {
		b.forwardRequest(ctx, r, nil)
		return
	}
	var kept []Res
	for i, res := range resources {
		if !slices.ContainsFunc(refused, func(f refusal) bool { return f.resourceKey == order[i] }) {
			kept = append(kept, res)
		}
	}
	merge := func(forwarded []Answer) []Answer {
		return mergeAnswers(order, refused, forwarded, a.answerKey, a.refused)
	}
	if len(kept) == 0 {
		resp := r.Body.ResponseKind()
		*a.answers(resp) = merge(nil)
		r.Respond(resp)
		return
	}
	*a.resources = kept
	b.forwardRequest(ctx, r, func(resp kmsg.Response) {
		answers := a.answers(resp)
		*answers = merge(*answers)
	})
}

// applyIncremental is current with the operations applied (SET, DELETE,
// and APPEND/SUBTRACT on comma-separated lists), as the controller will
// apply them; invalid operations are left for the controller to refuse.
func applyIncremental(current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) map[string]string {
	next := make(map[string]string, len(current)+len(ops))
	for k, v := range current {
		next[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value != nil {
				next[op.Name] = *op.Value
			}
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(next, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			if op.Value == nil {
				continue
			}
			var items []string
			if v, ok := next[op.Name]; ok && v != "" {
				items = strings.Split(v, ",")
			}
			for _, it := range strings.Split(*op.Value, ",") {
				it = strings.TrimSpace(it)
				has := slices.Contains(items, it)
				if op.Op == kmsg.IncrementalAlterConfigOpAppend && !has {
					items = append(items, it)
				} else if op.Op == kmsg.IncrementalAlterConfigOpSubtract && has {
					items = slices.DeleteFunc(items, func(s string) bool { return s == it })
				}
			}
			next[op.Name] = strings.Join(items, ",")
		}
	}
	return next
}

func init() {
	register(api{
		key: kmsg.AlterConfigs, min: 0, max: 2,
		listeners:           allListeners,
		authorizedAs:        "ALTER_CONFIGS on each resource",
		controllerAuthorize: authorizedBy(controllerFront.alterConfigs),
		errorAnswer: errorAnswerOf(func(r *kmsg.AlterConfigsRequest, out *kmsg.AlterConfigsResponse, e apiErr) {
			for _, res := range r.Resources {
				rr := kmsg.NewAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, e.code, e.msg
				out.Resources = append(out.Resources, rr)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleAlterConfigs,
	})
	register(api{
		key: kmsg.IncrementalAlterConfigs, min: 0, max: 1,
		listeners:           allListeners,
		authorizedAs:        "ALTER_CONFIGS on each resource",
		controllerAuthorize: authorizedBy(controllerFront.incrementalAlterConfigs),
		errorAnswer: errorAnswerOf(func(r *kmsg.IncrementalAlterConfigsRequest, out *kmsg.IncrementalAlterConfigsResponse, e apiErr) {
			for _, res := range r.Resources {
				rr := kmsg.NewIncrementalAlterConfigsResponseResource()
				rr.ResourceType, rr.ResourceName, rr.ErrorCode, rr.ErrorMessage = res.ResourceType, res.ResourceName, e.code, e.msg
				out.Resources = append(out.Resources, rr)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleIncrementalAlterConfigs,
	})
}
