package broker

// DescribeClientQuotas (key 48) v0-1 and AlterClientQuotas (key 49) v0-1
// (KIP-546).
//
// DescribeClientQuotas answers from the metadata image as Kafka's
// ClientQuotasImage.describe does: each filter component names an entity
// type (user, client-id or ip) and matches a name exactly, the default
// (MATCH_TYPE_DEFAULT), or any entity that has the type at all
// (MATCH_TYPE_SPECIFIED, which in KRaft includes the default); strict
// filters match only entities with no other types. A malformed filter is
// answered with Kafka's error for the whole request: INVALID_REQUEST, or
// UNSUPPORTED_VERSION for an unknown entity type. Served on the broker
// listeners only, as in Kafka.
//
// AlterClientQuotas changes metadata: it goes to the active controller
// (controller/quotas.go), from any broker and on the controller listener.
//
// Authorization: DescribeClientQuotas needs DESCRIBE_CONFIGS on the
// cluster (CLUSTER_AUTHORIZATION_FAILED for the whole request),
// AlterClientQuotas ALTER_CONFIGS, checked by the controller
// (controllerauth.go).

import (
	"context"
	"fmt"
	"slices"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleAlterClientQuotas(ctx context.Context, r *network.Request) {
	b.forwardRequest(ctx, r, nil)
}

func (b *Broker) handleDescribeClientQuotas(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.DescribeClientQuotasRequest)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationDescribeConfigs) {
		r.Respond(errorResponse(req, errCode(kerr.ClusterAuthorizationFailed)))
		return
	}
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	entries, err := describeClientQuotas(b.meta.Image(), req)
	if err != nil {
		resp.ErrorCode = err.Code
		msg := err.Message
		resp.ErrorMessage = &msg
		r.Respond(resp)
		return
	}
	resp.Entries = entries
	r.Respond(resp)
}

// quotaFilterError is a refused filter: Kafka's error and message.
type quotaFilterError struct {
	Code    int16
	Message string
}

// describeClientQuotas matches the image's quota entities against the
// request's filter.
func describeClientQuotas(img *metadata.Image, req *kmsg.DescribeClientQuotasRequest) ([]kmsg.DescribeClientQuotasResponseEntry, *quotaFilterError) {
	invalid := func(format string, args ...any) *quotaFilterError {
		return &quotaFilterError{Code: kerr.InvalidRequest.Code, Message: fmt.Sprintf(format, args...)}
	}
	exact := map[string]*string{}
	specified := map[string]bool{}
	for _, c := range req.Components {
		typ := c.EntityType
		_, inExact := exact[typ]
		switch {
		case typ == "":
			return nil, invalid("Invalid empty entity type.")
		case inExact || specified[typ]:
			return nil, invalid("Entity type %s cannot appear more than once in the filter.", typ)
		case typ != metadata.QuotaEntityIP && typ != metadata.QuotaEntityUser && typ != metadata.QuotaEntityClientID:
			return nil, &quotaFilterError{Code: kerr.UnsupportedVersion.Code, Message: "Unsupported entity type " + typ}
		}
		switch c.MatchType {
		case kmsg.QuotasMatchTypeExact:
			if c.Match == nil {
				return nil, invalid("Request specified MATCH_TYPE_EXACT, but set match string to null.")
			}
			exact[typ] = c.Match
		case kmsg.QuotasMatchTypeDefault:
			if c.Match != nil {
				return nil, invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
			}
			exact[typ] = nil
		case kmsg.QuotasMatchTypeAny:
			if c.Match != nil {
				return nil, invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
			}
			specified[typ] = true
		default:
			return nil, invalid("Unknown match type %d", int8(c.MatchType))
		}
	}
	has := func(typ string) bool { _, ok := exact[typ]; return ok || specified[typ] }
	if has(metadata.QuotaEntityIP) && (has(metadata.QuotaEntityUser) || has(metadata.QuotaEntityClientID)) {
		return nil, invalid("Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.")
	}
	entries := []kmsg.DescribeClientQuotasResponseEntry{}
	for entity, values := range img.ClientQuotas {
		data := entity.Data()
		if !quotaEntityMatches(data, exact, specified, req.Strict) {
			continue
		}
		e := kmsg.NewDescribeClientQuotasResponseEntry()
		for _, d := range data {
			ent := kmsg.NewDescribeClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = d.Type, d.Name
			e.Entity = append(e.Entity, ent)
		}
		for _, k := range sortedKeys(values) {
			v := kmsg.NewDescribeClientQuotasResponseEntryValue()
			v.Key, v.Value = k, values[k]
			e.Values = append(e.Values, v)
		}
		entries = append(entries, e)
	}
	return entries, nil
}

func quotaEntityMatches(data []metadata.QuotaEntityData, exact map[string]*string, specified map[string]bool, strict bool) bool {
	if strict && len(data) != len(exact)+len(specified) {
		return false
	}
	find := func(typ string) (metadata.QuotaEntityData, bool) {
		i := slices.IndexFunc(data, func(d metadata.QuotaEntityData) bool { return d.Type == typ })
		if i < 0 {
			return metadata.QuotaEntityData{}, false
		}
		return data[i], true
	}
	for typ, name := range exact {
		d, ok := find(typ)
		if !ok {
			return false
		}
		if (name == nil) != (d.Name == nil) || name != nil && *name != *d.Name {
			return false
		}
	}
	for typ := range specified {
		if _, ok := find(typ); !ok {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func init() {
	register(api{
		key: kmsg.DescribeClientQuotas, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE_CONFIGS on the cluster",
		errorAnswer: errorAnswerOf(func(_ *kmsg.DescribeClientQuotasRequest, out *kmsg.DescribeClientQuotasResponse, e apiErr) {
			out.ErrorCode, out.ErrorMessage = e.code, e.msg
		}),
		handle: (*Broker).handleDescribeClientQuotas,
	})
	register(api{
		key: kmsg.AlterClientQuotas, min: 0, max: 1,
		listeners:        allListeners,
		authorizedAs:     "ALTER_CONFIGS on the cluster",
		clusterOperation: kmsg.ACLOperationAlterConfigs,
		errorAnswer: errorAnswerOf(func(r *kmsg.AlterClientQuotasRequest, out *kmsg.AlterClientQuotasResponse, e apiErr) {
			for _, en := range r.Entries {
				re := kmsg.NewAlterClientQuotasResponseEntry()
				re.ErrorCode, re.ErrorMessage = e.code, defaultMessage(e.code)
				for _, ent := range en.Entity {
					rent := kmsg.NewAlterClientQuotasResponseEntryEntity()
					rent.Type, rent.Name = ent.Type, ent.Name
					re.Entity = append(re.Entity, rent)
				}
				out.Entries = append(out.Entries, re)
			}
		}),
		forward: &forwarding{},
		handle:  (*Broker).handleAlterClientQuotas,
	})
}
