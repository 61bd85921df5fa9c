package metadata

// Client quotas (KIP-546, Kafka's ClientQuotaControlManager): which quota
// applies to which user, client id or IP is metadata. Each
// ClientQuotaRecord (metadata record 14, as in Kafka) sets or removes one
// key of one entity; the image keeps every entity's keys
// (Image.ClientQuotas) and a snapshot writes one record per key. Brokers
// enforce the quotas (broker/quota.go); the controller decides which
// changes are valid (controller/quotas.go).
//
// The request's controller mutation quota (KIP-599) travels to the
// controller's decisions in the request's context (WithMutationQuota).

import (
	"context"
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kbin"
)

// RecordClientQuota is Kafka's ClientQuotaRecord.
const RecordClientQuota RecordType = 14

// Quota entity types (ClientQuotaEntity.USER, CLIENT_ID, IP).
const (
	QuotaEntityUser     = "user"
	QuotaEntityClientID = "client-id"
	QuotaEntityIP       = "ip"
)

// Quota keys (QuotaConfig's *_OVERRIDE_CONFIG names).
const (
	QuotaProducerByteRate       = "producer_byte_rate"
	QuotaConsumerByteRate       = "consumer_byte_rate"
	QuotaRequestPercentage      = "request_percentage"
	QuotaControllerMutationRate = "controller_mutation_rate"
	QuotaConnectionCreationRate = "connection_creation_rate"
)

// QuotaName is one part of a quota entity: absent, the type's default,
// or a name.
type QuotaName struct {
	Set     bool
	Default bool
	Name    string
}

// QuotaNamed is the part naming name.
func QuotaNamed(name string) QuotaName { return QuotaName{Set: true, Name: name} }

// QuotaDefault is the part naming the type's default.
func QuotaDefault() QuotaName { return QuotaName{Set: true, Default: true} }

// QuotaEntity is what a set of quota values applies to: a user, a client
// id, a user and a client id, or an IP, each named or the default.
type QuotaEntity struct {
	User     QuotaName
	ClientID QuotaName
	IP       QuotaName
}

// QuotaEntityData is one (type, name) pair of an entity as records and
// the protocol carry it; a nil name is the default.
type QuotaEntityData struct {
	Type string
	Name *string
}

// ClientQuotaRecord sets (Remove false) or removes one quota key of one
// entity.
type ClientQuotaRecord struct {
	Entity []QuotaEntityData
	Key    string
	Value  float64
	Remove bool
}

func (*ClientQuotaRecord) Type() RecordType { return RecordClientQuota }
func (*ClientQuotaRecord) Version() int16   { return 0 }

func (x *ClientQuotaRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendArrayLen(dst, len(x.Entity))
	for _, e := range x.Entity {
		dst = kbin.AppendString(dst, e.Type)
		dst = kbin.AppendNullableString(dst, e.Name)
	}
	dst = kbin.AppendString(dst, x.Key)
	dst = kbin.AppendFloat64(dst, x.Value)
	return kbin.AppendBool(dst, x.Remove)
}

func (x *ClientQuotaRecord) readBody(r *kbin.Reader, _ int16) {
	if n := r.ArrayLen(); n > 0 && r.Ok() {
		x.Entity = make([]QuotaEntityData, n)
		for i := range x.Entity {
			x.Entity[i] = QuotaEntityData{Type: r.String(), Name: r.NullableString()}
		}
	}
	x.Key = r.String()
	x.Value = r.Float64()
	x.Remove = r.Bool()
	if math.IsNaN(x.Value) {
		// Never written (the controller's validateQuotaValue refuses
		// it): damage. An empty read marks the reader bad.
		r.Src = nil
		r.Int8()
	}
}

// QuotaEntityOf reads an entity from its (type, name) pairs; ok is false
// for an unknown type, a type named twice or no pair at all.
func QuotaEntityOf(data []QuotaEntityData) (QuotaEntity, bool) {
	var e QuotaEntity
	for _, d := range data {
		var part *QuotaName
		switch d.Type {
		case QuotaEntityUser:
			part = &e.User
		case QuotaEntityClientID:
			part = &e.ClientID
		case QuotaEntityIP:
			part = &e.IP
		default:
			return QuotaEntity{}, false
		}
		if part.Set {
			return QuotaEntity{}, false
		}
		*part = QuotaName{Set: true, Default: d.Name == nil}
		if d.Name != nil {
			part.Name = *d.Name
		}
	}
	return e, len(data) > 0
}

