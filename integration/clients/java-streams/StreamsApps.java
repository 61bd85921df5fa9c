// Kafka Streams applications beyond WordCount for the streams/ scenarios
// (integration/scenarios_streams_apps.go), compiled by the harness against
// the streams set (integration/deps.go JavaPrograms).
//
//   java StreamsApps TOPOLOGY PROPERTIES_FILE
//
// TOPOLOGY is one of
//
//   join    KStream(app.input) join KTable(app.table): order|customer
//   window  per-key count:sum over tumbling windows (app.window.ms, grace
//           app.grace.ms) of event time, suppressed until the window closes;
//           the output key is key@windowStart
//   fkjoin  KTable(app.input: productId:qty) join KTable(app.table) on the
//           product id: order|product, a tombstone when the product goes
//   sums    per-key running sum of app.input in the store "sums", queried
//           over HTTP (interactive queries)
//
// Keys and values are strings everywhere; every result goes to app.output.
// Properties whose names start with "app." are the application's; the rest
// are StreamsConfig. The process ends on SIGTERM (closing KafkaStreams, so
// that its transactions are committed or aborted) or when Streams fails.
//
// For sums, an HTTP server on 127.0.0.1 (port chosen by the system) is
// application.server, and the address is written to app.address.file once
// it serves:
//
//   GET /store?stale=true|false  the local store's key=value lines: active
//                                tasks only, or standbys as well
//   GET /owner?key=K             the host:port whose active task holds K
//   GET /tasks                   state, active and standby task ids, and how
//                                many records restores have written
//
// A request Streams cannot answer yet (rebalancing) gets a 503.

import java.io.IOException;
import java.io.OutputStream;
import java.io.Reader;
import java.net.InetSocketAddress;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.Properties;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyQueryMetadata;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StoreQueryParameters;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.ThreadMetadata;
import org.apache.kafka.streams.TaskMetadata;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.InvalidStateStoreException;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.processor.StateRestoreListener;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.QueryableStoreTypes;
import org.apache.kafka.streams.state.ReadOnlyKeyValueStore;
import org.apache.kafka.streams.state.WindowStore;

