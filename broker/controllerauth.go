package broker

// What this node's controller checks before it acts on a request (Kafka's
// ControllerApis and AclApis on the controller): the requests clients send
// a broker, which forwards them (in process, or in an Envelope carrying
// the client's principal and address), and those sent straight to a
// controller listener, authorized with that connection's principal.
//
//   - CreateTopics: CREATE on the cluster, else CREATE on each topic
//     (TOPIC_AUTHORIZATION_FAILED "Authorization failed." for the others);
//     a created topic the principal may not DESCRIBE_CONFIGS is answered
//     without its configs, partitions and replication factor
//     (TopicConfigErrorCode TOPIC_AUTHORIZATION_FAILED).
//   - DeleteTopics: DELETE on the cluster, else DELETE on each topic; a
//     topic named by a principal that may not DESCRIBE it is refused
//     whether or not it exists, and one named by id is answered without
//     its name.
//   - CreatePartitions: ALTER on each topic.
//   - AlterConfigs, IncrementalAlterConfigs: ALTER_CONFIGS on the cluster
//     for BROKER and CLIENT_METRICS resources, on the topic or group for
//     theirs, with CLUSTER_, TOPIC_ and GROUP_AUTHORIZATION_FAILED.
//   - ALTER on the cluster: ElectLeaders, UpdateFeatures,
//     AlterPartitionReassignments, UnregisterBroker, AddRaftVoter,
//     RemoveRaftVoter, CreateAcls, DeleteAcls. DESCRIBE: DescribeQuorum,
//     ListPartitionReassignments. ALTER_CONFIGS: AlterClientQuotas.
//     CLUSTER_ACTION: BrokerRegistration,
//     BrokerHeartbeat, AllocateProducerIds, AlterPartition,
//     UpdateRaftVoter. A refusal fails the whole request with
//     CLUSTER_AUTHORIZATION_FAILED, as each API's error response carries
//     it.
//   - CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken:
//     DELEGATION_TOKEN_REQUEST_NOT_ALLOWED for a token-authenticated
//     principal (a forwarded one's flag is the envelope's), and
//     CREATE_TOKENS on the USER for a token of another owner
//     (DELEGATION_TOKEN_AUTHORIZATION_FAILED), as ControllerApis checks
//     them; the connection's protocol is the broker's to check
//     (delegationtokens.go), and a forwarded request's is not looked at.
//   - CreateAcls and DeleteAcls answer SECURITY_DISABLED ("No Authorizer
//     is configured.") when this node has no authorizer.
//
// Duplicates and unknown resource types are left for the controller to
// refuse, as Kafka refuses them before it authorizes.

