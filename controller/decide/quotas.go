package decide

// Client quotas (KIP-546's AlterClientQuotas, Kafka's
// ClientQuotaControlManager): which quota applies to which user, client id
// or IP is metadata. Each ClientQuotaRecord (metadata record 14, as in
// Kafka) sets or removes one key of one entity; the image keeps every
// entity's keys (Image.ClientQuotas); both are metadata's
// (metadata/quotas.go). Brokers enforce the quotas (broker/quota.go); this
// file decides which changes are valid, with Kafka's checks and messages:
//
//   - an entity is a set of (type, name) pairs; the types are user,
//     client-id and ip; a null name is the type's default; an empty name,
//     an unknown type, an empty entity, and ip together with user or
//     client-id are INVALID_REQUEST; an ip must parse or resolve (checked
//     when the request is read, before the decision: the controller's
//     loop must not wait for DNS);
//   - user and client-id entities take producer_byte_rate and
//     consumer_byte_rate (LONG), request_percentage and
//     controller_mutation_rate (DOUBLE); ip entities take
//     connection_creation_rate (INT); a value must be above 0, fit its
//     type and, for integral types, be whole;
//   - a removal of a key the entity does not have changes nothing; a value
//     equal to the current one writes no record;
//   - a key named twice in one entry, or an entity named twice in one
//     request, is refused as Kafka refuses it (the second entry answers
//     for the entity; the records of an earlier valid entry still commit,
//     as in Kafka's atomic result);
//   - a request that would write more than maxRecordsPerOp records, or
//     whose records cannot be committed, answers every entity it names
//     with that error (POLICY_VIOLATION, or the commit's).
//
// Entities print as Java's ClientQuotaEntity does in messages
// ("ClientQuotaEntity(entries={user=alice, client-id=c})"), in the order of
// the Java HashMap Kafka builds from the request.

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"time"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// quotaKeyType is the ConfigDef type of a quota key, which decides its
// range checks.
type quotaKeyType int

const (
	quotaLong quotaKeyType = iota
	quotaDouble
	quotaInt
)

var userClientQuotaKeys = map[string]quotaKeyType{
	metadata.QuotaProducerByteRate:       quotaLong,
	metadata.QuotaConsumerByteRate:       quotaLong,
	metadata.QuotaRequestPercentage:      quotaDouble,
	metadata.QuotaControllerMutationRate: quotaDouble,
}

var ipQuotaKeys = map[string]quotaKeyType{
	metadata.QuotaConnectionCreationRate: quotaInt,
}

// quotaAlteration is one entry of an AlterClientQuotas request as Kafka's
// AlterClientQuotasRequest.entries() reads it: the entity's pairs (a
// type named twice keeps its last name, as a Java HashMap does) and the
// operations in order.
type quotaAlteration struct {
	types []string           // entity types, first-put order
	names map[string]*string // type -> name (nil: default)
	// entityCap is the capacity Kafka's map of the entity starts with
	// (the number of pairs in the request), which decides its order.
	entityCap int
	ops       []quotaOp
	// ipValid says, for an entity with a named ip, whether the name
	// parses or resolves (decided before the controller loop, which
	// must not wait for DNS).
	ipValid bool
}

type quotaOp struct {
	key    string
	value  float64
	remove bool
}

// String is Java's ClientQuotaEntity.toString of the request's entity.
func (a *quotaAlteration) String() string {
	var sb strings.Builder
	sb.WriteString("ClientQuotaEntity(entries={")
	for i, t := range javaHashMapOrder(a.types, a.entityCap) {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(t)
		sb.WriteByte('=')
		if n := a.names[t]; n != nil {
			sb.WriteString(*n)
		} else {
			sb.WriteString("null")
		}
	}
	sb.WriteString("})")
	return sb.String()
}

