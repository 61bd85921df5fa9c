package controller

// API CONTRACT (stub): the controller helper replaces the bodies with the
// real implementation, keeping the names and signatures.

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/gregorbroker/gregor/storage"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var errNotImplemented = errors.New("controller: not implemented yet")

// Config configures a controller node.
type Config struct {
	FS          storage.FS
	NodeID      int32
	ClusterID   string
	DirectoryID UUID
	// MetadataDir holds __cluster_metadata-0 (raft WAL and snapshots).
	MetadataDir string
	// Voters is the initial voter set (one voter, this node, in combined
	// single-node mode).
	Voters []Voter
	// DefaultPartitions and DefaultReplicationFactor apply when CreateTopics
	// asks for -1 (num.partitions, default.replication.factor).
	DefaultPartitions        int32
	DefaultReplicationFactor int16
	// Schema knows the config keys: validation, list types and defaults.
	Schema ConfigSchema
	// SupportedFeatures is the [min, max] level this node supports for
	// each feature (UpdateFeatures is validated against it).
	SupportedFeatures map[string][2]int16
	Logger            *slog.Logger
	Now               func() time.Time
}

// ConfigSchema is what the controller needs to know about config keys to
// validate AlterConfigs, IncrementalAlterConfigs and CreateTopics configs.
// The broker's config package implements it.
type ConfigSchema interface {
	// Validate checks the complete set of overrides a resource would have
	// after a change; the error message is returned to the client with
	// INVALID_CONFIG (topics) or INVALID_REQUEST/INVALID_CONFIG (brokers).
	Validate(t ConfigResourceType, name string, overrides map[string]string) error
	// IsList reports whether key is a list type (APPEND and SUBTRACT work
	// only on lists).
	IsList(t ConfigResourceType, key string) bool
	// Default is the value a key has when it is not overridden.
	Default(t ConfigResourceType, key string) (string, bool)
}

// Controller runs the metadata quorum and applies committed records to the
// image. In combined mode the broker in the same process calls it directly.
type Controller struct{}

// Start replays the snapshot and WAL, starts raft and returns once this node
// has replayed everything it had on disk.
func Start(ctx context.Context, cfg Config) (*Controller, error) { return nil, errNotImplemented }

// Image returns the current committed image.
func (c *Controller) Image() *Image { return nil }

// Subscribe calls fn for every new image, in order, on one goroutine, first
// with the current image. It returns a function that cancels the subscription.
func (c *Controller) Subscribe(fn func(prev, next *Image)) (cancel func()) { return func() {} }

// Close stops raft and syncs the log.
func (c *Controller) Close() error { return nil }

// Admin requests that change metadata. Each validates, commits the records
// and answers only after they are applied (or returns per-item errors). The
// Kafka request and response types are used so that a broker can forward a
// request unchanged to the active controller.
func (c *Controller) CreateTopics(ctx context.Context, req *kmsg.CreateTopicsRequest) *kmsg.CreateTopicsResponse {
	return nil
}
func (c *Controller) DeleteTopics(ctx context.Context, req *kmsg.DeleteTopicsRequest) *kmsg.DeleteTopicsResponse {
	return nil
}
func (c *Controller) CreatePartitions(ctx context.Context, req *kmsg.CreatePartitionsRequest) *kmsg.CreatePartitionsResponse {
	return nil
}
func (c *Controller) IncrementalAlterConfigs(ctx context.Context, req *kmsg.IncrementalAlterConfigsRequest) *kmsg.IncrementalAlterConfigsResponse {
	return nil
}
func (c *Controller) AlterConfigs(ctx context.Context, req *kmsg.AlterConfigsRequest) *kmsg.AlterConfigsResponse {
	return nil
}
func (c *Controller) ElectLeaders(ctx context.Context, req *kmsg.ElectLeadersRequest) *kmsg.ElectLeadersResponse {
	return nil
}
func (c *Controller) DescribeQuorum(ctx context.Context, req *kmsg.DescribeQuorumRequest) *kmsg.DescribeQuorumResponse {
	return nil
}
func (c *Controller) UpdateFeatures(ctx context.Context, req *kmsg.UpdateFeaturesRequest) *kmsg.UpdateFeaturesResponse {
	return nil
}
func (c *Controller) RegisterBroker(ctx context.Context, req *kmsg.BrokerRegistrationRequest) *kmsg.BrokerRegistrationResponse {
	return nil
}
func (c *Controller) BrokerHeartbeat(ctx context.Context, req *kmsg.BrokerHeartbeatRequest) *kmsg.BrokerHeartbeatResponse {
	return nil
}
func (c *Controller) AllocateProducerIDs(ctx context.Context, req *kmsg.AllocateProducerIDsRequest) *kmsg.AllocateProducerIDsResponse {
	return nil
}