import (
	"context"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// controllerFront is the local controller behind its authorization.
type controllerFront struct {
	b    *Broker
	ctrl LocalController
}

var noAuthorizerConfigured = "No Authorizer is configured."

// Handle authorizes req for the identity its context carries (none: this
// node's own request) and hands what passes to the controller. What is
// checked is the API's descriptor's: needsAuthorizer, controllerRefuse,
// clusterOperation, controllerAuthorize.
func (f controllerFront) Handle(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	b := f.b
	a := apiFor(req.Key())
	if a == nil {
		return f.ctrl.Handle(ctx, req)
	}
	if a.needsAuthorizer && b.authz == nil {
		return errorResponse(req, apiErr{code: kerr.SecurityDisabled.Code, msg: &noAuthorizerConfigured}), nil
	}
	who, ok := identityFrom(ctx)
	if ok {
		// The principal owns or renews the tokens it asks for.
		ctx = metadata.WithRequestPrincipal(ctx, who.principal.String())
		if a.controllerRefuse != nil {
			if refusal := a.controllerRefuse(f, who, req); refusal != nil {
				return refusal, nil
			}
		}
	}
	if !ok || b.authz == nil {
		return f.ctrl.Handle(ctx, req)
	}
	if op := a.clusterOperation; op != 0 {
		if !b.clusterAllowed(who, op) {
			return errorResponse(req, clusterDenied(who, op)), nil
		}
		return f.ctrl.Handle(ctx, req)
	}
	if a.controllerAuthorize != nil {
		return a.controllerAuthorize(f, ctx, who, req)
	}
	return f.ctrl.Handle(ctx, req)
}

// authorizedBy is a controllerAuthorize of one request type.
func authorizedBy[Req kmsg.Request](check func(f controllerFront, ctx context.Context, who identity, req Req) (kmsg.Response, error)) func(controllerFront, context.Context, identity, kmsg.Request) (kmsg.Response, error) {
	return func(f controllerFront, ctx context.Context, who identity, req kmsg.Request) (kmsg.Response, error) {
		return check(f, ctx, who, req.(Req))
	}
}

// refusedBy is a controllerRefuse of one request type.
func refusedBy[Req kmsg.Request](refuse func(f controllerFront, who identity, req Req) kmsg.Response) func(controllerFront, identity, kmsg.Request) kmsg.Response {
	return func(f controllerFront, who identity, req kmsg.Request) kmsg.Response {
		return refuse(f, who, req.(Req))
	}
}

func (f controllerFront) createTopics(ctx context.Context, who identity, req *kmsg.CreateTopicsRequest) (kmsg.Response, error) {
	b := f.b
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	clusterCreate := b.allowedQuiet(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
	denied := map[string]bool{}
	describable := map[string]bool{}
	inner := *req
	inner.Topics = nil
	for _, t := range req.Topics {
		name := t.Topic
		if count[name] > 1 || name == "__cluster_metadata" {
			inner.Topics = append(inner.Topics, t) // the controller refuses it
			continue
		}
		if !clusterCreate && !b.allowed(who, kmsg.ACLOperationCreate, kmsg.ACLResourceTypeTopic, name) {
			denied[name] = true
			continue
		}
		describable[name] = b.allowedQuiet(who, kmsg.ACLOperationDescribeConfigs, kmsg.ACLResourceTypeTopic, name)
		inner.Topics = append(inner.Topics, t)
	}
	var resp *kmsg.CreateTopicsResponse
	if len(inner.Topics) > 0 {
		answer, err := f.ctrl.Handle(ctx, &inner)
		if err != nil {
			return nil, err
		}
		resp = answer.(*kmsg.CreateTopicsResponse)
	} else {
		resp = req.ResponseKind().(*kmsg.CreateTopicsResponse)
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.ErrorCode == 0 && !describable[t.Topic] && count[t.Topic] == 1 {
			t.ConfigErrorCode = kerr.TopicAuthorizationFailed.Code
			t.NumPartitions, t.ReplicationFactor = -1, -1
			t.Configs = nil
		}
	}
	for _, t := range req.Topics {
		if denied[t.Topic] {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic, rt.ErrorCode, rt.ErrorMessage = t.Topic, kerr.TopicAuthorizationFailed.Code, kmsg.StringPtr("Authorization failed.")
			resp.Topics = append(resp.Topics, rt)
		}
	}
	return resp, nil
}

func (f controllerFront) deleteTopics(ctx context.Context, who identity, req *kmsg.DeleteTopicsRequest) (kmsg.Response, error) {
	b := f.b
	img := f.ctrl.Image()
	clusterDelete := b.allowedQuiet(who, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName)
	describable := func(name string) bool {
		return clusterDelete || b.allowed(who, kmsg.ACLOperationDescribe, kmsg.ACLResourceTypeTopic, name)
	}
	deletable := func(name string) bool {
		return clusterDelete || b.allowed(who, kmsg.ACLOperationDelete, kmsg.ACLResourceTypeTopic, name)
	}
	names := map[string]int{}
	ids := map[[16]byte]int{}
	for _, n := range req.TopicNames {
		names[n]++
	}
	for _, t := range req.Topics {
		switch {
		case t.Topic != nil && t.TopicID == [16]byte{}:
			names[*t.Topic]++
		case t.Topic == nil:
			ids[t.TopicID]++
		}
	}
	var refused []kmsg.DeleteTopicsResponseTopic
	refuse := func(name *string, id [16]byte) {
		rt := kmsg.NewDeleteTopicsResponseTopic()
		rt.Topic, rt.TopicID, rt.ErrorCode = name, id, kerr.TopicAuthorizationFailed.Code
		refused = append(refused, rt)
	}
	// byName decides a topic named once: false when it is refused here.
	byName := func(name string) bool {
		if names[name] > 1 {
			return true
		}
		if !describable(name) {
			refuse(kmsg.StringPtr(name), [16]byte{})
			return false
		}
		if img.Topic(name) != nil && !deletable(name) {
			refuse(kmsg.StringPtr(name), [16]byte{})
			return false
		}
		return true
	}
	inner := *req
	inner.TopicNames, inner.Topics = nil, nil
	for _, n := range req.TopicNames {
		if byName(n) {
			inner.TopicNames = append(inner.TopicNames, n)
		}
	}
	for _, t := range req.Topics {
		keep := true
		switch {
		case t.Topic != nil && t.TopicID == [16]byte{}:
			keep = byName(*t.Topic)
		case t.Topic == nil && ids[t.TopicID] == 1:
			if topic := img.TopicByID(t.TopicID); topic != nil && !deletable(topic.Name) {
				if describable(topic.Name) {
					refuse(kmsg.StringPtr(topic.Name), t.TopicID)
				} else {
					refuse(nil, t.TopicID)
				}
				keep = false
			}
		}
		if keep {
			inner.Topics = append(inner.Topics, t)
		}
	}
	var resp *kmsg.DeleteTopicsResponse
	if len(inner.TopicNames)+len(inner.Topics) > 0 {
		answer, err := f.ctrl.Handle(ctx, &inner)
		if err != nil {
			return nil, err
		}
		resp = answer.(*kmsg.DeleteTopicsResponse)
	} else {
		resp = req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp, nil
}

func (f controllerFront) createPartitions(ctx context.Context, who identity, req *kmsg.CreatePartitionsRequest) (kmsg.Response, error) {
	count := map[string]int{}
	for _, t := range req.Topics {
		count[t.Topic]++
	}
	inner := *req
	inner.Topics = nil
	var refused []kmsg.CreatePartitionsResponseTopic
	for _, t := range req.Topics {
		if count[t.Topic] == 1 && !f.b.allowed(who, kmsg.ACLOperationAlter, kmsg.ACLResourceTypeTopic, t.Topic) {
			rt := kmsg.NewCreatePartitionsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, kerr.TopicAuthorizationFailed.Code
			refused = append(refused, rt)
			continue
		}
		inner.Topics = append(inner.Topics, t)
	}
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	if len(inner.Topics) > 0 {
		answer, err := f.ctrl.Handle(ctx, &inner)
		if err != nil {
			return nil, err
		}
		resp = answer.(*kmsg.CreatePartitionsResponse)
	}
	resp.Topics = append(resp.Topics, refused...)
	return resp, nil
}

// alterConfigsDenied is ControllerApis.authorizeAlterResource: the error
// for a resource the principal may not alter, nil when it may (or when
// the resource is one the controller refuses for its type).
func (f controllerFront) alterConfigsDenied(who identity, t kmsg.ConfigResourceType, name string, incremental bool) *kerr.Error {
	switch metadata.ConfigResourceType(t) {
	case metadata.ConfigResourceBrokerLogger:
		// The broker's own loggers: IncrementalAlterConfigs alone may
		// change them, with ALTER_CONFIGS on the cluster.
		if incremental && !f.b.clusterAllowed(who, kmsg.ACLOperationAlterConfigs) {
			return kerr.ClusterAuthorizationFailed
		}
	case metadata.ConfigResourceBroker, metadata.ConfigResourceClientMetrics:
		if !f.b.clusterAllowed(who, kmsg.ACLOperationAlterConfigs) {
			return kerr.ClusterAuthorizationFailed
		}
	case metadata.ConfigResourceTopic:
		if !f.b.allowed(who, kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeTopic, name) {
			return kerr.TopicAuthorizationFailed
		}
	case metadata.ConfigResourceGroup:
		if !f.b.allowed(who, kmsg.ACLOperationAlterConfigs, kmsg.ACLResourceTypeGroup, name) {
			return kerr.GroupAuthorizationFailed
		}
	}
	return nil
}

// splitConfigResources keeps the resources the principal may alter (and
// those named twice, which the controller refuses) and returns the errors
// of the others.
func splitConfigResources[R any](f controllerFront, who identity, resources []R, key func(R) (kmsg.ConfigResourceType, string), incremental bool) (kept []R, refused []configRefusal) {
	type id struct {
		t    kmsg.ConfigResourceType
		name string
	}
	count := map[id]int{}
	for _, r := range resources {
		t, name := key(r)
		count[id{t, name}]++
	}
	for _, r := range resources {
		t, name := key(r)
		if count[id{t, name}] == 1 {
			if e := f.alterConfigsDenied(who, t, name, incremental); e != nil {
				refused = append(refused, configRefusal{t: t, name: name, code: e.Code})
				continue
			}
		}
		kept = append(kept, r)
	}
	return kept, refused
}

type configRefusal struct {
	t    kmsg.ConfigResourceType
	name string
	code int16
}

func (f controllerFront) alterConfigs(ctx context.Context, who identity, req *kmsg.AlterConfigsRequest) (kmsg.Response, error) {
	inner := *req
	var refused []configRefusal
	inner.Resources, refused = splitConfigResources(f, who, req.Resources, func(r kmsg.AlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return r.ResourceType, r.ResourceName
	}, false)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	if len(inner.Resources) > 0 {
		answer, err := f.ctrl.Handle(ctx, &inner)
		if err != nil {
			return nil, err
		}
		resp = answer.(*kmsg.AlterConfigsResponse)
	}
	var out []kmsg.AlterConfigsResponseResource
	for _, c := range refused {
		rr := kmsg.NewAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = c.t, c.name, c.code
		out = append(out, rr)
	}
	resp.Resources = append(out, resp.Resources...)
	return resp, nil
}

func (f controllerFront) incrementalAlterConfigs(ctx context.Context, who identity, req *kmsg.IncrementalAlterConfigsRequest) (kmsg.Response, error) {
	inner := *req
	var refused []configRefusal
	inner.Resources, refused = splitConfigResources(f, who, req.Resources, func(r kmsg.IncrementalAlterConfigsRequestResource) (kmsg.ConfigResourceType, string) {
		return r.ResourceType, r.ResourceName
	}, true)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	if len(inner.Resources) > 0 {
		answer, err := f.ctrl.Handle(ctx, &inner)
		if err != nil {
			return nil, err
		}
		resp = answer.(*kmsg.IncrementalAlterConfigsResponse)
	}
	var out []kmsg.IncrementalAlterConfigsResponseResource
	for _, c := range refused {
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceType, rr.ResourceName, rr.ErrorCode = c.t, c.name, c.code
		out = append(out, rr)
	}
	resp.Resources = append(out, resp.Resources...)
	return resp, nil
}

// createTokenRefusal is ControllerApis' answer refusing who's
// CreateDelegationToken, or nil when it goes to the controller.
func (f controllerFront) createTokenRefusal(who identity, r *kmsg.CreateDelegationTokenRequest) kmsg.Response {
	owner, ok := tokenOwner(r, who.principal)
	switch {
	case !ok:
		return createTokenError(r, kerr.UnknownServerError, who.principal, who.principal)
	case who.tokenAuthenticated:
		return createTokenError(r, kerr.DelegationTokenRequestNotAllowed, owner, who.principal)
	case owner != who.principal && !f.b.allowed(who, kmsg.ACLOperationCreateTokens, kmsg.ACLResourceTypeUser, owner.String()):
		return createTokenError(r, kerr.DelegationTokenAuthorizationFailed, owner, who.principal)
	}
	return nil
}

// tokenChangeRefusal is ControllerApis' answer refusing who's
// RenewDelegationToken or ExpireDelegationToken, or nil when it goes to
// the controller.
func (f controllerFront) tokenChangeRefusal(who identity, req kmsg.Request) kmsg.Response {
	if !who.tokenAuthenticated {
		return nil
	}
	resp := req.ResponseKind()
	tokenErrorResponse(resp, kerr.DelegationTokenRequestNotAllowed.Code)
	return resp
}
