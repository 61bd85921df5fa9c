package broker

import (
	"testing"

	"github.com/gregorbroker/gregor/controller"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A node's own requests to the controller go at versions a controller
// listener serves, the highest it serves: a lower one would drop fields
// (a registration's log dirs and previous epoch), and one below the
// handler's minimum closes the connection (CreateTopics v0).
func TestOwnRequestVersionsAreServed(t *testing.T) {
	b := &Broker{opts: Options{LocalController: &controller.Controller{}}}
	served := map[kmsg.Key]*handler{}
	for _, h := range b.handlers() {
		if h.onController {
			served[h.key] = h
		}
	}
	for key, v := range ownRequestVersions {
		h := served[key]
		if h == nil {
			t.Errorf("%s is not served on controller listeners", key.Name())
			continue
		}
		if v != h.max || v < h.min {
			t.Errorf("%s is sent at v%d; controller listeners serve v%d-%d: send the highest", key.Name(), v, h.min, h.max)
		}
	}
}
