package broker

// Wire tests of authorization, one per API family: a request the ACLs
// deny gets Kafka's error code where Kafka puts it. Every connection is
// User:ANONYMOUS from 127.0.0.1 (PLAINTEXT), so the ACLs deny that
// principal (or grant it, with allow.everyone.if.no.acl.found off). As in
// Kafka, once any ACL applies to a resource, allow.everyone.if.no.acl.found
// no longer does: an operation not allowed by some ACL is denied.

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/broker/authz"
	"github.com/gregorbroker/gregor/broker/controllerclient"
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const anonymous = "User:ANONYMOUS"

func aclFor(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) metadata.ACL {
	return metadata.ACL{ResourceType: rt, ResourceName: name, PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: anonymous, Host: "*", Operation: op, PermissionType: perm}
}

func deny(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) metadata.ACL {
	return aclFor(rt, name, op, kmsg.ACLPermissionTypeDeny)
}

func allow(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) metadata.ACL {
	return aclFor(rt, name, op, kmsg.ACLPermissionTypeAllow)
}

// setACLs creates acls through n's controller and waits until n's
// authorizer has indexed them.
func setACLs(t testing.TB, n *testNode, acls ...metadata.ACL) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	for _, a := range acls {
		c := kmsg.NewCreateACLsRequestCreation()
		c.ResourceType, c.ResourceName, c.ResourcePatternType = a.ResourceType, a.ResourceName, a.PatternType
		c.Principal, c.Host, c.Operation, c.PermissionType = a.Principal, a.Host, a.Operation, a.PermissionType
		req.Creations = append(req.Creations, c)
	}
	for _, r := range n.ctrl.CreateACLs(ctxFor(t), req).Results {
		if r.ErrorCode != 0 {
			t.Fatalf("creating ACLs: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	waitACLsIndexed(t, n)
}

func waitACLsIndexed(t testing.TB, n *testNode) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for set, indexed := n.b.authz.Indexed(); indexed < 0 || set != n.ctrl.Image().ACLs; set, indexed = n.b.authz.Indexed() {
		if time.Now().After(deadline) {
			t.Fatalf("the authorizer never indexed the image's %d ACLs: its index is of another set, with %d (-1: no index yet)", n.ctrl.Image().ACLs.Len(), indexed)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// call sends req to addr on a connection of its own and returns the
// answer at the request's version.
func call[R kmsg.Response](t testing.TB, addr string, req kmsg.Request) R {
	t.Helper()
	c := dialRaw(t.(*testing.T), addr)
	c.send(req, 1)
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	c.recv(resp)
	return resp.(R)
}

// createTopicOn creates a topic through n's controller and waits for it to
// take writes.
func createTopicOn(t testing.TB, n *testNode, name string, partitions int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 5000
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = name, partitions, 1
	req.Topics = append(req.Topics, ct)
	if resp := n.ctrl.CreateTopics(ctxFor(t), req); resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("creating %s: %v", name, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	if !n.b.replicas.WaitApplied(ctxFor(t), n.ctrl.Image().Offset) {
		t.Fatalf("%s never opened", name)
	}
}

// openNode is a node where everything not denied is allowed.
func openNode(t *testing.T) *testNode {
	return startAuthzNode(t, &authz.Options{AllowEveryoneIfNoACLFound: true}, nil)
}

func batchBytes(t testing.TB, transactional bool) []byte {
	t.Helper()
	bb := protocol.NewBatchBuilder(protocol.CodecNone)
	if transactional {
		bb.SetProducer(7, 0, 0).SetTransactional(true)
	}
	bb.Add(nil, []byte("v"), nil, time.Now().UnixMilli())
	b, err := bb.Build()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func produceReq(topic string, records []byte, txnID *string) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(11)
	req.Acks, req.TimeoutMillis, req.TransactionID = 1, 5000, txnID
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}}}}
	return req
}

func TestAuthzProduceAndFetch(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "open", 1)
	createTopicOn(t, n, "closed", 1)
	setACLs(t, n,
		deny(kmsg.ACLResourceTypeTopic, "closed", kmsg.ACLOperationWrite),
		deny(kmsg.ACLResourceTypeTopic, "closed", kmsg.ACLOperationRead),
		deny(kmsg.ACLResourceTypeTransactionalId, "txn", kmsg.ACLOperationWrite))
	for topic, want := range map[string]int16{"open": 0, "closed": kerr.TopicAuthorizationFailed.Code, "missing": kerr.TopicAuthorizationFailed.Code} {
		if topic == "missing" {
			// An unknown topic the principal may not write is not
			// disclosed: it is refused, not unknown.
			setACLs(t, n, deny(kmsg.ACLResourceTypeTopic, "missing", kmsg.ACLOperationWrite))
		}
		resp := call[*kmsg.ProduceResponse](t, n.addr, produceReq(topic, batchBytes(t, false), nil))
		if got := resp.Topics[0].Partitions[0].ErrorCode; got != want {
			t.Fatalf("produce to %s: %v, want %v", topic, kerr.ErrorForCode(got), kerr.ErrorForCode(want))
		}
	}
	// A transactional batch needs WRITE on the transactional id: the
	// whole request is refused without it.
	resp := call[*kmsg.ProduceResponse](t, n.addr, produceReq("open", batchBytes(t, true), kmsg.StringPtr("txn")))
	if got := resp.Topics[0].Partitions[0].ErrorCode; got != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional produce: %v", kerr.ErrorForCode(got))
	}

	fetch := kmsg.NewPtrFetchRequest()
	fetch.SetVersion(12)
	fetch.ReplicaID, fetch.MaxWaitMillis, fetch.MaxBytes = -1, 10, 1<<20
	for _, topic := range []string{"open", "closed"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		ft.Partitions = append(ft.Partitions, fp)
		fetch.Topics = append(fetch.Topics, ft)
	}
	fr := call[*kmsg.FetchResponse](t, n.addr, fetch)
	codes := map[string]int16{}
	for _, rt := range fr.Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["open"] != 0 || codes["closed"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("fetch codes %v", codes)
	}
	// A follower's fetch needs CLUSTER_ACTION on the cluster.
	setACLs(t, n, deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction))
	fetch.ReplicaID = 2
	fr = call[*kmsg.FetchResponse](t, n.addr, fetch)
	for _, rt := range fr.Topics {
		if rt.Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.Fatalf("follower fetch of %s: %v", rt.Topic, kerr.ErrorForCode(rt.Partitions[0].ErrorCode))
		}
	}
}

