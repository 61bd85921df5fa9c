package decide

// SCRAM credentials (KIP-554): AlterUserScramCredentials (key 51, version
// 0) as Kafka's ScramControlManager decides it. The records and the
// credentials in the image are metadata's (metadata/scram.go).
//
// The client sends a salt and a salted password (Hi of RFC 5802); the
// controller keeps the salt, StoredKey and ServerKey and the iterations,
// never the salted password. Validation and error codes are Kafka's: a user
// named twice in one request gets DUPLICATE_RESOURCE, an empty user name
// or iterations outside 4096..16384 UNACCEPTABLE_CREDENTIAL, an unknown
// mechanism UNSUPPORTED_SASL_MECHANISM, deleting a credential that does not
// exist RESOURCE_NOT_FOUND. The accepted alterations of a request commit
// together; the refused ones change nothing. When the records cannot be
// committed, every user the request names gets the commit's error, as
// AlterUserScramCredentialsRequest.getErrorResponse answers.

import (
	"context"
	"maps"
	"slices"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// scramSupportedMetadataVersion is metadata.version 3.5-IV2, the first
// with SCRAM records (MetadataVersion.isScramSupported).
const scramSupportedMetadataVersion int16 = 11

// NewUserScramCredentialRecord derives the record of a credential from a
// salted password, as ScramControlManager.finishUpsertion does.
func NewUserScramCredentialRecord(user string, m sasl.ScramMechanism, salt, saltedPassword []byte, iterations int32) *metadata.UserScramCredentialRecord {
	c := m.Credential(salt, saltedPassword, iterations)
	return &metadata.UserScramCredentialRecord{Name: user, Mechanism: m.Type, Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: iterations}
}

// AlterUserScramCredentials is ScramControlManager.alterCredentials: users
// are the unit (one alteration per user per request), deletions are checked
// against the image, and every accepted alteration becomes a record.
func (e *Env) AlterUserScramCredentials(_ context.Context, img *metadata.Image, _ int64, req *kmsg.AlterUserSCRAMCredentialsRequest) ([]metadata.Record, *kmsg.AlterUserSCRAMCredentialsResponse) {
	refused := map[string]*Error{}
	supported := img.Features[metadata.MetadataVersionFeature] >= scramSupportedMetadataVersion
	duplicate := NewError(kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
	unsupported := NewError(kerr.UnsupportedVersion, "The current metadata.version does not support SCRAM")
	deletions := map[string]kmsg.AlterUserSCRAMCredentialsRequestDeletion{}
	upsertions := map[string]kmsg.AlterUserSCRAMCredentialsRequestUpsertion{}
	var order []string
	for _, del := range req.Deletions {
		if refused[del.Name] != nil {
			continue
		}
		if _, dup := deletions[del.Name]; dup {
			delete(deletions, del.Name)
			refused[del.Name] = duplicate
			continue
		}
		if !supported {
			refused[del.Name] = unsupported
			continue
		}
		m, err := scramUserAndMechanism(del.Name, del.Mechanism)
		if err == nil {
			if _, exists := img.ScramCredentials[metadata.ScramKey{User: del.Name, Mechanism: m.Type}]; !exists {
				err = NewError(kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
			}
		}
		if err != nil {
			refused[del.Name] = err
			continue
		}
		deletions[del.Name] = del
		order = append(order, del.Name)
	}
	for _, up := range req.Upsertions {
		if refused[up.Name] != nil {
			continue
		}
		_, wasDeleted := deletions[up.Name]
		_, wasUpserted := upsertions[up.Name]
		if wasDeleted || wasUpserted {
			delete(deletions, up.Name)
			delete(upsertions, up.Name)
			refused[up.Name] = duplicate
			continue
		}
		if !supported {
			refused[up.Name] = unsupported
			continue
		}
		m, err := scramUserAndMechanism(up.Name, up.Mechanism)
		if err == nil {
			switch {
			case up.Iterations < m.MinIterations:
				err = NewError(kerr.UnacceptableCredential, "Too few iterations")
			case up.Iterations > m.MaxIterations:
				err = NewError(kerr.UnacceptableCredential, "Too many iterations")
			case len(up.SaltedPassword) == 0:
				// Java's HMAC refuses an empty key; Kafka answers
				// with the exception's message.
				err = NewError(kerr.UnknownServerError, "Empty key")
			}
		}
		if err != nil {
			refused[up.Name] = err
			continue
		}
		upsertions[up.Name] = up
		order = append(order, up.Name)
	}
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	var recs []metadata.Record
	// A user whose alteration was accepted and then named again is
	// refused: order keeps it, the maps no longer do.
	for _, u := range order {
		if del, ok := deletions[u]; ok {
			recs = append(recs, &metadata.RemoveUserScramCredentialRecord{Name: u, Mechanism: del.Mechanism})
		} else if up, ok := upsertions[u]; ok {
			m, _ := sasl.ScramByType(up.Mechanism)
			recs = append(recs, NewUserScramCredentialRecord(u, m, up.Salt, up.SaltedPassword, up.Iterations))
		} else {
			continue
		}
		resp.Results = append(resp.Results, scramResult(u, nil))
	}
	for _, u := range slices.Sorted(maps.Keys(refused)) {
		resp.Results = append(resp.Results, scramResult(u, refused[u]))
	}
	return recs, resp
}

// AlterUserScramCredentialsFailed answers every user the request names
// with e.
func AlterUserScramCredentialsFailed(req *kmsg.AlterUserSCRAMCredentialsRequest, e *Error) *kmsg.AlterUserSCRAMCredentialsResponse {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	users := map[string]bool{}
	for _, del := range req.Deletions {
		users[del.Name] = true
	}
	for _, up := range req.Upsertions {
		users[up.Name] = true
	}
	for _, u := range slices.Sorted(maps.Keys(users)) {
		resp.Results = append(resp.Results, scramResult(u, e))
	}
	return resp
}

func scramResult(user string, e *Error) kmsg.AlterUserSCRAMCredentialsResponseResult {
	r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
	r.User = user
	if e != nil {
		r.ErrorCode = e.Code()
		r.ErrorMessage = e.Message()
	}
	return r
}

// scramUserAndMechanism is ScramControlManager.validateScramUsernameAndMechanism.
func scramUserAndMechanism(user string, mechanism int8) (sasl.ScramMechanism, *Error) {
	if user == "" {
		return sasl.ScramMechanism{}, NewError(kerr.UnacceptableCredential, "Username must not be empty")
	}
	m, ok := sasl.ScramByType(mechanism)
	if !ok {
		return sasl.ScramMechanism{}, NewError(kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
	}
	return m, nil
}
