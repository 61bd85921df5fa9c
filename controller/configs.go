package controller

// IncrementalAlterConfigs and AlterConfigs: Kafka's request checks (the
// broker-side preprocessing and ControllerApis), then
// ConfigurationControlManager's per-resource semantics. The records of all
// resources that pass commit together; each resource gets its own result.

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Incremental config operations (kmsg IncrementalAlterConfigsRequest
// OpType).
const (
	opSet      int8 = 0
	opDelete   int8 = 1
	opAppend   int8 = 2
	opSubtract int8 = 3

	configResourceClientMetrics metadata.ConfigResourceType = 16
)

func opName(op int8) string {
	switch op {
	case opSet:
		return "SET"
	case opDelete:
		return "DELETE"
	case opAppend:
		return "APPEND"
	case opSubtract:
		return "SUBTRACT"
	}
	return strconv.Itoa(int(op))
}

type configOp struct {
	op    int8
	value *string
}

type configChange struct {
	res metadata.ConfigResource
	// incremental: key -> operation; legacy: the full new set.
	ops    map[string]configOp
	keys   []string // request order
	legacy map[string]string
}

// checkResource applies the request-level checks Kafka makes before the
// controller sees a resource. It returns nil if the resource may proceed.
func checkResourceType(t int8) *apiError {
	switch metadata.ConfigResourceType(t) {
	case metadata.ConfigResourceTopic, metadata.ConfigResourceBroker, metadata.ConfigResourceGroup, configResourceClientMetrics:
		return nil
	case metadata.ConfigResourceBrokerLogger:
		return newAPIError(kerr.InvalidRequest, "BROKER_LOGGER resources are altered by the broker that owns the loggers, not by the controller.")
	}
	return newAPIError(kerr.UnsupportedVersion, "Unknown resource type %d.", t)
}

// admitResources reports which resources of an alter request may be
// processed: a resource named more than once is answered once with
// INVALID_REQUEST, an unsupported type with its error, through reject.
func admitResources(resources []metadata.ConfigResource, reject func(metadata.ConfigResource, *apiError)) []bool {
	seen := map[metadata.ConfigResource]int{}
	for _, r := range resources {
		seen[r]++
	}
	reported := map[metadata.ConfigResource]bool{}
	admitted := make([]bool, len(resources))
	for i, r := range resources {
		if seen[r] > 1 {
			if !reported[r] {
				reported[r] = true
				reject(r, newAPIError(kerr.InvalidRequest, "Each resource must appear at most once."))
			}
			continue
		}
		if e := checkResourceType(int8(r.Type)); e != nil {
			reject(r, e)
			continue
		}
		admitted[i] = true
	}
	return admitted
}

// IncrementalAlterConfigs changes configs key by key.
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	add := func(res metadata.ConfigResource, e *apiError) {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(res.Type), res.Name
		r.ErrorCode, r.ErrorMessage = e.code(), e.message()
		resp.Resources = append(resp.Resources, r)
	}
	resource := func(r kmsg.IncrementalAlterConfigsRequestResource) metadata.ConfigResource {
		return metadata.ConfigResource{Type: metadata.ConfigResourceType(r.ResourceType), Name: r.ResourceName}
	}
	alterConfigs(ctx, c, req.Resources, resource, func(r kmsg.IncrementalAlterConfigsRequestResource) (configChange, *apiError) {
		ch := configChange{res: resource(r), ops: map[string]configOp{}}
		for _, cfg := range r.Configs {
			op := int8(cfg.Op)
			if _, dup := ch.ops[cfg.Name]; dup {
				return ch, newAPIError(kerr.InvalidRequest, "Error due to duplicate config keys")
			}
			if op < opSet || op > opSubtract {
				return ch, newAPIError(kerr.InvalidRequest, "Unknown operations type %d", op)
			}
			if op != opDelete && cfg.Value == nil {
				return ch, newAPIError(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
			}
			ch.ops[cfg.Name] = configOp{op: op, value: cfg.Value}
			ch.keys = append(ch.keys, cfg.Name)
		}
		return ch, nil
	}, req.ValidateOnly, add)
	return resp
}

// AlterConfigs replaces the whole config set of each resource.
func (c *Controller) AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	add := func(res metadata.ConfigResource, e *apiError) {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(res.Type), res.Name
		r.ErrorCode, r.ErrorMessage = e.code(), e.message()
		resp.Resources = append(resp.Resources, r)
	}
	resource := func(r kmsg.AlterConfigsRequestResource) metadata.ConfigResource {
		return metadata.ConfigResource{Type: metadata.ConfigResourceType(r.ResourceType), Name: r.ResourceName}
	}
	alterConfigs(ctx, c, req.Resources, resource, func(r kmsg.AlterConfigsRequestResource) (configChange, *apiError) {
		ch := configChange{res: resource(r), legacy: map[string]string{}}
		for _, cfg := range r.Configs {
			if _, dup := ch.legacy[cfg.Name]; dup {
				return ch, newAPIError(kerr.InvalidRequest, "Error due to duplicate config keys")
			}
			if cfg.Value == nil {
				return ch, newAPIError(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
			}
			ch.legacy[cfg.Name] = *cfg.Value
			ch.keys = append(ch.keys, cfg.Name)
		}
		return ch, nil
	}, req.ValidateOnly, add)
	return resp
}

// alterConfigs is both alter APIs' decision: the resources admitted
// (admitResources), each one's change as its API reads it (change, or the
// error that refuses it), then the changes run together.
func alterConfigs[Res any](ctx context.Context, c *Controller, requested []Res, resource func(Res) metadata.ConfigResource,
	change func(Res) (configChange, *apiError), validateOnly bool, add func(metadata.ConfigResource, *apiError)) {
	resources := make([]metadata.ConfigResource, len(requested))
	for i, r := range requested {
		resources[i] = resource(r)
	}
	admitted := admitResources(resources, add)
	var changes []configChange
	for i, r := range requested {
		if !admitted[i] {
			continue
		}
		ch, e := change(r)
		if e != nil {
			add(resources[i], e)
			continue
		}
		changes = append(changes, ch)
	}
	c.runConfigChanges(ctx, changes, validateOnly, add)
}

type configResult struct {
	res metadata.ConfigResource
	err *apiError
}

func (c *Controller) runConfigChanges(ctx context.Context, changes []configChange, validateOnly bool, add func(metadata.ConfigResource, *apiError)) {
	if len(changes) == 0 {
		return
	}
	results, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, []configResult) {
		var recs []metadata.Record
		var out []configResult
		for _, ch := range changes {
			var more []metadata.Record
			var e *apiError
			if ch.legacy != nil {
				more, e = c.legacyAlterConfig(img, ch)
			} else {
				more, e = c.incrementalAlterConfig(img, ch)
			}
			if e == nil {
				recs = append(recs, more...)
			}
			out = append(out, configResult{res: ch.res, err: e})
		}
		recs = append(recs, c.clearELRRecords(img, recs)...)
		if len(recs) > maxRecordsPerOp {
			for i := range out {
				if out[i].err == nil {
					out[i].err = newAPIError(kerr.PolicyViolation, excessivelyLargeOperation)
				}
			}
			return nil, out
		}
		if validateOnly {
			return nil, out
		}
		if isUncleanElectionEnabling(recs) {
			c.uncleanCheck.runNow(c.now())
		}
		return recs, out
	})
	if !ok {
		for _, ch := range changes {
			add(ch.res, commitError(err))
		}
		return
	}
	for _, r := range results {
		add(r.res, r.err)
	}
}