func TestAuthzMetadata(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "seen", 1)
	createTopicOn(t, n, "hidden", 1)
	setACLs(t, n,
		deny(kmsg.ACLResourceTypeTopic, "hidden", kmsg.ACLOperationDescribe),
		allow(kmsg.ACLResourceTypeTopic, "nocreate", kmsg.ACLOperationDescribe),
		deny(kmsg.ACLResourceTypeTopic, "nocreate", kmsg.ACLOperationCreate),
		allow(kmsg.ACLResourceTypeTopic, "seen", kmsg.ACLOperationAll),
		deny(kmsg.ACLResourceTypeTopic, "seen", kmsg.ACLOperationWrite))
	all := kmsg.NewPtrMetadataRequest()
	all.SetVersion(10)
	all.IncludeClusterAuthorizedOperations, all.IncludeTopicAuthorizedOperations = true, true
	resp := call[*kmsg.MetadataResponse](t, n.addr, all)
	for _, mt := range resp.Topics {
		if *mt.Topic == "hidden" {
			t.Fatal("all topics include one the principal may not describe")
		}
		if *mt.Topic == "seen" {
			// Every topic operation but WRITE.
			want := int32(1<<3 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11)
			if mt.AuthorizedOperations != want {
				t.Fatalf("seen's authorized operations %b, want %b", mt.AuthorizedOperations, want)
			}
		}
	}
	if resp.AuthorizedOperations != int32(1<<5|1<<7|1<<8|1<<9|1<<10|1<<11|1<<12) {
		t.Fatalf("cluster authorized operations %b", resp.AuthorizedOperations)
	}
	// Auto-creation needs CREATE on the cluster or on the topic.
	setACLs(t, n, deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationCreate))
	named := kmsg.NewPtrMetadataRequest()
	named.SetVersion(12)
	named.AllowAutoTopicCreation = true
	for _, name := range []string{"hidden", "seen", "nocreate"} {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		named.Topics = append(named.Topics, rt)
	}
	resp = call[*kmsg.MetadataResponse](t, n.addr, named)
	codes := map[string]int16{}
	for _, mt := range resp.Topics {
		codes[*mt.Topic] = mt.ErrorCode
		if *mt.Topic == "hidden" && mt.TopicID != [16]byte{} {
			t.Fatal("a topic the principal may not describe answered with its id")
		}
	}
	if codes["hidden"] != kerr.TopicAuthorizationFailed.Code || codes["seen"] != 0 || codes["nocreate"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("named topic codes %v", codes)
	}
	if n.ctrl.Image().Topic("nocreate") != nil {
		t.Fatal("a topic was auto-created without CREATE")
	}
}

