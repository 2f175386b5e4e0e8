package io.cloudprofiler;

import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.List;
import java.util.stream.Collectors;

/**
 * A child JVM (ClassLoaderHandoverTest) whose own classpath has no binding:
 * the binding's classes (args[0], target/classes) come only from
 * classloaders it makes, as Flink makes one per job for a fat job jar.
 * Job A opens and closes a channel, then is dropped; job B, made after,
 * must take the library over (a GC frees A's hold); job C, made while B
 * is alive, must fail with the reason and the fix. One copy mapped
 * throughout. Prints "ok" lines; exits 1 on the first failure.
 */
public final class HandoverChild {
    private HandoverChild() {}

    /** Opens, logs on and closes a channel through loader's copy of the binding; the exception, or null. */
    static Throwable use(ClassLoader loader, String name) throws Exception {
        Class<?> cp = Class.forName("io.cloudprofiler.CloudProfiler", true, loader);
        Class<?> fmt = Class.forName("io.cloudprofiler.LogFormat", true, loader);
        Class<?> hnd = Class.forName("io.cloudprofiler.HandlerType", true, loader);
        Method open = cp.getMethod("openChannel", String.class, fmt, hnd);
        try {
            long h = (Long) open.invoke(null, name, fmt.getField("BINARY_TSC").get(null), hnd.getField("BUFFER_IDENTITY").get(null));
            cp.getMethod("logTS", long.class, long.class).invoke(null, h, 1L);
            cp.getMethod("closeChannel", long.class).invoke(null, h);
            return null;
        } catch (java.lang.reflect.InvocationTargetException e) {
            return e.getCause();
        }
    }

    static int copies() throws Exception {
        return Files.readAllLines(Paths.get("/proc/self/maps")).stream().filter(l -> l.contains("libcloudprofiler"))
                .map(l -> l.substring(l.indexOf('/'))).distinct().collect(Collectors.toList()).size();
    }

    static URLClassLoader job(URL[] urls) {
        return new URLClassLoader(urls, ClassLoader.getPlatformClassLoader());
    }

    public static void main(String[] args) throws Exception {
        URL[] urls = {Paths.get(args[0]).toUri().toURL()};
        URLClassLoader a = job(urls);
        Throwable e = use(a, "job-a");
        if (e != null) fail("job A: " + e);
        a.close();
        a = null; // A finished: unreachable, not yet collected
        try (URLClassLoader b = job(urls)) {
            e = use(b, "job-b");
            if (e != null) fail("job B, after A finished: " + e);
            System.out.println("ok: job B took the library over after job A finished; copies mapped: " + copies());
            try (URLClassLoader c = job(urls)) {
                e = use(c, "job-c");
                if (e == null) fail("job C, while B lives: loaded the library");
                String m = String.valueOf(e.getMessage());
                if (!m.contains("already loaded in another classloader") || !m.contains("flink/lib/")) fail("job C: " + m);
                System.out.println("ok: job C, while job B lives, failed: " + m.substring(0, Math.min(120, m.length())));
            }
        }
        if (copies() != 1) fail(copies() + " copies of the library mapped");
        System.out.println("ok: one copy mapped");
    }

    static void fail(String why) {
        System.out.println("FAIL " + why);
        System.exit(1);
    }
}