public final class StreamsApps {
    static final Serde<String> S = Serdes.String();
    static final String SUMS_STORE = "sums";

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: StreamsApps join|window|fkjoin|sums PROPERTIES_FILE");
            System.exit(2);
        }
        String mode = args[0];
        Properties all = new Properties();
        try (Reader r = Files.newBufferedReader(Paths.get(args[1]), StandardCharsets.UTF_8)) {
            all.load(r);
        }
        Properties app = new Properties(), streamsProps = new Properties();
        for (String k : all.stringPropertyNames()) {
            (k.startsWith("app.") ? app : streamsProps).put(k, all.getProperty(k));
        }
        streamsProps.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);
        streamsProps.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.StringSerde.class);

        HttpServer http = null;
        if (mode.equals("sums")) {
            // Bound before Streams starts: application.server must name it.
            http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
            streamsProps.put(StreamsConfig.APPLICATION_SERVER_CONFIG, "127.0.0.1:" + http.getAddress().getPort());
        }

        Topology topology = build(mode, app);
        System.out.println("topology " + mode + ":\n" + topology.describe());
        KafkaStreams streams = new KafkaStreams(topology, streamsProps);

        CountDownLatch done = new CountDownLatch(1);
        AtomicReference<String> failure = new AtomicReference<>();
        streams.setStateListener((now, before) -> {
            System.out.println("state " + before + " -> " + now);
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.PENDING_ERROR) {
                failure.compareAndSet(null, "Streams went to " + now);
                done.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.out.println("uncaught: " + e);
            e.printStackTrace(System.out);
            failure.compareAndSet(null, "uncaught " + e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        AtomicLong restored = new AtomicLong();
        streams.setGlobalStateRestoreListener(new StateRestoreListener() {
            public void onRestoreStart(TopicPartition tp, String store, long start, long end) {
                System.out.println("restore " + store + " " + tp + " from " + start + " to " + end);
            }

            public void onBatchRestored(TopicPartition tp, String store, long endOffset, long n) {
                restored.addAndGet(n);
            }

            public void onRestoreEnd(TopicPartition tp, String store, long n) {
                System.out.println("restored " + store + " " + tp + ": " + n + " records");
            }
        });

        Runtime.getRuntime().addShutdownHook(new Thread(done::countDown));
        streams.start();
        if (http != null) {
            serve(http, streams, restored);
            String address = "127.0.0.1:" + http.getAddress().getPort();
            // Written whole, then renamed: the harness never reads half an
            // address.
            Path file = Paths.get(app.getProperty("app.address.file"));
            Path tmp = Paths.get(file + ".tmp");
            Files.write(tmp, address.getBytes(StandardCharsets.UTF_8));
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
            System.out.println("serving interactive queries on " + address);
        }
        done.await();
        if (http != null) {
            http.stop(0);
        }
        streams.close(Duration.ofSeconds(30));
        System.out.println("closed");
        if (failure.get() != null) {
            System.out.println("failed: " + failure.get());
            System.exit(1);
        }
    }

    static String need(Properties app, String key) {
        String v = app.getProperty(key);
        if (v == null) {
            throw new IllegalArgumentException("property " + key + " is not set");
        }
        return v;
    }

    static Topology build(String mode, Properties app) {
        StreamsBuilder b = new StreamsBuilder();
        String input = need(app, "app.input"), output = need(app, "app.output");
        switch (mode) {
            case "join": {
                KTable<String, String> customers = b.table(need(app, "app.table"), Consumed.with(S, S),
                        Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as("customers").withKeySerde(S).withValueSerde(S));
                KStream<String, String> orders = b.stream(input, Consumed.with(S, S));
                orders.join(customers, (order, customer) -> order + "|" + customer).to(output, Produced.with(S, S));
                break;
            }
            case "window": {
                Duration size = Duration.ofMillis(Long.parseLong(need(app, "app.window.ms")));
                Duration grace = Duration.ofMillis(Long.parseLong(need(app, "app.grace.ms")));
                b.stream(input, Consumed.with(S, S))
                        .groupByKey(Grouped.with(S, S))
                        .windowedBy(TimeWindows.ofSizeAndGrace(size, grace))
                        .aggregate(() -> "0:0", (key, value, agg) -> {
                            String[] ns = agg.split(":");
                            return (Long.parseLong(ns[0]) + 1) + ":" + (Long.parseLong(ns[1]) + Long.parseLong(value));
                        }, Materialized.<String, String, WindowStore<Bytes, byte[]>>as("window-sums").withKeySerde(S).withValueSerde(S))
                        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                        .toStream()
                        .map((wk, agg) -> KeyValue.pair(wk.key() + "@" + wk.window().start(), agg))
                        .to(output, Produced.with(S, S));
                break;
            }
            case "fkjoin": {
                KTable<String, String> orders = b.table(input, Consumed.with(S, S));
                KTable<String, String> products = b.table(need(app, "app.table"), Consumed.with(S, S));
                orders.join(products, (String order) -> order.split(":")[0], (order, product) -> order + "|" + product)
                        .toStream()
                        .to(output, Produced.with(S, S));
                break;
            }
            case "sums": {
                b.stream(input, Consumed.with(S, S))
                        .groupByKey(Grouped.with(S, S))
                        .aggregate(() -> "0", (key, value, sum) -> Long.toString(Long.parseLong(sum) + Long.parseLong(value)),
                                Materialized.<String, String, KeyValueStore<Bytes, byte[]>>as(SUMS_STORE).withKeySerde(S).withValueSerde(S))
                        .toStream()
                        .to(output, Produced.with(S, S));
                break;
            }
            default:
                throw new IllegalArgumentException("unknown topology " + mode);
        }
        return b.build();
    }

    static void serve(HttpServer http, KafkaStreams streams, AtomicLong restored) {
        http.createContext("/store", ex -> answer(ex, () -> {
            boolean stale = "true".equals(param(ex.getRequestURI(), "stale"));
            StoreQueryParameters<ReadOnlyKeyValueStore<String, String>> q =
                    StoreQueryParameters.fromNameAndType(SUMS_STORE, QueryableStoreTypes.keyValueStore());
            if (stale) {
                q = q.enableStaleStores();
            }
            StringBuilder sb = new StringBuilder();
            try (KeyValueIterator<String, String> it = streams.store(q).all()) {
                while (it.hasNext()) {
                    KeyValue<String, String> kv = it.next();
                    sb.append(kv.key).append('=').append(kv.value).append('\n');
                }
            }
            return sb.toString();
        }));
        http.createContext("/owner", ex -> answer(ex, () -> {
            KeyQueryMetadata m = streams.queryMetadataForKey(SUMS_STORE, param(ex.getRequestURI(), "key"), S.serializer());
            if (m == null || m.equals(KeyQueryMetadata.NOT_AVAILABLE)) {
                throw new InvalidStateStoreException("no metadata for the key yet");
            }
            return m.activeHost().host() + ":" + m.activeHost().port() + "\n";
        }));
        http.createContext("/tasks", ex -> answer(ex, () -> {
            TreeSet<String> active = new TreeSet<>(), standby = new TreeSet<>();
            for (ThreadMetadata t : streams.metadataForLocalThreads()) {
                for (TaskMetadata tm : t.activeTasks()) {
                    active.add(tm.taskId().toString());
                }
                for (TaskMetadata tm : t.standbyTasks()) {
                    standby.add(tm.taskId().toString());
                }
            }
            return "state " + streams.state() + "\nactive " + String.join(",", active) + "\nstandby " + String.join(",", standby)
                    + "\nrestored " + restored.get() + "\n";
        }));
        http.start();
    }

    interface Body {
        String get() throws Exception;
    }

    static void answer(HttpExchange ex, Body body) throws IOException {
        int code = 200;
        String text;
        try {
            text = body.get();
        } catch (InvalidStateStoreException e) {
            code = 503;
            text = e.toString() + "\n";
        } catch (Exception e) {
            code = 500;
            text = e.toString() + "\n";
        }
        byte[] b = text.getBytes(StandardCharsets.UTF_8);
        ex.sendResponseHeaders(code, b.length);
        try (OutputStream os = ex.getResponseBody()) {
            os.write(b);
        }
    }

    static String param(URI uri, String name) {
        String q = uri.getRawQuery();
        if (q == null) {
            return null;
        }
        for (String kv : q.split("&")) {
            int i = kv.indexOf('=');
            if (i > 0 && kv.substring(0, i).equals(name)) {
                return java.net.URLDecoder.decode(kv.substring(i + 1), StandardCharsets.UTF_8);
            }
        }
        return null;
    }
}
