package metadata

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
)

// The metadata image: an immutable view of the committed metadata log.
// Handlers read the current *Image and never mutate it; applying records
// builds a new Image that shares unchanged parts with the previous one.

// ConfigResourceType mirrors Kafka's ConfigResource.Type codes.
type ConfigResourceType int8

const (
	ConfigResourceTopic        ConfigResourceType = 2
	ConfigResourceBroker       ConfigResourceType = 4
	ConfigResourceBrokerLogger ConfigResourceType = 8
	// ConfigResourceClientMetrics is a telemetry subscription (KIP-714).
	ConfigResourceClientMetrics ConfigResourceType = 16
	ConfigResourceGroup         ConfigResourceType = 32
)

// ConfigResource names what a config record applies to. Name "" with type
// broker is the cluster-wide default broker config.
type ConfigResource struct {
	Type ConfigResourceType
	Name string
}

// Endpoint is one listener of a broker or controller.
type Endpoint struct {
	Name             string // listener name, e.g. PLAINTEXT
	Host             string
	Port             int32
	SecurityProtocol int16
}

// Addr is the endpoint's host:port, an IPv6 host in brackets, as
// net.JoinHostPort writes it (the model imports nothing of networking).
func (e Endpoint) Addr() string {
	port := strconv.Itoa(int(e.Port))
	if strings.Contains(e.Host, ":") {
		return "[" + e.Host + "]:" + port
	}
	return e.Host + ":" + port
}

// Broker is a registered broker.
type Broker struct {
	ID                   int32
	Epoch                int64
	IncarnationID        protocol.UUID
	Endpoints            []Endpoint
	Rack                 *string
	Fenced               bool
	InControlledShutdown bool
	LogDirs              []protocol.UUID
	// Features are the feature ranges the broker said it supports.
	Features []BrokerFeature
}

func (b *Broker) String() string { return fmt.Sprintf("broker %d epoch %d", b.ID, b.Epoch) }

// Partition is one partition's replica assignment and leadership.
type Partition struct {
	// Replicas is the assignment; during a reassignment (KIP-455) it is
	// the union of the target replicas and RemovingReplicas, target first.
	Replicas []int32
	ISR      []int32
	// AddingReplicas and RemovingReplicas are set while a reassignment is
	// in progress: the target replicas not yet in the old assignment, and
	// the old replicas not in the target.
	AddingReplicas      []int32
	RemovingReplicas    []int32
	ELR                 []int32
	LastKnownELR        []int32
	Leader              int32 // -1 when there is none
	LeaderEpoch         int32
	PartitionEpoch      int32
	LeaderRecoveryState LeaderRecoveryState
	Directories         []protocol.UUID
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// Topic is a topic with its partitions, indexed by partition id. The
// partitions are a persistent vector (metadata/persist) so that a change
// to one partition of a large topic copies O(log n), not the topic.
type Topic struct {
	Name       string
	ID         protocol.UUID
	Partitions persist.Vector[Partition]
}

// Partition returns partition p of the topic, or nil if it has none
// (a negative p included). The Partition must not be modified.
func (t *Topic) Partition(p int32) *Partition {
	if p < 0 || int(p) >= t.Partitions.Len() {
		return nil
	}
	return t.Partitions.At(int(p))
}

// PartitionCount is the number of partitions, as an int32 as Kafka's
// protocol counts them.
func (t *Topic) PartitionCount() int32 { return int32(t.Partitions.Len()) }

// Topic returns the topic named name, or nil.
func (img *Image) Topic(name string) *Topic { return img.Topics.Lookup(name) }

// TopicByID returns the topic with id, or nil.
func (img *Image) TopicByID(id protocol.UUID) *Topic { return img.TopicsByID.Lookup(id) }

// Voter is one member of the controller quorum.
type Voter struct {
	ID          int32
	DirectoryID protocol.UUID
	Endpoints   []Endpoint
}

// Image is the committed cluster metadata at one offset of the metadata log.
type Image struct {
	// Offset is the raft index of the last applied entry, Epoch its term.
	Offset int64
	Epoch  int64

	ClusterID string
	// Features holds the finalized feature levels (metadata.version,
	// kraft.version, transaction.version, group.version, ...).
	Features map[string]int16

	Brokers map[int32]*Broker
	// Topics and TopicsByID index the same topics; they are persistent
	// maps (metadata/persist), so that a batch touching one topic copies
	// O(log topics) of them and subscribers can diff two images in
	// O(changed) (persist.Diff).
	Topics     persist.Map[string, *Topic]
	TopicsByID persist.Map[protocol.UUID, *Topic]
	Configs    map[ConfigResource]map[string]string
	// ACLs are the access control entries (acls.go); a new pointer
	// whenever they change.
	ACLs *ACLSet
	// ClientQuotas are the client quotas by entity (quotas.go).
	ClientQuotas map[QuotaEntity]map[string]float64

	// NextProducerID is the first producer id not yet handed out in a block.
	NextProducerID int64

	// ScramCredentials are the users' SCRAM credentials (scram.go).
	ScramCredentials map[ScramKey]ScramCredential
	// DelegationTokens are the delegation tokens by id
	// (delegationtokens.go).
	DelegationTokens map[string]*DelegationToken

	// LeaderID is the active controller's node id (-1 if none is known).
	LeaderID int32
	Voters   []Voter
	// Learners are the controllers that follow the log as raft learners
	// without voting (controller/membership.go).
	Learners []Voter
}

// ImageDigest is a SHA-256 of the records that rebuild img (a snapshot's
// content, in its deterministic order): two nodes with equal digests hold
// the same metadata.
func ImageDigest(img *Image) string {
	sum := sha256.Sum256(EncodeRecords(ImageRecords(img)))
	return hex.EncodeToString(sum[:])
}

// EndpointAddress is host:port of the endpoint on listener among eps, if
// one has a host.
func EndpointAddress(eps []Endpoint, listener string) (string, bool) {
	for _, ep := range eps {
		if ep.Name == listener && ep.Host != "" {
			return ep.Addr(), true
		}
	}
	return "", false
}

// VoterEndpoint is host:port of voter id's endpoint on listener among
// voters.
func VoterEndpoint(voters []Voter, id int32, listener string) (string, bool) {
	for _, v := range voters {
		if v.ID == id {
			if addr, ok := EndpointAddress(v.Endpoints, listener); ok {
				return addr, true
			}
		}
	}
	return "", false
}
