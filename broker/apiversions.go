package broker

// ApiVersions (key 18), versions 0-4.
//
// The API list is the handler registry of the listener the request came in
// on (client or controller listener). v3+ carries the feature tags that
// kafka-features reads: supported ranges of this node and the finalized
// levels from the metadata image. As in Kafka (KAFKA-17492), features whose
// supported minimum is 0 are left out below v4 because older clients
// cannot parse a zero minimum. An ApiVersions version we do not know is
// answered in the v0 format with UNSUPPORTED_VERSION (broker/network's
// conn.go).

import (
	"context"
	"sort"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleApiVersions(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ApiVersionsRequest)
	resp := b.apiVersionsFor(r.APIKeys(), r.Version())
	if r.Version() >= 3 {
		if !network.ValidClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion) {
			resp.ErrorCode = kerr.InvalidRequest.Code
		} else {
			// Client telemetry subscriptions match on it (KIP-714).
			r.SetClientSoftware(req.ClientSoftwareName, req.ClientSoftwareVersion)
		}
	}
	r.Respond(resp)
}

// apiVersionsFor is the ApiVersions answer at version on a listener that
// advertises keys.
func (b *Broker) apiVersionsFor(keys []kmsg.ApiVersionsResponseApiKey, version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ApiKeys = keys
	if version < 3 {
		return resp
	}
	names := make([]string, 0, len(b.opts.SupportedFeatures))
	for name := range b.opts.SupportedFeatures {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		rng := b.opts.SupportedFeatures[name]
		if rng[0] == 0 && version < 4 {
			continue
		}
		f := kmsg.NewApiVersionsResponseSupportedFeature()
		f.Name, f.MinVersion, f.MaxVersion = name, rng[0], rng[1]
		resp.SupportedFeatures = append(resp.SupportedFeatures, f)
	}
	img := b.meta.Image()
	if img == nil {
		return resp
	}
	resp.FinalizedFeaturesEpoch = img.Offset
	finalized := make([]string, 0, len(img.Features))
	for name, level := range img.Features {
		if level > 0 {
			finalized = append(finalized, name)
		}
	}
	sort.Strings(finalized)
	for _, name := range finalized {
		level := img.Features[name]
		f := kmsg.NewApiVersionsResponseFinalizedFeature()
		f.Name, f.MinVersionLevel, f.MaxVersionLevel = name, level, level
		resp.FinalizedFeatures = append(resp.FinalizedFeatures, f)
	}
	return resp
}

func init() {
	register(api{
		key: kmsg.ApiVersions, min: 0, max: 4,
		listeners:    allListeners,
		authorizedAs: "nothing",
		handle:       (*Broker).handleApiVersions,
	})
}
