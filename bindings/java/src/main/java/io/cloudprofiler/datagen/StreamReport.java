package io.cloudprofiler.datagen;

import java.util.Arrays;

/**
 * What the factory saw of one stream (one sender connection): the REPORT
 * frame's body (datagen/FRAMING.md), with the fields of the Go receiver's
 * {@code datagen.Report}, computed as FRAMING.md's "Accounting" says.
 * {@code received} counts the tuples put into the consumers' queue (the
 * factory never sheds load; {@code dropped} counts tuples whose
 * deserialization failed, and their ids are also {@code lost}). With {@code
 * gapsTruncated} false, {@code received + lost == sent}. Ids and counts are
 * unsigned 64-bit numbers held in Java longs.
 *
 * @param sent     from END, or HELLO's announced count when the connection ended without END
 * @param received   in-range ids handed to the consumers, each once (late ones included)
 * @param lost       ids never delivered: gaps, and the ids after the last one up to {@code firstId + sent};
 *                   an upper bound when {@code gapsTruncated}
 * @param outOfOrder ids that came late and filled a gap
 * @param duplicates in-range ids that came again (not delivered again)
 * @param outOfRange ids outside {@code [firstId, firstId + tuples)} of the HELLO (counted in nothing else,
 *                   not delivered)
 * @param bytes      of the tuples handed to the consumers (payload and 12-byte record header each)
 * @param gaps       the first 100 missing ranges, inclusive, in id order: {@code {from, to}}
 * @param gapsTruncated more gaps than those listed, or more than the 4096 the factory records
 * @param seconds  first bucket to the report
 * @param error    null if the stream ended with END; else why it ended (a malformed frame,
 *                 the connection closed before END, the factory closed)
 */
public record StreamReport(long runId, String sender, int thread, int threads, long firstId, long sent, long received,
        long lost, long outOfOrder, long duplicates, long outOfRange, long dropped, long bytes, long[][] gaps, boolean gapsTruncated, double seconds,
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
        b.append(",\"duplicates\":").append(Long.toUnsignedString(duplicates));
        b.append(",\"out_of_range\":").append(Long.toUnsignedString(outOfRange));
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
                + Long.toUnsignedString(received) + " of " + Long.toUnsignedString(sent) + ", lost "
                + Long.toUnsignedString(lost) + ", dropped " + dropped + ", out of order " + outOfOrder
                + (duplicates != 0 ? ", duplicates " + Long.toUnsignedString(duplicates) : "")
                + (outOfRange != 0 ? ", out of range " + Long.toUnsignedString(outOfRange) : "")
                + (gaps.length > 0 ? ", gaps " + Arrays.deepToString(gaps) + (gapsTruncated ? " (and more)" : "") : "")
                + (error != null ? " (" + error + ")" : "");
    }
}