func TestAuthzTopicReads(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "closed", 1)
	setACLs(t, n,
		deny(kmsg.ACLResourceTypeTopic, "closed", kmsg.ACLOperationDescribe),
		// A follower (CLUSTER_ACTION) may ask OffsetForLeaderEpoch of
		// any topic: deny that too.
		deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction))
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.SetVersion(7)
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "closed"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Timestamp = -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	if c := call[*kmsg.ListOffsetsResponse](t, n.addr, lo).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(c))
	}
	oe := kmsg.NewPtrOffsetForLeaderEpochRequest()
	oe.SetVersion(4)
	oe.ReplicaID = -1
	ot := kmsg.NewOffsetForLeaderEpochRequestTopic()
	ot.Topic = "closed"
	ot.Partitions = append(ot.Partitions, kmsg.NewOffsetForLeaderEpochRequestTopicPartition())
	oe.Topics = append(oe.Topics, ot)
	if c := call[*kmsg.OffsetForLeaderEpochResponse](t, n.addr, oe).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("offset for leader epoch: %v", kerr.ErrorForCode(c))
	}
	dr := kmsg.NewPtrDeleteRecordsRequest()
	dr.SetVersion(2)
	dr.TimeoutMillis = 1000
	dt := kmsg.NewDeleteRecordsRequestTopic()
	dt.Topic = "closed"
	dp := kmsg.NewDeleteRecordsRequestTopicPartition()
	dp.Offset = -1
	dt.Partitions = append(dt.Partitions, dp)
	dr.Topics = append(dr.Topics, dt)
	if c := call[*kmsg.DeleteRecordsResponse](t, n.addr, dr).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("delete records: %v", kerr.ErrorForCode(c))
	}
	dp2 := kmsg.NewPtrDescribeProducersRequest()
	dpt := kmsg.NewDescribeProducersRequestTopic()
	dpt.Topic, dpt.Partitions = "closed", []int32{0}
	dp2.Topics = append(dp2.Topics, dpt)
	if c := call[*kmsg.DescribeProducersResponse](t, n.addr, dp2).Topics[0].Partitions[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("describe producers: %v", kerr.ErrorForCode(c))
	}
	dtp := kmsg.NewPtrDescribeTopicPartitionsRequest()
	dtp.ResponsePartitionLimit = 100
	for _, name := range []string{"closed", "nosuch"} {
		rt := kmsg.NewDescribeTopicPartitionsRequestTopic()
		rt.Topic = name
		dtp.Topics = append(dtp.Topics, rt)
	}
	got := map[string]int16{}
	for _, rt := range call[*kmsg.DescribeTopicPartitionsResponse](t, n.addr, dtp).Topics {
		got[*rt.Topic] = rt.ErrorCode
	}
	if got["closed"] != kerr.TopicAuthorizationFailed.Code || got["nosuch"] != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("describe topic partitions: %v", got)
	}
}

func TestAuthzGroups(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "t", 1)
	createTopicOn(t, n, "secret", 1)
	setACLs(t, n,
		deny(kmsg.ACLResourceTypeGroup, "nogroup", kmsg.ACLOperationRead),
		deny(kmsg.ACLResourceTypeGroup, "nogroup", kmsg.ACLOperationDescribe),
		deny(kmsg.ACLResourceTypeGroup, "nogroup", kmsg.ACLOperationDelete),
		deny(kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLOperationRead),
		deny(kmsg.ACLResourceTypeTopic, "secret", kmsg.ACLOperationDescribe))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(4)
	fc.CoordinatorKeys = []string{"nogroup"}
	if c := call[*kmsg.FindCoordinatorResponse](t, n.addr, fc).Coordinators[0].ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("find coordinator: %v", kerr.ErrorForCode(c))
	}
	join := kmsg.NewPtrJoinGroupRequest()
	join.SetVersion(9)
	join.Group, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis, join.ProtocolType = "nogroup", 10000, 10000, "consumer"
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	jr := call[*kmsg.JoinGroupResponse](t, n.addr, join)
	if jr.ErrorCode != kerr.GroupAuthorizationFailed.Code || jr.Generation != -1 || jr.Protocol != nil {
		t.Fatalf("join: %+v", jr)
	}
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.SetVersion(4)
	hb.Group = "nogroup"
	if c := call[*kmsg.HeartbeatResponse](t, n.addr, hb).ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("heartbeat: %v", kerr.ErrorForCode(c))
	}
	cgh := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cgh.Group, cgh.MemberID, cgh.RebalanceTimeoutMillis = "g", "m0000000000000000000000", 10000
	cgh.SubscribedTopicNames = []string{"t", "secret"}
	if c := call[*kmsg.ConsumerGroupHeartbeatResponse](t, n.addr, cgh).ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("consumer group heartbeat subscribing to a topic it may not describe: %v", kerr.ErrorForCode(c))
	}
	// Offsets: the group is allowed, the secret topic is not. The
	// coordinator is ready once it finds the group.
	fc.CoordinatorKeys = []string{"g"}
	for deadline := time.Now().Add(15 * time.Second); ; {
		code := call[*kmsg.FindCoordinatorResponse](t, n.addr, fc).Coordinators[0].ErrorCode
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no group coordinator after 15 s: FindCoordinator answers %v", kerr.ErrorForCode(code))
		}
		time.Sleep(20 * time.Millisecond)
	}
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.SetVersion(8)
	commit.Group, commit.Generation, commit.MemberID = "g", -1, ""
	for _, topic := range []string{"t", "secret"} {
		ct := kmsg.NewOffsetCommitRequestTopic()
		ct.Topic = topic
		cp := kmsg.NewOffsetCommitRequestTopicPartition()
		cp.Offset = 0
		ct.Partitions = append(ct.Partitions, cp)
		commit.Topics = append(commit.Topics, ct)
	}
	codes := map[string]int16{}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		for _, rt := range call[*kmsg.OffsetCommitResponse](t, n.addr, commit).Topics {
			codes[rt.Topic] = rt.Partitions[0].ErrorCode
		}
		if codes["t"] != kerr.CoordinatorLoadInProgress.Code && codes["t"] != kerr.NotCoordinator.Code || time.Now().After(deadline) {
			break
		}
	}
	if codes["t"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("offset commit codes %v", codes)
	}
	commit.Group = "nogroup"
	for _, rt := range call[*kmsg.OffsetCommitResponse](t, n.addr, commit).Topics {
		if rt.Partitions[0].ErrorCode != kerr.GroupAuthorizationFailed.Code {
			t.Fatalf("commit to a denied group: %v", kerr.ErrorForCode(rt.Partitions[0].ErrorCode))
		}
	}
	fetch := kmsg.NewPtrOffsetFetchRequest()
	fetch.SetVersion(8)
	fetch.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g"}, {Group: "nogroup"}}
	fr := call[*kmsg.OffsetFetchResponse](t, n.addr, fetch)
	if fr.Groups[1].ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("offset fetch of a denied group: %v", kerr.ErrorForCode(fr.Groups[1].ErrorCode))
	}
	if g := fr.Groups[0]; g.ErrorCode != 0 || len(g.Topics) != 1 || g.Topics[0].Topic != "t" {
		t.Fatalf("offset fetch of all partitions shows %+v", g.Topics)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.SetVersion(5)
	dg.Groups, dg.IncludeAuthorizedOperations = []string{"g", "nogroup"}, true
	groups := map[string]kmsg.DescribeGroupsResponseGroup{}
	for _, g := range call[*kmsg.DescribeGroupsResponse](t, n.addr, dg).Groups {
		groups[g.Group] = g
	}
	if groups["nogroup"].ErrorCode != kerr.GroupAuthorizationFailed.Code || groups["g"].ErrorCode != 0 ||
		groups["g"].AuthorizedOperations != int32(1<<3|1<<6|1<<8|1<<10|1<<11) {
		t.Fatalf("describe groups %+v", groups)
	}
	lg := kmsg.NewPtrListGroupsRequest()
	lg.SetVersion(4)
	setACLs(t, n, deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationDescribe))
	for _, g := range call[*kmsg.ListGroupsResponse](t, n.addr, lg).Groups {
		if g.Group == "nogroup" {
			t.Fatal("listed a group the principal may not describe")
		}
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.SetVersion(2)
	del.Groups = []string{"nogroup"}
	if c := call[*kmsg.DeleteGroupsResponse](t, n.addr, del).Groups[0].ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("delete groups: %v", kerr.ErrorForCode(c))
	}
	od := kmsg.NewPtrOffsetDeleteRequest()
	od.Group = "nogroup"
	if c := call[*kmsg.OffsetDeleteResponse](t, n.addr, od).ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("offset delete: %v", kerr.ErrorForCode(c))
	}
}

