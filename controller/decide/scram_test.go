package decide

import (
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/sasl"
)

// TestScramDecisionWithoutAQuorum decides AlterUserScramCredentials on
// images built by hand: the records, the credentials they leave and the
// answer, user by user.
func TestScramDecisionWithoutAQuorum(t *testing.T) {
	e := testEnv()
	atVersion := func(level int16) *metadata.Image {
		return imageOf(t, &metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: level})
	}
	answers := func(resp *kmsg.AlterUserSCRAMCredentialsResponse) []string {
		var out []string
		for _, r := range resp.Results {
			s := r.User + ":ok"
			if r.ErrorCode != 0 {
				s = r.User + ":" + kerr.ErrorForCode(r.ErrorCode).Error()
			}
			if r.ErrorMessage != nil {
				s += ":" + *r.ErrorMessage
			}
			out = append(out, s)
		}
		return out
	}

	req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{scramUpsert("bob", 2, 4096, "bob-secret"), scramUpsert("alice", 1, 8192, "alice-secret")}
	recs, resp, img := decideOn(t, e, atVersion(scramSupportedMetadataVersion), (*Env).AlterUserScramCredentials, req)
	sha256, _ := sasl.ScramByType(1)
	sha512, _ := sasl.ScramByType(2)
	wantRecs := []metadata.Record{
		NewUserScramCredentialRecord("bob", sha512, req.Upsertions[0].Salt, req.Upsertions[0].SaltedPassword, 4096),
		NewUserScramCredentialRecord("alice", sha256, req.Upsertions[1].Salt, req.Upsertions[1].SaltedPassword, 8192),
	}
	if !reflect.DeepEqual(recs, wantRecs) {
		t.Fatalf("records %+v, want %+v", recs, wantRecs)
	}
	// Accepted users answer in the order their alterations come.
	if got, want := answers(resp), []string{"bob:ok", "alice:ok"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("answers %q, want %q", got, want)
	}
	if _, ok := scramCredential(img, sasl.ScramSHA256, "alice"); !ok {
		t.Fatal("alice has no SCRAM-SHA-256 credential")
	}

	// Refusals answer after the accepted users, sorted by name.
	req.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{scramDelete("alice", 1), scramDelete("carol", 1), scramDelete("bob", 2)}
	req.Upsertions = []kmsg.AlterUserSCRAMCredentialsRequestUpsertion{scramUpsert("bob", 2, 4096, "again"), scramUpsert("dan", 1, 4095, "x"), scramUpsert("eve", 1, 4096, "eve-secret")}
	recs, resp, img = decideOn(t, e, img, (*Env).AlterUserScramCredentials, req)
	wantRecs = []metadata.Record{
		&metadata.RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1},
		NewUserScramCredentialRecord("eve", sha256, req.Upsertions[2].Salt, req.Upsertions[2].SaltedPassword, 4096),
	}
	if !reflect.DeepEqual(recs, wantRecs) {
		t.Fatalf("records %+v, want %+v", recs, wantRecs)
	}
	want := []string{
		"alice:ok",
		"eve:ok",
		"bob:" + kerr.DuplicateResource.Error() + ":A user credential cannot be altered twice in the same request",
		"carol:" + kerr.ResourceNotFound.Error() + ":Attempt to delete a user credential that does not exist",
		"dan:" + kerr.UnacceptableCredential.Error() + ":Too few iterations",
	}
	if got := answers(resp); !reflect.DeepEqual(got, want) {
		t.Fatalf("answers %q, want %q", got, want)
	}
	if _, ok := scramCredential(img, sasl.ScramSHA256, "alice"); ok {
		t.Fatal("alice's deleted credential remains")
	}
	if _, ok := scramCredential(img, sasl.ScramSHA512, "bob"); !ok {
		t.Fatal("bob's refused deletion removed his credential")
	}
	if len(img.ScramCredentials) != 2 {
		t.Fatalf("credentials %v, want bob's and eve's", img.ScramCredentials)
	}

	// Below metadata.version 3.5-IV2 nothing is written.
	recs, resp, _ = decideOn(t, e, atVersion(scramSupportedMetadataVersion-1), (*Env).AlterUserScramCredentials, req)
	if len(recs) != 0 || len(resp.Results) != 5 {
		t.Fatalf("below 3.5-IV2: records %v, answers %q", recs, answers(resp))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != kerr.UnsupportedVersion.Code || *r.ErrorMessage != "The current metadata.version does not support SCRAM" {
			t.Fatalf("below 3.5-IV2: %q", answers(resp))
		}
	}

	// A commit failure answers every user named once, sorted.
	failed := AlterUserScramCredentialsFailed(req, commitError(errNotController))
	if got := answers(failed); len(got) != 5 || got[0] != "alice:"+kerr.NotController.Error()+":"+errNotController.Error() || failed.Results[4].User != "eve" {
		t.Fatalf("failed commit: %q", got)
	}
	for _, r := range failed.Results {
		if r.ErrorCode != kerr.NotController.Code {
			t.Fatalf("failed commit: %q", answers(failed))
		}
	}
}