// key is a comparable form of the entity (two entries name the same
// entity when their maps are equal).
func (a *quotaAlteration) key() string {
	var sb strings.Builder
	for _, t := range javaHashMapOrder(a.types, a.entityCap) {
		fmt.Fprintf(&sb, "%q", t)
		if n := a.names[t]; n != nil {
			fmt.Fprintf(&sb, "=%q;", *n)
		} else {
			sb.WriteString("=null;")
		}
	}
	return sb.String()
}

// javaHashMapOrder is the iteration order of a java.util.HashMap built
// with new HashMap<>(capacity) and the keys put in the given order (no
// key twice): buckets in index order, each in insertion order.
func javaHashMapOrder(keys []string, capacity int) []string {
	table := tableSizeFor(capacity)
	threshold := int(float64(table) * 0.75)
	for n := 1; n <= len(keys); n++ {
		if n > threshold {
			table *= 2
			threshold = int(float64(table) * 0.75)
		}
	}
	buckets := make([][]string, table)
	for _, k := range keys {
		h := javaStringHash(k)
		h ^= int32(uint32(h) >> 16)
		i := int(uint32(h) & uint32(table-1))
		buckets[i] = append(buckets[i], k)
	}
	out := make([]string, 0, len(keys))
	for _, b := range buckets {
		out = append(out, b...)
	}
	return out
}

// tableSizeFor is HashMap's first table size for an initial capacity
// (HashMap.tableSizeFor; a zero threshold means the default of 16).
func tableSizeFor(capacity int) int {
	if capacity <= 0 {
		return 1
	}
	n := 1
	for n < capacity {
		n <<= 1
	}
	return n
}

func javaStringHash(s string) int32 {
	var h int32
	for _, c := range s {
		if c > 0xFFFF {
			// A supplementary character is two UTF-16 units.
			c -= 0x10000
			h = 31*h + int32(0xD800+(c>>10))
			h = 31*h + int32(0xDC00+(c&0x3FF))
			continue
		}
		h = 31*h + int32(c)
	}
	return h
}

// quotaResult is one entity's answer.
type quotaResult struct {
	alt *quotaAlteration
	err *Error
}

// readQuotaAlterations reads the request's entries as Kafka does.
func readQuotaAlterations(req *kmsg.AlterClientQuotasRequest) []*quotaAlteration {
	out := make([]*quotaAlteration, 0, len(req.Entries))
	for _, e := range req.Entries {
		a := &quotaAlteration{names: map[string]*string{}, entityCap: len(e.Entity)}
		for _, ent := range e.Entity {
			if _, seen := a.names[ent.Type]; !seen {
				a.types = append(a.types, ent.Type)
			}
			a.names[ent.Type] = ent.Name
		}
		for _, op := range e.Ops {
			a.ops = append(a.ops, quotaOp{key: op.Key, value: op.Value, remove: op.Remove})
		}
		if ip := a.names[metadata.QuotaEntityIP]; ip != nil {
			a.ipValid = validIPEntity(*ip)
		}
		out = append(out, a)
	}
	return out
}