func TestAuthzTransactions(t *testing.T) {
	// Nothing is allowed but what is granted.
	n := startAuthzNode(t, &authz.Options{}, nil)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	init.ProducerID, init.ProducerEpoch = -1, -1
	if c := call[*kmsg.InitProducerIDResponse](t, n.addr, init).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("idempotent producer without IDEMPOTENT_WRITE or any topic WRITE: %v", kerr.ErrorForCode(c))
	}
	// WRITE on some topic is enough for an idempotent producer.
	setACLs(t, n, allow(kmsg.ACLResourceTypeTopic, "any", kmsg.ACLOperationWrite))
	if c := call[*kmsg.InitProducerIDResponse](t, n.addr, init).ErrorCode; c != 0 {
		t.Fatalf("idempotent producer with WRITE on a topic: %v", kerr.ErrorForCode(c))
	}
	init.TransactionalID, init.TransactionTimeoutMillis = kmsg.StringPtr("txn"), 10000
	if c := call[*kmsg.InitProducerIDResponse](t, n.addr, init).ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional producer: %v", kerr.ErrorForCode(c))
	}
	ap := kmsg.NewPtrAddPartitionsToTxnRequest()
	ap.SetVersion(3)
	ap.TransactionalID, ap.ProducerID, ap.ProducerEpoch = "txn", 1, 0
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "any", Partitions: []int32{0}}}
	if c := call[*kmsg.AddPartitionsToTxnResponse](t, n.addr, ap).Topics[0].Partitions[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("add partitions: %v", kerr.ErrorForCode(c))
	}
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.SetVersion(3)
	ao.TransactionalID, ao.Group = "txn", "g"
	if c := call[*kmsg.AddOffsetsToTxnResponse](t, n.addr, ao).ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("add offsets: %v", kerr.ErrorForCode(c))
	}
	end := kmsg.NewPtrEndTxnRequest()
	end.SetVersion(3)
	end.TransactionalID = "txn"
	if c := call[*kmsg.EndTxnResponse](t, n.addr, end).ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("end txn: %v", kerr.ErrorForCode(c))
	}
	setACLs(t, n, allow(kmsg.ACLResourceTypeTransactionalId, "txn", kmsg.ACLOperationWrite))
	// With the transactional id allowed, the group is checked next.
	if c := call[*kmsg.AddOffsetsToTxnResponse](t, n.addr, ao).ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("add offsets without the group: %v", kerr.ErrorForCode(c))
	}
	// An internal topic is never added by a client.
	ap.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "__consumer_offsets", Partitions: []int32{0}}, {Topic: "any", Partitions: []int32{0}}}
	codes := map[string]int16{}
	for _, rt := range call[*kmsg.AddPartitionsToTxnResponse](t, n.addr, ap).Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	if codes["__consumer_offsets"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("add partitions codes %v", codes)
	}
	to := kmsg.NewPtrTxnOffsetCommitRequest()
	to.SetVersion(3)
	to.TransactionalID, to.Group = "txn", "g"
	to.Topics = []kmsg.TxnOffsetCommitRequestTopic{{Topic: "any", Partitions: []kmsg.TxnOffsetCommitRequestTopicPartition{{Partition: 0}}}}
	if c := call[*kmsg.TxnOffsetCommitResponse](t, n.addr, to).Topics[0].Partitions[0].ErrorCode; c != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("txn offset commit: %v", kerr.ErrorForCode(c))
	}
	wm := kmsg.NewPtrWriteTxnMarkersRequest()
	wm.SetVersion(1)
	wm.Markers = []kmsg.WriteTxnMarkersRequestMarker{{ProducerID: 1, Topics: []kmsg.WriteTxnMarkersRequestMarkerTopic{{Topic: "any", Partitions: []int32{0}}}}}
	if c := call[*kmsg.WriteTxnMarkersResponse](t, n.addr, wm).Markers[0].Topics[0].Partitions[0].ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("write txn markers: %v", kerr.ErrorForCode(c))
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"other"}
	if c := call[*kmsg.DescribeTransactionsResponse](t, n.addr, dt).TransactionStates[0].ErrorCode; c != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("describe transactions: %v", kerr.ErrorForCode(c))
	}
}

