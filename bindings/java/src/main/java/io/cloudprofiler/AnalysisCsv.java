package io.cloudprofiler;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Reads the CSV files {@code cloudprofiler analyze} writes (capacity.csv,
 * mace.csv, criticalpath.csv, ...): one map per row, by column name, in the
 * header's order. A field in double quotes may hold commas (a note does),
 * and {@code ""} stands for a quote. Python's counterpart is
 * {@code cloudprofiler.read_analysis}. Needs no native library.
 */
public final class AnalysisCsv {
    private AnalysisCsv() {}

    /**
     * The rows of file, each a map from column name to field.
     *
     * @throws IOException when the file cannot be read, is empty, or a row
     *     has another number of fields than the header (the message names
     *     the file and the line)
     */
    public static List<Map<String, String>> read(Path file) throws IOException {
        List<String> lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        if (lines.isEmpty()) throw new IOException(file + ": empty, no header line");
        List<String> head = fields(lines.get(0));
        List<Map<String, String>> rows = new ArrayList<>();
        for (int n = 1; n < lines.size(); n++) {
            String line = lines.get(n);
            if (line.isEmpty()) continue;
            List<String> f = fields(line);
            if (f.size() != head.size()) {
                throw new IOException(file + ":" + (n + 1) + ": " + f.size() + " fields, the header has " + head.size());
            }
            Map<String, String> r = new LinkedHashMap<>();
            for (int i = 0; i < f.size(); i++) r.put(head.get(i), f.get(i));
            rows.add(r);
        }
        return rows;
    }

    /** The fields of one CSV line. */
    static List<String> fields(String line) {
        List<String> out = new ArrayList<>();
        StringBuilder b = new StringBuilder();
        boolean quoted = false;
        for (int i = 0; i < line.length(); i++) {
            char c = line.charAt(i);
            if (quoted && c == '"' && i + 1 < line.length() && line.charAt(i + 1) == '"') {
                b.append('"');
                i++;
            } else if (c == '"') {
                quoted = !quoted;
            } else if (c == ',' && !quoted) {
                out.add(b.toString());
                b.setLength(0);
            } else {
                b.append(c);
            }
        }
        out.add(b.toString());
        return out;
    }
}
