package decide

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The ACL decisions are functions of the image and the request: a creation
// equal to an existing ACL or to an earlier one of the request writes no
// record, a deletion removes an ACL two filters match once, and a failed
// commit answers every entry with its error.
func TestACLDecisionsWithoutAQuorum(t *testing.T) {
	e := testEnv()
	const (
		topic = kmsg.ACLResourceTypeTopic
		lit   = kmsg.ACLResourcePatternTypeLiteral
		read  = kmsg.ACLOperationRead
		allow = kmsg.ACLPermissionTypeAllow
	)
	a := creation(topic, "a", lit, "User:x", "*", read, allow)
	b := creation(topic, "b", lit, "User:x", "*", read, allow)
	bad := creation(topic, "", lit, "User:x", "*", read, allow)
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = []kmsg.CreateACLsRequestCreation{a, a, bad}
	recs, resp, img := decideOn(t, e, imageOf(t), (*Env).CreateACLs, req)
	if len(recs) != 1 || len(resp.Results) != 3 || resp.Results[0].ErrorCode != 0 || resp.Results[1].ErrorCode != 0 ||
		resp.Results[2].ErrorCode != kerr.InvalidRequest.Code || img.ACLs.Len() != 1 {
		t.Fatalf("records %v, results %+v, %d ACLs", recs, resp.Results, img.ACLs.Len())
	}
	req.Creations = []kmsg.CreateACLsRequestCreation{a, b}
	recs, _, img = decideOn(t, e, img, (*Env).CreateACLs, req)
	if len(recs) != 1 || img.ACLs.Len() != 2 {
		t.Fatalf("a again and b: records %v, %d ACLs", recs, img.ACLs.Len())
	}

	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	named := f
	named.ResourceName = kmsg.StringPtr("a")
	del.Filters = []kmsg.DeleteACLsRequestFilter{named, f}
	recs, dresp, img := decideOn(t, e, img, (*Env).DeleteACLs, del)
	if len(recs) != 2 || len(dresp.Results[0].MatchingACLs) != 1 || len(dresp.Results[1].MatchingACLs) != 2 || img.ACLs.Len() != 0 {
		t.Fatalf("records %v, results %+v, %d ACLs left", recs, dresp.Results, img.ACLs.Len())
	}

	failed := CreateACLsFailed(req, commitError(errNotController))
	for _, r := range failed.Results {
		if r.ErrorCode != kerr.NotController.Code {
			t.Fatalf("failed commit: %+v", failed.Results)
		}
	}
}
