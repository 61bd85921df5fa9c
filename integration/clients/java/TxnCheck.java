// Transactions check with Apache's Java clients, compiled by the harness
// against each client release it runs (integration/deps.go JavaClients), so
// it keeps to the API that 3.9 and 4.x share.
//
//   java TxnCheck BOOTSTRAP TOPIC GROUP COUNT
//
// The input topic is TOPIC-in (1 partition), the output TOPIC-out (3
// partitions), the transactional id TOPIC-txn. A group consumer reads COUNT
// input records; one transaction copies them with the consumer's position
// sent to it (sendOffsetsToTransaction with the group metadata) and commits;
// the next writes COUNT/2 records and an offset of 1 and aborts; the last
// writes COUNT/2 records and commits. Prints one JSON line with what it saw
// (integration/scenarios_txn.go checks it); exits non-zero when a client
// call fails.

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.FinalizedVersionRange;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnCheck {
    private static final int PARTITIONS = 3;

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: TxnCheck BOOTSTRAP TOPIC GROUP COUNT");
            System.exit(2);
        }
        String bootstrap = args[0], topic = args[1], group = args[2];
        int count = Integer.parseInt(args[3]);
        int extra = count / 2;
        String inTopic = topic + "-in", outTopic = topic + "-out", txnId = topic + "-txn";
        TopicPartition in0 = new TopicPartition(inTopic, 0);

        Integer tv;
        Properties ap = new Properties();
        ap.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(inTopic, 1, (short) 1), new NewTopic(outTopic, PARTITIONS, (short) 1))).all().get();
            FinalizedVersionRange r = admin.describeFeatures().featureMetadata().get().finalizedFeatures().get("transaction.version");
            tv = r == null ? 0 : (int) r.maxVersionLevel();
        }

        Properties pp = new Properties();
        pp.put("bootstrap.servers", bootstrap);
        pp.put("enable.idempotence", "true");
        pp.put("acks", "all");
        try (KafkaProducer<String, String> plain = new KafkaProducer<>(pp, new StringSerializer(), new StringSerializer())) {
            for (int i = 0; i < count; i++) {
                plain.send(new ProducerRecord<>(inTopic, 0, null, "in-" + i)).get();
            }
        }

        Properties cp = new Properties();
        cp.put("bootstrap.servers", bootstrap);
        cp.put("group.id", group);
        cp.put("auto.offset.reset", "earliest");
        cp.put("enable.auto.commit", "false");
        cp.put("isolation.level", "read_committed");
        List<String> inputs = new ArrayList<>();
        long groupOffset;
        Map<String, AtomicInteger> acked = new ConcurrentHashMap<>();
        AtomicReference<Exception> sendError = new AtomicReference<>();
        Callback onAck = (md, err) -> {
            if (err != null) {
                sendError.compareAndSet(null, err);
            }
        };
        try (KafkaConsumer<String, String> source = new KafkaConsumer<>(cp, new StringDeserializer(), new StringDeserializer())) {
            source.subscribe(List.of(inTopic));
            long deadline = System.currentTimeMillis() + 60_000;
            while (inputs.size() < count && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> rec : source.poll(Duration.ofMillis(500))) {
                    inputs.add(rec.value());
                }
            }
            if (inputs.size() != count) {
                throw new IllegalStateException("the group consumer read " + inputs.size() + " of " + count + " input records in 60 s");
            }

            Properties tp = new Properties();
            tp.put("bootstrap.servers", bootstrap);
            tp.put("transactional.id", txnId);
            tp.put("acks", "all");
            try (KafkaProducer<String, String> producer = new KafkaProducer<>(tp, new StringSerializer(), new StringSerializer())) {
                producer.initTransactions();

                // 1: consume-transform-produce, the position sent with the output.
                producer.beginTransaction();
                for (int i = 0; i < inputs.size(); i++) {
                    send(producer, outTopic, i, "copy-" + inputs.get(i), acked, onAck);
                }
                producer.sendOffsetsToTransaction(Map.of(in0, new OffsetAndMetadata(source.position(in0))), source.groupMetadata());
                producer.commitTransaction();

                // 2: aborted once every record is in the log, with an offset
                // that must not reach the group.
                producer.beginTransaction();
                for (int i = 0; i < extra; i++) {
                    send(producer, outTopic, i, "aborted-" + i, acked, onAck);
                }
                producer.flush();
                producer.sendOffsetsToTransaction(Map.of(in0, new OffsetAndMetadata(1)), source.groupMetadata());
                producer.abortTransaction();

                // 3: committed behind the aborted records in every partition.
                producer.beginTransaction();
                for (int i = 0; i < extra; i++) {
                    send(producer, outTopic, i, "commit2-" + i, acked, onAck);
                }
                producer.commitTransaction();
            }
            if (sendError.get() != null) {
                throw sendError.get();
            }
            OffsetAndMetadata om = source.committed(Collections.singleton(in0), Duration.ofSeconds(30)).get(in0);
            groupOffset = om == null ? -1 : om.offset();
        }

        // Under transactions V2 the coordinator bumps the epoch at every
        // EndTxn; under V1 it stays at InitProducerId's.
        int epoch;
        try (Admin admin = Admin.create(ap)) {
            epoch = admin.describeTransactions(List.of(txnId)).all().get().get(txnId).producerEpoch();
        }

        List<String> rc = readAll(bootstrap, outTopic, "read_committed", count + extra);
        List<String> ru = readAll(bootstrap, outTopic, "read_uncommitted", count + 2 * extra);

        StringBuilder out = new StringBuilder("{\"client\":\"java-");
        out.append(org.apache.kafka.common.utils.AppInfoParser.getVersion()).append('"');
        out.append(",\"input\":").append(inputs.size());
        out.append(",\"acked\":{");
        String sep = "";
        for (Map.Entry<String, AtomicInteger> e : new TreeMap<>(acked).entrySet()) {
            out.append(sep).append('"').append(e.getKey()).append("\":").append(e.getValue().get());
            sep = ",";
        }
        out.append("},\"group_offset\":").append(groupOffset);
        out.append(",\"read_committed\":").append(jsonStrings(rc));
        out.append(",\"read_uncommitted\":").append(jsonStrings(ru));
        out.append(",\"transaction_version\":").append(tv);
        out.append(",\"producer_epoch\":").append(epoch).append('}');
        System.out.println(out);
    }

    // send counts a record as acked, by its value's prefix, once the broker
    // acknowledges it.
    private static void send(KafkaProducer<String, String> p, String topic, int i, String value,
                             Map<String, AtomicInteger> acked, Callback onError) {
        String prefix = value.substring(0, value.indexOf('-'));
        p.send(new ProducerRecord<>(topic, i % PARTITIONS, null, value), (md, err) -> {
            if (err == null) {
                acked.computeIfAbsent(prefix, k -> new AtomicInteger()).incrementAndGet();
            }
            onError.onCompletion(md, err);
        });
    }

    // readAll reads every partition from the start until want values
    // arrived (or 60 s passed), then one more second for anything beyond.
    private static List<String> readAll(String bootstrap, String topic, String isolation, int want) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("enable.auto.commit", "false");
        p.put("isolation.level", isolation);
        List<String> seen = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p, new StringDeserializer(), new StringDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < PARTITIONS; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 60_000;
            long drainUntil = Long.MAX_VALUE;
            while (System.currentTimeMillis() < Math.min(deadline, drainUntil)) {
                for (ConsumerRecord<String, String> rec : c.poll(Duration.ofMillis(200))) {
                    seen.add(rec.value());
                }
                if (seen.size() >= want && drainUntil == Long.MAX_VALUE) {
                    drainUntil = System.currentTimeMillis() + 1000;
                }
            }
        }
        return seen;
    }

    private static String jsonStrings(List<String> values) {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < values.size(); i++) {
            if (i > 0) {
                b.append(',');
            }
            // The values are the check's own ASCII words: nothing to escape.
            b.append('"').append(values.get(i)).append('"');
        }
        return b.append(']').toString();
    }
}
