package broker

import (
	"testing"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node's own requests to the controller go at the highest version a
// controller listener serves (ControllerMaxVersion, which the controller
// client sends them at): a lower one would drop fields
// (a registration's log dirs and previous epoch), and one below the
// handler's minimum closes the connection (CreateTopics v0). Each must be
// served there.
func TestOwnRequestsAreServedOnControllerListeners(t *testing.T) {
	b := &Broker{opts: Options{LocalController: &controller.Controller{}}}
	served := map[kmsg.Key]*network.Handler{}
	for _, h := range b.handlers() {
		if h.OnController {
			served[h.Key] = h
		}
	}
	for _, key := range []kmsg.Key{kmsg.BrokerRegistration, kmsg.BrokerHeartbeat, kmsg.AllocateProducerIDs, kmsg.AlterPartition, kmsg.CreateTopics} {
		if served[key] == nil {
			t.Errorf("%s, which a node sends its controller, is not served on controller listeners", key.Name())
		}
	}
}
