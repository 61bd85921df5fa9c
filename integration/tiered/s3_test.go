package tiered

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gregorbroker/gregor/integration"
	"github.com/gregorbroker/gregor/integration/node"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// s3Store starts SeaweedFS's S3 gateway on a loopback address of the
// test's own with a bucket made, and returns the gateway and a client of
// it.
func s3Store(t *testing.T, bucket string) (*integration.Weed, *minio.Client) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts SeaweedFS")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	root, err := integration.FindRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	host := node.Host(t)
	w, err := integration.StartWeed(ctx, integration.NewTools(root), host.IP, filepath.Join(t.TempDir(), "weed"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	cl, err := minio.New(strings.TrimPrefix(w.S3, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(integration.WeedAccessKey, integration.WeedSecretKey, ""), BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.MakeBucket(ctx, bucket, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("making bucket %s: %v", bucket, err)
	}
	return w, cl
}

// The directory test's scenario against an S3-compatible server: the
// segments go to the bucket under the prefix, and come back from it.
func TestTieredS3ReadsOldSegmentsFromTheBucket(t *testing.T) {
	w, s3 := s3Store(t, "tiered")
	n := node.StartEnv(t, []string{"AWS_ACCESS_KEY_ID=" + integration.WeedAccessKey, "AWS_SECRET_ACCESS_KEY=" + integration.WeedSecretKey},
		"remote.log.storage.system.enable=true",
		"gregor.remote.storage=s3://tiered/cluster-a",
		"gregor.remote.storage.s3.endpoint="+w.S3,
		"gregor.remote.storage.s3.path.style=true",
		"remote.log.manager.task.interval.ms=500",
		"log.retention.check.interval.ms=500",
		"file.delete.delay.ms=1000",
		"gregor.http.listener=127.0.0.1:0",
	)
	readsOldSegmentsFromTheStore(t, n, func() int {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		logs := 0
		for obj := range s3.ListObjects(ctx, "tiered", minio.ListObjectsOptions{Prefix: "cluster-a/", Recursive: true}) {
			if obj.Err != nil {
				t.Fatal(obj.Err)
			}
			if strings.HasSuffix(obj.Key, ".log") {
				logs++
			}
		}
		return logs
	})
}

// An S3 store that cannot be reached does not stop the broker: it starts,
// logs why the store cannot be used, and serves the topic from its local
// log (nothing leaves it until the store is back).
func TestTieredS3UnreachableKeepsServing(t *testing.T) {
	host := node.Host(t)
	n := node.StartEnv(t, []string{"AWS_ACCESS_KEY_ID=gregor", "AWS_SECRET_ACCESS_KEY=gregor-secret"},
		"remote.log.storage.system.enable=true",
		"gregor.remote.storage=s3://missing/prefix",
		"gregor.remote.storage.s3.endpoint=http://"+host.Addr(8333),
		"gregor.remote.storage.s3.path.style=true",
		"remote.log.manager.task.interval.ms=500",
	)
	node.WaitFor(t, 40*time.Second, "a clear error about the unreachable store", func() bool {
		return strings.Contains(n.Output(), "the remote store cannot be used yet")
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	// Uncompressed: 2,000 records of 1 KB roll a segment of 1 MiB, which
	// the leader then tries to copy.
	cl := n.Client(kgo.ProducerBatchCompression(kgo.NoCompression()))
	cfg := map[string]*string{"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr("1048576"), "local.retention.ms": kadm.StringPtr("1000")}
	if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, cfg, "local"); err != nil || resp.Err != nil {
		t.Fatalf("creating the topic: %v %v", err, resp.Err)
	}
	produceN(ctx, t, cl, "local", 0, 2000)
	consumeAll(ctx, t, n, "local", 2000)
	if start, _ := listOffset(ctx, t, cl, "local", -4); start != 0 {
		t.Fatalf("local log start %d: segments left the disk without a store", start)
	}
	// The copy of the rolled segment fails once minio-go has retried the
	// put (about 8 s with its backoff), and the task says so.
	node.WaitFor(t, 30*time.Second, "the failing task logged", func() bool {
		return strings.Contains(n.Output(), "tiered storage task failed")
	})
	if start, _ := listOffset(ctx, t, cl, "local", -4); start != 0 {
		t.Fatalf("local log start %d: segments left the disk without a store", start)
	}
}
