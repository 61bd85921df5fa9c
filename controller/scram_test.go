package controller

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/gregorbroker/gregor/vfs"
)

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

func scramDelete(user string, mech int8) kmsg.AlterUserSCRAMCredentialsRequestDeletion {
	d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	d.Name, d.Mechanism = user, mech
	return d
}

func alterScram(t *testing.T, c *Controller, dels []kmsg.AlterUserSCRAMCredentialsRequestDeletion, ups ...kmsg.AlterUserSCRAMCredentialsRequestUpsertion) map[string]int16 {
	t.Helper()
	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Deletions, req.Upsertions = dels, ups
	resp := c.AlterUserScramCredentials(ctxT(t), req)
	out := map[string]int16{}
	for _, r := range resp.Results {
		if _, dup := out[r.User]; dup {
			t.Fatalf("user %s answered twice", r.User)
		}
		out[r.User] = r.ErrorCode
		if r.ErrorCode != 0 && r.ErrorMessage == nil {
			t.Fatalf("user %s: error %d without a message", r.User, r.ErrorCode)
		}
	}
	return out
}

func TestAlterUserScramCredentials(t *testing.T) {
	c := startTest(t, vfs.NewMemFS())
	got := alterScram(t, c, nil, scramUpsert("alice", 1, 8192, "alice-secret"), scramUpsert("bob", 2, 4096, "bob-secret"))
	if got["alice"] != 0 || got["bob"] != 0 {
		t.Fatalf("upsert: %v", got)
	}
	img := c.Image()
	cred, ok := scramCredential(img, sasl.ScramSHA256, "alice")
	sha256, _ := sasl.ScramByName(sasl.ScramSHA256)
	want := sha256.Credential([]byte("salt-of-alice"), sha256.SaltedPassword("alice-secret", []byte("salt-of-alice"), 8192), 8192)
	if !ok || !reflect.DeepEqual(cred, want) {
		t.Fatalf("alice's credential %+v, want %+v", cred, want)
	}
	if _, ok := scramCredential(img, sasl.ScramSHA512, "alice"); ok {
		t.Fatal("alice has a SCRAM-SHA-512 credential")
	}
	if _, ok := scramCredential(img, sasl.ScramSHA512, "bob"); !ok {
		t.Fatal("bob has no SCRAM-SHA-512 credential")
	}

	// Kafka's validation, user by user; the valid alterations of the
	// request commit.
	got = alterScram(t, c,
		[]kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("alice", 1), scramDelete("carol", 1), scramDelete("bob", 2), scramDelete("bob", 2), scramDelete("dave", 1), scramDelete("dave", 1), scramDelete("", 1), scramDelete("erin", 3)},
		scramUpsert("frank", 1, 4095, "x"), scramUpsert("gina", 2, 16385, "x"), scramUpsert("zed", 1, 4096, "zed-secret"),
		scramUpsert("zed", 2, 4096, "again"), scramUpsert("hal", 0, 4096, "x"), scramUpsert("ivy", 1, 16384, "ivy-secret"))
	for user, code := range map[string]int16{
		"alice": 0,
		"carol": kerr.ResourceNotFound.Code,
		// The first error of a user stands: the second deletion of
		// dave is not looked at.
		"dave":  kerr.ResourceNotFound.Code,
		"zed":   kerr.DuplicateResource.Code,
		"":      kerr.UnacceptableCredential.Code,
		"erin":  kerr.UnsupportedSaslMechanism.Code,
		"frank": kerr.UnacceptableCredential.Code,
		"gina":  kerr.UnacceptableCredential.Code,
		"bob":   kerr.DuplicateResource.Code,
		"hal":   kerr.UnsupportedSaslMechanism.Code,
		"ivy":   0,
	} {
		if got[user] != code {
			t.Errorf("user %q: error %d, want %d (all: %v)", user, got[user], code, got)
		}
	}
	img = c.Image()
	if _, ok := scramCredential(img, sasl.ScramSHA256, "alice"); ok {
		t.Fatal("alice's deleted credential remains")
	}
	if _, ok := scramCredential(img, sasl.ScramSHA256, "ivy"); !ok {
		t.Fatal("ivy's credential was not added")
	}
	if _, ok := scramCredential(img, sasl.ScramSHA512, "bob"); !ok {
		t.Fatal("bob's refused (duplicate) deletion changed the image")
	}
	if _, ok := scramCredential(img, sasl.ScramSHA256, "zed"); ok {
		t.Fatal("zed's refused (duplicate) upsertion changed the image")
	}

	// A snapshot rebuilds the credentials.
	rebuilt, err := metadata.ApplyBatch(metadata.EmptyImage("c"), metadata.ImageRecords(img), 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rebuilt.ScramCredentials, img.ScramCredentials) {
		t.Fatalf("snapshot rebuilt %v, image has %v", rebuilt.ScramCredentials, img.ScramCredentials)
	}
}

func TestScramRefusedBelowMetadataVersion35IV2(t *testing.T) {
	fsys := vfs.NewMemFS()
	if err := Format(fsys, testDir, FormatOptions{ClusterID: "test-cluster", NodeID: 1, DirectoryID: protocol.RandomUUID(),
		Voters:   []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}}},
		Features: map[string]int16{metadata.MetadataVersionFeature: 10}}); err != nil {
		t.Fatal(err)
	}
	c := startTest(t, fsys)
	got := alterScram(t, c, []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("a", 1)}, scramUpsert("b", 1, 4096, "x"))
	if got["a"] != kerr.UnsupportedVersion.Code || got["b"] != kerr.UnsupportedVersion.Code {
		t.Fatalf("at metadata.version 10: %v", got)
	}
}

func TestFormatBootstrapsScramCredentials(t *testing.T) {
	fsys := vfs.NewMemFS()
	m, _ := sasl.ScramByName(sasl.ScramSHA512)
	rec := decide.NewUserScramCredentialRecord("admin", m, []byte("s"), m.SaltedPassword("admin-secret", []byte("s"), 4096), 4096)
	if err := Format(fsys, testDir, FormatOptions{ClusterID: "test-cluster", NodeID: 1, DirectoryID: protocol.RandomUUID(),
		Voters:           []metadata.Voter{{ID: 1, Endpoints: []metadata.Endpoint{{Name: "CONTROLLER", Host: "localhost", Port: 9093}}}},
		ScramCredentials: []*metadata.UserScramCredentialRecord{rec}}); err != nil {
		t.Fatal(err)
	}
	info, err := ReadFormat(fsys, testDir)
	if err != nil || len(info.ScramCredentials) != 1 || !reflect.DeepEqual(info.ScramCredentials[0], rec) {
		t.Fatalf("read back %+v, %v", info.ScramCredentials, err)
	}
	c := startTest(t, fsys)
	waitFor(t, "admin's SCRAM-SHA-512 credential in the image", func() bool {
		_, ok := scramCredential(c.Image(), sasl.ScramSHA512, "admin")
		return ok
	})
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
