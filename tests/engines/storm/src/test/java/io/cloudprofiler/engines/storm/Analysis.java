package io.cloudprofiler.engines.storm;

import io.cloudprofiler.AnalysisCsv;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One run of {@code cloudprofiler analyze} over a run's logs, and what we
 * read back: capacity.csv's whole-run {@code in/out} rows (docs/capacity.md
 * has the columns) by operator ("2-digest") and by instance ("2-digest#5",
 * the Storm task id), and summary.txt.
 */
final class Analysis {
    final List<String> command;
    final int exitCode;
    final Path out;
    /** "OPERATOR" or "OPERATOR#TASK" -> its whole-run row; empty without capacity.csv. */
    final Map<String, Map<String, String>> rows = new HashMap<>();
    final List<String> summary;

    private Analysis(List<String> command, int exitCode, Path out, List<String> summary) {
        this.command = command;
        this.exitCode = exitCode;
        this.out = out;
        this.summary = summary;
    }

    /** Runs analyze (its stdout and stderr kept beside OUT as analyze.stdout, analyze.stderr) and reads its files. */
    static Analysis run(Path tool, Path logs, Path out, boolean durations) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of(tool.toString(), "analyze", "--logs", logs.toString(), "--out", out.toString()));
        if (!durations) cmd.add("--no-durations");
        Path stdout = out.resolveSibling("analyze.stdout"), stderr = out.resolveSibling("analyze.stderr");
        Process p = new ProcessBuilder(cmd).redirectOutput(stdout.toFile()).redirectError(stderr.toFile()).start();
        if (!p.waitFor(180, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new IllegalStateException(String.join(" ", cmd) + ": still running after 180 s");
        }
        Path summaryTxt = out.resolve("summary.txt");
        List<String> summary = Files.exists(summaryTxt) ? Files.readAllLines(summaryTxt, StandardCharsets.UTF_8) : List.of();
        Analysis a = new Analysis(cmd, p.exitValue(), out, summary);
        Path csv = out.resolve("capacity.csv");
        if (Files.exists(csv)) {
            for (Map<String, String> r : AnalysisCsv.read(csv)) { // quoted notes may hold commas
                if (!"-1".equals(r.get("window")) || !"in/out".equals(r.get("method"))) continue;
                String key = r.get("operator");
                if ("instance".equals(r.get("level"))) {
                    String inst = r.get("instance"); // node/pid/INSTANCE: Storm's task id last
                    key += "#" + inst.substring(inst.lastIndexOf('/') + 1);
                }
                a.rows.put(key, r);
            }
        }
        return a;
    }

    Map<String, String> row(String key) {
        return rows.get(key);
    }

    double num(String key, String column) {
        Map<String, String> r = rows.get(key);
        if (r == null) return Double.NaN;
        String v = r.get(column);
        if (v == null || v.isEmpty()) return Double.NaN;
        try {
            return Double.parseDouble(v);
        } catch (NumberFormatException e) {
            return Double.NaN;
        }
    }

    String text(String key, String column) {
        Map<String, String> r = rows.get(key);
        return r == null ? null : r.get(column);
    }

    /** The operator capacity.csv names the bottleneck (its whole-run row), or null. */
    String bottleneck() {
        for (Map.Entry<String, Map<String, String>> e : rows.entrySet()) {
            if ("operator".equals(e.getValue().get("level")) && "true".equals(e.getValue().get("bottleneck"))) return e.getKey();
        }
        return null;
    }

    /** summary.txt's verdict on the bottleneck: "Bottleneck: NAME ..." (a "!" before it when overloaded), or "not named". */
    static final Pattern VERDICT = Pattern.compile("^\\s*!?\\s*Bottleneck: (not named|none found|[^\\s,(:]+)");
    /** summary.txt's "Where the p99 goes: PART, NN% of ...": the part (e.g. "queueing before 2-digest", "other"). */
    static final Pattern P99 = Pattern.compile("Where the p99 goes: (.*?), [0-9.]+% of");

    /** The operator summary.txt's verdict names the bottleneck ("not named", "none found"), or "none" without a verdict line. */
    String verdictBottleneck() {
        Matcher m = VERDICT.matcher(verdictLine());
        return m.find() ? m.group(1) : "none";
    }

    /** summary.txt's verdict line on the bottleneck, trimmed ("" without one). */
    String verdictLine() {
        for (String line : summary) {
            if (VERDICT.matcher(line).find()) return line.trim();
        }
        return "";
    }

    /** The largest part of the p99 journeys, as summary.txt's "Where the p99 goes" names it; null without that line. */
    String p99Part() {
        for (String line : summary) {
            Matcher m = P99.matcher(line);
            if (m.find()) return m.group(1);
        }
        return null;
    }

    /** summary.txt's lines that hold any of the phrases, trimmed. */
    List<String> summaryLines(String... phrases) {
        List<String> l = new ArrayList<>();
        for (String line : summary) {
            for (String p : phrases) {
                if (line.contains(p)) {
                    l.add(line.trim());
                    break;
                }
            }
        }
        return l;
    }
}
