package io.cloudprofiler;

/**
 * Child JVM main for LoaderTest: CloudProfiler when loading fails with
 * something other than the expected exceptions (here NativeLibrary's class
 * is missing: a NoClassDefFoundError in its static initialiser).
 */
public final class UnloadableProbe {
    public static void main(String[] args) {
        System.out.println("available=" + CloudProfiler.isAvailable());
        System.out.println("error=" + CloudProfiler.loadError().getMessage());
        System.out.println("nohandle=" + CloudProfiler.logTS(77, 1));
        System.out.println("batch=" + CloudProfiler.batchError(CloudProfiler.logTS(77, new long[] {1, 2}, 2)));
        try {
            CloudProfiler.openChannel("x", LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY);
            System.out.println("open=opened");
        } catch (CloudProfilerException e) {
            System.out.println("open=" + e.getClass().getSimpleName());
        }
    }
}
