package controller

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/gregorbroker/gregor/metadata"
	"github.com/gregorbroker/gregor/protocol"
	"github.com/gregorbroker/gregor/vfs"
)

// BenchmarkCreateTopicsBurst measures one burst of 50 concurrent
// CreateTopics requests of 100 partitions each (one topic per request, as
// an admin tool creating topics in parallel sends them) against a fresh
// single-node controller, on the in-memory FS and on the real disk. On the
// in-memory FS it also reports the file syncs per burst (fewer than the 50
// entries when queued operations share a Ready).
func BenchmarkCreateTopicsBurst(b *testing.B) {
	const topics, partitions = 50, 100
	for _, disk := range []string{"memfs", "osfs"} {
		b.Run(disk, func(b *testing.B) {
			var syncs, burstSyncs atomic.Int64
			for range b.N {
				b.StopTimer()
				var c *Controller
				if disk == "memfs" {
					fsys := vfs.NewMemFS()
					fsys.Inject(func(op vfs.Op, _ string) error {
						if op == vfs.OpSync {
							syncs.Add(1)
						}
						return nil
					})
					c = startTest(b, fsys)
				} else {
					c = startBenchOS(b)
				}
				registerBroker(b, c, 1)
				before := syncs.Load()
				b.StartTimer()
				var wg sync.WaitGroup
				errs := make(chan error, topics)
				for i := range topics {
					wg.Add(1)
					go func() {
						defer wg.Done()
						req := kmsg.NewPtrCreateTopicsRequest()
						req.Topics = []kmsg.CreateTopicsRequestTopic{topicReq(fmt.Sprintf("burst-%d", i), partitions, 1)}
						if r := c.CreateTopics(ctxT(b), req).Topics[0]; r.ErrorCode != 0 {
							errs <- fmt.Errorf("create %s: %d %v", r.Topic, r.ErrorCode, r.ErrorMessage)
						}
					}()
				}
				wg.Wait()
				b.StopTimer()
				burstSyncs.Add(syncs.Load() - before)
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				if n := c.Image().Topics.Len(); n != topics {
					b.Fatalf("%d topics in the image", n)
				}
				c.Close()
			}
			if disk == "memfs" {
				b.ReportMetric(float64(burstSyncs.Load())/float64(b.N), "syncs/burst")
			}
		})
	}
}

// startBenchOS starts a single-node controller on the real filesystem in a
// temporary directory (fsyncs cost what they cost on this machine).
func startBenchOS(b *testing.B) *Controller {
	b.Helper()
	dir := b.TempDir()
	cfg := testConfig(vfs.OSFS{})
	cfg.MetadataDir = dir
	if err := Format(vfs.OSFS{}, dir, FormatOptions{
		ClusterID: "test-cluster", NodeID: 1, DirectoryID: protocol.RandomUUID(),
		Voters: []metadata.Voter{{ID: 1}},
	}); err != nil {
		b.Fatalf("format: %v", err)
	}
	c, err := Start(ctxT(b), cfg)
	if err != nil {
		b.Fatalf("start: %v", err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}
