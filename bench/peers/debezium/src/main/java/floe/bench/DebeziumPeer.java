package floe.bench;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.format.Json;

import java.io.BufferedWriter;
import java.io.IOException;
import java.io.OutputStreamWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Runs the Debezium PostgreSQL connector in Debezium's embedded engine and writes every
 * change event (the value, as Debezium's JSON converter renders it) as one line to a
 * file; exits once it has written --events=N events. When the N-th event is written
 * (and the file flushed) it prints {@code {"done": N}} on stdout, before shutting the
 * engine down.
 *
 * <p>Arguments: {@code --out=FILE --events=N [key=value ...]}: every key=value is a
 * property of the engine/connector and overrides the defaults below. On stdout, one
 * JSON line at the end: events written, bytes, and the seconds from JVM start to
 * the N-th event. Exit code 0 when N events were written, 1 when the engine stopped
 * before that.
 */
public final class DebeziumPeer {
    private DebeziumPeer() {}

    public static void main(String[] args) throws Exception {
        final long start = System.nanoTime();
        String out = null;
        long target = -1;
        Properties props = new Properties();
        props.setProperty("name", "floe-bench-debezium");
        props.setProperty("connector.class", "io.debezium.connector.postgresql.PostgresConnector");
        props.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        props.setProperty("offset.flush.interval.ms", "10000");
        props.setProperty("plugin.name", "pgoutput");
        props.setProperty("topic.prefix", "bench");
        props.setProperty("database.user", "postgres");
        props.setProperty("database.password", "");
        props.setProperty("database.dbname", "postgres");
        props.setProperty("tombstones.on.delete", "false");
        // Event values without the embedded schema (the usual setting for JSON sinks).
        props.setProperty("converter.schemas.enable", "false");
        for (String a : args) {
            if (a.startsWith("--out=")) {
                out = a.substring("--out=".length());
            } else if (a.startsWith("--events=")) {
                target = Long.parseLong(a.substring("--events=".length()));
            } else {
                int eq = a.indexOf('=');
                if (eq <= 0) {
                    System.err.println("debezium-peer: bad argument " + a);
                    System.exit(2);
                }
                props.setProperty(a.substring(0, eq), a.substring(eq + 1));
            }
        }
        if (out == null || target < 0) {
            System.err.println("usage: DebeziumPeer --out=FILE --events=N [key=value ...]");
            System.exit(2);
        }
        final long want = target;
        final AtomicLong count = new AtomicLong();
        final AtomicLong bytes = new AtomicLong();
        final AtomicLong doneAt = new AtomicLong();
        final AtomicReference<String> failure = new AtomicReference<>();
        final CountDownLatch done = new CountDownLatch(1);
        final BufferedWriter writer = new BufferedWriter(new OutputStreamWriter(
                Files.newOutputStream(Path.of(out)), StandardCharsets.UTF_8), 1 << 20);

        DebeziumEngine<ChangeEvent<String, String>> engine = DebeziumEngine.create(Json.class)
                .using(props)
                .notifying(record -> {
                    String value = record.value();
                    if (value == null) {
                        return;
                    }
                    long n;
                    synchronized (writer) {
                        try {
                            writer.write(value);
                            writer.write('\n');
                        } catch (IOException e) {
                            throw new UncheckedIOException(e);
                        }
                        bytes.addAndGet(value.length() + 1);
                        n = count.incrementAndGet();
                    }
                    if (n == want) {
                        doneAt.set(System.nanoTime());
                        done.countDown();
                    }
                })
                .using((success, message, error) -> {
                    if (count.get() < want) {
                        failure.set("engine stopped after " + count.get() + " events: " + message
                                + (error != null ? " (" + error + ")" : ""));
                        if (error != null) {
                            error.printStackTrace();
                        }
                    }
                    done.countDown();
                })
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor();
        executor.execute(engine);
        done.await();
        synchronized (writer) {
            writer.flush();
        }
        // The N-th event is written: the caller takes its time and CPU readings now.
        System.out.println("{\"done\": " + count.get() + "}");
        System.out.flush();
        // Shut down; never wait for ever.
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                return;
            }
            System.err.println("debezium-peer: engine did not close within 60 s, halting");
            Runtime.getRuntime().halt(failure.get() == null ? 0 : 1);
        });
        watchdog.setDaemon(true);
        watchdog.start();
        engine.close();
        executor.shutdown();
        executor.awaitTermination(30, TimeUnit.SECONDS);
        synchronized (writer) {
            writer.close();
        }
        double toLast = doneAt.get() == 0 ? -1 : (doneAt.get() - start) / 1e9;
        System.out.println("{\"events\": " + count.get() + ", \"bytes\": " + bytes.get()
                + ", \"seconds_to_last_event\": " + toLast
                + ", \"seconds_total\": " + (System.nanoTime() - start) / 1e9 + "}");
        System.out.flush();
        if (failure.get() != null) {
            System.err.println("debezium-peer: " + failure.get());
            Runtime.getRuntime().halt(1);
        }
        Runtime.getRuntime().halt(0);
    }
}
