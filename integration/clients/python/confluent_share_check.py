"""confluent-kafka (librdkafka) share consumer (KIP-932) check.

Usage: confluent_share_check.py BOOTSTRAP TOPIC GROUP COUNT

TOPIC exists with one partition and GROUP's share.auto.offset.reset is
earliest (the scenario sets both). Produces COUNT records, then two
ShareConsumers of GROUP in explicit acknowledgement mode read them, polled
in turn: on its first delivery a record at an offset that ends in 1 is
released and one that ends in 2 rejected, every other record is accepted;
a released record must come back (delivery count 2) and is accepted then;
a rejected or accepted one must never come back. Each poll's
acknowledgements are committed with commit_sync and must succeed. Prints
one JSON line with what it saw; exits non-zero on any failure.
"""
import json
import sys
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer


def main():
    bootstrap, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    errors = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=f"v-{i}".encode(),
                         on_delivery=lambda err, msg: errors.append(str(err)) if err else None)
    if producer.flush(30) or errors:
        raise SystemExit(f"produce: errors {errors[:3]}")

    members = [ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": f"share-{i}",
                              "share.acknowledgement.mode": "explicit"}) for i in range(2)]
    for m in members:
        m.subscribe([topic])
    deliveries = {}  # offset -> delivery counts seen, in order
    by_member = [0, 0]
    accepted, released, rejected = set(), set(), set()
    want_accepted = {o for o in range(count) if o % 10 != 2}
    deadline = time.time() + 90
    while accepted != want_accepted and time.time() < deadline:
        for i, m in enumerate(members):
            batch = m.poll(0.5)
            if len(batch) == 0:
                continue
            for msg in batch:
                if msg.error():
                    raise SystemExit(f"member {i}: {msg.error()}")
                off, dc = msg.offset(), msg.delivery_count()
                by_member[i] += 1
                if off in accepted or off in rejected:
                    raise SystemExit(f"offset {off} delivered again (count {dc}) after it was "
                                     f"{'accepted' if off in accepted else 'rejected'}")
                deliveries.setdefault(off, []).append(dc)
                if dc == 1 and off % 10 == 1:
                    m.acknowledge(msg, AcknowledgeType.RELEASE)
                    released.add(off)
                elif dc == 1 and off % 10 == 2:
                    m.acknowledge(msg, AcknowledgeType.REJECT)
                    rejected.add(off)
                else:
                    if dc != (2 if off % 10 == 1 else 1):
                        raise SystemExit(f"offset {off} handed over with delivery count {dc}")
                    m.acknowledge(msg, AcknowledgeType.ACCEPT)
                    accepted.add(off)
            for tp, err in m.commit_sync(30).items():
                if err is not None:
                    raise SystemExit(f"member {i}: commit_sync {tp}: {err}")
    for m in members:
        m.close()
    if accepted != want_accepted:
        raise SystemExit(f"{len(accepted)} records accepted, want {len(want_accepted)}; "
                         f"missing {sorted(want_accepted - accepted)[:10]}")
    print(json.dumps({"produced": count, "accepted": len(accepted), "released": len(released),
                      "rejected": len(rejected), "by_member": by_member,
                      "redelivered": sum(1 for d in deliveries.values() if len(d) > 1)}))


if __name__ == "__main__":
    main()
