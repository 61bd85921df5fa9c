package decide

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
)

// TestJavaHashMapOrder: the orders printed by java.util.HashMap for the
// same keys and capacities (checked with a JDK 21).
func TestJavaHashMapOrder(t *testing.T) {
	for _, tc := range []struct {
		keys     []string
		capacity int
		want     []string
	}{
		{[]string{"user", "client-id"}, 2, []string{"client-id", "user"}},
		{[]string{"client-id", "user"}, 2, []string{"client-id", "user"}},
		{[]string{"user", "client-id", "ip"}, 3, []string{"client-id", "user", "ip"}},
		{[]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}, 4,
			[]string{"producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate", "request_percentage"}},
		{[]string{"a", "b", "c", "d", "e", "f", "g"}, 7, []string{"a", "b", "c", "d", "e", "f", "g"}},
		{[]string{"user", "client-id"}, 0, []string{"client-id", "user"}},
	} {
		if got := javaHashMapOrder(tc.keys, tc.capacity); !slices.Equal(got, tc.want) {
			t.Errorf("javaHashMapOrder(%v, %d) = %v, want %v", tc.keys, tc.capacity, got, tc.want)
		}
	}
}

func quotaEntry(ops []kmsg.AlterClientQuotasRequestEntryOp, entity ...string) kmsg.AlterClientQuotasRequestEntry {
	e := kmsg.NewAlterClientQuotasRequestEntry()
	for i := 0; i < len(entity); i += 2 {
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type = entity[i]
		if entity[i+1] != "<default>" {
			ent.Name = strPtr(entity[i+1])
		}
		e.Entity = append(e.Entity, ent)
	}
	e.Ops = ops
	return e
}

func setOp(key string, v float64) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Value = key, v
	return op
}

func removeOp(key string) kmsg.AlterClientQuotasRequestEntryOp {
	op := kmsg.NewAlterClientQuotasRequestEntryOp()
	op.Key, op.Remove = key, true
	return op
}

func alterRequest(entries ...kmsg.AlterClientQuotasRequestEntry) *kmsg.AlterClientQuotasRequest {
	req := kmsg.NewPtrAlterClientQuotasRequest()
	req.Entries = entries
	return req
}

// runAlter decides a request against img without committing it.
func runAlter(img *metadata.Image, req *kmsg.AlterClientQuotasRequest) ([]metadata.Record, []quotaResult) {
	return alterQuotaEntities(img, readQuotaAlterations(req))
}

func TestAlterClientQuotasValidation(t *testing.T) {
	img := metadata.EmptyImage("c")
	for _, tc := range []struct {
		name  string
		entry kmsg.AlterClientQuotasRequestEntry
		msg   string
	}{
		{"empty entity", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}),
			"Invalid empty client quota entity"},
		{"unknown type", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "group", "g"),
			"Unhandled client quota entity type: group"},
		{"empty name", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "user", ""),
			"Empty user not supported"},
		{"ip with user", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 1)}, "user", "u", "ip", "1.2.3.4"),
			"Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"},
		{"bad ip", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 1)}, "ip", "no.such.host.invalid"),
			"no.such.host.invalid is not a valid IP or resolvable host."},
		{"ip key on user", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 1)}, "user", "u"),
			"Invalid configuration key connection_creation_rate"},
		{"user key on ip", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "ip", "<default>"),
			"Invalid configuration key producer_byte_rate"},
		{"zero", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("request_percentage", 0)}, "client-id", "c"),
			"Quota request_percentage must be greater than 0"},
		{"fraction", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("consumer_byte_rate", 10.5)}, "client-id", "c"),
			"consumer_byte_rate cannot be a fractional value."},
		{"too large long", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1e19)}, "client-id", "c"),
			"Proposed value for producer_byte_rate is too large for a LONG."},
		{"too large int", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 3e9)}, "ip", "127.0.0.1"),
			"Proposed value for connection_creation_rate is too large for an INT."},
		{"duplicate key", quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1), setOp("producer_byte_rate", 2)}, "user", "u", "client-id", "c"),
			"Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c, user=u})"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recs, res := runAlter(img, alterRequest(tc.entry))
			if len(recs) != 0 || len(res) != 1 || res[0].err == nil {
				t.Fatalf("records %v results %v, want one refusal", recs, res)
			}
			if res[0].err.err != kerr.InvalidRequest || *res[0].err.Message() != tc.msg {
				t.Fatalf("got %v %q, want INVALID_REQUEST %q", res[0].err.err, *res[0].err.Message(), tc.msg)
			}
		})
	}
	// Doubles take fractions; a fractional error tolerates rounding.
	recs, res := runAlter(img, alterRequest(
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("request_percentage", 12.5), setOp("controller_mutation_rate", 0.5)}, "user", "u"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1000.0000001)}, "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 5)}, "ip", "<default>"),
	))
	if len(recs) != 4 || len(res) != 3 || res[0].err != nil || res[1].err != nil || res[2].err != nil {
		t.Fatalf("records %v results %+v", recs, res)
	}
}

