package broker

import (
	"slices"
	"testing"

	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every descriptor declares what the broker needs of it; one that leaves
// a required property out fails here, not in a client's hands.
func TestEveryDescriptorIsComplete(t *testing.T) {
	if len(apis) == 0 {
		t.Fatal("no API is registered")
	}
	for key, a := range apis {
		name := key.Name()
		if a.key != key {
			t.Errorf("%s is registered under %d", name, key)
		}
		if a.handle == nil {
			t.Errorf("%s has no handler", name)
		}
		if a.listeners == 0 {
			t.Errorf("%s is served on no listener", name)
		}
		if a.authorizedAs == "" {
			t.Errorf("%s does not say what it is authorized against", name)
		}
		if a.min < 0 || a.min > a.max {
			t.Errorf("%s serves v%d-%d", name, a.min, a.max)
		}
		if !a.internal {
			req := kmsg.RequestForKey(int16(key))
			if req == nil || a.max > req.MaxVersion() {
				t.Errorf("%s v%d is beyond what kmsg decodes", name, a.max)
			}
		}
		if a.unsupported != nil && a.advertisedMin >= a.min {
			t.Errorf("%s answers versions below v%d but advertises none (advertisedMin v%d)", name, a.min, a.advertisedMin)
		}
		if a.controllerOnly && a.listeners != controllerListeners {
			t.Errorf("%s exists only with a controller but is served on client listeners", name)
		}
		// An API failed as a whole needs its whole-request answer: one
		// that goes to the controller (timed out, refused there), one
		// checked against the cluster there, one needing an authorizer.
		needsAnswer := a.forward != nil || a.clusterOperation != 0 || a.needsAuthorizer
		if needsAnswer && a.errorAnswer == nil {
			t.Errorf("%s can fail as a whole (forwarded, checked on the cluster or needing an authorizer) but has no errorAnswer", name)
		}
		if a.controllerAuthorize != nil && a.clusterOperation != 0 {
			t.Errorf("%s has both a cluster operation and its own controller check; only one is used", name)
		}
		if (a.controllerAuthorize != nil || a.controllerRefuse != nil) && a.forward == nil && !a.controllerOnly {
			t.Errorf("%s is checked by the controller but never reaches it", name)
		}
		if a.quota.strictSince != 0 && !a.quota.mutates {
			t.Errorf("%s has a strict mutation version but does not mutate", name)
		}
	}
}

// Every error answer is the request's own response at the request's
// version, for every version served, and encodes and decodes as one.
func TestEveryErrorAnswerIsTheRequestsResponse(t *testing.T) {
	for key, a := range apis {
		if a.errorAnswer == nil || a.internal {
			continue
		}
		for v := a.min; v <= a.max; v++ {
			req := kmsg.RequestForKey(int16(key))
			req.SetVersion(v)
			resp := errorResponse(req, errCode(kerr.ClusterAuthorizationFailed))
			if resp == nil || resp.Key() != int16(key) || resp.GetVersion() != v {
				t.Fatalf("%s v%d: answer %#v", key.Name(), v, resp)
			}
			back := kmsg.ResponseForKey(int16(key))
			back.SetVersion(v)
			if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
				t.Errorf("%s v%d: the answer does not decode: %v", key.Name(), v, err)
			}
		}
	}
}

// A forwarded request that no controller answers in time gets
// REQUEST_TIMED_OUT, whichever API it is: the connection stays open.
func TestEveryForwardedRequestTimesOutWithAnAnswer(t *testing.T) {
	var forwarded []string
	for key, a := range apis {
		if a.forward == nil {
			continue
		}
		forwarded = append(forwarded, key.Name())
		req := kmsg.RequestForKey(int16(key))
		req.SetVersion(a.max)
		if timedOutResponse(req) == nil {
			t.Errorf("%s: no REQUEST_TIMED_OUT answer", key.Name())
		}
	}
	slices.Sort(forwarded)
	for _, must := range []string{"AddRaftVoter", "RemoveRaftVoter", "UpdateRaftVoter", "CreateTopics"} {
		if !slices.Contains(forwarded, must) {
			t.Errorf("%s is not forwarded; forwarded: %v", must, forwarded)
		}
	}
}

// What the broker hands to the controller, the controller decides: every
// forwarded API and every one a controller listener passes to it
// directly.
func TestEveryRequestForTheControllerIsDecided(t *testing.T) {
	for key, a := range apis {
		direct := a.controllerOnly && !a.internal && a.key != kmsg.Envelope
		if (a.forward != nil || direct) && !controller.Decides(int16(key)) {
			t.Errorf("%s goes to the controller, which does not decide it", key.Name())
		}
	}
}
