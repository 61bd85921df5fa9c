package metadata

// Replay: applying committed records to an image. An Image is never changed
// after it is published; applying a batch copies only what the batch
// touches and shares everything else with the previous image. The topics
// and each topic's partitions are persistent collections (persist.Map,
// persist.Vector): a batch changing k partitions copies O(k · log n) of
// them, whatever the number of topics and partitions (a change to one
// partition of a 100,000-partition topic copied 18 MB when they were a Go
// map and a slice). The other top-level maps (brokers, configs, quotas,
// features) are small and still copied whole when a batch writes to them.

import (
	"cmp"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"github.com/gregorbroker/gregor/metadata/persist"
	"github.com/gregorbroker/gregor/protocol"
)

// EmptyImage is the image before any record is applied.
func EmptyImage(clusterID string) *Image {
	return &Image{
		Offset:    0,
		Epoch:     0,
		ClusterID: clusterID,
		Features:  map[string]int16{},
		Brokers:   map[int32]*Broker{},
		Configs:   map[ConfigResource]map[string]string{},
		ACLs:      &ACLSet{byID: map[protocol.UUID]ACL{}, count: map[ACL]int{}},
		LeaderID:  -1,

		ClientQuotas: map[QuotaEntity]map[string]float64{},
	}
}

// imageBuilder applies records on top of a base image without touching it.
type imageBuilder struct {
	next *Image

	featuresCopied bool
	brokersCopied  bool
	// topicsByName and topicsByID edit the topic maps once a record
	// touches them (topics); Done publishes them.
	topicsByName  *persist.MapEditor[string, *Topic]
	topicsByID    *persist.MapEditor[protocol.UUID, *Topic]
	configsCopied bool
	aclsCopied    bool
	scramCopied   bool
	tokensCopied  bool
	// Sub-objects already copied in this batch, safe to modify; a copied
	// topic's partitions are edited through its editor until done.
	topicCopied  map[protocol.UUID]*persist.VectorEditor[Partition]
	brokerCopied map[int32]bool
	configCopied map[ConfigResource]bool
	quotasCopied bool
	quotaCopied  map[QuotaEntity]bool
}

func newImageBuilder(base *Image) *imageBuilder {
	next := *base
	return &imageBuilder{next: &next}
}

// ApplyBatch returns the image after records, at offset/epoch. On error the
// base image is unchanged and the result must not be used.
func ApplyBatch(base *Image, records []Record, offset, epoch int64) (*Image, error) {
	b := newImageBuilder(base)
	for i, rec := range records {
		if err := b.apply(rec); err != nil {
			return nil, fmt.Errorf("applying record %d (type %d) at offset %d: %w", i, rec.Type(), offset, err)
		}
	}
	b.done()
	b.next.Offset = offset
	b.next.Epoch = epoch
	return b.next, nil
}

func (b *imageBuilder) features() map[string]int16 {
	if !b.featuresCopied {
		b.next.Features = maps.Clone(b.next.Features)
		if b.next.Features == nil {
			b.next.Features = map[string]int16{}
		}
		b.featuresCopied = true
	}
	return b.next.Features
}

func (b *imageBuilder) brokers() map[int32]*Broker {
	if !b.brokersCopied {
		b.next.Brokers = maps.Clone(b.next.Brokers)
		if b.next.Brokers == nil {
			b.next.Brokers = map[int32]*Broker{}
		}
		b.brokersCopied = true
		b.brokerCopied = map[int32]bool{}
	}
	return b.next.Brokers
}

// mutableBroker returns a copy of broker id that this batch may modify.
func (b *imageBuilder) mutableBroker(id int32) *Broker {
	brokers := b.brokers()
	old, ok := brokers[id]
	if !ok {
		return nil
	}
	if b.brokerCopied[id] {
		return old
	}
	cp := *old
	brokers[id] = &cp
	b.brokerCopied[id] = true
	return &cp
}

func (b *imageBuilder) topics() (byName *persist.MapEditor[string, *Topic], byID *persist.MapEditor[protocol.UUID, *Topic]) {
	if b.topicsByName == nil {
		b.topicsByName = b.next.Topics.Edit()
		b.topicsByID = b.next.TopicsByID.Edit()
		b.topicCopied = map[protocol.UUID]*persist.VectorEditor[Partition]{}
	}
	return b.topicsByName, b.topicsByID
}

// mutableTopic returns a copy of the topic that this batch may modify and
// the editor of its partitions (whose result done stores in the topic).
func (b *imageBuilder) mutableTopic(id protocol.UUID) (*Topic, *persist.VectorEditor[Partition]) {
	byName, byID := b.topics()
	old, ok := byID.Get(id)
	if !ok {
		return nil, nil
	}
	if parts, ok := b.topicCopied[id]; ok {
		return old, parts
	}
	cp := *old
	byName.Set(cp.Name, &cp)
	byID.Set(id, &cp)
	parts := cp.Partitions.Edit()
	b.topicCopied[id] = parts
	return &cp, parts
}