func TestAuthzAdminThroughTheController(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "keep", 1)
	setACLs(t, n,
		deny(kmsg.ACLResourceTypeTopic, "forbidden", kmsg.ACLOperationCreate),
		deny(kmsg.ACLResourceTypeTopic, "keep", kmsg.ACLOperationDelete),
		deny(kmsg.ACLResourceTypeTopic, "keep", kmsg.ACLOperationAlter),
		deny(kmsg.ACLResourceTypeTopic, "keep", kmsg.ACLOperationAlterConfigs),
		deny(kmsg.ACLResourceTypeTopic, "keep", kmsg.ACLOperationDescribeConfigs),
		deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationAlter),
		allow(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationAlterConfigs))
	ct := call[*kmsg.CreateTopicsResponse](t, n.addr, createTopicsRequest("forbidden", 1, 5000))
	if r := ct.Topics[0]; r.ErrorCode != kerr.TopicAuthorizationFailed.Code || r.ErrorMessage == nil || *r.ErrorMessage != "Authorization failed." {
		t.Fatalf("create topics: %+v", r)
	}
	if n.ctrl.Image().Topic("forbidden") != nil {
		t.Fatal("created a topic without CREATE")
	}
	// Created, but its configs are not shown without DESCRIBE_CONFIGS.
	setACLs(t, n, allow(kmsg.ACLResourceTypeTopic, "blind", kmsg.ACLOperationCreate))
	ct = call[*kmsg.CreateTopicsResponse](t, n.addr, createTopicsRequest("blind", 1, 5000))
	if r := ct.Topics[0]; r.ErrorCode != 0 || r.ConfigErrorCode != kerr.TopicAuthorizationFailed.Code || r.NumPartitions != -1 || len(r.Configs) != 0 {
		t.Fatalf("create topics without describe configs: %+v", r)
	}
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.SetVersion(5)
	dt.TimeoutMillis, dt.TopicNames = 5000, []string{"keep"}
	if c := call[*kmsg.DeleteTopicsResponse](t, n.addr, dt).Topics[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("delete topics: %v", kerr.ErrorForCode(c))
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 5000
	cp.Topics = []kmsg.CreatePartitionsRequestTopic{{Topic: "keep", Count: 2}}
	if c := call[*kmsg.CreatePartitionsResponse](t, n.addr, cp).Topics[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("create partitions: %v", kerr.ErrorForCode(c))
	}
	iac := kmsg.NewPtrIncrementalAlterConfigsRequest()
	iac.SetVersion(1)
	iac.Resources = []kmsg.IncrementalAlterConfigsRequestResource{
		{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "keep", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "retention.ms", Value: kmsg.StringPtr("1000")}}},
		{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "", Configs: []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "log.cleaner.threads", Value: kmsg.StringPtr("1")}}},
	}
	codes := map[kmsg.ConfigResourceType]int16{}
	for _, r := range call[*kmsg.IncrementalAlterConfigsResponse](t, n.addr, iac).Resources {
		codes[r.ResourceType] = r.ErrorCode
	}
	if codes[kmsg.ConfigResourceTypeTopic] != kerr.TopicAuthorizationFailed.Code || codes[kmsg.ConfigResourceTypeBroker] != 0 {
		t.Fatalf("incremental alter configs %v", codes)
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.SetVersion(4)
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "keep"}}
	if r := call[*kmsg.DescribeConfigsResponse](t, n.addr, dc).Resources[0]; r.ErrorCode != kerr.TopicAuthorizationFailed.Code || *r.ErrorMessage != "Topic authorization failed." {
		t.Fatalf("describe configs: %+v", r)
	}
	el := kmsg.NewPtrElectLeadersRequest()
	el.SetVersion(2)
	el.TimeoutMillis = 5000
	if c := call[*kmsg.ElectLeadersResponse](t, n.addr, el).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("elect leaders: %v", kerr.ErrorForCode(c))
	}
	ca := kmsg.NewPtrCreateACLsRequest()
	ca.SetVersion(3)
	ca.Creations = []kmsg.CreateACLsRequestCreation{aclCreation(kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral, "User:a", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow)}
	if r := call[*kmsg.CreateACLsResponse](t, n.addr, ca).Results[0]; r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage == nil {
		t.Fatalf("create ACLs without ALTER on the cluster: %+v", r)
	}
	as := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	as.Deletions = []kmsg.AlterUserSCRAMCredentialsRequestDeletion{{Name: "alice", Mechanism: 1}}
	if r := call[*kmsg.AlterUserSCRAMCredentialsResponse](t, n.addr, as).Results; len(r) != 1 || r[0].User != "alice" ||
		r[0].ErrorCode != kerr.ClusterAuthorizationFailed.Code || r[0].ErrorMessage == nil {
		t.Fatalf("alter SCRAM credentials without ALTER on the cluster: %+v", r)
	}
	setACLs(t, n, deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationDescribe))
	ds := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	if r := call[*kmsg.DescribeUserSCRAMCredentialsResponse](t, n.addr, ds); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code || r.ErrorMessage != nil {
		t.Fatalf("describe SCRAM credentials without DESCRIBE on the cluster: %+v", r)
	}
	da := kmsg.NewPtrDescribeACLsRequest()
	da.SetVersion(3)
	da.ResourceType, da.ResourcePatternType, da.Operation, da.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if c := call[*kmsg.DescribeACLsResponse](t, n.addr, da).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe ACLs: %v", kerr.ErrorForCode(c))
	}
	dq := kmsg.NewPtrDescribeQuorumRequest()
	dq.SetVersion(2)
	if c := call[*kmsg.DescribeQuorumResponse](t, n.addr, dq).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe quorum: %v", kerr.ErrorForCode(c))
	}
	ld := kmsg.NewPtrDescribeLogDirsRequest()
	ld.SetVersion(4)
	if c := call[*kmsg.DescribeLogDirsResponse](t, n.addr, ld).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe log dirs: %v", kerr.ErrorForCode(c))
	}
	cl := kmsg.NewPtrDescribeClusterRequest()
	cl.SetVersion(1)
	cl.IncludeClusterAuthorizedOperations, cl.EndpointType = true, 1
	if ops := call[*kmsg.DescribeClusterResponse](t, n.addr, cl).ClusterAuthorizedOperations; ops != 0 {
		t.Fatalf("cluster authorized operations without DESCRIBE: %b", ops)
	}
}