// validIPEntity is Kafka's isValidIpEntity: InetAddress.getByName accepts
// an address literal or a name that resolves.
func validIPEntity(ip string) bool {
	if net.ParseIP(ip) != nil {
		return true
	}
	if ip == "" {
		// getByName("") is the loopback address.
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupHost(ctx, ip)
	return err == nil && len(addrs) > 0
}

// ClientQuotaAlterations is an AlterClientQuotas request as its decision
// takes it: the entries read, each named ip already parsed or resolved,
// since the controller's loop must not wait for DNS.
type ClientQuotaAlterations struct {
	req     *kmsg.AlterClientQuotasRequest
	entries []*quotaAlteration
}

// ReadClientQuotaAlterations reads req for its decision (outside the
// loop: it may resolve names).
func ReadClientQuotaAlterations(req *kmsg.AlterClientQuotasRequest) ClientQuotaAlterations {
	return ClientQuotaAlterations{req: req, entries: readQuotaAlterations(req)}
}

// AlterClientQuotas decides an AlterClientQuotas request: a validate-only
// request writes nothing, one that would write more than maxRecordsPerOp
// records fails as a whole.
func (e *Env) AlterClientQuotas(_ context.Context, img *metadata.Image, _ int64, in ClientQuotaAlterations) ([]metadata.Record, *kmsg.AlterClientQuotasResponse) {
	recs, results := alterQuotaEntities(img, in.entries)
	if len(recs) > maxRecordsPerOp {
		return nil, AlterClientQuotasFailed(in, NewError(kerr.PolicyViolation, excessivelyLargeOperation))
	}
	if in.req.ValidateOnly {
		return nil, alterClientQuotasAnswer(in.req, results)
	}
	return recs, alterClientQuotasAnswer(in.req, results)
}

// AlterClientQuotasFailed answers every entity the request names with e,
// once, in the order the entities first appear.
func AlterClientQuotasFailed(in ClientQuotaAlterations, e *Error) *kmsg.AlterClientQuotasResponse {
	var results []quotaResult
	seen := map[string]bool{}
	for _, a := range in.entries {
		if !seen[a.key()] {
			seen[a.key()] = true
			results = append(results, quotaResult{alt: a, err: e})
		}
	}
	return alterClientQuotasAnswer(in.req, results)
}

// alterClientQuotasAnswer is the response with an entry per result, its
// entity in the order Kafka's map of it iterates.
func alterClientQuotasAnswer(req *kmsg.AlterClientQuotasRequest, results []quotaResult) *kmsg.AlterClientQuotasResponse {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	for _, r := range results {
		entry := kmsg.NewAlterClientQuotasResponseEntry()
		entry.ErrorCode = r.err.Code()
		entry.ErrorMessage = r.err.Message()
		for _, t := range javaHashMapOrder(r.alt.types, r.alt.entityCap) {
			ent := kmsg.NewAlterClientQuotasResponseEntryEntity()
			ent.Type, ent.Name = t, r.alt.names[t]
			entry.Entity = append(entry.Entity, ent)
		}
		resp.Entries = append(resp.Entries, entry)
	}
	return resp
}

// alterQuotaEntities is ClientQuotaControlManager.alterClientQuotas: the
// records of every valid entry and one result per distinct entity, in the
// order the entities first appear.
func alterQuotaEntities(img *metadata.Image, alts []*quotaAlteration) ([]metadata.Record, []quotaResult) {
	var recs []metadata.Record
	var results []quotaResult
	index := map[string]int{}
	put := func(a *quotaAlteration, e *Error) {
		if i, ok := index[a.key()]; ok {
			results[i] = quotaResult{alt: a, err: e}
			return
		}
		index[a.key()] = len(results)
		results = append(results, quotaResult{alt: a, err: e})
	}
	for _, a := range alts {
		// Kafka keeps the ops in a map: a key named twice is an error
		// for the entity, and the last value of a key is the one used.
		ops := map[string]quotaOp{}
		var order []string
		for _, op := range a.ops {
			if _, dup := ops[op.key]; dup {
				put(a, NewError(kerr.InvalidRequest, "Duplicate quota key %s not updating quota for this entity %s", op.key, a))
				continue
			}
			ops[op.key] = op
			order = append(order, op.key)
		}
		if _, done := index[a.key()]; done {
			put(a, NewError(kerr.InvalidRequest, "Ignoring duplicate entity %s", a))
			continue
		}
		more, e := alterQuotaEntity(img, a, ops, order)
		if e == nil {
			recs = append(recs, more...)
		}
		put(a, e)
	}
	return recs, results
}

func alterQuotaEntity(img *metadata.Image, a *quotaAlteration, ops map[string]quotaOp, order []string) ([]metadata.Record, *Error) {
	if len(a.types) == 0 {
		return nil, NewError(kerr.InvalidRequest, "Invalid empty client quota entity")
	}
	var data []metadata.QuotaEntityData
	for _, t := range javaHashMapOrder(a.types, a.entityCap) {
		switch t {
		case metadata.QuotaEntityUser, metadata.QuotaEntityClientID, metadata.QuotaEntityIP:
		default:
			return nil, NewError(kerr.InvalidRequest, "Unhandled client quota entity type: %s", t)
		}
		if n := a.names[t]; n != nil && *n == "" {
			return nil, NewError(kerr.InvalidRequest, "Empty %s not supported", t)
		}
		data = append(data, metadata.QuotaEntityData{Type: t, Name: a.names[t]})
	}
	entity, _ := metadata.QuotaEntityOf(data)
	var keys map[string]quotaKeyType
	switch {
	case entity.IP.Set && (entity.User.Set || entity.ClientID.Set):
		// Sic: Kafka's message lacks the space.
		return nil, NewError(kerr.InvalidRequest, "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
	case entity.IP.Set:
		if !entity.IP.Default && !a.ipValid {
			return nil, NewError(kerr.InvalidRequest, "%s is not a valid IP or resolvable host.", entity.IP.Name)
		}
		keys = ipQuotaKeys
	default:
		keys = userClientQuotaKeys
	}
	current := img.ClientQuotas[entity]
	var recs []metadata.Record
	// Kafka walks its map of ops in hash order: the first invalid key in
	// that order is the one reported.
	for _, key := range javaHashMapOrder(order, len(a.ops)) {
		op := ops[key]
		if op.remove {
			if _, had := current[key]; had {
				recs = append(recs, &metadata.ClientQuotaRecord{Entity: entity.Data(), Key: key, Remove: true})
			}
			continue
		}
		if e := validateQuotaValue(keys, key, op.value); e != nil {
			return nil, e
		}
		if cur, had := current[key]; !had || cur != op.value {
			recs = append(recs, &metadata.ClientQuotaRecord{Entity: entity.Data(), Key: key, Value: op.value})
		}
	}
	return recs, nil
}

// validateQuotaValue is ClientQuotaControlManager.validateQuotaKeyValue.
func validateQuotaValue(keys map[string]quotaKeyType, key string, v float64) *Error {
	typ, ok := keys[key]
	if !ok {
		return NewError(kerr.InvalidRequest, "Invalid configuration key %s", key)
	}
	if !(v > 0) {
		// Kafka tests v <= 0, which lets NaN through; nothing can
		// enforce a NaN quota, so Gregor refuses it with the same
		// message.
		return NewError(kerr.InvalidRequest, "Quota %s must be greater than 0", key)
	}
	switch typ {
	case quotaDouble:
		return nil
	case quotaInt:
		if v > math.MaxInt32 {
			return NewError(kerr.InvalidRequest, "Proposed value for %s is too large for an INT.", key)
		}
	case quotaLong:
		if v > math.MaxInt64 {
			return NewError(kerr.InvalidRequest, "Proposed value for %s is too large for a LONG.", key)
		}
	}
	if math.Abs(math.Mod(v, 1)) > 1e-6 {
		return NewError(kerr.InvalidRequest, "%s cannot be a fractional value.", key)
	}
	return nil
}

// quotaRefuses records permits against q and reports the error of a topic
// the quota refuses (ApiError.fromThrowable of
// ThrottlingQuotaExceededException).
func quotaRefuses(q metadata.MutationQuota, permits int) *Error {
	if q == nil || q.Record(permits) {
		return nil
	}
	return NewError(kerr.ThrottlingQuotaExceeded, "The throttling quota has been exceeded.")
}

// partitionRecordCount is how many partitions recs create.
func partitionRecordCount(recs []metadata.Record) int {
	n := 0
	for _, r := range recs {
		if _, ok := r.(*metadata.PartitionRecord); ok {
			n++
		}
	}
	return n
}
