package io.cloudprofiler;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.Set;

/**
 * Finds and loads libcloudprofiler.so, once per JVM. In order:
 * <ol>
 * <li>a copy already mapped into this process (loaded through another
 *     classloader, or another API such as the Foreign Function API): that
 *     same file, because a second copy would start a second Go runtime, which
 *     Go does not support;
 * <li>the system property {@code cloudprofiler.library}, the path of the file;
 * <li>{@code System.loadLibrary("cloudprofiler")}: java.library.path (a Storm
 *     supervisor adds the topology jar's resources/Linux-amd64/ to it);
 * <li>the jar's own copy, resources/Linux-amd64/libcloudprofiler.so, extracted
 *     to {@code <cloudprofiler.extract.dir or java.io.tmpdir>/cloudprofiler-<user>/<version>-<sha256>/}
 *     (written to a temporary file and renamed, so concurrent JVMs never see
 *     half a file; an existing copy is used only if its hash matches).
 * </ol>
 * A JNI library can be loaded into one classloader only: a second one gets a
 * {@link CloudProfilerException} saying where the jar belongs.
 */
final class NativeLibrary {
    static final String PROPERTY = "cloudprofiler.library";
    static final String EXTRACT_DIR_PROPERTY = "cloudprofiler.extract.dir";
    static final String RESOURCE = "/resources/Linux-amd64/libcloudprofiler.so";
    static final String FILE_NAME = "libcloudprofiler.so";

    private static String path;
    private static String how;

    private NativeLibrary() {}

    static synchronized String path() {
        return path != null ? path : FILE_NAME;
    }

    static synchronized String describe() {
        return path == null ? "(not loaded)" : path + " (" + how + ")";
    }

