package broker

// ListConfigResources (key 74), versions 0-1: KIP-1142's list of the
// resources that have configs (v0 was KIP-714's ListClientMetricsResources).
//
// Per requested type, it lists the groups and client-metrics resources that have
// dynamic configs, the registered brokers with an endpoint on the
// request's listener (as BROKER and BROKER_LOGGER resources) and every
// topic, in Kafka's type order, names sorted. A type the version does not
// know is UNSUPPORTED_VERSION for the whole request, as in Kafka.
// kafka-configs --describe relies on it to find groups that have configs
// but no members.
//
// Authorization: DESCRIBE_CONFIGS on the cluster, else
// CLUSTER_AUTHORIZATION_FAILED for the whole request.
//
// This file is the worked example of docs/adding-an-api.md: the
// descriptor, then the handler and what only it uses.

import (
	"context"
	"slices"
	"sort"
	"strconv"

	"github.com/gregorbroker/gregor/broker/network"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(api{
		key: kmsg.ListConfigResources, min: 0, max: 1,
		listeners:    clientListeners,
		authorizedAs: "DESCRIBE_CONFIGS on the cluster",
		errorAnswer: errorAnswerOf(func(_ *kmsg.ListConfigResourcesRequest, out *kmsg.ListConfigResourcesResponse, e apiErr) {
			out.ErrorCode = e.code
		}),
		handle: (*Broker).handleListConfigResources,
	})
}

// listedConfigTypes are the types ListConfigResources v1 lists, in the
// order Kafka's handleListConfigResources adds them.
func listedConfigTypes() []metadata.ConfigResourceType {
	return []metadata.ConfigResourceType{
		metadata.ConfigResourceGroup, metadata.ConfigResourceClientMetrics, metadata.ConfigResourceBrokerLogger,
		metadata.ConfigResourceBroker, metadata.ConfigResourceTopic,
	}
}

func (b *Broker) handleListConfigResources(ctx context.Context, r *network.Request) {
	req := r.Body.(*kmsg.ListConfigResourcesRequest)
	resp := req.ResponseKind().(*kmsg.ListConfigResourcesResponse)
	if !b.clusterAllowed(identityOf(r), kmsg.ACLOperationDescribeConfigs) {
		r.Respond(errorResponse(req, errCode(kerr.ClusterAuthorizationFailed)))
		return
	}
	// v0 (ListClientMetricsResources) knows only client metrics.
	supported := listedConfigTypes()
	if req.Version == 0 {
		supported = []metadata.ConfigResourceType{metadata.ConfigResourceClientMetrics}
	}
	wanted := map[metadata.ConfigResourceType]bool{}
	for _, t := range req.ResourceTypes {
		if !slices.Contains(supported, metadata.ConfigResourceType(t)) {
			resp.ErrorCode = kerr.UnsupportedVersion.Code
			r.Respond(resp)
			return
		}
		wanted[metadata.ConfigResourceType(t)] = true
	}
	img := b.meta.Image()
	resp.ConfigResources = []kmsg.ListConfigResourcesResponseConfigResource{}
	for _, t := range supported {
		if len(wanted) > 0 && !wanted[t] {
			continue
		}
		for _, name := range configResourceNames(img, t, r.Listener()) {
			cr := kmsg.NewListConfigResourcesResponseConfigResource()
			cr.Name, cr.Type = name, int8(t)
			resp.ConfigResources = append(resp.ConfigResources, cr)
		}
	}
	r.Respond(resp)
}

// configResourceNames are the resources of one type that
// ListConfigResources lists, sorted.
func configResourceNames(img *metadata.Image, t metadata.ConfigResourceType, listener string) []string {
	var names []string
	switch t {
	case metadata.ConfigResourceGroup, metadata.ConfigResourceClientMetrics:
		for res := range img.Configs {
			if res.Type == t {
				names = append(names, res.Name)
			}
		}
	case metadata.ConfigResourceBroker, metadata.ConfigResourceBrokerLogger:
		for id, br := range img.Brokers {
			if slices.ContainsFunc(br.Endpoints, func(ep metadata.Endpoint) bool { return ep.Name == listener }) {
				names = append(names, strconv.Itoa(int(id)))
			}
		}
	case metadata.ConfigResourceTopic:
		for name := range img.Topics.All() {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	return names
}
