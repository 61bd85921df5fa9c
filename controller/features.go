package controller

// UpdateFeatures, with Kafka's FeatureControlManager checks: the level must
// be supported by this controller (cfg.SupportedFeatures) and by every
// registered broker, downgrades need a downgrade type, and metadata.version
// cannot go below 3.3-IV3 or be downgraded in a way that may lose metadata.
// All updates commit together or none does.

import (
	"context"
	"fmt"

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

// UpdateFeatures changes finalized feature levels.
func (c *Controller) UpdateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	resp := req.ResponseKind().(*kmsg.UpdateFeaturesResponse)
	type update struct {
		name        string
		level       int16
		upgradeType int8
	}
	var updates []update
	for _, u := range req.FeatureUpdates {
		t := u.UpgradeType
		if req.Version == 0 {
			t = upgradeTypeUpgrade
			if u.AllowDowngrade {
				t = upgradeTypeSafeDowngrade
			}
		}
		updates = append(updates, update{name: u.Feature, level: u.MaxVersionLevel, upgradeType: t})
	}
	validateOnly := req.ValidateOnly
	e, ok, err := submitTyped(c, ctx, func(img *metadata.Image, _ int64) ([]metadata.Record, *apiError) {
		var recs []metadata.Record
		for _, u := range updates {
			rec, e := c.updateFeature(img, u.name, u.level, u.upgradeType)
			if e != nil {
				return nil, e
			}
			recs = append(recs, rec)
		}
		if validateOnly {
			return nil, nil
		}
		for _, u := range updates {
			if u.name == metadata.EligibleLeaderReplicasFeature && u.level > 0 {
				recs = append(c.elrSafetyRecords(img), recs...)
				break
			}
		}
		return recs, nil
	})
	if !ok && err == nil {
		e = nil
	}
	if err != nil {
		e = commitError(err)
	}
	if e != nil {
		resp.ErrorCode = e.code()
		resp.ErrorMessage = strPtr("The update failed for all features since the following feature had an error: " + *e.message())
		return resp
	}
	if req.Version <= 1 {
		for _, u := range req.FeatureUpdates {
			r := kmsg.NewUpdateFeaturesResponseResult()
			r.Feature = u.Feature
			resp.Results = append(resp.Results, r)
		}
	}
	return resp
}

func (c *env) updateFeature(img *metadata.Image, name string, level int16, upgradeType int8) (metadata.Record, *apiError) {
	invalid := func(format string, args ...any) *apiError {
		return newAPIError(kerr.InvalidUpdateVersion, "Invalid update version %d for feature %s. %s", level, name, fmt.Sprintf(format, args...))
	}
	if upgradeType < upgradeTypeUpgrade || upgradeType > upgradeTypeUnsafeDowngrade {
		return nil, invalid("The controller does not support the given upgrade type.")
	}
	current := img.Features[name]
	if level < 0 {
		return nil, invalid("A feature version cannot be less than 0.")
	}
	if reason := c.reasonNotSupported(img, name, level); reason != "" {
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
		invalidMV := func(msg string) *apiError {
			return newAPIError(kerr.InvalidUpdateVersion, "Invalid metadata.version %d. %s", level, msg)
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

// reasonNotSupported says why level of feature is not supported by this
// controller or a registered broker ("" if it is).
func (c *env) reasonNotSupported(img *metadata.Image, name string, level int16) string {
	r, ok := c.supportedFeatures[name]
	if !ok {
		r = [2]int16{0, 0}
	}
	if why := versionRangeReason(level, fmt.Sprintf("Local controller %d", c.nodeID), r); why != "" {
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

func init() {
	decides((*Controller).UpdateFeatures)
}
