package io.cloudprofiler;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
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
 *     half a file; an existing copy is used only if its hash matches). Both
 *     directories must be real directories (not symbolic links), owned by
 *     this process's user and not writable by group or others: otherwise
 *     nothing is loaded from them. Each build's jar has its own copy (11
 *     MB): once one is loaded, the other versions' and builds' copies there
 *     that no JVM has extracted or reused for {@value #PRUNE_AFTER_MINUTES}
 *     minutes are removed (a JVM that still runs one keeps its mapping).
 * </ol>
 * A JNI library can be loaded into one classloader only. A classloader
 * that finds the library bound to another one (a job's, with the jar in a
 * fat job jar and Flink's child-first loading) asks for a garbage collection and
 * tries again for up to {@value #OTHER_LOADER_WAIT_MS} ms: a finished job's
 * classloader, once collected, lets go of the library (the JNI glue keeps
 * no reference into Java), so jobs that follow one another each load it.
 * While the other classloader lives (a job still running) it gets a
 * {@link CloudProfilerException} saying where the jar belongs.
 */
final class NativeLibrary {
    static final String PROPERTY = "cloudprofiler.library";
    static final String EXTRACT_DIR_PROPERTY = "cloudprofiler.extract.dir";
    static final String RESOURCE = "/resources/Linux-amd64/libcloudprofiler.so";
    static final String FILE_NAME = "libcloudprofiler.so";
    /** A copy of another version or build, unused this long, is removed when a JVM loads its own. */
    static final long PRUNE_AFTER_MINUTES = 10;
    /** How long a job's classloader waits for another one to let go of the library. */
    static final long OTHER_LOADER_WAIT_MS = 3000;

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
            pruneOtherCopies(lib.getParent());
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
            if (!waitForOtherLoader(file, e)) {
                explainIfOtherClassLoader(e);
                throw new CloudProfilerException("cloudprofiler: loading " + file + " (" + via + ") failed: " + e.getMessage(), e);
            }
        }
        path = file;
        how = via;
    }

    /**
     * After "already loaded in another classloader": collects garbage and
     * loads again, every 100 ms for up to OTHER_LOADER_WAIT_MS, in case that
     * other classloader is a finished job's, unreachable but not yet
     * collected. True once loaded; false (the first error stands) when the
     * time is up or another error comes.
     */
    private static boolean waitForOtherLoader(String file, UnsatisfiedLinkError e) {
        if (!String.valueOf(e.getMessage()).contains("another classloader")) return false;
        long deadline = System.nanoTime() + OTHER_LOADER_WAIT_MS * 1_000_000L;
        while (System.nanoTime() < deadline) {
            System.gc();
            try {
                Thread.sleep(100); // the JDK unloads a collected classloader's libraries on its cleaner thread
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                return false;
            }
            try {
                System.load(file);
                return true;
            } catch (UnsatisfiedLinkError again) {
                if (!String.valueOf(again.getMessage()).contains("another classloader")) return false;
            }
        }
        return false;
    }

    /** True if l is the system classloader or one of its parents (null: the boot loader). */
    static boolean onJvmClasspath(ClassLoader l) {
        if (l == null) return true;
        for (ClassLoader s = ClassLoader.getSystemClassLoader(); s != null; s = s.getParent()) {
            if (s == l) return true;
        }
        return false;
    }

    private static void explainIfOtherClassLoader(UnsatisfiedLinkError e) {
        String m = String.valueOf(e.getMessage());
        if (!m.contains("another classloader")) return;
        throw new CloudProfilerException("cloudprofiler: " + m + ". A JVM loads a JNI library into one classloader"
                + " only, and this copy of the io.cloudprofiler classes was loaded by a second one ("
                + NativeLibrary.class.getClassLoader() + ") while the first still lives (a job still running: "
                + OTHER_LOADER_WAIT_MS + " ms of garbage collection did not free it). Load the cloudprofiler jar once, from a classloader"
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
        byte[] maps;
        try {
            maps = Files.readAllBytes(Paths.get("/proc/self/maps"));
        } catch (IOException e) {
            return null;
        }
        return mappedCopy(maps);
    }

    /**
     * mappedCopy on the bytes of a /proc/self/maps. Read as ISO-8859-1 (any
     * byte is a character: a path that is not valid UTF-8 anywhere in the
     * file must not hide the library); the library's own path is then
     * decoded as this JVM names files (sun.jnu.encoding), and one it cannot
     * name is an error, not "nothing mapped".
     */
    static String mappedCopy(byte[] maps) {
        String text = new String(maps, StandardCharsets.ISO_8859_1);
        for (String line : text.split("\n")) {
            int slash = line.indexOf('/');
            if (slash < 0) continue;
            String p = line.substring(slash);
            String name = p.substring(p.lastIndexOf('/') + 1);
            if (!name.startsWith("libcloudprofiler") || !name.contains(".so")) continue;
            boolean deleted = p.endsWith(" (deleted)");
            String path = fileName(p.getBytes(StandardCharsets.ISO_8859_1));
            if (path == null) {
                throw new CloudProfilerException(0, "cloudprofiler: a copy of the library is mapped into this process at a"
                        + " path this JVM cannot name in its file name encoding (" + jnuCharset() + "): "
                        + p + "; loading another copy would start a second Go runtime. Load the library from"
                        + " a path in plain ASCII, or run the JVM in a UTF-8 locale.");
            }
            if (deleted) {
                throw new CloudProfilerException(0, "cloudprofiler: " + path + " is mapped into this process but its file"
                        + " was deleted; loading another copy would start a second Go runtime. Restart the JVM.");
            }
            return path;
        }
        return null;
    }

    private static Charset jnuCharset() {
        try {
            String enc = System.getProperty("sun.jnu.encoding");
            if (enc != null) return Charset.forName(enc);
        } catch (RuntimeException e) {
            // unknown: the default below
        }
        return Charset.defaultCharset();
    }

    /** Raw path bytes as this JVM's file name String, or null if its encoding cannot represent them. */
    private static String fileName(byte[] raw) {
        try {
            return jnuCharset().newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
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
                "cloudprofiler-" + user).toAbsolutePath();
        Files.createDirectories(base.getParent());
        privateDirectory(base);
        UserPrincipal me = currentUser(base.getParent());
        checkPrivate(base, me);
        Path dir = base.resolve(version() + "-" + sha.substring(0, 16));
        privateDirectory(dir);
        checkPrivate(dir, me);
        // In use: another JVM's pruneOtherCopies leaves a directory touched
        // within PRUNE_AFTER_MINUTES alone.
        Files.setLastModifiedTime(dir, FileTime.fromMillis(System.currentTimeMillis()));
        Path lib = dir.resolve(FILE_NAME);
        if (Files.isRegularFile(lib, LinkOption.NOFOLLOW_LINKS) && sha256(Files.readAllBytes(lib)).equals(sha)) return lib;
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

    /**
     * Removes the copies beside keep ({@code <version>-<hash>} directories)
     * that no JVM extracted or reused in the last {@value
     * #PRUNE_AFTER_MINUTES} minutes: nothing else would, and each build's jar
     * leaves one. A JVM still running such a copy keeps it mapped (the file
     * goes, its pages stay). Best effort: a copy that cannot be removed
     * stays, and nothing is thrown.
     */
    static void pruneOtherCopies(Path keep) {
        long cutoff = System.currentTimeMillis() - PRUNE_AFTER_MINUTES * 60_000;
        try (DirectoryStream<Path> copies = Files.newDirectoryStream(keep.getParent())) {
            for (Path d : copies) {
                if (d.equals(keep) || !d.getFileName().toString().matches(".+-[0-9a-f]{16}")) continue;
                try {
                    BasicFileAttributes a = Files.readAttributes(d, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
                    if (!a.isDirectory() || a.lastModifiedTime().toMillis() > cutoff) continue;
                    List<Path> files = new ArrayList<>();
                    try (DirectoryStream<Path> in = Files.newDirectoryStream(d)) {
                        for (Path f : in) files.add(f);
                    }
                    boolean recent = false;
                    for (Path f : files) {
                        recent |= Files.getLastModifiedTime(f, LinkOption.NOFOLLOW_LINKS).toMillis() > cutoff;
                    }
                    if (recent) continue;
                    for (Path f : files) Files.deleteIfExists(f);
                    Files.deleteIfExists(d);
                } catch (IOException | RuntimeException e) {
                    // left as it is
                }
            }
        } catch (IOException | RuntimeException e) {
            // left as it is
        }
    }

    /** Makes dir (rwx------) unless something is there already (checked after, by checkPrivate). */
    private static void privateDirectory(Path dir) throws IOException {
        if (Files.exists(dir, LinkOption.NOFOLLOW_LINKS)) return;
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        } catch (FileAlreadyExistsException raced) {
            // another JVM made it (or something else is there): checked next
        }
    }

    /**
     * This process's user, as the file system sees it: the owner of a file
     * it has just created (more robust than user.name, which is only a
     * property). In java.io.tmpdir, else in {@code fallback}.
     */
    private static UserPrincipal currentUser(Path fallback) throws IOException {
        IOException first = null;
        for (String d : new String[] {System.getProperty("java.io.tmpdir"), fallback.toString()}) {
            if (d == null) continue;
            try {
                Path probe = Files.createTempFile(Paths.get(d), "cloudprofiler-owner", ".tmp");
                try {
                    return Files.getOwner(probe, LinkOption.NOFOLLOW_LINKS);
                } finally {
                    Files.deleteIfExists(probe);
                }
            } catch (IOException e) {
                if (first == null) first = e;
            }
        }
        throw new IOException("cannot tell this process's user (no temporary file could be made): " + first, first);
    }

    /**
     * Refuses to load code from dir unless it is a real directory (not a
     * symbolic link), owned by {@code me}, and not writable by group or
     * others: anyone else who could write there could replace the library.
     */
    static void checkPrivate(Path dir, UserPrincipal me) throws IOException {
        BasicFileAttributes a = Files.readAttributes(dir, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        if (a.isSymbolicLink()) {
            throw new IOException(dir + " is a symbolic link (to " + Files.readSymbolicLink(dir)
                    + "), not a directory of its own: not loading code from it");
        }
        if (!a.isDirectory()) throw new IOException(dir + " is not a directory: not loading code from it");
        UserPrincipal owner = Files.getOwner(dir, LinkOption.NOFOLLOW_LINKS);
        if (!owner.equals(me)) {
            throw new IOException(dir + " is owned by " + owner.getName() + ", not by this process's user "
                    + me.getName() + ": not loading code from it");
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(dir, LinkOption.NOFOLLOW_LINKS);
        if (perms.contains(PosixFilePermission.GROUP_WRITE) || perms.contains(PosixFilePermission.OTHERS_WRITE)) {
            throw new IOException(dir + " is writable by others (" + PosixFilePermissions.toString(perms)
                    + "): not loading code from it");
        }
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