func TestAlterClientQuotasApply(t *testing.T) {
	img := metadata.EmptyImage("c")
	apply := func(req *kmsg.AlterClientQuotasRequest) []metadata.Record {
		t.Helper()
		recs, res := runAlter(img, req)
		for _, r := range res {
			if r.err != nil {
				t.Fatalf("refused: %s", *r.err.Message())
			}
		}
		next, err := metadata.ApplyBatch(img, recs, img.Offset+1, 1)
		if err != nil {
			t.Fatal(err)
		}
		img = next
		return recs
	}
	userClient := metadata.QuotaEntity{User: metadata.QuotaNamed("u"), ClientID: metadata.QuotaNamed("c")}
	defaultUser := metadata.QuotaEntity{User: metadata.QuotaDefault()}
	apply(alterRequest(
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 100), setOp("consumer_byte_rate", 200)}, "user", "u", "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("request_percentage", 30)}, "user", "<default>"),
	))
	want := map[metadata.QuotaEntity]map[string]float64{
		userClient:  {"producer_byte_rate": 100, "consumer_byte_rate": 200},
		defaultUser: {"request_percentage": 30},
	}
	if !reflect.DeepEqual(img.ClientQuotas, want) {
		t.Fatalf("quotas %v, want %v", img.ClientQuotas, want)
	}
	// The same value again writes nothing; removing an absent key
	// writes nothing.
	if recs := apply(alterRequest(quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 100), removeOp("request_percentage")}, "client-id", "c", "user", "u"))); len(recs) != 0 {
		t.Fatalf("no-op alteration wrote %v", recs)
	}
	// Removing every key drops the entity.
	apply(alterRequest(quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{removeOp("producer_byte_rate"), removeOp("consumer_byte_rate")}, "user", "u", "client-id", "c")))
	if _, ok := img.ClientQuotas[userClient]; ok || len(img.ClientQuotas) != 1 {
		t.Fatalf("quotas after removal %v", img.ClientQuotas)
	}
	// A snapshot rebuilds the same quotas.
	rebuilt, err := metadata.ApplyBatch(metadata.EmptyImage("c"), metadata.ImageRecords(img), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt.ClientQuotas, img.ClientQuotas) {
		t.Fatalf("snapshot rebuilt %v, want %v", rebuilt.ClientQuotas, img.ClientQuotas)
	}
}

// TestAlterClientQuotasDuplicateEntity: an entity named twice answers once
// with Kafka's message; the first entry's records still commit (Kafka's
// result is atomic over what was decided).
func TestAlterClientQuotasDuplicateEntity(t *testing.T) {
	recs, res := runAlter(metadata.EmptyImage("c"), alterRequest(
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 2)}, "client-id", "c"),
	))
	if len(res) != 1 || res[0].err == nil || *res[0].err.Message() != "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=c})" {
		t.Fatalf("results %+v", res)
	}
	if len(recs) != 1 || recs[0].(*metadata.ClientQuotaRecord).Value != 1 {
		t.Fatalf("records %v", recs)
	}
}

