package main

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/gregorbroker/gregor/tiered"
)

// tieredOptions opens tiered storage's store and configures the remote log
// manager (nil without remote.log.storage.system.enable).
func (s *settings) tieredOptions(hooks testHooks, log *slog.Logger) (*tiered.Options, error) {
	rs := s.remoteStorage
	if rs == nil {
		return nil, nil
	}
	var store tiered.Store
	switch {
	case rs.Dir != "":
		d, err := tiered.NewDirStore(hooks.fs, rs.Dir)
		if err != nil {
			return nil, err
		}
		store = d
	default:
		s3, err := tiered.NewS3Store(tiered.S3Options{Endpoint: rs.S3Endpoint, Region: rs.S3Region, Bucket: rs.S3Bucket,
			Prefix: rs.S3Prefix, PathStyle: rs.S3PathStyle, CAFile: rs.S3CAFile})
		if err != nil {
			return nil, fmt.Errorf("tiered storage: %w", err)
		}
		// An unreachable bucket does not stop the broker: local service
		// goes on, and copies and remote reads fail (and are retried)
		// until it is reachable.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s3.Check(ctx); err != nil {
				log.Error("tiered storage: the remote store cannot be used yet; segments stay local until it can", "store", s3.String(), "err", err)
			}
		}()
		store = s3
	}
	md, err := s.remoteLogMetadata(log)
	if err != nil {
		return nil, err
	}
	log.Info("tiered storage enabled", "store", store.String())
	return &tiered.Options{
		Store:         hooks.wrapStore(store),
		Metadata:      md,
		MetadataWait:  rs.Metadata.ConsumeWait,
		BrokerID:      s.nodeID,
		TaskInterval:  time.Duration(s.cfg.Long("remote.log.manager.task.interval.ms")) * time.Millisecond,
		CopierThreads: int(s.cfg.Int("remote.log.manager.copier.thread.pool.size")),
		ReaderThreads: int(s.cfg.Int("remote.log.reader.threads")),
		FetchMaxWait:  time.Duration(s.cfg.Int("remote.fetch.max.wait.ms")) * time.Millisecond,
		CopyQuotaWindow: tiered.QuotaWindow{Samples: int(s.cfg.Int("remote.log.manager.copy.quota.window.num")),
			Size: time.Duration(s.cfg.Int("remote.log.manager.copy.quota.window.size.seconds")) * time.Second},
		FetchQuotaWindow: tiered.QuotaWindow{Samples: int(s.cfg.Int("remote.log.manager.fetch.quota.window.num")),
			Size: time.Duration(s.cfg.Int("remote.log.manager.fetch.quota.window.size.seconds")) * time.Second},
		Logger: log.With("component", "tiered"),
	}, nil
}

// remoteLogMetadata is the client of __remote_log_metadata: it bootstraps
// from this broker's own endpoint on the metadata manager's listener, and
// connects as the broker's own clients do there.
func (s *settings) remoteLogMetadata(log *slog.Logger) (*tiered.TopicLog, error) {
	md := s.remoteStorage.Metadata
	var seed string
	for _, l := range s.cfg.AdvertisedListeners {
		if l.Name == md.Listener {
			seed = l.Endpoint().Addr()
		}
	}
	if seed == "" {
		return nil, fmt.Errorf("tiered storage: this broker advertises no %s listener for remote.log.metadata.manager.listener.name", md.Listener)
	}
	dial, err := s.listeners.PeerDial(md.Listener)
	if err != nil {
		return nil, fmt.Errorf("tiered storage: the client of __remote_log_metadata: %w", err)
	}
	return tiered.NewTopicLog(tiered.TopicLogOptions{
		Seeds: []string{seed}, Dial: dial,
		// Kafka's manager names its clients after this prefix and the
		// broker id.
		ClientID:   "__remote_log_metadata_client_" + strconv.Itoa(int(s.nodeID)),
		Partitions: md.Partitions, ReplicationFactor: md.ReplicationFactor, RetentionMs: md.RetentionMs,
		Logger: log.With("component", "tiered"),
	})
}
