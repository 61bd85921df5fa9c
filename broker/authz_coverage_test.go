package broker

import (
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestEveryServedAPIIsAuthorized(t *testing.T) {
	n := startAuthzNode(t, &authz.Options{AllowEveryoneIfNoACLFound: true}, nil)
	var missing []string
	for _, h := range n.b.handlers() {
		if a := apiFor(int16(h.Key)); a == nil || a.authorizedAs == "" {
			missing = append(missing, h.Key.Name())
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Fatalf("served without a listed authorization (see the descriptor's authorizedAs): %v", missing)
	}
}

// The SCRAM credential APIs answer a refusal as Kafka's getErrorResponse
// does.
func TestSCRAMErrorResponses(t *testing.T) {
	who := identity{principal: authz.Principal{Type: "User", Name: "ANONYMOUS"}}
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	for _, name := range []string{"b", "a"} {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name = name
		alter.Deletions = append(alter.Deletions, d)
	}
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name = "a"
	alter.Upsertions = append(alter.Upsertions, u)
	if op := apiFor(alter.Key()).clusterOperation; op != kmsg.ACLOperationAlter {
		t.Fatalf("AlterUserScramCredentials needs %v", op)
	}
	e := clusterDenied(who, kmsg.ACLOperationAlter)
	resp := errorResponse(alter, e).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != 2 || resp.Results[0].User != "a" || resp.Results[1].User != "b" {
		t.Fatalf("results %+v", resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != e.code || r.ErrorMessage != e.msg {
			t.Fatalf("result %+v", r)
		}
	}
	describe := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	describe.Users = make([]kmsg.DescribeUserSCRAMCredentialsRequestUser, 2)
	dresp := errorResponse(describe, errCode(kerr.ClusterAuthorizationFailed)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if dresp.ErrorCode != kerr.ClusterAuthorizationFailed.Code || dresp.ErrorMessage != nil || len(dresp.Results) != 2 ||
		dresp.Results[1].ErrorCode != kerr.ClusterAuthorizationFailed.Code || dresp.Results[1].User != "" {
		t.Fatalf("describe %+v", dresp)
	}
}
