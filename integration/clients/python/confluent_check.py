"""confluent-kafka (librdkafka) produce/consume/group/admin check.

Usage: confluent_check.py BOOTSTRAP TOPIC GROUP COUNT [GROUP_PROTOCOL]
GROUP_PROTOCOL is classic (the default) or consumer (KIP-848).
CONFLUENT_EXTRA_CONFIG, a JSON object, is added to every client's
configuration (security.protocol, sasl.*, ssl.* for a secured listener).
Prints one JSON line with what it saw; exits non-zero on any failure.
"""
import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    protocol = sys.argv[5] if len(sys.argv) > 5 else "classic"
    extra = json.loads(os.environ.get("CONFLUENT_EXTRA_CONFIG", "{}"))
    admin = AdminClient({"bootstrap.servers": bootstrap, **extra})
    for fut in admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)]).values():
        fut.result(timeout=30)
    md = admin.list_topics(topic=topic, timeout=30)
    partitions = len(md.topics[topic].partitions)
    if partitions != 3:
        raise SystemExit(f"metadata shows {partitions} partitions, want 3")

    errors = []
    acked = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked.append(msg.value().decode())

    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                         "compression.type": "lz4", "linger.ms": 5, **extra})
    for i in range(count):
        producer.produce(topic, key=f"k{i % 10}".encode(), value=f"v-{i}".encode(), on_delivery=on_delivery)
    remaining = producer.flush(30)
    if remaining or errors or len(acked) != count:
        raise SystemExit(f"produce: {len(acked)} acked, {remaining} unflushed, errors {errors[:3]}")

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "group.protocol": protocol, **extra})
    consumer.subscribe([topic])
    seen = []
    deadline = time.time() + 60
    while len(seen) < count and time.time() < deadline:
        msg = consumer.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        seen.append(msg.value().decode())
    if sorted(seen) != sorted(acked):
        raise SystemExit(f"consumed {len(seen)} records, want the {count} acked")
    consumer.commit(asynchronous=False)
    committed = consumer.committed([TopicPartition(topic, p) for p in range(3)], timeout=30)
    total = sum(tp.offset for tp in committed if tp.offset >= 0)
    consumer.close()

    groups = admin.list_consumer_groups().result(timeout=30)
    listed = any(g.group_id == group for g in groups.valid)
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    group_type = str(getattr(desc, "type", "")).rsplit(".", 1)[-1]
    if protocol == "consumer" and group_type.upper() != "CONSUMER":
        raise SystemExit(f"group type {group_type!r} after a group.protocol=consumer member, want CONSUMER")
    print(json.dumps({"produced": len(acked), "consumed": len(seen), "committed": total, "group_listed": listed,
                      "group_state": str(desc.state).rsplit(".", 1)[-1], "group_type": group_type}))


if __name__ == "__main__":
    main()
