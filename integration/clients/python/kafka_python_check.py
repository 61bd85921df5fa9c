"""kafka-python produce/consume/group/admin check.

Usage: kafka_python_check.py BOOTSTRAP TOPIC GROUP COUNT
Prints one JSON line with what it saw; exits non-zero on any failure.
"""
import json
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def _group_id(g):
    # kafka-python 3 returns dicts; 2.x returned (group_id, protocol_type) tuples.
    if isinstance(g, dict):
        return g.get("group_id", g.get("group"))
    return g[0]


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    futures = [producer.send(topic, key=f"k{i % 10}".encode(), value=f"v-{i}".encode()) for i in range(count)]
    producer.flush(30)
    acked = []
    for i, f in enumerate(futures):
        f.get(timeout=30)
        acked.append(f"v-{i}")
    producer.close()

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    seen = []
    deadline = time.time() + 60
    while len(seen) < count and time.time() < deadline:
        for records in consumer.poll(timeout_ms=1000).values():
            seen.extend(r.value.decode() for r in records)
    if sorted(seen) != sorted(acked):
        raise SystemExit(f"consumed {len(seen)} records, want the {count} acked")
    consumer.commit()
    total = sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in range(3))
    consumer.close()

    listed = any(_group_id(g) == group for g in admin.list_groups())
    offsets = admin.list_group_offsets({group: None})[group]
    admin_total = sum(o.offset for tp, o in offsets.items() if tp.topic == topic)
    admin.close()
    print(json.dumps({"produced": len(acked), "consumed": len(seen), "committed": total,
                      "group_listed": listed, "admin_committed": admin_total}))


if __name__ == "__main__":
    main()