// The controller listener's APIs need CLUSTER_ACTION (or, for requests
// clients send there, what the controller checks), with the principal of
// that connection; an Envelope is authorized for the principal it
// carries.
func TestAuthzControllerListener(t *testing.T) {
	n := openNode(t)
	ctrlAddr := n.b.Addrs()["CONTROLLER"]
	setACLs(t, n, deny(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction))
	hb := kmsg.NewPtrBrokerHeartbeatRequest()
	hb.SetVersion(1)
	hb.BrokerID, hb.BrokerEpoch = 1, n.b.brokerEpoch
	if c := call[*kmsg.BrokerHeartbeatResponse](t, ctrlAddr, hb).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("broker heartbeat: %v", kerr.ErrorForCode(c))
	}
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = requestBody(createTopicsRequest("viaenvelope", 1, 5000), 9)
	env.RequestPrincipal = controllerclient.EncodePrincipal(authz.Principal{Type: "User", Name: "alice"}, false)
	env.ClientHostAddress = []byte{127, 0, 0, 1}
	if c := call[*kmsg.EnvelopeResponse](t, ctrlAddr, env).ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("envelope without CLUSTER_ACTION: %v", kerr.ErrorForCode(c))
	}
	// The node's own broker reaches its controller in process: its
	// heartbeats and internal topics need no grant.
	if err := n.b.heartbeat(ctxFor(t)); err != nil {
		t.Fatalf("the node's own heartbeat: %v", err)
	}
	internal := kmsg.NewCreateTopicsRequestTopic()
	internal.Topic, internal.NumPartitions, internal.ReplicationFactor = "__internal_test", 1, 1
	if err := n.b.createInternalTopic(ctxFor(t), internal); err != nil {
		t.Fatalf("the node's own topic creation: %v", err)
	}
	if n.ctrl.Image().Brokers[1].Fenced {
		t.Fatal("the node's broker was fenced")
	}
}

