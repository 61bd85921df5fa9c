package config

import (
	"time"

	"github.com/gregorbroker/gregor/metadata"
)

// DelegationTokenConfig is the controller's delegation token set-up: the
// secret (delegation.token.secret.key, or its deprecated alias, which Load
// has already mapped), the lifetimes and the expiry sweep's interval.
func (cfg *Broker) DelegationTokenConfig() metadata.DelegationTokenConfig {
	ms := func(key string) time.Duration { return time.Duration(cfg.Long(key)) * time.Millisecond }
	return metadata.DelegationTokenConfig{
		SecretKey:           cfg.String(TokenSecretKey),
		MaxLifetime:         ms("delegation.token.max.lifetime.ms"),
		ExpiryTime:          ms("delegation.token.expiry.time.ms"),
		ExpiryCheckInterval: ms("delegation.token.expiry.check.interval.ms"),
	}
}
