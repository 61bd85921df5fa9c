package controller

// The active controller's sweep of expired delegation tokens, every
// DelegationTokens.ExpiryCheckInterval (default an hour); the records are
// decide.ExpiredTokenRecords.
//
// Deviation: the sweep removes at most sweepLimit tokens per entry and
// runs again on the next tick while more are due, as Kafka's does with its
// own limit.

import (
	"time"

	"github.com/gregorbroker/gregor/controller/decide"
	"github.com/gregorbroker/gregor/metadata"
)

// sweepLimit is the most tokens one sweep removes (Kafka's
// MAX_RECORDS_PER_EXPIRATION).
const sweepLimit = 1000

// sweepExpiredTokens removes expired tokens every ExpiryCheckInterval
// (loop, active).
func (c *Controller) sweepExpiredTokens() {
	now := c.now()
	if c.nextTokenSweep.IsZero() {
		c.nextTokenSweep = now.Add(c.tokenSweepInterval())
		return
	}
	if now.Before(c.nextTokenSweep) {
		return
	}
	recs := decide.ExpiredTokenRecords(c.latest(), now.UnixMilli(), sweepLimit)
	if len(recs) >= sweepLimit {
		c.nextTokenSweep = now // more are due: again on the next tick
	} else {
		c.nextTokenSweep = now.Add(c.tokenSweepInterval())
	}
	if len(recs) == 0 {
		return
	}
	for _, r := range recs {
		id := r.(*metadata.RemoveDelegationTokenRecord).TokenID
		t := c.latest().DelegationTokens[id]
		c.logger.Info("Delegation token expired", "token", id, "owner", t.Owner)
	}
	c.propose(recs, c.nextIndex(), func(err error) {
		if err != nil {
			c.logger.Warn("removing expired delegation tokens was not committed", "err", err)
		}
	})
}

func (c *Controller) tokenSweepInterval() time.Duration {
	if d := c.cfg.DelegationTokens.ExpiryCheckInterval; d > 0 {
		return d
	}
	return time.Hour
}