func (c *env) incrementalAlterConfig(img *metadata.Image, ch configChange) ([]metadata.Record, *apiError) {
	current := img.Configs[ch.res]
	var recs []metadata.Record
	for _, key := range ch.keys {
		op := ch.ops[key]
		cur, had := current[key]
		var curPtr *string
		if had {
			curPtr = &cur
		}
		newValue := curPtr
		switch op.op {
		case opSet:
			newValue = op.value
		case opDelete:
			newValue = nil
		case opAppend, opSubtract:
			if c.schema == nil || !c.schema.IsList(ch.res.Type, key) {
				return nil, newAPIError(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", opName(op.op), key)
			}
			parts := c.listParts(ch.res.Type, key, curPtr)
			for _, v := range strings.Split(*op.value, ",") {
				if op.op == opAppend {
					if !slices.Contains(parts, v) {
						parts = append(parts, v)
					}
				} else if i := slices.Index(parts, v); i >= 0 {
					parts = slices.Delete(parts, i, i+1)
				}
			}
			joined := strings.Join(parts, ",")
			newValue = &joined
		}
		if !equalStringPtr(curPtr, newValue) || ch.res.Type == metadata.ConfigResourceBroker {
			recs = append(recs, &metadata.ConfigRecord{ResourceType: ch.res.Type, ResourceName: ch.res.Name, Name: key, Value: newValue})
		}
	}
	if e := c.validateConfigs(img, ch.res, recs); e != nil {
		return nil, e
	}
	return recs, nil
}

// listParts is the current list value of key: its override, or else its
// default, split on commas without empty elements.
func (c *env) listParts(t metadata.ConfigResourceType, key string, current *string) []string {
	var v string
	if current != nil {
		v = *current
	} else if d, ok := c.schema.Default(t, key); ok {
		v = d
	} else {
		return nil
	}
	var parts []string
	for _, p := range strings.Split(v, ",") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	return parts
}

func (c *env) legacyAlterConfig(img *metadata.Image, ch configChange) ([]metadata.Record, *apiError) {
	current := img.Configs[ch.res]
	var recs []metadata.Record
	for _, key := range ch.keys {
		v := ch.legacy[key]
		cur, had := current[key]
		if !had || cur != v || ch.res.Type == metadata.ConfigResourceBroker {
			recs = append(recs, &metadata.ConfigRecord{ResourceType: ch.res.Type, ResourceName: ch.res.Name, Name: key, Value: strPtr(v)})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(current)) {
		if _, keep := ch.legacy[key]; !keep {
			recs = append(recs, &metadata.ConfigRecord{ResourceType: ch.res.Type, ResourceName: ch.res.Name, Name: key, Value: nil})
		}
	}
	if e := c.validateConfigs(img, ch.res, recs); e != nil {
		return nil, e
	}
	return recs, nil
}

// validateConfigs checks the resource's overrides after recs, then that the
// resource exists (Kafka's order).
func (c *env) validateConfigs(img *metadata.Image, res metadata.ConfigResource, recs []metadata.Record) *apiError {
	if e := checkMinISRChange(img, recs); e != nil {
		return e
	}
	after := maps.Clone(img.Configs[res])
	if after == nil {
		after = map[string]string{}
	}
	for _, r := range recs {
		cr := r.(*metadata.ConfigRecord)
		if cr.Value == nil {
			delete(after, cr.Name)
		} else {
			after[cr.Name] = *cr.Value
		}
	}
	if c.schema != nil {
		if err := c.schema.Validate(res.Type, res.Name, after); err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				return &apiError{err: ke, msg: err.Error()}
			}
			return newAPIError(kerr.InvalidConfig, "%s", err.Error())
		}
	}
	return c.checkConfigResourceExists(img, res)
}

func (c *env) checkConfigResourceExists(img *metadata.Image, res metadata.ConfigResource) *apiError {
	switch res.Type {
	case metadata.ConfigResourceBroker:
		if res.Name == "" {
			return nil
		}
		id, err := strconv.ParseInt(res.Name, 10, 32)
		if err != nil {
			return newAPIError(kerr.InvalidRequest, "Invalid broker name %s", res.Name)
		}
		if img.Brokers[int32(id)] != nil {
			return nil
		}
		for _, v := range img.Voters {
			if v.ID == int32(id) {
				return nil
			}
		}
		return newAPIError(kerr.BrokerIDNotRegistered, "No node with id %d found.", id)
	case metadata.ConfigResourceTopic:
		if img.Topics[res.Name] == nil {
			return newAPIError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", res.Name)
		}
	}
	return nil
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

func init() {
	decides((*Controller).AlterConfigs)
	decides((*Controller).IncrementalAlterConfigs)
}
