package io.cloudprofiler;

/** Child JVM main for LoaderTest: where the library came from, and whether a channel opens. */
public final class LoaderProbe {
    public static void main(String[] args) {
        System.out.println("available=" + CloudProfiler.isAvailable());
        System.out.println("path=" + CloudProfiler.libraryPath());
        try (Channel ch = Channel.open("probe", LogFormat.BINARY_TSC, HandlerType.BUFFER_IDENTITY)) {
            System.out.println("log=" + ch.logTS(1));
        } catch (CloudProfilerException e) {
            System.out.println("error=" + e.getMessage());
        }
        System.out.println("nohandle=" + CloudProfiler.logTS(77, 1));
    }
}
