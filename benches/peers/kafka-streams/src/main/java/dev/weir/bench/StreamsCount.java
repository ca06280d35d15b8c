package dev.weir.bench;

import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.Stores;

/**
 * kafka-bench's job (docs/BENCHMARKS.md §5) as a Kafka Streams application, so that Weir can be
 * measured beside the system most Kafka users would reach for: read the input topic, count the
 * records of each key, write each updated count to the output topic, exactly-once.
 *
 * <p>The output is what Weir's {@code count} example emits (examples/rust/count), because
 * kafka-bench checks both the same way: one output record per input record, its key the input
 * key unchanged, its value the key's count so far as decimal UTF-8 text, its timestamp the input
 * record's (Kafka Streams keeps a forwarded record's timestamp, and its producer writes it as
 * the output's CreateTime, which the latency runs measure from).
 *
 * <p>The count is written with the Processor API rather than the DSL's
 * {@code groupByKey().count()}: the DSL's count is a table whose record cache merges updates of a
 * key between commits, so it would emit fewer records than it reads, and a different job. The
 * store is Kafka Streams' default, a persistent RocksDB key-value store with a changelog topic;
 * under exactly-once every put is also written to that changelog inside the transaction.
 *
 * <p>Arguments, all required but {@code --until-end}:
 *
 * <pre>
 * --bootstrap HOST:PORT  --input TOPIC  --output TOPIC  --application-id ID
 * --commit-interval-ms N  --threads N  --state-dir DIR  [--until-end]
 * </pre>
 *
 * <p>It prints {@code StreamsCount running} on standard output once the application first
 * reaches the RUNNING state. With {@code --until-end} it takes the input's end offsets when it
 * starts and closes the application once it has processed every record before them: a clean
 * close commits the open transaction, so every output record is visible when the process exits
 * (the analogue of a Weir job with {@code until = "end"}, which ends with a final checkpoint).
 * Without it, it runs until SIGTERM, then closes the same way. Exit status 0 after a clean close, 1 when the
 * application failed or did not close within a minute.
 */
public final class StreamsCount {
    /** The name of the count store (and so of its changelog topic). */
    private static final String STORE = "counts";
    /** How long a close may take before the process gives up on it. */
    private static final Duration CLOSE_TIMEOUT = Duration.ofSeconds(60);

