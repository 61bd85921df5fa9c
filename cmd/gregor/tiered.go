package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/gregorbroker/gregor/tiered"
	"github.com/gregorbroker/gregor/vfs"
)

// tieredOptions opens tiered storage's store and configures the remote log
// manager (nil without remote.log.storage.system.enable).
func (s *settings) tieredOptions(fsys vfs.FS, log *slog.Logger) (*tiered.Options, error) {
	rs := s.remoteStorage
	if rs == nil {
		return nil, nil
	}
	var store tiered.Store
	switch {
	case rs.Dir != "":
		d, err := tiered.NewDirStore(fsys, rs.Dir)
		if err != nil {
			return nil, err
		}
		store = d
	default:
		return nil, fmt.Errorf("remote storage s3://%s/%s: the S3 backend is not built yet; use dir:<path>", rs.S3Bucket, rs.S3Prefix)
	}
	log.Info("tiered storage enabled", "store", store.String())
	return &tiered.Options{
		Store:         store,
		BrokerID:      s.nodeID,
		TaskInterval:  time.Duration(s.cfg.Long("remote.log.manager.task.interval.ms")) * time.Millisecond,
		CopierThreads: int(s.cfg.Int("remote.log.manager.copier.thread.pool.size")),
		Logger:        log.With("component", "tiered"),
	}, nil
}