// TestClientQuotasDecisionWithoutAQuorum decides AlterClientQuotas on an
// image built by hand: the records, the quotas they leave and the answer,
// entity by entity.
func TestClientQuotasDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	user := metadata.QuotaEntity{User: metadata.QuotaNamed("u")}
	ip := metadata.QuotaEntity{IP: metadata.QuotaNamed("127.0.0.1")}
	img := imageOf(t, &metadata.ClientQuotaRecord{Entity: user.Data(), Key: "producer_byte_rate", Value: 100})
	type answer struct {
		entity string
		code   int16
		msg    string
	}
	answers := func(resp *kmsg.AlterClientQuotasResponse) []answer {
		var out []answer
		for _, en := range resp.Entries {
			a := answer{code: en.ErrorCode}
			for _, ent := range en.Entity {
				a.entity += ent.Type + "=" + *ent.Name + ";"
			}
			if en.ErrorMessage != nil {
				a.msg = *en.ErrorMessage
			}
			out = append(out, a)
		}
		return out
	}
	req := alterRequest(
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 100), setOp("consumer_byte_rate", 200)}, "user", "u"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("request_percentage", 0)}, "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("connection_creation_rate", 5)}, "ip", "127.0.0.1"),
	)
	in := ClientQuotaAlterations{req: req, entries: readQuotaAlterations(req)}
	recs, resp, next := decideOn(t, e, img, (*Env).AlterClientQuotas, in)
	// producer_byte_rate keeps its value: no record.
	wantRecs := []metadata.Record{
		&metadata.ClientQuotaRecord{Entity: user.Data(), Key: "consumer_byte_rate", Value: 200},
		&metadata.ClientQuotaRecord{Entity: ip.Data(), Key: "connection_creation_rate", Value: 5},
	}
	if !reflect.DeepEqual(recs, wantRecs) {
		t.Fatalf("records %+v, want %+v", recs, wantRecs)
	}
	wantQuotas := map[metadata.QuotaEntity]map[string]float64{
		user: {"producer_byte_rate": 100, "consumer_byte_rate": 200},
		ip:   {"connection_creation_rate": 5},
	}
	if !reflect.DeepEqual(next.ClientQuotas, wantQuotas) {
		t.Fatalf("quotas %v, want %v", next.ClientQuotas, wantQuotas)
	}
	wantAnswers := []answer{
		{entity: "user=u;"},
		{entity: "client-id=c;", code: kerr.InvalidRequest.Code, msg: "Quota request_percentage must be greater than 0"},
		{entity: "ip=127.0.0.1;"},
	}
	if got := answers(resp); !reflect.DeepEqual(got, wantAnswers) {
		t.Fatalf("answers %+v, want %+v", got, wantAnswers)
	}

	// Validate-only answers the same and writes nothing.
	req.ValidateOnly = true
	recs, resp, _ = decideOn(t, e, img, (*Env).AlterClientQuotas, in)
	if len(recs) != 0 || !reflect.DeepEqual(answers(resp), wantAnswers) {
		t.Fatalf("validate-only: records %v, answers %+v", recs, answers(resp))
	}
	req.ValidateOnly = false

	// The decision takes the ip check made before it: it does not resolve.
	unresolved := ClientQuotaAlterations{req: req, entries: readQuotaAlterations(req)}
	unresolved.entries[2].ipValid = false
	recs, resp, _ = decideOn(t, e, img, (*Env).AlterClientQuotas, unresolved)
	if got := answers(resp)[2]; len(recs) != 1 || got != (answer{entity: "ip=127.0.0.1;", code: kerr.InvalidRequest.Code, msg: "127.0.0.1 is not a valid IP or resolvable host."}) {
		t.Fatalf("unresolved ip: records %v, answer %+v", recs, got)
	}

	// More records than one operation may write: every entity is refused
	// and nothing is written.
	var entries []kmsg.AlterClientQuotasRequestEntry
	for i := range maxRecordsPerOp + 1 {
		entries = append(entries, quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "client-id", fmt.Sprint("c", i)))
	}
	large := alterRequest(entries...)
	recs, resp, _ = decideOn(t, e, img, (*Env).AlterClientQuotas, ClientQuotaAlterations{req: large, entries: readQuotaAlterations(large)})
	if len(recs) != 0 || len(resp.Entries) != maxRecordsPerOp+1 {
		t.Fatalf("too large: %d records, %d answers", len(recs), len(resp.Entries))
	}
	for _, en := range resp.Entries {
		if en.ErrorCode != kerr.PolicyViolation.Code || *en.ErrorMessage != excessivelyLargeOperation {
			t.Fatalf("too large: answer %+v", en)
		}
	}

	// A commit failure answers each entity the request names once.
	dup := alterRequest(
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 1)}, "user", "u", "client-id", "c"),
		quotaEntry([]kmsg.AlterClientQuotasRequestEntryOp{setOp("producer_byte_rate", 2)}, "client-id", "c"),
	)
	failed := AlterClientQuotasFailed(ClientQuotaAlterations{req: dup, entries: readQuotaAlterations(dup)}, commitError(errNotController))
	msg := errNotController.Error()
	wantFailed := []answer{
		{entity: "client-id=c;", code: kerr.NotController.Code, msg: msg},
		{entity: "client-id=c;user=u;", code: kerr.NotController.Code, msg: msg},
	}
	if got := answers(failed); !reflect.DeepEqual(got, wantFailed) {
		t.Fatalf("failed commit: %+v, want %+v", got, wantFailed)
	}
}
