package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

func reRegistration(id int32, previousEpoch int64) *kmsg.BrokerRegistrationRequest {
	req := kmsg.NewPtrBrokerRegistrationRequest()
	req.Version = 3
	req.BrokerID = id
	req.ClusterID = "test-cluster"
	req.IncarnationID = protocol.RandomUUID()
	req.LogDirs = [][16]byte{protocol.RandomUUID()}
	req.PreviousBrokerEpoch = previousEpoch
	req.Listeners = []kmsg.BrokerRegistrationRequestListener{{Name: "PLAINTEXT", Host: "localhost", Port: 9092}}
	req.Features = []kmsg.BrokerRegistrationRequestFeature{
		{Name: metadata.MetadataVersionFeature, MinSupportedVersion: 7, MaxSupportedVersion: 30},
		{Name: metadata.KRaftVersionFeature, MinSupportedVersion: 0, MaxSupportedVersion: 1},
	}
	return req
}

// A combined node killed and restarted registers a new incarnation of its
// broker with a freshly started controller; the old registration's session
// was never renewed with this controller, so it must not block the new one.
func TestReRegistrationAfterControllerRestart(t *testing.T) {
	fsys := vfs.NewMemFS()
	c := startTest(t, fsys)
	registerBroker(t, c, 1)
	c.Close()
	c2 := startTest(t, fsys)
	if resp := c2.RegisterBroker(ctxT(t), reRegistration(1, -1)); resp.ErrorCode != 0 {
		t.Fatalf("re-registration after restart: error %d", resp.ErrorCode)
	}
}

// While the registered incarnation is alive, another one is refused,
// unless it names the registered epoch (a clean restart, KIP-966).
func TestDuplicateRegistrationWhileAlive(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	epoch := registerBroker(t, c, 1)
	if resp := c.RegisterBroker(ctxT(t), reRegistration(1, -1)); resp.ErrorCode != kerr.DuplicateBrokerRegistration.Code {
		t.Fatalf("want DUPLICATE_BROKER_REGISTRATION, got %d", resp.ErrorCode)
	}
	if resp := c.RegisterBroker(ctxT(t), reRegistration(1, epoch)); resp.ErrorCode != 0 {
		t.Fatalf("restart naming the previous epoch: error %d", resp.ErrorCode)
	}
}
