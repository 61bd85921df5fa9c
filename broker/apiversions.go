package broker

// ApiVersions (key 18), versions 0-4.
//
// The API list is the handler registry of the listener the request came in
// on (client or controller listener). v3+ carries the feature tags that
// kafka-features reads: supported ranges of this node and the finalized
// levels from the metadata image. As in Kafka (KAFKA-17492), features whose
// supported minimum is 0 are left out below v4 because older clients
// cannot parse a zero minimum. An ApiVersions version we do not know is
// answered in the v0 format with UNSUPPORTED_VERSION (conn.go).

import (
	"context"
	"regexp"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// softwareNameOrVersion is Kafka's rule for ClientSoftwareName and
// ClientSoftwareVersion (KIP-511).
var softwareNameOrVersion = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

func (b *Broker) handleApiVersions(ctx context.Context, r *request) {
	req := r.kreq.(*kmsg.ApiVersionsRequest)
	resp := b.apiVersionsFor(r.conn.listener, r.version())
	if r.version() >= 3 && (!softwareNameOrVersion.MatchString(req.ClientSoftwareName) || !softwareNameOrVersion.MatchString(req.ClientSoftwareVersion)) {
		resp.ErrorCode = kerr.InvalidRequest.Code
	}
	r.respond(resp)
}

func (b *Broker) apiVersionsFor(l *listener, version int16) *kmsg.ApiVersionsResponse {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(version)
	resp.ApiKeys = l.registry.APIKeys()
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
