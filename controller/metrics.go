package controller

import (
	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/metrics"
)

// RegisterMetrics registers the controller's gauges (Kafka's
// kafka.controller:type=KafkaController), counted at scrape time from the
// committed image every controller applies, as Kafka's
// ControllerMetadataMetricsPublisher counts them; ActiveControllerCount is
// 1 on the active controller only; and Kafka's raft-metrics of the
// metadata quorum (raftmetrics.go).
func (c *Controller) RegisterMetrics(r *metrics.Registry) {
	c.registerRaftMetrics(r)
	var last clusterCounts
	r.OnScrape(func() { last = countCluster(c.Image()) })
	r.Gauge(metrics.ActiveControllerCount, func() float64 {
		if c.Active() {
			return 1
		}
		return 0
	})
	r.Gauge(metrics.OfflinePartitionsCount, func() float64 { return float64(last.offlinePartitions) })
	r.Gauge(metrics.ActiveBrokerCount, func() float64 { return float64(last.activeBrokers) })
	r.Gauge(metrics.FencedBrokerCount, func() float64 { return float64(last.fencedBrokers) })
	r.Gauge(metrics.GlobalTopicCount, func() float64 { return float64(last.topics) })
	r.Gauge(metrics.GlobalPartitionCount, func() float64 { return float64(last.partitions) })
	r.Gauge(metrics.PreferredReplicaImbalanceCount, func() float64 { return float64(last.imbalanced) })
}

type clusterCounts struct {
	offlinePartitions, activeBrokers, fencedBrokers, topics, partitions, imbalanced int
}

// countCluster counts what the controller's gauges report of img.
func countCluster(img *metadata.Image) clusterCounts {
	var c clusterCounts
	if img == nil {
		return c
	}
	for _, b := range img.Brokers {
		if b.Fenced {
			c.fencedBrokers++
		} else {
			c.activeBrokers++
		}
	}
	for _, t := range img.Topics.All() {
		c.topics++
		for _, p := range t.Partitions.All() {
			c.partitions++
			if p.Leader < 0 {
				c.offlinePartitions++
			}
			if len(p.Replicas) > 0 && p.Leader != p.Replicas[0] {
				c.imbalanced++
			}
		}
	}
	return c
}
