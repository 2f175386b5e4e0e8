package io.cloudprofiler.examples.flink;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Comparator;
import java.util.stream.Stream;
import org.junit.jupiter.api.extension.Extension;

/**
 * Registered for every test by JUnit's extension auto-detection
 * (src/test/resources: junit-platform.properties, META-INF/services), so it
 * runs before any test: points java.io.tmpdir at a new directory under
 * target/ and deletes that when the JVM exits. The library the binding's jar
 * extracts (cloudprofiler-&lt;user&gt;/, from java.io.tmpdir at load) and
 * Flink's web upload directory (flink-web-upload) then land there, not in
 * /tmp. The JDK's own temporary files (Files.createTempFile, @TempDir) keep
 * the tmpdir of the JVM's start: the tests delete those themselves.
 */
public final class PrivateTmpDir implements Extension {
    static final Path DIR = create();

    private static Path create() {
        try {
            Path dir = Files.createTempDirectory(Paths.get(System.getProperty("user.dir"), "target"), "test-tmp-");
            System.setProperty("java.io.tmpdir", dir.toString());
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir)));
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static void deleteTree(Path dir) {
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException | UncheckedIOException e) {
            System.err.println("PrivateTmpDir: " + dir + " not deleted: " + e);
        }
    }
}
