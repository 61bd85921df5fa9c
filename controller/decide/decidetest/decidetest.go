// Package decidetest holds what the tests of the controller and of its
// decisions share. It is imported by tests only.
package decidetest

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Schema is a small config schema for the controller's tests: cleanup.policy is a list defaulting
// to "delete"; retention.ms must be an integer >= -1; everything else must
// be a known key. Groups know two keys, whose values must be integers from
// 5000 to 60000; the default group ("") is refused with INVALID_REQUEST.
type Schema struct{}

var groupKeys = map[string]bool{"consumer.heartbeat.interval.ms": true, "consumer.session.timeout.ms": true}

func validateGroup(name string, overrides map[string]string) error {
	if name == "" {
		return fmt.Errorf("Default group resources are not allowed.: %w", kerr.InvalidRequest)
	}
	for k, v := range overrides {
		if !groupKeys[k] {
			return errors.New("Unknown group config name: " + k)
		}
		if n, err := strconv.ParseInt(v, 10, 32); err != nil || n < 5000 || n > 60000 {
			return errors.New("Invalid value " + v + " for configuration " + k)
		}
	}
	return nil
}

var knownKeys = map[string]bool{
	"cleanup.policy": true, "retention.ms": true, "segment.bytes": true,
	"log.retention.ms": true, "num.io.threads": true,
	"min.insync.replicas": true, "unclean.leader.election.enable": true,
}

func (Schema) Validate(t metadata.ConfigResourceType, name string, overrides map[string]string) error {
	if t == metadata.ConfigResourceGroup {
		return validateGroup(name, overrides)
	}
	for k, v := range overrides {
		if !knownKeys[k] {
			return errors.New("Unknown topic config name: " + k)
		}
		if k == "num.io.threads" && v == "0" {
			return fmt.Errorf("num.io.threads must be at least 1: %w", kerr.InvalidRequest)
		}
		if k == "retention.ms" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < -1 {
				return errors.New("Invalid value " + v + " for configuration retention.ms")
			}
		}
	}
	return nil
}

func (Schema) IsList(t metadata.ConfigResourceType, key string) bool {
	return key == "cleanup.policy"
}

func (Schema) Default(t metadata.ConfigResourceType, key string) (string, bool) {
	if key == "cleanup.policy" {
		return "delete", true
	}
	return "", false
}
