package faults

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// CompactWorkload is keyed load on a compacted topic
// (cleanup.policy=compact): idempotent acks=all producers, as
// Workload's, sending unique values ("compact-producer-<i>-<seq>") under
// Keys keys, so that every key is written again and again and the
// cleaner has older records of each to remove. Each send is a
// CompactSend op; RecordCompactRead records the read at the end and
// CheckCompacted holds the two together.
type CompactWorkload struct {
	Seeds           []string
	Topic           string
	Producers       int
	Rate            int // sends a second per producer
	Keys            int
	DeliveryTimeout time.Duration

	History *History
	Log     *slog.Logger
}

// Run runs the producers until ctx ends, then waits for every send in
// flight to complete (or its delivery timeout).
func (w *CompactWorkload) Run(ctx context.Context) error {
	sender := &Workload{Seeds: w.Seeds, Topic: w.Topic, Rate: w.Rate, Keys: w.Keys, DeliveryTimeout: w.DeliveryTimeout, History: w.History, Log: w.Log}
	var fns []func() error
	var clients []*kgo.Client
	for i := range w.Producers {
		cl, err := sender.producerClient()
		if err != nil {
			for _, c := range clients {
				c.Close()
			}
			return err
		}
		clients = append(clients, cl)
		fns = append(fns, func() error {
			defer cl.Close()
			sender.produce(ctx, cl, fmt.Sprintf("compact-producer-%d", i), CompactSend)
			return nil
		})
	}
	return runAll(fns)
}