    static synchronized void load() {
        if (path != null) return;
        String os = System.getProperty("os.name", ""), arch = System.getProperty("os.arch", "");
        if (!os.startsWith("Linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
            throw new CloudProfilerException(0, "cloudprofiler: the native library is built for Linux amd64 only; this JVM runs on "
                    + os + " " + arch);
        }
        List<String> tried = new ArrayList<>();

        String mapped = mappedCopy();
        if (mapped != null) {
            loadFile(mapped, "already mapped into this process");
            return;
        }

        String prop = System.getProperty(PROPERTY);
        if (prop != null && !prop.isEmpty()) {
            File f = new File(prop).getAbsoluteFile();
            if (!f.isFile()) {
                throw new CloudProfilerException(0, "cloudprofiler: -D" + PROPERTY + "=" + prop + ": no such file");
            }
            loadFile(f.getPath(), "-D" + PROPERTY);
            return;
        }
        tried.add("-D" + PROPERTY + ": not set");

        try {
            System.loadLibrary("cloudprofiler");
            String p = mappedCopy();
            path = p != null ? p : "java.library.path";
            how = "System.loadLibrary, java.library.path";
            return;
        } catch (UnsatisfiedLinkError e) {
            explainIfOtherClassLoader(e);
            tried.add("System.loadLibrary(\"cloudprofiler\") on java.library.path="
                    + System.getProperty("java.library.path") + ": " + e.getMessage());
        }
        // A copy that failed half-way (mapped, then refused) must be the one used.
        mapped = mappedCopy();
        if (mapped != null) {
            loadFile(mapped, "already mapped into this process");
            return;
        }

        try {
            Path lib = extract();
            loadFile(lib.toString(), "extracted from the jar");
            return;
        } catch (IOException | RuntimeException e) {
            if (e instanceof CloudProfilerException) throw (CloudProfilerException) e;
            tried.add("extracting " + RESOURCE + " from the jar: " + e.getMessage());
        }
        StringBuilder sb = new StringBuilder("cloudprofiler: could not load " + FILE_NAME + ". Tried, in order:");
        for (int i = 0; i < tried.size(); i++) sb.append("\n  ").append(i + 1).append(". ").append(tried.get(i));
        sb.append("\nSet -D" + PROPERTY + "=/path/to/" + FILE_NAME
                + ", put it on java.library.path, or use a jar built with it (`make java`).");
        throw new CloudProfilerException(0, sb.toString());
    }

    private static void loadFile(String file, String via) {
        try {
            System.load(file);
        } catch (UnsatisfiedLinkError e) {
            explainIfOtherClassLoader(e);
            throw new CloudProfilerException("cloudprofiler: loading " + file + " (" + via + ") failed: " + e.getMessage(), e);
        }
        path = file;
        how = via;
    }

    private static void explainIfOtherClassLoader(UnsatisfiedLinkError e) {
        String m = String.valueOf(e.getMessage());
        if (!m.contains("another classloader")) return;
        throw new CloudProfilerException("cloudprofiler: " + m + ". A JVM loads a JNI library into one classloader"
                + " only, and this copy of the io.cloudprofiler classes was loaded by a second one ("
                + NativeLibrary.class.getClassLoader() + "). Load the cloudprofiler jar once, from a classloader"
                + " every job shares: in Flink, copy it into flink/lib/ and leave it out of the job jar (a job jar"
                + " that must carry it also needs 'io.cloudprofiler' in classloader.parent-first-patterns.additional,"
                + " so that the copy in flink/lib/ is the one used); in Storm, put it on the worker classpath"
                + " (extlib/) instead of in several topology jars.", e);
    }

    /**
     * The path of a libcloudprofiler*.so* already mapped into this process,
     * from /proc/self/maps; null if none. A mapped copy whose file is gone
     * cannot be loaded again, and loading another would start a second Go
     * runtime: that is an error.
     */
    static String mappedCopy() {
        List<String> lines;
        try {
            lines = Files.readAllLines(Paths.get("/proc/self/maps"));
        } catch (IOException e) {
            return null;
        }
        for (String line : lines) {
            int slash = line.indexOf('/');
            if (slash < 0) continue;
            String p = line.substring(slash);
            String name = p.substring(p.lastIndexOf('/') + 1);
            if (!name.startsWith("libcloudprofiler") || !name.contains(".so")) continue;
            if (p.endsWith(" (deleted)")) {
                throw new CloudProfilerException(0, "cloudprofiler: " + p + " is mapped into this process but its file"
                        + " was deleted; loading another copy would start a second Go runtime. Restart the JVM.");
            }
            return p;
        }
        return null;
    }

    private static Path extract() throws IOException {
        byte[] bytes;
        try (InputStream in = NativeLibrary.class.getResourceAsStream(RESOURCE)) {
            if (in == null) throw new IOException("the jar has no " + RESOURCE + " (it was built without the native library)");
            bytes = in.readAllBytes();
        }
        String sha = sha256(bytes);
        String user = System.getProperty("user.name", "user").replaceAll("[^A-Za-z0-9._-]", "_");
        Path base = Paths.get(System.getProperty(EXTRACT_DIR_PROPERTY, System.getProperty("java.io.tmpdir")),
                "cloudprofiler-" + user);
        Set<PosixFilePermission> owner = PosixFilePermissions.fromString("rwx------");
        if (!Files.isDirectory(base)) {
            try {
                Files.createDirectories(base.getParent());
                Files.createDirectory(base, PosixFilePermissions.asFileAttribute(owner));
            } catch (java.nio.file.FileAlreadyExistsException raced) {
                // another JVM made it
            }
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(base);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new IOException(base + " is writable by others (" + PosixFilePermissions.toString(perms)
                    + "): not loading code from it");
        }
        Path dir = base.resolve(version() + "-" + sha.substring(0, 16));
        Files.createDirectories(dir);
        Path lib = dir.resolve(FILE_NAME);
        if (Files.isRegularFile(lib) && sha256(Files.readAllBytes(lib)).equals(sha)) return lib;
        Path tmp = Files.createTempFile(dir, FILE_NAME, ".tmp");
        try {
            Files.write(tmp, bytes);
            Files.setPosixFilePermissions(tmp, PosixFilePermissions.fromString("r-x------"));
            try {
                Files.move(tmp, lib, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, lib, StandardCopyOption.REPLACE_EXISTING);
            }
        } finally {
            Files.deleteIfExists(tmp);
        }
        return lib;
    }

    static String version() {
        Properties p = new Properties();
        try (InputStream in = NativeLibrary.class.getResourceAsStream("/io/cloudprofiler/version.properties")) {
            if (in != null) p.load(in);
        } catch (IOException e) {
            // the hash alone still names the copy
        }
        return p.getProperty("version", "unknown").replaceAll("[^A-Za-z0-9._-]", "_");
    }

    private static String sha256(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(b);
            StringBuilder sb = new StringBuilder();
            for (byte x : d) sb.append(String.format("%02x", x));
            return sb.toString();
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }
}
