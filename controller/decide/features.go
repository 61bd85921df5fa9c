package decide

// UpdateFeatures, with Kafka's FeatureControlManager checks: the level must
// be supported by this controller (cfg.SupportedFeatures) and by every
// registered broker, downgrades need a downgrade type, and metadata.version
// cannot go below 3.3-IV3 or be downgraded in a way that may lose metadata.
// All updates commit together or none does: one refused update, or a
// failed commit, answers the whole request with its error.

import (
	"context"
	"fmt"
	"maps"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	upgradeTypeUnknown         int8 = 0
	upgradeTypeUpgrade         int8 = 1
	upgradeTypeSafeDowngrade   int8 = 2
	upgradeTypeUnsafeDowngrade int8 = 3

	// minimumMetadataVersion is 3.3-IV3, the oldest level Kafka 4 accepts.
	minimumMetadataVersion     int16 = 7
	minimumMetadataVersionName       = "3.3-IV3"
)

// UpdateFeatures decides an UpdateFeatures request.
func (e *Env) UpdateFeatures(_ context.Context, img *metadata.Image, _ int64, req *kmsg.UpdateFeaturesRequest) ([]metadata.Record, *kmsg.UpdateFeaturesResponse) {
	var recs []metadata.Record
	enablesELR := false
	for _, u := range req.FeatureUpdates {
		upgradeType := u.UpgradeType
		if req.Version == 0 {
			upgradeType = upgradeTypeUpgrade
			if u.AllowDowngrade {
				upgradeType = upgradeTypeSafeDowngrade
			}
		}
		rec, err := e.updateFeature(img, u.Feature, u.MaxVersionLevel, upgradeType)
		if err != nil {
			return nil, UpdateFeaturesFailed(req, err)
		}
		recs = append(recs, rec)
		enablesELR = enablesELR || u.Feature == metadata.EligibleLeaderReplicasFeature && u.MaxVersionLevel > 0
	}
	if err := e.checkDependencies(img, req); err != nil {
		return nil, UpdateFeaturesFailed(req, err)
	}
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	if req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature = u.Feature
			resp.Results = append(resp.Results, r)
		}
	}
	if req.ValidateOnly {
		return nil, resp
	}
	if enablesELR {
		recs = append(e.ELRSafetyRecords(img), recs...)
	}
	return recs, resp
}

// UpdateFeaturesFailed answers the whole request with e, the failure of
// one update or of the commit: no feature is updated.
func UpdateFeaturesFailed(req *kmsg.UpdateFeaturesRequest, e *Error) *kmsg.UpdateFeaturesResponse {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	resp.ErrorCode = e.Code()
	resp.ErrorMessage = strPtr("The update failed for all features since the following feature had an error: " + *e.Message())
	return resp
}

func (e *Env) updateFeature(img *metadata.Image, name string, level int16, upgradeType int8) (metadata.Record, *Error) {
	invalid := func(format string, args ...any) *Error {
		return NewError(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", level, name, fmt.Sprintf(format, args...))
	}
	if upgradeType < upgradeTypeUpgrade || upgradeType > upgradeTypeUnsafeDowngrade {
		return nil, invalid("The controller does not support the given upgrade type.")
	}
	current := img.Features[name]
	if level < 0 {
		return nil, invalid("A feature version cannot be less than 0.")
	}
	if reason := e.reasonNotSupported(img, name, level); reason != "" {
		return nil, invalid("%s", reason)
	}
	if level < current {
		if upgradeType == upgradeTypeUpgrade {
			return nil, invalid("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.")
		}
	} else if level > current && upgradeType != upgradeTypeUpgrade {
		return nil, invalid("Can't downgrade to a newer version.")
	}
	if name == metadata.MetadataVersionFeature {
		invalidMV := func(msg string) *Error {
			return NewError(kerr.InvalidUpdateVersion, "Invalid metadata.version %d. %s", level, msg)
		}
		if level < minimumMetadataVersion {
			return nil, invalidMV("Unable to set a metadata.version less than " + minimumMetadataVersionName)
		}
		if level < current {
			// Every metadata.version step since 3.3 may change the record
			// formats, so a downgrade could lose metadata.
			if upgradeType == upgradeTypeUnsafeDowngrade {
				return nil, invalidMV("Unsafe metadata downgrade is not supported in this version.")
			}
			return nil, invalidMV("Refusing to perform the requested downgrade because it might delete metadata information.")
		}
	}
	return &metadata.FeatureLevelRecord{Name: name, FeatureLevel: level}, nil
}

// checkDependencies refuses updates that leave a feature at a level whose
// dependency (metadata.FeatureDependencyViolation) the finalized levels
// after the whole request do not meet, naming the first such update.
func (e *Env) checkDependencies(img *metadata.Image, req *kmsg.UpdateFeaturesRequest) *Error {
	levels := maps.Clone(img.Features)
	if levels == nil {
		levels = map[string]int16{}
	}
	for _, u := range req.FeatureUpdates {
		levels[u.Feature] = u.MaxVersionLevel
	}
	why := metadata.FeatureDependencyViolation(levels)
	if why == "" {
		return nil
	}
	u := req.FeatureUpdates[0]
	for _, cand := range req.FeatureUpdates {
		if cand.Feature != metadata.MetadataVersionFeature {
			u = cand
			break
		}
	}
	return NewError(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", u.MaxVersionLevel, u.Feature, why)
}

// reasonNotSupported says why level of feature is not supported by this
// controller or a registered broker ("" if it is).
func (e *Env) reasonNotSupported(img *metadata.Image, name string, level int16) string {
	r, ok := e.SupportedFeatures[name]
	if !ok {
		r = [2]int16{0, 0}
	}
	if why := versionRangeReason(level, fmt.Sprintf("Local controller %d", e.NodeID), r); why != "" {
		return why
	}
	for _, id := range sortedBrokerIDs(img) {
		br := [2]int16{0, 0}
		for _, f := range img.Brokers[id].Features {
			if f.Name == name {
				br = [2]int16{f.MinLevel, f.MaxLevel}
			}
		}
		if why := versionRangeReason(level, fmt.Sprintf("Broker %d", id), br); why != "" {
			return why
		}
	}
	return ""
}

func versionRangeReason(level int16, what string, r [2]int16) string {
	if level >= r[0] && level <= r[1] {
		return ""
	}
	if r[1] == 0 {
		return what + " does not support this feature."
	}
	return what + " only supports versions " + versionRangeString(r)
}

func versionRangeString(r [2]int16) string {
	switch {
	case r[0] == r[1]:
		return fmt.Sprint(r[0])
	case r[1] == 32767:
		return fmt.Sprintf("%d+", r[0])
	}
	return fmt.Sprintf("%d-%d", r[0], r[1])
}
