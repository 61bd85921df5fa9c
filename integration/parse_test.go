package integration

import (
	"slices"
	"testing"
)

// Outputs below were captured from the Apache Kafka 4.3.1 tools.

func TestParseTopicDescribe(t *testing.T) {
	out := "Topic: t1\tTopicId: t9t-1GxWTV63RzQT_2iBVQ\tPartitionCount: 3\tReplicationFactor: 1\tConfigs: min.insync.replicas=1,cleanup.policy=delete,retention.ms=123456\n" +
		"\tTopic: t1\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: \n" +
		"\tTopic: t1\tPartition: 1\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: \n" +
		"\tTopic: t1\tPartition: 2\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: \n"
	topics, err := parseTopicDescribe(out)
	if err != nil {
		t.Fatal(err)
	}
	d := topics["t1"]
	if d == nil || d.PartitionCount != 3 || d.ReplicationFactor != 1 || len(d.Partitions) != 3 || d.TopicID != "t9t-1GxWTV63RzQT_2iBVQ" {
		t.Fatalf("got %+v", d)
	}
	if d.Configs["retention.ms"] != "123456" || d.Configs["cleanup.policy"] != "delete" {
		t.Fatalf("configs %v", d.Configs)
	}
	if d.Partitions[2].Partition != 2 || d.Partitions[2].Leader != "1" || d.Partitions[2].Isr != "1" {
		t.Fatalf("partition %+v", d.Partitions[2])
	}
}

func TestParseTopicDescribeErrors(t *testing.T) {
	for name, out := range map[string]string{
		"partition first":   "\tTopic: t1\tPartition: 0\tLeader: 1\n",
		"bad count":         "Topic: t1\tTopicId: x\tPartitionCount: three\tReplicationFactor: 1\tConfigs: \n",
		"bad partition num": "Topic: t1\tTopicId: x\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: \n\tTopic: t1\tPartition: x\n",
	} {
		if _, err := parseTopicDescribe(out); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestParseColumns(t *testing.T) {
	out := "\nConsumer group 'g1' has no active members.\n\n" +
		"GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\n" +
		"g1              t1              0          0               0               0               -               -               -\n" +
		"g1              t1              1          1               1               0               -               -               -\n"
	rows := parseColumns(out, "GROUP")
	if len(rows) != 2 || rows[1]["PARTITION"] != "1" || rows[1]["CURRENT-OFFSET"] != "1" || rows[0]["CLIENT-ID"] != "-" {
		t.Fatalf("got %v", rows)
	}
}

func TestParseTabColumns(t *testing.T) {
	out := "CoordinatorId\tTransactionalId\tProducerId\tProducerEpoch\tTransactionState\tTransactionTimeoutMs\tCurrentTransactionStartTimeMs\tTransactionDurationMs\tTopicPartitions\t\n" +
		"1            \ttx1            \t1         \t1            \tCompleteCommit  \t60000               \t1795956061862                \t6201                 \t               \t\n"
	rows := parseTabColumns(out, "CoordinatorId")
	if len(rows) != 1 || rows[0]["TransactionState"] != "CompleteCommit" || rows[0]["TopicPartitions"] != "" || rows[0]["ProducerId"] != "1" {
		t.Fatalf("got %v", rows)
	}
}

func TestParseOffsets(t *testing.T) {
	got, err := parseOffsets("t1:0:0\nt1:1:12\nmy:topic:2:7\n")
	if err != nil {
		t.Fatal(err)
	}
	if got[0] != 0 || got[1] != 12 || got[2] != 7 || len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	for _, bad := range []string{"nonsense", "t1:x:1", "t1:1:y"} {
		if _, err := parseOffsets(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestParseConfigs(t *testing.T) {
	out := "Dynamic configs for topic t1 are:\n" +
		"  cleanup.policy=delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n" +
		"  retention.ms=999999 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=999999}\n" +
		"  ssl.key.password=null sensitive=true synonyms={}\n"
	got := parseConfigs(out)
	if len(got) != 3 || got["retention.ms"].Value != "999999" || !got["ssl.key.password"].Sensitive {
		t.Fatalf("got %v", got)
	}
	if got["cleanup.policy"].Synonyms != "{DYNAMIC_TOPIC_CONFIG:cleanup.policy=delete, DEFAULT_CONFIG:log.cleanup.policy=delete}" {
		t.Fatalf("synonyms %q", got["cleanup.policy"].Synonyms)
	}
}

func TestParseDumpLog(t *testing.T) {
	out := "Dumping data/t2-0/00000000000000000000.log\nLog starting offset: 0\n" +
		"baseOffset: 0 lastOffset: 1 count: 2 baseSequence: 0 lastSequence: 1 producerId: 2 producerEpoch: 0 partitionLeaderEpoch: 0 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1795956089379 size: 79 magic: 2 compresscodec: none crc: 3566638872 isvalid: true\n" +
		"| offset: 0 CreateTime: 1795956089363 keySize: 1 valueSize: 1 sequence: 0 headerKeys: [] key: a payload: 1\n" +
		"| offset: 1 CreateTime: 1795956089379 keySize: 1 valueSize: 9 sequence: 1 headerKeys: [] key: b payload: two words\n"
	b, err := parseDumpLog(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 1 || b[0].Count != 2 || !b[0].Valid || b[0].Magic != "2" || len(b[0].Records) != 2 {
		t.Fatalf("got %+v", b)
	}
	if r := b[0].Records[1]; r.Offset != 1 || r.Key != "b" || r.Payload != "two words" {
		t.Fatalf("record %+v", r)
	}
	if _, err := parseDumpLog("| offset: 0 key: a payload: 1\n"); err == nil {
		t.Fatal("record before batch: no error")
	}
}

func TestMirrorParseACLList(t *testing.T) {
	// kafka-acls --list, the shape of the tool's output in
	// mirror/identity-acls' runs and acl/kafka-acls' expectations.
	out := "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ident-1, patternType=LITERAL)`:\n" +
		"\t(principal=User:eve, host=*, operation=WRITE, permissionType=DENY)\n" +
		"\t(principal=User:dave, host=10.0.0.1, operation=DESCRIBE, permissionType=ALLOW)\n" +
		"\n" +
		"Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=app-, patternType=PREFIXED)`:\n" +
		"\t(principal=User:bob, host=*, operation=DESCRIBE, permissionType=DENY)\n" +
		"\n"
	got, err := parseACLList(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GROUP:PREFIXED:app- (principal=User:bob, host=*, operation=DESCRIBE, permissionType=DENY)",
		"TOPIC:LITERAL:ident-1 (principal=User:dave, host=10.0.0.1, operation=DESCRIBE, permissionType=ALLOW)",
		"TOPIC:LITERAL:ident-1 (principal=User:eve, host=*, operation=WRITE, permissionType=DENY)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got, err := parseACLList(""); err != nil || len(got) != 0 {
		t.Fatalf("empty output: %q, %v", got, err)
	}
	// An entry outside a block, or a line of another shape, is refused
	// rather than skipped.
	for _, bad := range []string{
		"\t(principal=User:eve, host=*, operation=WRITE, permissionType=DENY)\n",
		"Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)`:\n\tsomething else\n",
	} {
		if got, err := parseACLList(bad); err == nil {
			t.Errorf("parseACLList(%q) = %q, want an error", bad, got)
		}
	}
}
