package broker

import (
	"testing"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzHandlersAuthorized is FuzzHandlers on a node with the authorizer
// and ACLs, on both its listeners: every served API with a fuzzed body,
// including Envelopes with fuzzed principals and addresses and the ACL
// APIs with any codes, is answered or its connection closed, never a
// panic.
func FuzzHandlersAuthorized(f *testing.F) {
	n := startAuthzNode(f, &authz.Options{AllowEveryoneIfNoACLFound: true, SuperUsers: []string{"User:admin"}}, nil)
	setACLs(f, n,
		deny(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeGroup, "g", kmsg.ACLOperationRead))
	addrs := []string{n.addr, n.b.Addrs()["CONTROLLER"]}
	for _, h := range n.b.handlers() {
		for v := h.Min; v <= h.Max; v++ {
			req := kmsg.RequestForKey(int16(h.Key))
			if req == nil {
				continue
			}
			req.SetVersion(v)
			f.Add(uint8(h.Key), uint8(v), false, req.AppendTo(nil))
			f.Add(uint8(h.Key), uint8(v), true, req.AppendTo(nil))
		}
	}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = requestBody(createTopicsRequest("fz", 1, 100), 3)
	env.RequestPrincipal = controllerclient.EncodePrincipal(authz.Principal{Type: "User", Name: "x"}, false)
	env.ClientHostAddress = []byte{1, 2, 3, 4}
	f.Add(uint8(kmsg.Envelope), uint8(0), true, env.AppendTo(nil))
	f.Fuzz(func(t *testing.T, key, version uint8, controllerListener bool, body []byte) {
		req := kmsg.RequestForKey(int16(key))
		if req == nil || int16(version) > req.MaxVersion() {
			return
		}
		req.SetVersion(int16(version))
		addr := addrs[0]
		if controllerListener {
			addr = addrs[1]
		}
		sendFuzzed(t, n, addr, req, body)
	})
}