// The forwarded principal decides: with CLUSTER_ACTION granted to the
// forwarding broker, an enveloped CreateTopics of a principal denied
// CREATE is refused and one of another principal passes.
func TestAuthzEnvelopeUsesTheForwardedPrincipal(t *testing.T) {
	n := openNode(t)
	ctrlAddr := n.b.Addrs()["CONTROLLER"]
	// Alice may create anything; mallory may not create mallory-*; the
	// forwarding connection may forward.
	setACLs(t, n,
		allow(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction),
		metadata.ACL{ResourceType: kmsg.ACLResourceTypeCluster, ResourceName: metadata.ClusterResourceName, PatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeAllow},
		metadata.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "mallory-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:mallory", Host: "*", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeDeny})
	send := func(user, topic string) *kmsg.CreateTopicsResponse {
		env := kmsg.NewPtrEnvelopeRequest()
		env.RequestData = requestBody(createTopicsRequest(topic, 1, 5000), 9)
		env.RequestPrincipal = controllerclient.EncodePrincipal(authz.Principal{Type: "User", Name: user}, false)
		env.ClientHostAddress = []byte{10, 0, 0, 9}
		er := call[*kmsg.EnvelopeResponse](t, ctrlAddr, env)
		if er.ErrorCode != 0 {
			t.Fatalf("envelope: %v", kerr.ErrorForCode(er.ErrorCode))
		}
		inner := kmsg.NewPtrCreateTopicsResponse()
		inner.SetVersion(7)
		if _, err := protocol.ParseResponse(er.ResponseData, inner); err != nil {
			t.Fatal(err)
		}
		return inner
	}
	if c := send("mallory", "mallory-1").Topics[0].ErrorCode; c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mallory's forwarded creation: %v", kerr.ErrorForCode(c))
	}
	if c := send("alice", "mallory-2").Topics[0].ErrorCode; c != 0 {
		t.Fatalf("alice's forwarded creation: %v", kerr.ErrorForCode(c))
	}
	// A principal that cannot be read is refused.
	env := kmsg.NewPtrEnvelopeRequest()
	env.RequestData = requestBody(createTopicsRequest("x", 1, 5000), 9)
	env.RequestPrincipal = []byte{0, 9, 1}
	env.ClientHostAddress = []byte{10, 0, 0, 9}
	if c := call[*kmsg.EnvelopeResponse](t, ctrlAddr, env).ErrorCode; c != kerr.PrincipalDeserializationFailure.Code {
		t.Fatalf("unreadable principal: %v", kerr.ErrorForCode(c))
	}
}

func TestAuthzSuperUser(t *testing.T) {
	n := startAuthzNode(t, &authz.Options{SuperUsers: []string{anonymous}}, nil)
	createTopicOn(t, n, "t", 1)
	setACLs(t, n, deny(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationWrite))
	if c := call[*kmsg.ProduceResponse](t, n.addr, produceReq("t", batchBytes(t, false), nil)).Topics[0].Partitions[0].ErrorCode; c != 0 {
		t.Fatalf("a super user was refused: %v", kerr.ErrorForCode(c))
	}
}

// ACL changes take effect on the next request of an open connection.
func TestAuthzFollowsACLChanges(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "t", 1)
	c := dialRaw(t, n.addr)
	produce := func(corr int32) int16 {
		c.send(produceReq("t", batchBytes(t, false), nil), corr)
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(11)
		c.recv(resp)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := produce(1); code != 0 {
		t.Fatal(kerr.ErrorForCode(code))
	}
	setACLs(t, n, deny(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationWrite))
	if code := produce(2); code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("after the DENY: %v", kerr.ErrorForCode(code))
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	n.ctrl.DeleteACLs(context.Background(), del)
	waitACLsIndexed(t, n)
	if code := produce(3); code != 0 {
		t.Fatalf("after deleting it: %v", kerr.ErrorForCode(code))
	}
}

