package io.cloudprofiler.datagen;

import java.util.Arrays;

/**
 * What the factory saw of one stream (one sender connection): the REPORT
 * frame's body (datagen/FRAMING.md), with the fields of the Go receiver's
 * {@code datagen.Report}. {@code received} counts the tuples handed to the
 * consumers (the factory never drops; {@code dropped} counts tuples whose
 * deserialization failed, and their ids are also {@code lost}). Ids are
 * unsigned 64-bit numbers held in Java longs.
 *
 * @param sent     from END, or HELLO's announced count when the connection ended without END
 * @param lost     ids never delivered: gaps, and the ids after the last one up to {@code firstId + sent}
 * @param gaps     the first 100 missing ranges, inclusive: {@code {from, to}}
 * @param seconds  first bucket to the report
 * @param error    null if the stream ended with END; else why it ended (a malformed frame,
 *                 the connection closed before END, the factory closed)
 */
public record StreamReport(long runId, String sender, int thread, int threads, long firstId, long sent, long received,
        long lost, long outOfOrder, long dropped, long bytes, long[][] gaps, boolean gapsTruncated, double seconds,
        String error) {

    /** The JSON object of a REPORT frame (what {@code gen send} reads back). */
    public String toJson() {
        StringBuilder b = new StringBuilder(256);
        b.append("{\"run_id\":").append(Long.toUnsignedString(runId));
        b.append(",\"sender\":");
        quote(b, sender);
        b.append(",\"thread\":").append(Integer.toUnsignedString(thread));
        b.append(",\"threads\":").append(Integer.toUnsignedString(threads));
        b.append(",\"first_id\":").append(Long.toUnsignedString(firstId));
        b.append(",\"sent\":").append(Long.toUnsignedString(sent));
        b.append(",\"received\":").append(Long.toUnsignedString(received));
        b.append(",\"lost\":").append(Long.toUnsignedString(lost));
        b.append(",\"out_of_order\":").append(Long.toUnsignedString(outOfOrder));
        b.append(",\"dropped\":").append(Long.toUnsignedString(dropped));
        b.append(",\"bytes\":").append(Long.toUnsignedString(bytes));
        b.append(",\"gaps\":[");
        for (int i = 0; i < gaps.length; i++) {
            if (i > 0) b.append(',');
            b.append('[').append(Long.toUnsignedString(gaps[i][0])).append(',')
                    .append(Long.toUnsignedString(gaps[i][1])).append(']');
        }
        b.append("],\"gaps_truncated\":").append(gapsTruncated);
        b.append(",\"seconds\":").append(Double.isFinite(seconds) ? Double.toString(seconds) : "0");
        if (error != null) {
            b.append(",\"error\":");
            quote(b, error);
        }
        return b.append('}').toString();
    }

    static void quote(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        b.append('"');
    }

    @Override
    public String toString() {
        return "run " + Long.toUnsignedString(runId) + " " + sender + " thread " + thread + "/" + threads + ": received "
                + received + " of " + sent + ", lost " + lost + ", dropped " + dropped + ", out of order " + outOfOrder
                + (gaps.length > 0 ? ", gaps " + Arrays.deepToString(gaps) + (gapsTruncated ? " (and more)" : "") : "")
                + (error != null ? " (" + error + ")" : "");
    }
}