// done ends the batch: the topics it copied take their edited partitions
// and the topic maps their edited versions.
func (b *imageBuilder) done() {
	if b.topicsByName == nil {
		return
	}
	for id, parts := range b.topicCopied {
		if t, ok := b.topicsByID.Get(id); ok {
			t.Partitions = parts.Done()
		}
	}
	b.next.Topics = b.topicsByName.Done()
	b.next.TopicsByID = b.topicsByID.Done()
}

// ConfigTouched reports whether a ConfigRecord of res was applied
// between prev and img (a later image of the same log): one that set a
// value to what it was counts too, as Kafka's controller writes broker
// configs even unchanged so that brokers reload a keystore rewritten
// under the same name (KAFKA-14136). It relies on mutableConfig giving a
// resource a new map whenever a record touches it.
func (img *Image) ConfigTouched(prev *Image, res ConfigResource) bool {
	if prev == nil {
		return true
	}
	a, b := prev.Configs[res], img.Configs[res]
	return (a == nil) != (b == nil) || reflect.ValueOf(a).UnsafePointer() != reflect.ValueOf(b).UnsafePointer()
}

// mutableConfig returns a copy of the resource's config map that this batch
// may modify, creating it if needed.
func (b *imageBuilder) mutableConfig(res ConfigResource) map[string]string {
	if !b.configsCopied {
		b.next.Configs = maps.Clone(b.next.Configs)
		if b.next.Configs == nil {
			b.next.Configs = map[ConfigResource]map[string]string{}
		}
		b.configsCopied = true
		b.configCopied = map[ConfigResource]bool{}
	}
	if b.configCopied[res] {
		return b.next.Configs[res]
	}
	m := maps.Clone(b.next.Configs[res])
	if m == nil {
		m = map[string]string{}
	}
	b.next.Configs[res] = m
	b.configCopied[res] = true
	return m
}

// mutableACLs returns a copy of the ACL set that this batch may modify.
func (b *imageBuilder) mutableACLs() *ACLSet {
	if !b.aclsCopied {
		b.next.ACLs = b.next.ACLs.clone()
		b.aclsCopied = true
	}
	return b.next.ACLs
}

func (b *imageBuilder) dropEmptyConfig(res ConfigResource) {
	if len(b.next.Configs[res]) == 0 {
		delete(b.next.Configs, res)
	}
}

