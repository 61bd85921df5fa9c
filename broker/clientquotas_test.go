package broker

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func quotaComponent(typ string, match kmsg.QuotasMatchType, name *string) kmsg.DescribeClientQuotasRequestComponent {
	c := kmsg.NewDescribeClientQuotasRequestComponent()
	c.EntityType, c.MatchType, c.Match = typ, match, name
	return c
}

// describeEntities lists the matching entities as "type=name,..." strings
// (name <default> for a default), sorted.
func describeEntities(t *testing.T, cl *kgo.Client, strict bool, comps ...kmsg.DescribeClientQuotasRequestComponent) ([]string, *kmsg.DescribeClientQuotasResponse) {
	t.Helper()
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	req.Components, req.Strict = comps, strict
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range resp.Entries {
		var parts []string
		for _, ent := range e.Entity {
			name := "<default>"
			if ent.Name != nil {
				name = *ent.Name
			}
			parts = append(parts, ent.Type+"="+name)
		}
		out = append(out, strings.Join(parts, ","))
	}
	slices.Sort(out)
	return out, resp
}

func TestClientQuotasAlterDescribe(t *testing.T) {
	n := startTestNode(t, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	s := func(v string) *string { return &v }
	alter := kmsg.NewPtrAlterClientQuotasRequest()
	for _, ent := range [][]kmsg.AlterClientQuotasRequestEntryEntity{
		{{Type: "user", Name: s("alice")}},
		{{Type: "user", Name: s("alice")}, {Type: "client-id", Name: s("app")}},
		{{Type: "user", Name: nil}},
		{{Type: "client-id", Name: s("app")}},
		{{Type: "ip", Name: s("10.0.0.1")}},
	} {
		e := kmsg.NewAlterClientQuotasRequestEntry()
		e.Entity = ent
		key := "producer_byte_rate"
		if ent[0].Type == "ip" {
			key = "connection_creation_rate"
		}
		e.Ops = []kmsg.AlterClientQuotasRequestEntryOp{{Key: key, Value: 1000}}
		alter.Entries = append(alter.Entries, e)
	}
	aresp, err := alter.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range aresp.Entries {
		if e.ErrorCode != 0 {
			t.Fatalf("alter refused %v: %v", e.Entity, *e.ErrorMessage)
		}
	}
	user, client, ip := "user", "client-id", "ip"
	for _, tc := range []struct {
		strict bool
		comps  []kmsg.DescribeClientQuotasRequestComponent
		want   []string
	}{
		{false, nil, []string{"client-id=app", "ip=10.0.0.1", "user=<default>", "user=alice", "user=alice,client-id=app"}},
		{true, nil, nil},
		{false, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeExact, s("alice"))}, []string{"user=alice", "user=alice,client-id=app"}},
		{true, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeExact, s("alice"))}, []string{"user=alice"}},
		{false, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeDefault, nil)}, []string{"user=<default>"}},
		// KRaft's "specified" includes the default.
		{true, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeAny, nil)}, []string{"user=<default>", "user=alice"}},
		{false, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(client, kmsg.QuotasMatchTypeAny, nil)}, []string{"client-id=app", "user=alice,client-id=app"}},
		{false, []kmsg.DescribeClientQuotasRequestComponent{quotaComponent(ip, kmsg.QuotasMatchTypeExact, s("10.0.0.1"))}, []string{"ip=10.0.0.1"}},
	} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, resp := describeEntities(t, cl, tc.strict, tc.comps...)
			if resp.ErrorCode != 0 {
				t.Fatalf("describe %+v: error %d", tc.comps, resp.ErrorCode)
			}
			if slices.Equal(got, tc.want) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("describe strict=%v %+v = %v, want %v", tc.strict, tc.comps, got, tc.want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		comps []kmsg.DescribeClientQuotasRequestComponent
		code  int16
		msg   string
	}{
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent("", kmsg.QuotasMatchTypeAny, nil)}, kerr.InvalidRequest.Code, "Invalid empty entity type."},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeAny, nil), quotaComponent(user, kmsg.QuotasMatchTypeDefault, nil)}, kerr.InvalidRequest.Code, "Entity type user cannot appear more than once in the filter."},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent("group", kmsg.QuotasMatchTypeAny, nil)}, kerr.UnsupportedVersion.Code, "Unsupported entity type group"},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeExact, nil)}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_EXACT, but set match string to null."},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeDefault, s("x"))}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, kmsg.QuotasMatchTypeAny, s("x"))}, kerr.InvalidRequest.Code, "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string."},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(user, 7, nil)}, kerr.InvalidRequest.Code, "Unknown match type 7"},
		{[]kmsg.DescribeClientQuotasRequestComponent{quotaComponent(ip, kmsg.QuotasMatchTypeAny, nil), quotaComponent(client, kmsg.QuotasMatchTypeAny, nil)}, kerr.InvalidRequest.Code,
			"Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component."},
	} {
		_, resp := describeEntities(t, cl, false, tc.comps...)
		if resp.ErrorCode != tc.code || resp.ErrorMessage == nil || *resp.ErrorMessage != tc.msg || resp.Entries != nil {
			t.Errorf("describe %+v: %d %v %v, want %d %q and no entries", tc.comps, resp.ErrorCode, resp.ErrorMessage, resp.Entries, tc.code, tc.msg)
		}
	}
}