    private StreamsCount() {}

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = parse(argv);
        String bootstrap = required(args, "bootstrap");
        String input = required(args, "input");
        String output = required(args, "output");
        boolean untilEnd = args.containsKey("until-end");

        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, required(args, "application-id"));
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        // The commit interval is Weir's checkpoint interval: under exactly-once each commit ends
        // a transaction, so output becomes visible at the same pace as Weir's.
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, required(args, "commit-interval-ms"));
        // Two threads, as Weir's job runs parallelism 2 (and the raw loop 2 loops): with
        // exactly_once_v2 each thread has one transactional producer, so 2 transactions per
        // commit interval, like Weir's 2 sink subtasks per checkpoint.
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, required(args, "threads"));
        props.put(StreamsConfig.STATE_DIR_CONFIG, required(args, "state-dir"));
        // The same start as Weir's source (`start = "earliest"`); also Kafka Streams' default.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Everything else is Kafka Streams' default, as Weir's connectors run with theirs.

        int partitions;
        long[] ends;
        try (Admin admin = Admin.create(Map.of(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap))) {
            partitions = admin.describeTopics(List.of(input)).allTopicNames().get()
                    .get(input).partitions().size();
            ends = new long[partitions];
            if (untilEnd) {
                // The input of the max-throughput runs is written before the run and has no
                // transactions: its end offsets are the number of records to process.
                Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
                for (int p = 0; p < partitions; p++) {
                    latest.put(new TopicPartition(input, p), OffsetSpec.latest());
                }
                Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> found =
                        admin.listOffsets(latest).all().get();
                for (int p = 0; p < partitions; p++) {
                    ends[p] = found.get(new TopicPartition(input, p)).offset();
                }
            }
        }
        // Per input partition, the offset after the last record processed: written by the
        // stream threads, read by the main thread to see the end (--until-end).
        AtomicLongArray processed = new AtomicLongArray(partitions);

        StreamsBuilder builder = new StreamsBuilder();
        builder.addStateStore(Stores.keyValueStoreBuilder(
                Stores.persistentKeyValueStore(STORE), Serdes.Bytes(), Serdes.Long()));
        builder.stream(input, Consumed.with(Serdes.Bytes(), Serdes.ByteArray()))
                .process(() -> new Count(processed), STORE)
                .to(output, Produced.with(Serdes.Bytes(), Serdes.String()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch running = new CountDownLatch(1);
        CountDownLatch stopped = new CountDownLatch(1);
        AtomicInteger failed = new AtomicInteger();
        streams.setStateListener((now, before) -> {
            if (now == KafkaStreams.State.RUNNING) {
                running.countDown();
            }
            if (now == KafkaStreams.State.ERROR || now == KafkaStreams.State.NOT_RUNNING) {
                stopped.countDown();
            }
        });
        streams.setUncaughtExceptionHandler(e -> {
            System.err.println("StreamsCount: the application failed: " + e);
            failed.set(1);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        // SIGTERM: close cleanly (committing the open transaction) before the JVM exits.
        CountDownLatch closed = new CountDownLatch(1);
        Thread hook = new Thread(() -> {
            close(streams, failed);
            closed.countDown();
        }, "close-on-sigterm");
        Runtime.getRuntime().addShutdownHook(hook);

        streams.start();
        while (!running.await(10, TimeUnit.MILLISECONDS)) {
            if (stopped.getCount() == 0) {
                System.exit(1);
            }
        }
        System.out.println("StreamsCount running");
        System.out.flush();

        if (!untilEnd) {
            // Until SIGTERM, whose hook closes the application and lets the JVM exit, or a
            // failure.
            stopped.await();
            if (failed.get() != 0) {
                System.exit(1);
            }
            closed.await(CLOSE_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
            return;
        }
        while (!reached(processed, ends)) {
            if (stopped.getCount() == 0) {
                System.exit(1);
            }
            Thread.sleep(10);
        }
        Runtime.getRuntime().removeShutdownHook(hook);
        close(streams, failed);
        System.exit(failed.get());
    }

    /** Closes the application, committing what it processed; notes a close that timed out. */
    private static void close(KafkaStreams streams, AtomicInteger failed) {
        if (!streams.close(CLOSE_TIMEOUT)) {
            System.err.println("StreamsCount: the application did not close within " + CLOSE_TIMEOUT);
            failed.set(1);
        }
    }

    /** Whether every partition was processed up to its end offset. */
    private static boolean reached(AtomicLongArray processed, long[] ends) {
        for (int p = 0; p < ends.length; p++) {
            if (processed.get(p) < ends[p]) {
                return false;
            }
        }
        return true;
    }

    /** {@code --name value} and {@code --flag} pairs. */
    private static Map<String, String> parse(String[] argv) {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i < argv.length; i++) {
            if (!argv[i].startsWith("--")) {
                throw new IllegalArgumentException("unexpected argument " + argv[i]);
            }
            String name = argv[i].substring(2);
            if (name.equals("until-end")) {
                args.put(name, "");
            } else if (i + 1 < argv.length) {
                args.put(name, argv[++i]);
            } else {
                throw new IllegalArgumentException("--" + name + " needs a value");
            }
        }
        return args;
    }

    private static String required(Map<String, String> args, String name) {
        String value = args.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing --" + name + " (have "
                    + args.keySet().stream().sorted().collect(Collectors.joining(", ")) + ")");
        }
        return value;
    }

    /**
     * The count: one output record per input record, the key's count so far as decimal text,
     * key and timestamp kept.
     */
    private static final class Count implements Processor<Bytes, byte[], Bytes, String> {
        private final AtomicLongArray processed;
        private ProcessorContext<Bytes, String> context;
        private KeyValueStore<Bytes, Long> counts;

        Count(AtomicLongArray processed) {
            this.processed = processed;
        }

        @Override
        public void init(ProcessorContext<Bytes, String> context) {
            this.context = context;
            this.counts = context.getStateStore(STORE);
        }

        @Override
        public void process(Record<Bytes, byte[]> record) {
            Long before = counts.get(record.key());
            long count = before == null ? 1 : before + 1;
            counts.put(record.key(), count);
            context.forward(record.withValue(Long.toString(count)));
            context.recordMetadata().ifPresent(m -> processed.lazySet(m.partition(), m.offset() + 1));
        }
    }
}