func (b *imageBuilder) apply(rec Record) error {
	switch r := rec.(type) {
	case *NoOpRecord:
		return nil
	case *FeatureLevelRecord:
		if r.FeatureLevel == 0 {
			delete(b.features(), r.Name)
		} else {
			b.features()[r.Name] = r.FeatureLevel
		}
		return nil
	case *VotersRecord:
		b.next.Voters = slices.Clone(r.Voters)
		return nil
	case *LearnersRecord:
		b.next.Learners = slices.Clone(r.Learners)
		return nil
	case *TopicRecord:
		byName, byID := b.topics()
		if _, ok := byName.Get(r.Name); ok {
			return fmt.Errorf("duplicate topic name %q", r.Name)
		}
		if _, ok := byID.Get(r.TopicID); ok {
			return fmt.Errorf("duplicate topic id %s", r.TopicID)
		}
		t := &Topic{Name: r.Name, ID: r.TopicID}
		byName.Set(r.Name, t)
		byID.Set(r.TopicID, t)
		b.topicCopied[r.TopicID] = t.Partitions.Edit()
		return nil
	case *PartitionRecord:
		t, parts := b.mutableTopic(r.TopicID)
		if t == nil {
			return fmt.Errorf("partition %d of unknown topic id %s", r.PartitionID, r.TopicID)
		}
		p := Partition{
			Replicas:            nilIfEmpty(r.Replicas),
			ISR:                 nilIfEmpty(r.ISR),
			AddingReplicas:      nilIfEmpty(r.AddingReplicas),
			RemovingReplicas:    nilIfEmpty(r.RemovingReplicas),
			ELR:                 nilIfEmpty(r.ELR),
			LastKnownELR:        nilIfEmpty(r.LastKnownELR),
			Leader:              r.Leader,
			LeaderEpoch:         r.LeaderEpoch,
			PartitionEpoch:      r.PartitionEpoch,
			LeaderRecoveryState: r.LeaderRecoveryState,
			Directories:         nilIfEmpty(r.Directories),
		}
		switch {
		case int(r.PartitionID) == parts.Len():
			parts.Append(p)
		case r.PartitionID >= 0 && int(r.PartitionID) < parts.Len():
			parts.Set(int(r.PartitionID), p)
		default:
			return fmt.Errorf("partition %d of topic %q is not contiguous (topic has %d)", r.PartitionID, t.Name, parts.Len())
		}
		return nil
	case *PartitionChangeRecord:
		t, parts := b.mutableTopic(r.TopicID)
		if t == nil {
			return fmt.Errorf("partition change for unknown topic id %s", r.TopicID)
		}
		if r.PartitionID < 0 || int(r.PartitionID) >= parts.Len() {
			return fmt.Errorf("partition change for unknown partition %s-%d", t.Name, r.PartitionID)
		}
		p := parts.Mutable(int(r.PartitionID))
		*p = ApplyPartitionChange(*p, r)
		return nil
	case *RemoveTopicRecord:
		byName, byID := b.topics()
		t, ok := byID.Get(r.TopicID)
		if !ok {
			return fmt.Errorf("removing unknown topic id %s", r.TopicID)
		}
		byID.Delete(r.TopicID)
		byName.Delete(t.Name)
		delete(b.topicCopied, r.TopicID)
		res := ConfigResource{Type: ConfigResourceTopic, Name: t.Name}
		if _, ok := b.next.Configs[res]; ok {
			b.mutableConfig(res)
			delete(b.next.Configs, res)
		}
		return nil
	case *ConfigRecord:
		res := ConfigResource{Type: r.ResourceType, Name: r.ResourceName}
		m := b.mutableConfig(res)
		if r.Value == nil {
			delete(m, r.Name)
		} else {
			m[r.Name] = *r.Value
		}
		b.dropEmptyConfig(res)
		return nil
	case *RegisterBrokerRecord:
		brokers := b.brokers()
		brokers[r.BrokerID] = &Broker{
			ID:                   r.BrokerID,
			Epoch:                r.BrokerEpoch,
			IncarnationID:        r.IncarnationID,
			Endpoints:            nilIfEmpty(r.Endpoints),
			Rack:                 r.Rack,
			Fenced:               r.Fenced,
			InControlledShutdown: r.InControlledShutdown,
			LogDirs:              nilIfEmpty(r.LogDirs),
			Features:             nilIfEmpty(r.Features),
		}
		b.brokerCopied[r.BrokerID] = true
		return nil
	case *UnregisterBrokerRecord:
		brokers := b.brokers()
		old, ok := brokers[r.BrokerID]
		if !ok {
			return fmt.Errorf("unregistering unknown broker %d", r.BrokerID)
		}
		if old.Epoch != r.BrokerEpoch {
			return fmt.Errorf("unregistering broker %d with epoch %d, registered epoch is %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
		}
		delete(brokers, r.BrokerID)
		return nil
	case *BrokerRegistrationChangeRecord:
		br := b.mutableBroker(r.BrokerID)
		if br == nil {
			return fmt.Errorf("registration change for unknown broker %d", r.BrokerID)
		}
		if br.Epoch != r.BrokerEpoch {
			return fmt.Errorf("registration change for broker %d with epoch %d, registered epoch is %d", r.BrokerID, r.BrokerEpoch, br.Epoch)
		}
		switch r.Fenced {
		case FenceChangeFence:
			br.Fenced = true
			// A fenced broker is no longer shutting down in a controlled way.
			br.InControlledShutdown = false
		case FenceChangeUnfence:
			br.Fenced = false
		case FenceChangeNone:
		default:
			return fmt.Errorf("invalid fencing change %d", r.Fenced)
		}
		switch r.InControlledShutdown {
		case ControlledShutdownChangeShutdown:
			br.InControlledShutdown = true
		case ControlledShutdownChangeNone:
		default:
			return fmt.Errorf("invalid controlled shutdown change %d", r.InControlledShutdown)
		}
		if r.LogDirs != nil {
			br.LogDirs = nilIfEmpty(r.LogDirs)
		}
		return nil
	case *AccessControlEntryRecord:
		// As Kafka's replay: an id already present is replaced.
		b.mutableACLs().put(r.ID, r.ACL)
		return nil
	case *RemoveAccessControlEntryRecord:
		acls := b.mutableACLs()
		acl, ok := acls.byID[r.ID]
		if !ok {
			return fmt.Errorf("removing unknown ACL id %s", r.ID)
		}
		delete(acls.byID, r.ID)
		acls.drop(acl)
		return nil
	case *UserScramCredentialRecord, *RemoveUserScramCredentialRecord:
		return b.applyScram(rec)
	case *ClientQuotaRecord:
		return b.applyClientQuota(r)
	case *DelegationTokenRecord, *RemoveDelegationTokenRecord:
		return b.applyDelegationToken(rec)
	case *ProducerIdsRecord:
		if r.NextProducerID < b.next.NextProducerID {
			return fmt.Errorf("producer id block would move next producer id back from %d to %d", b.next.NextProducerID, r.NextProducerID)
		}
		b.next.NextProducerID = r.NextProducerID
		return nil
	}
	return fmt.Errorf("no replay for record type %d", rec.Type())
}

// ApplyPartitionChange is p after r.
func ApplyPartitionChange(p Partition, r *PartitionChangeRecord) Partition {
	if r.Leader != NoLeaderChange {
		p.Leader = r.Leader
		p.LeaderEpoch++
	}
	if r.ISR != nil {
		p.ISR = nilIfEmpty(r.ISR)
	}
	if r.Replicas != nil {
		p.Replicas = nilIfEmpty(r.Replicas)
	}
	if r.ELR != nil {
		p.ELR = nilIfEmpty(r.ELR)
	}
	if r.LastKnownELR != nil {
		p.LastKnownELR = nilIfEmpty(r.LastKnownELR)
	}
	if r.Directories != nil {
		p.Directories = nilIfEmpty(r.Directories)
	}
	if r.AddingReplicas != nil {
		p.AddingReplicas = nilIfEmpty(r.AddingReplicas)
	}
	if r.RemovingReplicas != nil {
		p.RemovingReplicas = nilIfEmpty(r.RemovingReplicas)
	}
	if r.LeaderRecoveryState != nil {
		p.LeaderRecoveryState = *r.LeaderRecoveryState
	}
	p.PartitionEpoch++
	return p
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return slices.Clone(s)
}

// ImageRecords returns records that rebuild img from an empty image (the
// content of a snapshot), in a deterministic order.
func ImageRecords(img *Image) []Record {
	var out []Record
	for _, name := range slices.Sorted(maps.Keys(img.Features)) {
		out = append(out, &FeatureLevelRecord{Name: name, FeatureLevel: img.Features[name]})
	}
	if len(img.Voters) > 0 {
		out = append(out, &VotersRecord{Voters: img.Voters})
	}
	if len(img.Learners) > 0 {
		out = append(out, &LearnersRecord{Learners: img.Learners})
	}
	for _, id := range slices.Sorted(maps.Keys(img.Brokers)) {
		br := img.Brokers[id]
		out = append(out, &RegisterBrokerRecord{
			BrokerID:             br.ID,
			IncarnationID:        br.IncarnationID,
			BrokerEpoch:          br.Epoch,
			Endpoints:            br.Endpoints,
			Features:             br.Features,
			Rack:                 br.Rack,
			Fenced:               br.Fenced,
			InControlledShutdown: br.InControlledShutdown,
			LogDirs:              br.LogDirs,
		})
	}
	for _, name := range slices.Sorted(img.Topics.Keys()) {
		t := img.Topic(name)
		out = append(out, &TopicRecord{Name: t.Name, TopicID: t.ID})
		for i, p := range t.Partitions.All() {
			out = append(out, &PartitionRecord{
				PartitionID:         int32(i),
				TopicID:             t.ID,
				Replicas:            p.Replicas,
				ISR:                 p.ISR,
				RemovingReplicas:    p.RemovingReplicas,
				AddingReplicas:      p.AddingReplicas,
				Leader:              p.Leader,
				LeaderEpoch:         p.LeaderEpoch,
				PartitionEpoch:      p.PartitionEpoch,
				Directories:         p.Directories,
				ELR:                 p.ELR,
				LastKnownELR:        p.LastKnownELR,
				LeaderRecoveryState: p.LeaderRecoveryState,
			})
		}
	}
	resources := slices.SortedFunc(maps.Keys(img.Configs), func(a, b ConfigResource) int {
		if c := cmp.Compare(a.Type, b.Type); c != 0 {
			return c
		}
		return cmp.Compare(a.Name, b.Name)
	})
	for _, res := range resources {
		cfg := img.Configs[res]
		for _, k := range slices.Sorted(maps.Keys(cfg)) {
			v := cfg[k]
			out = append(out, &ConfigRecord{ResourceType: res.Type, ResourceName: res.Name, Name: k, Value: &v})
		}
	}
	for _, id := range img.ACLs.SortedIDs() {
		out = append(out, &AccessControlEntryRecord{ID: id, ACL: img.ACLs.byID[id]})
	}
	out = append(out, scramRecords(img)...)
	out = append(out, clientQuotaRecords(img)...)
	out = append(out, delegationTokenRecords(img)...)
	if img.NextProducerID > 0 {
		out = append(out, &ProducerIdsRecord{BrokerID: -1, BrokerEpoch: -1, NextProducerID: img.NextProducerID})
	}
	return out
}

// ImageFromRecords is the image that records build from an empty one (a
// snapshot's content; tests of the image's readers build theirs with it).
func ImageFromRecords(clusterID string, records []Record) (*Image, error) {
	return ApplyBatch(EmptyImage(clusterID), records, 1, 1)
}
