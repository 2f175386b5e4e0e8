package io.cloudprofiler.examples.storm;

import io.cloudprofiler.datagen.Deserializer;
import java.nio.charset.StandardCharsets;
import org.apache.storm.tuple.Fields;
import org.apache.storm.tuple.Values;

/**
 * The object factory's deserializer for the synthetic ad events of {@code
 * cloudprofiler gen send --synthetic}: the flat JSON object straight into the
 * tuple the spout emits, {@link #FIELDS} (the tuple id from the framing, then
 * the event's fields; {@code event_time} as a long). A small parser of flat
 * JSON (string, number, true, false, null values; unknown keys skipped);
 * anything else throws, and the factory drops the tuple (counted in its
 * report). Stateless: the factory calls it from several threads.
 */
public final class AdEventValues implements Deserializer<Values> {
    public static final Fields FIELDS = new Fields("id", "user_id", "page_id", "ad_id", "ad_type", "event_type",
            "event_time", "ip_address");
    private static final String[] KEYS = {"user_id", "page_id", "ad_id", "ad_type", "event_type", "event_time",
            "ip_address"};
    private static final int EVENT_TIME = 5;

    @Override
    public Values deserialize(long tupleId, byte[] b, int off, int len) {
        Object[] v = new Object[KEYS.length + 1];
        v[0] = tupleId;
        int end = off + len, p = skip(b, off, end);
        p = expect(b, p, end, '{');
        p = skip(b, p, end);
        if (p < end && b[p] == '}') {
            p++;
        } else {
            while (true) {
                p = expect(b, skip(b, p, end), end, '"');
                int ks = p;
                p = endOfString(b, p, end);
                String key = new String(b, ks, p - 1 - ks, StandardCharsets.UTF_8);
                p = skip(b, expect(b, skip(b, p, end), end, ':'), end);
                int vs = p;
                boolean str = p < end && b[p] == '"';
                p = str ? endOfString(b, p + 1, end) : endOfLiteral(b, p, end);
                String val = str ? unescape(b, vs + 1, p - 1) : literal(b, vs, p);
                for (int k = 0; k < KEYS.length; k++) {
                    if (KEYS[k].equals(key)) v[k + 1] = k == EVENT_TIME ? (Object) Long.parseLong(val) : val;
                }
                p = skip(b, p, end);
                if (p >= end) throw bad("',' or '}'", p - off);
                if (b[p++] == '}') break;
                if (b[p - 1] != ',') throw bad("',' or '}'", p - 1 - off);
            }
        }
        if (skip(b, p, end) != end) throw bad("the end", p - off);
        return new Values(v);
    }

    private static int skip(byte[] b, int p, int end) {
        while (p < end && (b[p] == ' ' || b[p] == '\t' || b[p] == '\n' || b[p] == '\r')) p++;
        return p;
    }

    private static int expect(byte[] b, int p, int end, char c) {
        if (p >= end || b[p] != c) throw bad("'" + c + "'", p);
        return p + 1;
    }

    /** From just after an opening quote to just after the closing one. */
    private static int endOfString(byte[] b, int p, int end) {
        while (p < end) {
            byte c = b[p++];
            if (c == '"') return p;
            if (c == '\\') p++;
            else if ((c & 0xff) < 0x20) throw bad("no control character in a string", p);
        }
        throw bad("the end of a string", p);
    }

    private static int endOfLiteral(byte[] b, int p, int end) {
        int s = p;
        while (p < end && b[p] != ',' && b[p] != '}' && b[p] != ' ' && b[p] != '\t' && b[p] != '\n' && b[p] != '\r') {
            if (b[p] == '{' || b[p] == '[' || b[p] == '"') throw bad("a flat value", p);
            p++;
        }
        if (p == s) throw bad("a value", p);
        return p;
    }

    private static String literal(byte[] b, int s, int e) {
        String v = new String(b, s, e - s, StandardCharsets.US_ASCII);
        if (v.equals("null")) return null;
        if (v.equals("true") || v.equals("false")) return v;
        try {
            Double.parseDouble(v);
        } catch (NumberFormatException x) {
            throw bad("a value, not " + v, s);
        }
        return v;
    }

    private static String unescape(byte[] b, int s, int e) {
        int first = s;
        while (first < e && b[first] != '\\') first++;
        if (first == e) return new String(b, s, e - s, StandardCharsets.UTF_8); // no escapes: the common case
        StringBuilder out = new StringBuilder(e - s);
        int run = s; // start of the bytes not yet decoded (UTF-8 between escapes)
        for (int i = s; i < e; i++) {
            if (b[i] != '\\') continue;
            out.append(new String(b, run, i - run, StandardCharsets.UTF_8));
            char c = (char) b[++i];
            switch (c) {
                case 'n' -> out.append('\n');
                case 't' -> out.append('\t');
                case 'r' -> out.append('\r');
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'u' -> {
                    if (i + 4 >= e) throw bad("four hex digits", i);
                    out.append((char) Integer.parseInt(new String(b, i + 1, 4, StandardCharsets.US_ASCII), 16));
                    i += 4;
                }
                case '"', '\\', '/' -> out.append(c);
                default -> throw bad("a JSON escape", i);
            }
            run = i + 1;
        }
        return out.append(new String(b, run, e - run, StandardCharsets.UTF_8)).toString();
    }

    private static IllegalArgumentException bad(String want, int at) {
        return new IllegalArgumentException("ad event JSON: want " + want + " at byte " + at);
    }
}
