package metadata

// SCRAM credentials (KIP-554): UserScramCredentialRecord and
// RemoveUserScramCredentialRecord (Kafka's metadata record types 11 and
// 22, same fields) and their place in the image. The image keeps the salt,
// StoredKey and ServerKey and the iterations, never the salted password.
// What AlterUserScramCredentials decides is the controller's
// (controller/scram.go); the broker's SCRAM server reads the credentials
// through a lookup that copies them into sasl's own type.

import (
	"cmp"
	"maps"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	RecordUserScramCredential       RecordType = 11
	RecordRemoveUserScramCredential RecordType = 22
)

// ScramKey names one credential: a user's, for one mechanism (Kafka's
// mechanism type: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512).
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is what the image keeps of a SCRAM password (Kafka's
// UserScramCredentialRecord without the name and mechanism).
type ScramCredential struct {
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// UserScramCredentialRecord creates or replaces a user's credential for a
// mechanism.
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord deletes a user's credential for a
// mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

func (*UserScramCredentialRecord) Type() RecordType       { return RecordUserScramCredential }
func (*RemoveUserScramCredentialRecord) Type() RecordType { return RecordRemoveUserScramCredential }
func (*UserScramCredentialRecord) Version() int16         { return 0 }
func (*RemoveUserScramCredentialRecord) Version() int16   { return 0 }

func (x *UserScramCredentialRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendString(dst, x.Name)
	dst = kbin.AppendInt8(dst, x.Mechanism)
	dst = kbin.AppendBytes(dst, x.Salt)
	dst = kbin.AppendBytes(dst, x.StoredKey)
	dst = kbin.AppendBytes(dst, x.ServerKey)
	return kbin.AppendInt32(dst, x.Iterations)
}

func (x *UserScramCredentialRecord) readBody(r *kbin.Reader, _ int16) {
	x.Name = r.String()
	x.Mechanism = r.Int8()
	x.Salt = r.Bytes()
	x.StoredKey = r.Bytes()
	x.ServerKey = r.Bytes()
	x.Iterations = r.Int32()
}

func (x *RemoveUserScramCredentialRecord) appendBody(dst []byte) []byte {
	dst = kbin.AppendString(dst, x.Name)
	return kbin.AppendInt8(dst, x.Mechanism)
}

func (x *RemoveUserScramCredentialRecord) readBody(r *kbin.Reader, _ int16) {
	x.Name = r.String()
	x.Mechanism = r.Int8()
}

// applyScram applies a SCRAM record to the image being built.
func (b *imageBuilder) applyScram(rec Record) error {
	if !b.scramCopied {
		b.next.ScramCredentials = maps.Clone(b.next.ScramCredentials)
		if b.next.ScramCredentials == nil {
			b.next.ScramCredentials = map[ScramKey]ScramCredential{}
		}
		b.scramCopied = true
	}
	switch r := rec.(type) {
	case *UserScramCredentialRecord:
		b.next.ScramCredentials[ScramKey{User: r.Name, Mechanism: r.Mechanism}] = ScramCredential{
			Salt: r.Salt, StoredKey: r.StoredKey, ServerKey: r.ServerKey, Iterations: r.Iterations,
		}
	case *RemoveUserScramCredentialRecord:
		key := ScramKey{User: r.Name, Mechanism: r.Mechanism}
		if _, ok := b.next.ScramCredentials[key]; !ok {
			return errUnknownScramCredential(key)
		}
		delete(b.next.ScramCredentials, key)
	}
	return nil
}

type errUnknownScramCredential ScramKey

func (e errUnknownScramCredential) Error() string {
	return "Unable to find credential to delete: user " + e.User + ", mechanism " + strconv.Itoa(int(e.Mechanism))
}

// scramRecords are the records that rebuild the image's credentials, in a
// deterministic order.
func scramRecords(img *Image) []Record {
	keys := slices.SortedFunc(maps.Keys(img.ScramCredentials), func(a, b ScramKey) int {
		if c := cmp.Compare(a.User, b.User); c != 0 {
			return c
		}
		return cmp.Compare(a.Mechanism, b.Mechanism)
	})
	out := make([]Record, 0, len(keys))
	for _, k := range keys {
		c := img.ScramCredentials[k]
		out = append(out, &UserScramCredentialRecord{Name: k.User, Mechanism: k.Mechanism,
			Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
	return out
}
