// SigtermJvm — a JVM that loads libcloudprofiler.so (through the Foreign
// Function API, standing in for the JNI binding to come) and logs until it
// gets SIGTERM. The library must not take SIGTERM away from the JVM: the
// shutdown hook runs, closes every channel, and the JVM exits 143.
// Usage: java --enable-native-access=ALL-UNNAMED SigtermJvm.java LIB
import java.lang.foreign.*;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import static java.lang.foreign.ValueLayout.*;

public class SigtermJvm {
    static volatile long accepted;

    public static void main(String[] args) throws Throwable {
        Linker linker = Linker.nativeLinker();
        SymbolLookup lib = SymbolLookup.libraryLookup(Path.of(args[0]), Arena.global());
        MethodHandle open = linker.downcallHandle(lib.find("OpenChannel").orElseThrow(),
            FunctionDescriptor.of(JAVA_LONG, ADDRESS, JAVA_INT, JAVA_INT));
        MethodHandle log = linker.downcallHandle(lib.find("LogTS").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, JAVA_LONG, JAVA_LONG));
        MethodHandle closeAll = linker.downcallHandle(lib.find("CloseAllChannels").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT));
        long ch = (long) open.invokeExact(Arena.global().allocateFrom("jvm sigterm"), 5 /* ZSTD_TSC */, 1 /* BUFFER_IDENTITY */);
        if (ch < 0) throw new IllegalStateException("OpenChannel: " + ch);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                int rc = (int) closeAll.invokeExact();
                System.out.println("hook: CloseAllChannels=" + rc + " accepted>=" + accepted);
                System.out.flush();
            } catch (Throwable t) {
                t.printStackTrace();
            }
        }));
        System.out.println("logging");
        System.out.flush();
        for (long i = 0; ; i++) {
            int rc = (int) log.invokeExact(ch, i);
            if (rc != 0) break; // closed by the hook
            accepted = i + 1;
        }
        Thread.sleep(Long.MAX_VALUE); // wait for the hook to finish the JVM
    }
}
