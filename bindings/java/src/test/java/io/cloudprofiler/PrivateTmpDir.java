package io.cloudprofiler;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.DirectoryStream;
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
 * target/ and deletes that when the JVM exits (or, if it could not, the next
 * test JVM there does). The library extracted from the classes
 * (cloudprofiler-&lt;user&gt;/, read from java.io.tmpdir at load) then lands
 * there, not in /tmp; child JVMs get it too ({@link TestSupport#childJvm}).
 * The JDK's own temporary files (Files.createTempFile, @TempDir) keep the
 * tmpdir of the JVM's start: the tests delete those themselves.
 */
public final class PrivateTmpDir implements Extension {
    private static final String PREFIX = "test-tmp-";
    static final Path DIR = create();

    private static Path create() {
        try {
            Path target = Paths.get(System.getProperty("user.dir"), "target");
            removeStale(target);
            Path dir = Files.createTempDirectory(target, PREFIX + ProcessHandle.current().pid() + "-");
            System.setProperty("java.io.tmpdir", dir.toString());
            Runtime.getRuntime().addShutdownHook(new Thread(() -> deleteTree(dir)));
            return dir;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** The directories of test JVMs that ended before their hook finished (halted, killed). */
    private static void removeStale(Path target) throws IOException {
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(target, PREFIX + "*")) {
            for (Path d : ds) {
                String[] f = d.getFileName().toString().split("-");  // test, tmp, pid, random
                if (f.length == 4 && f[2].matches("[0-9]{1,18}") && ProcessHandle.of(Long.parseLong(f[2])).isEmpty()) {
                    deleteTree(d);
                }
            }
        }
    }

    /** Tries a few times: other shutdown hooks (Flink's, Storm's) may be removing or adding files meanwhile. */
    private static void deleteTree(Path dir) {
        for (int attempt = 0; attempt < 5 && Files.exists(dir); attempt++) {
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            } catch (IOException | UncheckedIOException e) {
                // a file went away under the walk: walk again
            }
            if (Files.exists(dir)) {
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
        if (Files.exists(dir)) System.err.println("PrivateTmpDir: could not delete " + dir);
    }
}