// Data is the entity as (type, name) pairs, in the order user, client-id,
// ip.
func (e QuotaEntity) Data() []QuotaEntityData {
	var out []QuotaEntityData
	add := func(typ string, n QuotaName) {
		if !n.Set {
			return
		}
		d := QuotaEntityData{Type: typ}
		if !n.Default {
			name := n.Name
			d.Name = &name
		}
		out = append(out, d)
	}
	add(QuotaEntityUser, e.User)
	add(QuotaEntityClientID, e.ClientID)
	add(QuotaEntityIP, e.IP)
	return out
}

// applyClientQuota replays one record into the image's quota map.
func (b *imageBuilder) applyClientQuota(r *ClientQuotaRecord) error {
	entity, ok := QuotaEntityOf(r.Entity)
	if !ok {
		return fmt.Errorf("client quota record with an invalid entity %v", r.Entity)
	}
	if !b.quotasCopied {
		b.next.ClientQuotas = cloneQuotaMap(b.next.ClientQuotas)
		b.quotasCopied = true
		b.quotaCopied = map[QuotaEntity]bool{}
	}
	values := b.next.ClientQuotas[entity]
	if !b.quotaCopied[entity] {
		values = cloneValues(values)
		b.quotaCopied[entity] = true
	}
	if r.Remove {
		delete(values, r.Key)
	} else {
		values[r.Key] = r.Value
	}
	if len(values) == 0 {
		delete(b.next.ClientQuotas, entity)
	} else {
		b.next.ClientQuotas[entity] = values
	}
	return nil
}

func cloneQuotaMap(m map[QuotaEntity]map[string]float64) map[QuotaEntity]map[string]float64 {
	out := make(map[QuotaEntity]map[string]float64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

func cloneValues(m map[string]float64) map[string]float64 {
	out := make(map[string]float64, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// clientQuotaRecords are the records that rebuild the image's quotas, in
// a deterministic order (snapshots).
func clientQuotaRecords(img *Image) []Record {
	entities := make([]QuotaEntity, 0, len(img.ClientQuotas))
	for e := range img.ClientQuotas {
		entities = append(entities, e)
	}
	sort.Slice(entities, func(i, j int) bool { return quotaEntityLess(entities[i], entities[j]) })
	var out []Record
	for _, e := range entities {
		values := img.ClientQuotas[e]
		keys := make([]string, 0, len(values))
		for k := range values {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, &ClientQuotaRecord{Entity: e.Data(), Key: k, Value: values[k]})
		}
	}
	return out
}

func quotaEntityLess(a, b QuotaEntity) bool {
	for _, pair := range [][2]QuotaName{{a.User, b.User}, {a.ClientID, b.ClientID}, {a.IP, b.IP}} {
		x, y := pair[0], pair[1]
		if x != y {
			if x.Set != y.Set {
				return !x.Set
			}
			if x.Default != y.Default {
				return x.Default
			}
			return x.Name < y.Name
		}
	}
	return false
}

// MutationQuota is the controller mutation quota of the request being
// decided (KIP-599's ControllerMutationQuota): CreateTopics,
// CreatePartitions and DeleteTopics take one permit per partition they
// create or delete, topic by topic. A strict quota (the request versions
// that carry THROTTLING_QUOTA_EXCEEDED) refuses a topic once the quota is
// exhausted; a permissive one takes every permit and only throttles.
type MutationQuota interface {
	// Record takes permits; false when the quota refuses them.
	Record(permits int) bool
}

type mutationQuotaKey struct{}

// WithMutationQuota attaches the request's mutation quota to ctx, for the
// controller's Handle.
func WithMutationQuota(ctx context.Context, q MutationQuota) context.Context {
	return context.WithValue(ctx, mutationQuotaKey{}, q)
}

// MutationQuotaOf is the quota attached to ctx, nil when none applies.
func MutationQuotaOf(ctx context.Context) MutationQuota {
	q, _ := ctx.Value(mutationQuotaKey{}).(MutationQuota)
	return q
}
