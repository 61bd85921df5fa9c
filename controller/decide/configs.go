package decide

// IncrementalAlterConfigs and AlterConfigs: Kafka's request checks (the
// broker-side preprocessing and ControllerApis), then
// ConfigurationControlManager's per-resource semantics. The two APIs differ
// only in how they read a resource's change (configAPI); one decision
// (configAPI.decide) does the rest for both. The records of all resources
// that pass commit together; each resource gets its own result, or the
// commit error when they do not commit.

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

// checkResourceType applies the request-level checks Kafka makes before
// the controller sees a resource. It returns nil if the resource may
// proceed.
func checkResourceType(t int8) *Error {
	switch metadata.ConfigResourceType(t) {
	case metadata.ConfigResourceTopic, metadata.ConfigResourceBroker, metadata.ConfigResourceGroup, metadata.ConfigResourceClientMetrics:
		return nil
	case metadata.ConfigResourceBrokerLogger:
		return NewError(kerr.InvalidRequest, "BROKER_LOGGER resources are altered by the broker that owns the loggers, not by the controller.")
	}
	return NewError(kerr.UnsupportedVersion, "Unknown resource type %d.", t)
}

// admitResources reports which resources of an alter request may be
// processed: a resource named more than once is answered once with
// INVALID_REQUEST, an unsupported type with its error, through reject.
func admitResources(resources []metadata.ConfigResource, reject func(metadata.ConfigResource, *Error)) []bool {
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
				reject(r, NewError(kerr.InvalidRequest, "Each resource must appear at most once."))
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

func configResourceOf(t kmsg.ConfigResourceType, name string) metadata.ConfigResource {
	return metadata.ConfigResource{Type: metadata.ConfigResourceType(t), Name: name}
}

// configAPI is how one of the two alter APIs reads a requested resource:
// its name, and its change (or the error that refuses it). Everything
// after that reading is shared.
type configAPI[Res any] struct {
	resource func(Res) metadata.ConfigResource
	change   func(Res) (configChange, *Error)
}

var incrementalConfigs = configAPI[kmsg.IncrementalAlterConfigsRequestResource]{
	resource: func(r kmsg.IncrementalAlterConfigsRequestResource) metadata.ConfigResource {
		return configResourceOf(r.ResourceType, r.ResourceName)
	},
	change: func(r kmsg.IncrementalAlterConfigsRequestResource) (configChange, *Error) {
		ch := configChange{res: configResourceOf(r.ResourceType, r.ResourceName), ops: map[string]configOp{}}
		for _, cfg := range r.Configs {
			op := int8(cfg.Op)
			if _, dup := ch.ops[cfg.Name]; dup {
				return ch, NewError(kerr.InvalidRequest, "Error due to duplicate config keys")
			}
			if op < opSet || op > opSubtract {
				return ch, NewError(kerr.InvalidRequest, "Unknown operations type %d", op)
			}
			if op != opDelete && cfg.Value == nil {
				return ch, NewError(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
			}
			ch.ops[cfg.Name] = configOp{op: op, value: cfg.Value}
			ch.keys = append(ch.keys, cfg.Name)
		}
		return ch, nil
	},
}

var legacyConfigs = configAPI[kmsg.AlterConfigsRequestResource]{
	resource: func(r kmsg.AlterConfigsRequestResource) metadata.ConfigResource {
		return configResourceOf(r.ResourceType, r.ResourceName)
	},
	change: func(r kmsg.AlterConfigsRequestResource) (configChange, *Error) {
		ch := configChange{res: configResourceOf(r.ResourceType, r.ResourceName), legacy: map[string]string{}}
		for _, cfg := range r.Configs {
			if _, dup := ch.legacy[cfg.Name]; dup {
				return ch, NewError(kerr.InvalidRequest, "Error due to duplicate config keys")
			}
			if cfg.Value == nil {
				return ch, NewError(kerr.InvalidRequest, "Null value not supported for : %s", cfg.Name)
			}
			ch.legacy[cfg.Name] = *cfg.Value
			ch.keys = append(ch.keys, cfg.Name)
		}
		return ch, nil
	},
}

// IncrementalAlterConfigs decides an IncrementalAlterConfigs request.
func (e *Env) IncrementalAlterConfigs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.IncrementalAlterConfigsRequest) ([]metadata.Record, *kmsg.IncrementalAlterConfigsResponse) {
	recs, results := incrementalConfigs.decide(e, img, req.Resources, req.ValidateOnly)
	return recs, incrementalAlterConfigsAnswer(req, results)
}

// IncrementalAlterConfigsFailed answers every resource of the request with
// e.
func IncrementalAlterConfigsFailed(req *kmsg.IncrementalAlterConfigsRequest, e *Error) *kmsg.IncrementalAlterConfigsResponse {
	return incrementalAlterConfigsAnswer(req, incrementalConfigs.failed(req.Resources, e))
}

func incrementalAlterConfigsAnswer(req *kmsg.IncrementalAlterConfigsRequest, results []configResult) *kmsg.IncrementalAlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, res := range results {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(res.res.Type), res.res.Name
		r.ErrorCode, r.ErrorMessage = res.err.Code(), res.err.Message()
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

// AlterConfigs decides an AlterConfigs request.
func (e *Env) AlterConfigs(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AlterConfigsRequest) ([]metadata.Record, *kmsg.AlterConfigsResponse) {
	recs, results := legacyConfigs.decide(e, img, req.Resources, req.ValidateOnly)
	return recs, alterConfigsAnswer(req, results)
}

// AlterConfigsFailed answers every resource of the request with e.
func AlterConfigsFailed(req *kmsg.AlterConfigsRequest, e *Error) *kmsg.AlterConfigsResponse {
	return alterConfigsAnswer(req, legacyConfigs.failed(req.Resources, e))
}

func alterConfigsAnswer(req *kmsg.AlterConfigsRequest, results []configResult) *kmsg.AlterConfigsResponse {
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	for _, res := range results {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = kmsg.ConfigResourceType(res.res.Type), res.res.Name
		r.ErrorCode, r.ErrorMessage = res.err.Code(), res.err.Message()
		resp.Resources = append(resp.Resources, r)
	}
	return resp
}

type configResult struct {
	res metadata.ConfigResource
	err *Error
}

// decide is both alter APIs' decision: the resources admitted
// (admitResources), each one's change as the API reads it, then the
// changes decided together (runConfigChanges). The results come as the
// broker answered them: the resources refused on admission, then those
// whose change could not be read, then the changes, each group in request
// order.
func (api configAPI[Res]) decide(e *Env, img *metadata.Image, requested []Res, validateOnly bool) ([]metadata.Record, []configResult) {
	var results []configResult
	reject := func(res metadata.ConfigResource, err *Error) {
		results = append(results, configResult{res: res, err: err})
	}
	resources := make([]metadata.ConfigResource, len(requested))
	for i, r := range requested {
		resources[i] = api.resource(r)
	}
	admitted := admitResources(resources, reject)
	var changes []configChange
	for i, r := range requested {
		if !admitted[i] {
			continue
		}
		ch, err := api.change(r)
		if err != nil {
			reject(resources[i], err)
			continue
		}
		changes = append(changes, ch)
	}
	recs, changed := e.runConfigChanges(img, changes, validateOnly)
	return recs, append(results, changed...)
}

// failed answers every requested resource, duplicates included, with e.
func (api configAPI[Res]) failed(requested []Res, e *Error) []configResult {
	results := make([]configResult, len(requested))
	for i, r := range requested {
		results[i] = configResult{res: api.resource(r), err: e}
	}
	return results
}

// IncrementalAlterConfigsEnabledUncleanElection reports whether resp,
// the committed answer to req, turned unclean.leader.election.enable on
// somewhere (never for a validate-only request).
func IncrementalAlterConfigsEnabledUncleanElection(req *kmsg.IncrementalAlterConfigsRequest, resp *kmsg.IncrementalAlterConfigsResponse) bool {
	if req.ValidateOnly {
		return false
	}
	altered := map[metadata.ConfigResource]bool{}
	for _, r := range resp.Resources {
		altered[configResourceOf(r.ResourceType, r.ResourceName)] = r.ErrorCode == 0
	}
	return incrementalConfigs.enablesUncleanElection(req.Resources, altered)
}

// AlterConfigsEnabledUncleanElection reports whether resp, the committed
// answer to req, turned unclean.leader.election.enable on somewhere (never
// for a validate-only request).
func AlterConfigsEnabledUncleanElection(req *kmsg.AlterConfigsRequest, resp *kmsg.AlterConfigsResponse) bool {
	if req.ValidateOnly {
		return false
	}
	altered := map[metadata.ConfigResource]bool{}
	for _, r := range resp.Resources {
		altered[configResourceOf(r.ResourceType, r.ResourceName)] = r.ErrorCode == 0
	}
	return legacyConfigs.enablesUncleanElection(req.Resources, altered)
}

// enablesUncleanElection reports whether the requested changes the answer
// says were made (altered) turn unclean.leader.election.enable on.
func (api configAPI[Res]) enablesUncleanElection(requested []Res, altered map[metadata.ConfigResource]bool) bool {
	var set []metadata.Record
	for _, r := range requested {
		if ch, err := api.change(r); err == nil && altered[ch.res] {
			set = append(set, ch.valuesSet()...)
		}
	}
	return isUncleanElectionEnabling(set)
}

// valuesSet are the records of the values ch sets outright, whether or not
// they differ from the current ones.
func (ch configChange) valuesSet() []metadata.Record {
	var recs []metadata.Record
	for _, key := range ch.keys {
		var value *string
		if ch.legacy != nil {
			value = strPtr(ch.legacy[key])
		} else if op := ch.ops[key]; op.op == opSet {
			value = op.value
		} else {
			continue
		}
		recs = append(recs, &metadata.ConfigRecord{ResourceType: ch.res.Type, ResourceName: ch.res.Name, Name: key, Value: value})
	}
	return recs
}

// runConfigChanges decides changes together against img: each change's
// records, or the error that refuses it, then the ELR clearing that the
// min.insync.replicas changes among them need. An operation over
// maxRecordsPerOp records is refused for every change that passed.
func (e *Env) runConfigChanges(img *metadata.Image, changes []configChange, validateOnly bool) ([]metadata.Record, []configResult) {
	var recs []metadata.Record
	var out []configResult
	for _, ch := range changes {
		var more []metadata.Record
		var err *Error
		if ch.legacy != nil {
			more, err = e.legacyAlterConfig(img, ch)
		} else {
			more, err = e.incrementalAlterConfig(img, ch)
		}
		if err == nil {
			recs = append(recs, more...)
		}
		out = append(out, configResult{res: ch.res, err: err})
	}
	recs = append(recs, e.clearELRRecords(img, recs)...)
	if len(recs) > maxRecordsPerOp {
		for i := range out {
			if out[i].err == nil {
				out[i].err = NewError(kerr.PolicyViolation, excessivelyLargeOperation)
			}
		}
		return nil, out
	}
	if validateOnly {
		return nil, out
	}
	return recs, out
}

func (e *Env) incrementalAlterConfig(img *metadata.Image, ch configChange) ([]metadata.Record, *Error) {
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
			if e.Schema == nil || !e.Schema.IsList(ch.res.Type, key) {
				return nil, NewError(kerr.InvalidConfig, "Can't %s to key %s because its type is not LIST.", opName(op.op), key)
			}
			parts := e.listParts(ch.res.Type, key, curPtr)
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
	if err := e.validateConfigs(img, ch.res, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// listParts is the current list value of key: its override, or else its
// default, split on commas without empty elements.
func (e *Env) listParts(t metadata.ConfigResourceType, key string, current *string) []string {
	var v string
	if current != nil {
		v = *current
	} else if d, ok := e.Schema.Default(t, key); ok {
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

func (e *Env) legacyAlterConfig(img *metadata.Image, ch configChange) ([]metadata.Record, *Error) {
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
	if err := e.validateConfigs(img, ch.res, recs); err != nil {
		return nil, err
	}
	return recs, nil
}

// validateConfigs checks the resource's overrides after recs, then that the
// resource exists (Kafka's order).
func (e *Env) validateConfigs(img *metadata.Image, res metadata.ConfigResource, recs []metadata.Record) *Error {
	if err := checkMinISRChange(img, recs); err != nil {
		return err
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
	if e.Schema != nil {
		err := e.Schema.Validate(res.Type, res.Name, after)
		if cs, ok := e.Schema.(metadata.ConfigChangeSchema); ok && err == nil {
			err = cs.ValidateChange(res.Type, res.Name, img.Configs[res], after)
		}
		if err != nil {
			var ke *kerr.Error
			if errors.As(err, &ke) {
				return &Error{err: ke, msg: err.Error()}
			}
			// The broker's schema says its code this way (broker/config's
			// ValidationError), as metadata.ConfigSchema allows.
			var coded interface{ ErrorCode() int16 }
			if errors.As(err, &coded) {
				if ke, ok := kerr.ErrorForCode(coded.ErrorCode()).(*kerr.Error); ok {
					return &Error{err: ke, msg: err.Error()}
				}
			}
			return NewError(kerr.InvalidConfig, "%s", err.Error())
		}
	}
	return e.checkConfigResourceExists(img, res)
}

func (e *Env) checkConfigResourceExists(img *metadata.Image, res metadata.ConfigResource) *Error {
	switch res.Type {
	case metadata.ConfigResourceBroker:
		if res.Name == "" {
			return nil
		}
		id, err := strconv.ParseInt(res.Name, 10, 32)
		if err != nil {
			return NewError(kerr.InvalidRequest, "Invalid broker name %s", res.Name)
		}
		if img.Brokers[int32(id)] != nil {
			return nil
		}
		for _, v := range img.Voters {
			if v.ID == int32(id) {
				return nil
			}
		}
		return NewError(kerr.BrokerIDNotRegistered, "No node with id %d found.", id)
	case metadata.ConfigResourceTopic:
		if img.Topic(res.Name) == nil {
			return NewError(kerr.UnknownTopicOrPartition, "The topic '%s' does not exist.", res.Name)
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
