"""confluent-kafka (librdkafka) transactions check: consume-transform-produce
with the input offsets sent to the transaction, then an aborted transaction,
then one more committed one, read back by read_committed and
read_uncommitted consumers.

Usage: confluent_txn_check.py BOOTSTRAP TOPIC GROUP COUNT
The input topic is TOPIC-in (1 partition), the output TOPIC-out (3
partitions), the transactional id TOPIC-txn. COUNT input records are copied
in the first transaction; COUNT/2 records are aborted, COUNT/2 more
committed. Prints one JSON line with what it saw (the harness checks it:
integration/scenarios_txn.go); exits non-zero when a client call fails.
"""
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

PARTITIONS = 3


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    in_topic, out_topic, txn_id = topic + "-in", topic + "-out", topic + "-txn"
    extra = count // 2
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(in_topic, num_partitions=1, replication_factor=1),
                                    NewTopic(out_topic, num_partitions=PARTITIONS, replication_factor=1)]).values():
        fut.result(timeout=30)

    plain = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
    for i in range(count):
        plain.produce(in_topic, value=f"in-{i}".encode(), partition=0)
    if plain.flush(30):
        raise SystemExit("input records not flushed in 30 s")

    source = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "isolation.level": "read_committed"})
    source.subscribe([in_topic])
    inputs = []
    deadline = time.time() + 60
    while len(inputs) < count and time.time() < deadline:
        msg = source.poll(1.0)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        inputs.append(msg.value().decode())
    if len(inputs) != count:
        raise SystemExit(f"the group consumer read {len(inputs)} of {count} input records in 60 s")

    acked = {"copy": 0, "aborted": 0, "commit2": 0}
    errors = []

    def on_delivery(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value().decode().split("-", 1)[0]] += 1

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "acks": "all"})
    producer.init_transactions(30)

    # 1: consume-transform-produce, the consumer's position sent with the
    # output, committed.
    producer.begin_transaction()
    for i, v in enumerate(inputs):
        producer.produce(out_topic, value=f"copy-{v}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
    producer.send_offsets_to_transaction(source.position(source.assignment()), source.consumer_group_metadata(), 30)
    producer.commit_transaction(30)

    # 2: aborted, after every record is in the log (flush), with an offset
    # that must not reach the group.
    producer.begin_transaction()
    for i in range(extra):
        producer.produce(out_topic, value=f"aborted-{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
    if producer.flush(30):
        raise SystemExit("aborted transaction's records not flushed in 30 s")
    producer.send_offsets_to_transaction([TopicPartition(in_topic, 0, 1)], source.consumer_group_metadata(), 30)
    producer.abort_transaction(30)

    # 3: committed behind the aborted records in every partition.
    producer.begin_transaction()
    for i in range(extra):
        producer.produce(out_topic, value=f"commit2-{i}".encode(), partition=i % PARTITIONS, on_delivery=on_delivery)
    producer.commit_transaction(30)
    if errors:
        raise SystemExit(f"delivery errors: {errors[:3]}")

    committed = source.committed([TopicPartition(in_topic, 0)], timeout=30)
    group_offset = committed[0].offset
    source.close()

    report = {"client": "confluent-kafka-python", "input": len(inputs), "acked": acked, "group_offset": group_offset,
              "read_committed": read_all(bootstrap, out_topic, group + "-rc", "read_committed", count + extra),
              "read_uncommitted": read_all(bootstrap, out_topic, group + "-ru", "read_uncommitted", count + 2 * extra)}
    print(json.dumps(report))


def read_all(bootstrap, topic, group, isolation, want):
    """Reads every partition from the start until want values arrived (or
    60 s passed), then one more second for anything beyond them."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  "isolation.level": isolation})
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    seen = []
    deadline = time.time() + 60
    drain_until = None
    while time.time() < deadline and (drain_until is None or time.time() < drain_until):
        msg = c.poll(0.2)
        if msg is None:
            continue
        if msg.error():
            raise KafkaException(msg.error())
        seen.append(msg.value().decode())
        if len(seen) >= want and drain_until is None:
            drain_until = time.time() + 1
    c.close()
    return seen


if __name__ == "__main__":
    main()
