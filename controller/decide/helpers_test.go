package decide

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
)

// testEnv is a decisions' env as a single controller with the default
// configuration has it, with a fixed clock and random source.
func testEnv() *Env {
	return &Env{
		NodeID:                   1,
		SupportedFeatures:        map[string][2]int16{metadata.MetadataVersionFeature: {7, metadata.LatestMetadataVersion}},
		DefaultPartitions:        1,
		DefaultReplicationFactor: 1,
		Now:                      func() time.Time { return time.UnixMilli(1_700_000_000_000) },
		Rand:                     rand.New(rand.NewPCG(1, 2)),
		Logger:                   slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// imageOf is an image with recs applied, as the controller's replay
// builds it.
func imageOf(t testing.TB, recs ...metadata.Record) *metadata.Image {
	t.Helper()
	img, err := metadata.ApplyBatch(metadata.EmptyImage("test-cluster"), recs, 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// decision is a decision as the controller runs it (runDecision), for
// decideOn.
type decision[In, Out any] func(e *Env, ctx context.Context, img *metadata.Image, offset int64, in In) ([]metadata.Record, Out)

// decideOn runs a decision on img with the next offset after it, as the
// loop does, and applies its records (failing the test if replay refuses
// them): the image the answer rests on once they are committed.
func decideOn[In, Out any](t testing.TB, e *Env, img *metadata.Image, d decision[In, Out], in In) ([]metadata.Record, Out, *metadata.Image) {
	t.Helper()
	offset := img.Offset + 1
	recs, out := d(e, context.Background(), img, offset, in)
	next := img
	if len(recs) > 0 {
		var err error
		if next, err = metadata.ApplyBatch(img, recs, offset, img.Epoch); err != nil {
			t.Fatalf("the decision's records do not replay: %v", err)
		}
	}
	return recs, out, next
}

// errNotController and commitError stand for what the controller passes
// a failed answer when a decision's records are not committed: its
// commitError (decide.go in controller) of its errNotController, or of
// the client's time running out.
var errNotController = errors.New("this node is not the active controller")

func commitError(err error) *Error {
	code := kerr.NotController
	if errors.Is(err, context.DeadlineExceeded) {
		code = kerr.RequestTimedOut
	}
	return NewError(code, "%s", err.Error())
}

// (also in controller's acls_test.go)
func creation(rt kmsg.ACLResourceType, name string, pt kmsg.ACLResourcePatternType, principal, host string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) kmsg.CreateACLsRequestCreation {
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = rt, name, pt
	c.Principal, c.Host, c.Operation, c.PermissionType = principal, host, op, perm
	return c
}

// (also in controller's configs_test.go)
func alterReq(t kmsg.ConfigResourceType, name, key string, op int8, value *string) *kmsg.IncrementalAlterConfigsRequest {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	r := kmsg.NewIncrementalAlterConfigsRequestResource()
	r.ResourceType = t
	r.ResourceName = name
	r.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: key, Op: kmsg.IncrementalAlterConfigOp(op), Value: value}}
	req.Resources = append(req.Resources, r)
	return req
}

// (also in controller's delegationtokens_test.go)
const testTokenSecret = "token-secret"

// (also in controller's topics_test.go)
func topicReq(name string, partitions int32, rf int16) kmsg.CreateTopicsRequestTopic {
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic = name
	t.NumPartitions = partitions
	t.ReplicationFactor = rf
	return t
}

// (also in controller's scram_test.go)
func scramUpsert(user string, mech int8, iterations int32, password string) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations = user, mech, iterations
	u.Salt = []byte("salt-of-" + user)
	if m, ok := sasl.ScramByType(mech); ok && iterations > 0 {
		u.SaltedPassword = m.SaltedPassword(password, u.Salt, int(iterations))
	} else {
		u.SaltedPassword = []byte("x")
	}
	return u
}

// (also in controller's scram_test.go)
func scramDelete(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

// scramCredential is user's credential in img for the SCRAM mechanism
// called mechanism, in sasl's type (as the broker's lookup copies it).
func scramCredential(img *metadata.Image, mechanism, user string) (sasl.ScramCredential, bool) {
	m, ok := sasl.ScramByName(mechanism)
	if !ok {
		return sasl.ScramCredential{}, false
	}
	c, ok := img.ScramCredentials[metadata.ScramKey{User: user, Mechanism: m.Type}]
	return sasl.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, ok
}
