package protocol

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's names differ from kmsg's only in capitalisation, but for the two
// keys Kafka renamed.
func TestKafkaNamesAreKmsgsButForCase(t *testing.T) {
	renamed := map[int16]bool{45: true, 74: true}
	for key := range int16(len(kafkaNames)) {
		if kafkaNames[key] == "" {
			t.Errorf("key %d has no Kafka name", key)
			continue
		}
		if k := kmsg.NameForKey(key); !renamed[key] && k != "Unknown" && !strings.EqualFold(k, KafkaName(key)) {
			t.Errorf("key %d: Kafka's %s, kmsg's %s", key, KafkaName(key), k)
		}
	}
	if KafkaName(RaftMessagesKey) != "RaftMessages" || KafkaName(-1) != "Unknown" {
		t.Fatal("names of keys Kafka does not define")
	}
}