// A broker's controller client forwards a client's request to a remote
// active controller in an Envelope carrying the client's principal and
// address, which the controller authorizes; the broker's own requests go
// as themselves, authorized with the principal of its connection.
func TestAuthzForwardingCarriesThePrincipal(t *testing.T) {
	n := openNode(t)
	setACLs(t, n,
		allow(kmsg.ACLResourceTypeCluster, metadata.ClusterResourceName, kmsg.ACLOperationClusterAction),
		metadata.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "x-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:mallory", Host: "*", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeDeny},
		metadata.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "x-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeAllow},
		metadata.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "x-", PatternType: kmsg.ACLResourcePatternTypePrefixed,
			Principal: anonymous, Host: "*", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeDeny})
	// An ACL on the cluster (CLUSTER_ACTION, for the forwarding
	// connection) means nobody has CREATE on it: the topic ACLs decide.
	cc := remoteControllerClient(t, n)
	create := func(ctx context.Context, topic string) int16 {
		t.Helper()
		answer, err := cc.Handle(ctx, createTopicsRequest(topic, 1, 5000))
		if err != nil {
			t.Fatal(err)
		}
		return answer.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode
	}
	as := func(user string) context.Context {
		return withIdentity(ctxFor(t), identity{principal: authz.Principal{Type: "User", Name: user}, host: "10.1.1.1", addr: netip.MustParseAddr("10.1.1.1")})
	}
	if c := create(as("mallory"), "x-1"); c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("mallory's forwarded creation: %v", kerr.ErrorForCode(c))
	}
	if c := create(as("alice"), "x-2"); c != 0 {
		t.Fatalf("alice's forwarded creation: %v", kerr.ErrorForCode(c))
	}
	// No identity: the broker's own request, as its connection's
	// principal (User:ANONYMOUS here), which the ACLs deny.
	if c := create(ctxFor(t), "x-3"); c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("the broker's own creation as User:ANONYMOUS: %v", kerr.ErrorForCode(c))
	}
	// The address travels too: a DENY for alice from her host applies.
	setACLs(t, n, metadata.ACL{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "x-4", PatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "10.1.1.1", Operation: kmsg.ACLOperationCreate, PermissionType: kmsg.ACLPermissionTypeDeny})
	if c := create(as("alice"), "x-4"); c != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("alice's forwarded creation from a denied host: %v", kerr.ErrorForCode(c))
	}
}

// A client whose CreateAcls was answered finds the ACL in force on its
// next request, even before the image subscription has indexed it: the
// check indexes the node's current image itself.
func TestAuthzDecidesOnTheImageACLChangesWereAnsweredWith(t *testing.T) {
	n := openNode(t)
	createTopicOn(t, n, "t", 1)
	// The subscription that indexes new images stops: only the checks'
	// own look at the current image can see the DENY.
	n.b.stopACLs()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Version = 3
	c := kmsg.NewCreateACLsRequestCreation()
	d := deny(kmsg.ACLResourceTypeTopic, "t", kmsg.ACLOperationWrite)
	c.ResourceType, c.ResourceName, c.ResourcePatternType = d.ResourceType, d.ResourceName, d.PatternType
	c.Principal, c.Host, c.Operation, c.PermissionType = d.Principal, d.Host, d.Operation, d.PermissionType
	req.Creations = append(req.Creations, c)
	if code := call[*kmsg.CreateACLsResponse](t, n.addr, req).Results[0].ErrorCode; code != 0 {
		t.Fatalf("CreateAcls: %v", kerr.ErrorForCode(code))
	}
	if code := call[*kmsg.ProduceResponse](t, n.addr, produceReq("t", batchBytes(t, false), nil)).Topics[0].Partitions[0].ErrorCode; code != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("a produce right after the DENY was answered: %v", kerr.ErrorForCode(code))
	}
}

// TestAuthzShareState: the share group state RPCs and FindCoordinator's
// share keys need CLUSTER_ACTION, as Kafka's KafkaApis checks.
func TestAuthzShareState(t *testing.T) {
	n := startAuthzNode(t, &authz.Options{}, nil)
	topic := [16]byte{7}
	read := kmsg.NewPtrReadShareGroupStateRequest()
	read.GroupID = "q"
	read.Topics = []kmsg.ReadShareGroupStateRequestTopic{{TopicID: topic, Partitions: []kmsg.ReadShareGroupStateRequestTopicPartition{{Partition: 0}, {Partition: 1}}}}
	for _, p := range call[*kmsg.ReadShareGroupStateResponse](t, n.addr, read).Topics[0].Partitions {
		if p.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
			t.Fatalf("read share state, partition %d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode))
		}
	}
	write := kmsg.NewPtrWriteShareGroupStateRequest()
	write.GroupID = "q"
	write.Topics = []kmsg.WriteShareGroupStateRequestTopic{{TopicID: topic, Partitions: []kmsg.WriteShareGroupStateRequestTopicPartition{{Partition: 0}}}}
	if c := call[*kmsg.WriteShareGroupStateResponse](t, n.addr, write).Topics[0].Partitions[0].ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("write share state: %v", kerr.ErrorForCode(c))
	}
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.SetVersion(6)
	fc.CoordinatorType = 2
	fc.CoordinatorKeys = []string{"q:AAAAAAAAAAAAAAAAAAAAAA:0"}
	if c := call[*kmsg.FindCoordinatorResponse](t, n.addr, fc).Coordinators[0].ErrorCode; c != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("find a share coordinator: %v", kerr.ErrorForCode(c))
	}
	setACLs(t, n, allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationClusterAction))
	if c := call[*kmsg.ReadShareGroupStateResponse](t, n.addr, read).Topics[0].Partitions[0].ErrorCode; c == kerr.ClusterAuthorizationFailed.Code {
		t.Fatal("read share state with CLUSTER_ACTION: still refused")
	}
}
