package io.cloudprofiler;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** analyze's CSV files read back: quoted notes with commas, quotes, bad files refused. */
class AnalysisCsvTest {
    private static Path write(String name, String text) throws IOException {
        Path f = Files.createTempFile(PrivateTmpDir.DIR, name, ".csv");
        Files.writeString(f, text);
        return f;
    }

    @Test
    void quotedFieldsKeepTheirCommasAndQuotes() throws IOException {
        Path f = write("capacity", "level,operator,capacity,note\n"
                + "operator,B,11585.2,\"B, downstream, was saturated in 2 of 5 windows\"\n"
                + "instance,B,,\"a \"\"quoted\"\" word\"\n"
                + "\n"
                + "operator,A,,\n");
        try {
            List<Map<String, String>> rows = AnalysisCsv.read(f);
            assertEquals(3, rows.size());
            assertEquals(List.of("level", "operator", "capacity", "note"), List.copyOf(rows.get(0).keySet()));
            assertEquals("B, downstream, was saturated in 2 of 5 windows", rows.get(0).get("note"));
            assertEquals("11585.2", rows.get(0).get("capacity"));
            assertEquals("a \"quoted\" word", rows.get(1).get("note"));
            assertEquals("", rows.get(1).get("capacity"));
            assertEquals("", rows.get(2).get("note"));
        } finally {
            Files.deleteIfExists(f);
        }
    }

    @Test
    void raggedRowsAndEmptyFilesAreRefused() throws IOException {
        Path ragged = write("ragged", "a,b,c\n1,2,3\n1,\"2,3\"\n");
        Path empty = write("empty", "");
        try {
            IOException e = assertThrows(IOException.class, () -> AnalysisCsv.read(ragged));
            assertTrue(e.getMessage().contains(ragged + ":3: 2 fields, the header has 3"), e.getMessage());
            e = assertThrows(IOException.class, () -> AnalysisCsv.read(empty));
            assertTrue(e.getMessage().contains("no header"), e.getMessage());
            assertThrows(IOException.class, () -> AnalysisCsv.read(ragged.resolveSibling("no-such-file.csv")));
        } finally {
            Files.deleteIfExists(ragged);
            Files.deleteIfExists(empty);
        }
    }
}
