package integration

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's default partitioner hashes keys as the Java producer does;
// the models' own hash must agree with it.
func TestKafkaPartitionMatchesJavaDefault(t *testing.T) {
	for _, n := range []int32{1, 2, 3, 4, 7} {
		p := kgo.StickyKeyPartitioner(nil).ForTopic("t")
		for i := range 500 {
			// Every length mod 4, so that each tail of the hash is covered.
			key := fmt.Sprintf("%c%d-%s", 'a'+i%26, i, "xyzw"[:i%4])
			if got, want := kafkaPartition(key, n), int32(p.Partition(&kgo.Record{Key: []byte(key)}, int(n))); got != want {
				t.Fatalf("kafkaPartition(%q, %d) = %d, franz-go says %d", key, n, got, want)
			}
		}
	}
}
