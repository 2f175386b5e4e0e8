package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Jobs with their own copy of the binding, one after another in one JVM
 * (a fat Flink job jar): each takes the library over once the one before
 * is collected; two at once, the second fails naming the fix (HandoverChild).
 */
class ClassLoaderHandoverTest {
    @Test
    void aJobAfterAFinishedOneLoadsTheLibraryAndTwoAtOnceDoNot(@TempDir Path dir) throws Exception {
        TestSupport.Result res = TestSupport.run(
                TestSupport.childJvm(TestSupport.testClasses().toString(), List.of("-Xmx128m"), HandoverChild.class.getName(),
                        TestSupport.mainClasses().toString()),
                Map.of("CP_LOG_DIR", dir.toString()), 120);
        assertEquals(0, res.status, res.toString());
        assertTrue(res.out.contains("ok: job B took the library over"), res.toString());
        assertTrue(res.out.contains("ok: job C, while job B lives, failed"), res.toString());
        assertTrue(res.out.contains("ok: one copy mapped"), res.toString());
    }
}
