package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.FileTime;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Where the library is loaded from, in child JVMs; and a second classloader in this one. */
class LoaderTest {
    private static String classes() {
        return TestSupport.classesDirs();
    }

    private static TestSupport.Result probe(String classpath, Path logs, String... jvmArgs) throws Exception {
        return TestSupport.run(TestSupport.childJvm(classpath, List.of(jvmArgs), LoaderProbe.class.getName()),
                Map.of("CP_LOG_DIR", logs.toString()), 60);
    }

    private static String field(TestSupport.Result r, String key) {
        Matcher m = Pattern.compile("(?m)^" + key + "=(.*)$").matcher(r.out);
        assertTrue(m.find(), key + " missing: " + r);
        return m.group(1);
    }

    @Test
    void systemPropertyComesFirst(@TempDir Path dir) throws Exception {
        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.library=" + TestSupport.nativeLib(),
                "-Djava.library.path=/nonexistent");
        assertEquals(TestSupport.nativeLib() + " (-Dcloudprofiler.library)", field(r, "path"), r.toString());
        assertEquals("0", field(r, "log"));
    }

    @Test
    void thenJavaLibraryPath(@TempDir Path dir) throws Exception {
        TestSupport.Result r = probe(classes(), dir, "-Djava.library.path=" + TestSupport.nativeLib().getParent());
        assertEquals(TestSupport.nativeLib() + " (System.loadLibrary, java.library.path)", field(r, "path"), r.toString());
        assertEquals("0", field(r, "log"));
    }

    @Test
    void thenTheJarsCopyExtractedOnceToAVersionedPath(@TempDir Path dir) throws Exception {
        Path extract = dir.resolve("x");
        TestSupport.Result r1 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract);
        String p1 = field(r1, "path");
        assertTrue(p1.endsWith("(extracted from the jar)"), r1.toString());
        Path lib = Paths.get(p1.substring(0, p1.indexOf(" (")));
        assertTrue(lib.startsWith(extract.resolve("cloudprofiler-" + System.getProperty("user.name").replaceAll("[^A-Za-z0-9._-]", "_"))), p1);
        assertTrue(lib.getParent().getFileName().toString().matches("0\\.1\\.0(-[0-9a-f]{8}-SNAPSHOT)?-[0-9a-f]{16}"), p1); // a checkout's build: its own version (Makefile)
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(lib.getParent().getParent())));
        assertEquals("0", field(r1, "log"));
        long mtime = Files.getLastModifiedTime(lib).toMillis();

        TestSupport.Result r2 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract);
        assertEquals(p1, field(r2, "path"));
        assertEquals(mtime, Files.getLastModifiedTime(lib).toMillis(), "a good copy is reused");

        // A damaged copy is replaced, never loaded.
        Files.setPosixFilePermissions(lib, PosixFilePermissions.fromString("rw-------"));
        Files.write(lib, new byte[] {1, 2, 3});
        TestSupport.Result r3 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract);
        assertEquals(p1, field(r3, "path"), r3.toString());
        assertEquals("0", field(r3, "log"));
        assertEquals(Files.size(TestSupport.nativeLib()), Files.size(lib));
    }

    /**
     * Copies of other versions and builds beside the one loaded: those no
     * JVM touched for ten minutes go, a fresh one stays (another JVM may be
     * loading it), and what is not such a copy stays.
     */
    @Test
    void otherBuildsCopiesUnusedForTenMinutesAreRemoved(@TempDir Path dir) throws Exception {
        Path extract = dir.resolve("x");
        Path base = extract.resolve("cloudprofiler-" + System.getProperty("user.name").replaceAll("[^A-Za-z0-9._-]", "_"));
        Files.createDirectories(base);
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx------"));
        FileTime hourAgo = FileTime.fromMillis(System.currentTimeMillis() - 3_600_000L);
        Path stale = base.resolve("0.0.9-0123456789abcdef"), fresh = base.resolve("0.1.0-fedcba9876543210"),
                oldFreshFile = base.resolve("0.0.8-00112233445566aa"), other = base.resolve("notes");
        for (Path d : new Path[] {stale, fresh, oldFreshFile, other}) {
            Files.createDirectories(d);
            Files.write(d.resolve("libcloudprofiler.so"), new byte[] {1, 2, 3});
        }
        for (Path d : new Path[] {stale, other}) Files.setLastModifiedTime(d.resolve("libcloudprofiler.so"), hourAgo);
        Files.setLastModifiedTime(oldFreshFile.resolve("libcloudprofiler.so"), FileTime.fromMillis(System.currentTimeMillis()));
        for (Path d : new Path[] {stale, oldFreshFile, other}) Files.setLastModifiedTime(d, hourAgo);

        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract);
        String p = field(r, "path");
        assertTrue(p.endsWith("(extracted from the jar)"), r.toString());
        Path lib = Paths.get(p.substring(0, p.indexOf(" (")));
        assertTrue(Files.isRegularFile(lib), p);
        assertFalse(Files.exists(stale), "a copy unused for an hour is removed");
        assertTrue(Files.exists(fresh.resolve("libcloudprofiler.so")), "a copy touched just now stays");
        assertTrue(Files.exists(oldFreshFile.resolve("libcloudprofiler.so")), "a copy whose file was written just now stays");
        assertTrue(Files.exists(other.resolve("libcloudprofiler.so")), "a directory that is no copy stays");
    }

    @Test
    void aBadPropertyIsReportedNotSkipped(@TempDir Path dir) throws Exception {
        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.library=/nonexistent/libcloudprofiler.so");
        assertEquals("false", field(r, "available"));
        assertTrue(field(r, "error").contains("-Dcloudprofiler.library=/nonexistent/libcloudprofiler.so: no such file"), r.toString());
        assertEquals(String.valueOf(CloudProfiler.ERR_BAD_HANDLE), field(r, "nohandle"), "logTS never throws, even unloaded");
    }

    @Test
    void nothingToLoadListsEveryPlaceTried(@TempDir Path dir) throws Exception {
        // The classes without the library inside, no property, no library path.
        Path bare = dir.resolve("bare");
        Path src = TestSupport.mainClasses();
        try (var s = Files.walk(src)) {
            for (Path p : s.collect(Collectors.toList())) {
                Path rel = src.relativize(p);
                if (rel.startsWith("resources")) continue;
                if (Files.isDirectory(p)) Files.createDirectories(bare.resolve(rel.toString()));
                else Files.copy(p, bare.resolve(rel.toString()));
            }
        }
        String cp = bare + File.pathSeparator + TestSupport.testClasses();
        TestSupport.Result r = probe(cp, dir, "-Djava.library.path=/nonexistent");
        String err = r.out;
        assertTrue(err.contains("1. -Dcloudprofiler.library: not set"), r.toString());
        assertTrue(err.contains("2. System.loadLibrary(\"cloudprofiler\") on java.library.path=/nonexistent"), r.toString());
        assertTrue(err.contains("3. extracting /resources/Linux-amd64/libcloudprofiler.so from the jar: the jar has no"), r.toString());
    }

    /** Loading fails with an Error (here a class missing): kept as the load error, logTS still answers. */
    @Test
    void anyLoadFailureIsKeptNotThrown(@TempDir Path dir) throws Exception {
        Path bare = dir.resolve("bare");
        Path src = TestSupport.mainClasses();
        try (var s = Files.walk(src)) {
            for (Path p : s.collect(Collectors.toList())) {
                Path rel = src.relativize(p);
                if (rel.getFileName().toString().startsWith("NativeLibrary")) continue;
                if (Files.isDirectory(p)) Files.createDirectories(bare.resolve(rel.toString()));
                else Files.copy(p, bare.resolve(rel.toString()));
            }
        }
        String cp = bare + File.pathSeparator + TestSupport.testClasses();
        TestSupport.Result r = TestSupport.run(TestSupport.childJvm(cp, List.of(), UnloadableProbe.class.getName()),
                Map.of("CP_LOG_DIR", dir.toString()), 60);
        assertEquals("false", field(r, "available"), r.toString());
        assertTrue(field(r, "error").contains("NoClassDefFoundError"), r.toString());
        assertEquals(String.valueOf(CloudProfiler.ERR_BAD_HANDLE), field(r, "nohandle"), r.toString());
        assertEquals(String.valueOf(CloudProfiler.ERR_BAD_HANDLE), field(r, "batch"), r.toString());
        assertEquals("CloudProfilerException", field(r, "open"), r.toString());
    }

    @Test
    void aWorldWritableExtractDirIsRefused(@TempDir Path dir) throws Exception {
        Path base = dir.resolve("x").resolve("cloudprofiler-" + System.getProperty("user.name").replaceAll("[^A-Za-z0-9._-]", "_"));
        Files.createDirectories(base);
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwxrwxrwx"));
        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + dir.resolve("x"));
        assertTrue(r.out.contains("is writable by others (rwxrwxrwx): not loading code from it"), r.toString());
    }

    private static String userDir() {
        return "cloudprofiler-" + System.getProperty("user.name").replaceAll("[^A-Za-z0-9._-]", "_");
    }

    /** The extract directory a symbolic link (to a good private directory): refused, named as such. */
    @Test
    void aSymlinkedExtractDirIsRefused(@TempDir Path dir) throws Exception {
        Path real = Files.createDirectory(dir.resolve("real"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Path base = dir.resolve("x").resolve(userDir());
        Files.createDirectories(base.getParent());
        Files.createSymbolicLink(base, real);
        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + dir.resolve("x"),
                "-Djava.library.path=/nonexistent");
        assertEquals("false", field(r, "available"), r.toString());
        assertTrue(r.out.contains(base + " is a symbolic link (to " + real + "), not a directory of its own: not loading"
                + " code from it"), r.toString());
        try (var s = Files.list(real)) {
            assertEquals(0, s.count(), "nothing written through the link");
        }
    }

    /** A base directory someone else owns (made here with chown: only when the tests run as root). */
    @Test
    void aForeignOwnedExtractDirIsRefused(@TempDir Path dir) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue("root".equals(System.getProperty("user.name")), "needs root to chown");
        Path base = dir.resolve("x").resolve(userDir());
        Files.createDirectories(base);
        Files.setPosixFilePermissions(base, PosixFilePermissions.fromString("rwx------"));
        var nobody = base.getFileSystem().getUserPrincipalLookupService().lookupPrincipalByName("nobody");
        Files.setOwner(base, nobody);
        TestSupport.Result r = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + dir.resolve("x"),
                "-Djava.library.path=/nonexistent");
        assertEquals("false", field(r, "available"), r.toString());
        assertTrue(r.out.contains(base + " is owned by nobody, not by this process's user root: not loading code from it"),
                r.toString());
    }

    /** The same for the versioned directory inside a good base. */
    @Test
    void aSymlinkedVersionDirIsRefused(@TempDir Path dir) throws Exception {
        Path extract = dir.resolve("x");
        // a first run makes base/<version>-<sha>/; then that directory is replaced by a link
        TestSupport.Result r1 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract, "-Djava.library.path=/nonexistent");
        String p1 = field(r1, "path");
        assertTrue(p1.endsWith("(extracted from the jar)"), r1.toString());
        Path version = Paths.get(p1.substring(0, p1.indexOf(" ("))).getParent();
        Path elsewhere = Files.createDirectory(dir.resolve("elsewhere"), PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        Files.move(version.resolve("libcloudprofiler.so"), elsewhere.resolve("libcloudprofiler.so"));
        Files.delete(version);
        Files.createSymbolicLink(version, elsewhere);
        TestSupport.Result r2 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract, "-Djava.library.path=/nonexistent");
        assertEquals("false", field(r2, "available"), r2.toString());
        assertTrue(r2.out.contains(version + " is a symbolic link"), r2.toString());
        // a group-writable one is refused too
        Files.delete(version);
        Files.createDirectory(version);
        Files.setPosixFilePermissions(version, PosixFilePermissions.fromString("rwxrwx---"));
        TestSupport.Result r3 = probe(classes(), dir, "-Dcloudprofiler.extract.dir=" + extract, "-Djava.library.path=/nonexistent");
        assertTrue(r3.out.contains(version + " is writable by others (rwxrwx---)"), r3.toString());
    }

    /**
     * /proc/self/maps read as bytes: a mapping whose path is not UTF-8 must
     * not make the reader see "nothing mapped" (and load a second copy).
     */
    @Test
    void mapsWithPathsThatAreNotUtf8() {
        byte[] other = "7f00-7f01 r-xp 00000000 08:01 42 /opt/\u00ff\u00fe/libother.so\n".getBytes(StandardCharsets.ISO_8859_1);
        byte[] ours = "7f02-7f03 r-xp 00000000 08:01 43 /opt/cp/libcloudprofiler.so\n".getBytes(StandardCharsets.ISO_8859_1);
        byte[] maps = new byte[other.length + ours.length];
        System.arraycopy(other, 0, maps, 0, other.length);
        System.arraycopy(ours, 0, maps, other.length, ours.length);
        assertEquals("/opt/cp/libcloudprofiler.so", NativeLibrary.mappedCopy(maps));
        assertEquals(null, NativeLibrary.mappedCopy(other));
        // our own copy at a path this JVM cannot name: an error, not "nothing mapped"
        byte[] bad = "7f02-7f03 r-xp 00000000 08:01 43 /opt/\u00ff/libcloudprofiler.so\n".getBytes(StandardCharsets.ISO_8859_1);
        CloudProfilerException e = assertThrows(CloudProfilerException.class, () -> NativeLibrary.mappedCopy(bad));
        assertTrue(e.getMessage().contains("cannot name"), e.getMessage());
        // UTF-8 names are decoded as such (this JVM's file names are UTF-8 here)
        if (java.nio.charset.Charset.forName(System.getProperty("sun.jnu.encoding", "UTF-8")).equals(StandardCharsets.UTF_8)) {
            byte[] utf8 = "7f02-7f03 r-xp 00000000 08:01 43 /opt/\u00e9t\u00e9/libcloudprofiler.so\n".getBytes(StandardCharsets.UTF_8);
            assertEquals("/opt/\u00e9t\u00e9/libcloudprofiler.so", NativeLibrary.mappedCopy(utf8));
        }
        byte[] deleted = "7f02-7f03 r-xp 00000000 08:01 43 /tmp/libcloudprofiler.so (deleted)\n".getBytes(StandardCharsets.ISO_8859_1);
        assertTrue(assertThrows(CloudProfilerException.class, () -> NativeLibrary.mappedCopy(deleted)).getMessage()
                .contains("was deleted"));
    }

    /**
     * This JVM loaded the library through the application classloader; the
     * binding's classes loaded again by another classloader (as a Flink job
     * jar that carries them would be) must fail with the reason and the fix,
     * and must not map a second copy (a second Go runtime).
     */
    @Test
    void aSecondClassLoaderGetsTheReasonAndTheFix() throws Exception {
        assertTrue(CloudProfiler.isAvailable());
        URL[] urls = {TestSupport.mainClasses().toUri().toURL()};
        try (URLClassLoader other = new URLClassLoader(urls, ClassLoader.getPlatformClassLoader())) {
            Class<?> cp = Class.forName("io.cloudprofiler.CloudProfiler", true, other);
            assertNotEquals(CloudProfiler.class, cp);
            assertEquals(Boolean.FALSE, cp.getMethod("isAvailable").invoke(null));
            Class<?> fmt = Class.forName("io.cloudprofiler.LogFormat", true, other);
            Class<?> hnd = Class.forName("io.cloudprofiler.HandlerType", true, other);
            Method open = cp.getMethod("openChannel", String.class, fmt, hnd);
            InvocationTargetException e = assertThrows(InvocationTargetException.class, () -> open.invoke(null, "other-loader",
                    fmt.getField("BINARY").get(null), hnd.getField("NULLH").get(null)));
            assertEquals("io.cloudprofiler.CloudProfilerException", e.getCause().getClass().getName());
            String msg = e.getCause().getMessage();
            assertTrue(msg.contains("already loaded in another classloader"), msg);
            assertTrue(msg.contains("flink/lib/"), msg);
            assertTrue(msg.contains("classloader.parent-first-patterns.additional"), msg);
            Method log = cp.getMethod("logTS", long.class, long.class);
            assertEquals(CloudProfiler.ERR_BAD_HANDLE, log.invoke(null, 1L, 1L));
        }
        List<String> copies = Files.readAllLines(Paths.get("/proc/self/maps")).stream()
                .filter(l -> l.contains("libcloudprofiler")).map(l -> l.substring(l.indexOf('/')))
                .distinct().collect(Collectors.toList());
        assertEquals(1, copies.size(), copies.toString());
        // and this classloader's copy still works
        try (Channel ch = Channel.open("after-other-loader", LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY)) {
            assertEquals(0, ch.logTS(1));
        }
        assertInstanceOf(String.class, CloudProfiler.libraryPath());
    }
}
