package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The Java side against the contract: every constant of capi/cloudprofiler.h
 * has its Java twin with the same value, and the JNI headers javac generated
 * in this build are the ones libcp/jni.c was compiled against.
 */
class ContractTest {
    private static Map<String, Integer> headerConstants(String enumName) throws Exception {
        String h = Files.readString(TestSupport.repo().resolve("capi/cloudprofiler.h"));
        int start = h.indexOf("enum " + enumName + " {");
        assertTrue(start >= 0, enumName);
        String body = h.substring(start, h.indexOf("};", start));
        Map<String, Integer> m = new HashMap<>();
        Matcher mt = Pattern.compile("CP_(\\w+)\\s*=\\s*(-?\\d+)").matcher(body);
        while (mt.find()) m.put(mt.group(1), Integer.parseInt(mt.group(2)));
        assertFalse(m.isEmpty(), enumName);
        return m;
    }

    @Test
    void formatsMatchTheHeader() throws Exception {
        Map<String, Integer> c = headerConstants("cp_log_format");
        assertEquals(c.size(), LogFormat.values().length);
        for (LogFormat f : LogFormat.values()) assertEquals(c.get(f.name()), f.value(), f.name());
    }

    @Test
    void handlersMatchTheHeader() throws Exception {
        Map<String, Integer> c = headerConstants("cp_handler_type");
        assertEquals(c.size(), HandlerType.values().length);
        for (HandlerType h : HandlerType.values()) assertEquals(c.get(h.name()), h.value(), h.name());
    }

    @Test
    void errorsAndArgumentsMatchTheHeader() throws Exception {
        Map<String, Integer> c = new HashMap<>(headerConstants("cp_error"));
        c.putAll(headerConstants("cp_arg"));
        c.putAll(headerConstants("cp_blocked"));
        for (Map.Entry<String, Integer> e : c.entrySet()) {
            assertEquals(e.getValue(), CloudProfiler.class.getField(e.getKey()).getInt(null), e.getKey());
        }
    }

    @Test
    void jniHeadersAreTheOnesTheLibraryWasBuiltWith() throws Exception {
        Path gen = Paths.get(TestSupport.prop("cloudprofiler.test.headers"));
        List<Path> hs;
        try (Stream<Path> s = Files.list(gen)) {
            hs = s.filter(p -> p.toString().endsWith(".h")).sorted().collect(Collectors.toList());
        }
        assertEquals(2, hs.size(), hs.toString());
        for (Path p : hs) {
            Path committed = TestSupport.repo().resolve("libcp").resolve(p.getFileName());
            assertEquals(Files.readString(p), Files.readString(committed),
                    p.getFileName() + " changed: copy " + p + " to libcp/ and rebuild the library");
        }
    }
}
