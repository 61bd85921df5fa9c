package decide

import (
	"reflect"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
)

// featureUpdate is an UpdateFeatures request of one update.
func featureUpdate(version int16, name string, level int16, upgradeType int8) *kmsg.UpdateFeaturesRequest {
	req := kmsg.NewPtrUpdateFeaturesRequest()
	req.Version = version
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = name, level, upgradeType
	u.AllowDowngrade = upgradeType != upgradeTypeUpgrade
	req.FeatureUpdates = []kmsg.UpdateFeaturesRequestFeatureUpdate{u}
	return req
}

func TestFeatureDecisionsWithoutAQuorum(t *testing.T) {
	e := testEnv()
	e.SupportedFeatures["group.version"] = [2]int16{0, 1}
	e.SupportedFeatures[metadata.EligibleLeaderReplicasFeature] = [2]int16{0, 1}
	img := imageOf(t,
		&metadata.FeatureLevelRecord{Name: metadata.MetadataVersionFeature, FeatureLevel: 7},
		&metadata.RegisterBrokerRecord{BrokerID: 1, BrokerEpoch: 1, IncarnationID: protocol.RandomUUID(), LogDirs: []protocol.UUID{protocol.RandomUUID()},
			Features: []metadata.BrokerFeature{
				{Name: metadata.MetadataVersionFeature, MinLevel: 7, MaxLevel: metadata.LatestMetadataVersion},
				{Name: "group.version", MinLevel: 0, MaxLevel: 1},
				{Name: metadata.EligibleLeaderReplicasFeature, MinLevel: 0, MaxLevel: 1},
			}},
	)
	const prefix = "The update failed for all features since the following feature had an error: "

	validateOnly := featureUpdate(1, "group.version", 1, upgradeTypeUpgrade)
	validateOnly.ValidateOnly = true
	recs, resp, _ := decideOn(t, e, img, (*Env).UpdateFeatures, validateOnly)
	if len(recs) != 0 || resp.ErrorCode != 0 || len(resp.Results) != 1 {
		t.Fatalf("validate only: records %v, answer %+v", recs, resp)
	}

	recs, resp, img = decideOn(t, e, img, (*Env).UpdateFeatures, featureUpdate(1, "group.version", 1, upgradeTypeUpgrade))
	if len(recs) != 1 || resp.ErrorCode != 0 || len(resp.Results) != 1 || resp.Results[0].Feature != "group.version" || img.Features["group.version"] != 1 {
		t.Fatalf("upgrade: records %v, answer %+v, features %v", recs, resp, img.Features)
	}

	// Version 2 answers without per-feature results.
	recs, resp, img = decideOn(t, e, img, (*Env).UpdateFeatures, featureUpdate(2, "group.version", 0, upgradeTypeSafeDowngrade))
	if len(recs) != 1 || resp.ErrorCode != 0 || len(resp.Results) != 0 || img.Features["group.version"] != 0 {
		t.Fatalf("v2 safe downgrade: records %v, answer %+v, features %v", recs, resp, img.Features)
	}

	// One update the controller refuses fails the whole request.
	refused := featureUpdate(1, "group.version", 1, upgradeTypeUpgrade)
	bad := featureUpdate(1, "group.version", 5, upgradeTypeUpgrade).FeatureUpdates[0]
	bad.Feature = "nope.version"
	refused.FeatureUpdates = append(refused.FeatureUpdates, bad)
	recs, resp, _ = decideOn(t, e, img, (*Env).UpdateFeatures, refused)
	if len(recs) != 0 || resp.ErrorCode != kerr.InvalidUpdateVersion.Code || len(resp.Results) != 0 ||
		resp.ErrorMessage == nil || *resp.ErrorMessage != prefix+"Invalid update version 5 for feature nope.version. Local controller 1 does not support this feature." {
		t.Fatalf("refused: records %v, answer %+v", recs, resp)
	}

	// ELR needs metadata.version 4.0-IV1 (23): refused at 7, also when the
	// same request upgrades metadata.version only to 22; accepted with an
	// upgrade to 23 in the same request.
	elrAt := func(mv int16) *kmsg.UpdateFeaturesRequest {
		req := featureUpdate(1, metadata.MetadataVersionFeature, mv, upgradeTypeUpgrade)
		req.FeatureUpdates = append(req.FeatureUpdates, featureUpdate(1, metadata.EligibleLeaderReplicasFeature, 1, upgradeTypeUpgrade).FeatureUpdates...)
		return req
	}
	for _, req := range []*kmsg.UpdateFeaturesRequest{featureUpdate(1, metadata.EligibleLeaderReplicasFeature, 1, upgradeTypeUpgrade), elrAt(22)} {
		mv := int16(7)
		if len(req.FeatureUpdates) == 2 {
			mv = 22
		}
		recs, resp, _ = decideOn(t, e, img, (*Env).UpdateFeatures, req)
		wantMsg := prefix + "Invalid update version 1 for feature eligible.leader.replicas.version. eligible.leader.replicas.version 1 requires metadata.version at least 4.0-IV1 (23), and it would be " +
			metadata.MetadataVersionName(mv) + " (" + strconv.Itoa(int(mv)) + ")."
		if len(recs) != 0 || resp.ErrorCode != kerr.InvalidUpdateVersion.Code || resp.ErrorMessage == nil || *resp.ErrorMessage != wantMsg {
			t.Fatalf("ELR at metadata.version %d: records %v, answer %+v, want %q", mv, recs, resp, wantMsg)
		}
	}
	recs, resp, _ = decideOn(t, e, img, (*Env).UpdateFeatures, elrAt(23))
	if resp.ErrorCode != 0 || len(recs) != 3 {
		t.Fatalf("ELR with metadata.version 23: records %v, answer %+v", recs, resp)
	}
	recs, resp, img = decideOn(t, e, img, (*Env).UpdateFeatures, featureUpdate(1, metadata.MetadataVersionFeature, metadata.LatestMetadataVersion, upgradeTypeUpgrade))
	if resp.ErrorCode != 0 || len(recs) != 1 || img.Features[metadata.MetadataVersionFeature] != metadata.LatestMetadataVersion {
		t.Fatalf("metadata.version upgrade from 7: records %v, answer %+v", recs, resp)
	}

	// Turning ELR on first writes the cluster-wide min.insync.replicas it
	// needs.
	recs, resp, img = decideOn(t, e, img, (*Env).UpdateFeatures, featureUpdate(1, metadata.EligibleLeaderReplicasFeature, 1, upgradeTypeUpgrade))
	want := []metadata.Record{
		&metadata.ConfigRecord{ResourceType: metadata.ConfigResourceBroker, Name: minInSyncReplicasConfig, Value: strPtr(defaultMinInSyncReplicas)},
		&metadata.FeatureLevelRecord{Name: metadata.EligibleLeaderReplicasFeature, FeatureLevel: 1},
	}
	if resp.ErrorCode != 0 || !reflect.DeepEqual(recs, want) || img.Features[metadata.EligibleLeaderReplicasFeature] != 1 {
		t.Fatalf("ELR on: records %v, answer %+v", recs, resp)
	}

	failed := UpdateFeaturesFailed(refused, commitError(errNotController))
	if failed.ErrorCode != kerr.NotController.Code || len(failed.Results) != 0 ||
		failed.ErrorMessage == nil || *failed.ErrorMessage != prefix+errNotController.Error() {
		t.Fatalf("failed commit: %+v", failed)
	}
}
