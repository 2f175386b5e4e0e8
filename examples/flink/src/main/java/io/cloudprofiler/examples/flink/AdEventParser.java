package io.cloudprofiler.examples.flink;

import io.cloudprofiler.datagen.Deserializer;
import java.nio.charset.StandardCharsets;

/**
 * The object factory's deserializer for the synthetic ad events: a tiny
 * parser of one flat JSON object ({@code {"user_id":"...","page_id":"...",
 * "ad_id":"...","ad_type":"...","event_type":"...","event_time":"...",
 * "ip_address":"..."}}) straight from the frame's bytes. Values are strings,
 * numbers, true, false or null (no nested objects or arrays); unknown keys
 * are skipped; {@code event_time} may be a number or a string of digits.
 * Anything else throws, and the factory drops the tuple (counted in its
 * report). Stateless: the factory calls it from several threads.
 */
public final class AdEventParser implements Deserializer<AdEvent> {
    private static final long serialVersionUID = 1L;

    private static final byte[] USER_ID = key("user_id"), PAGE_ID = key("page_id"), AD_ID = key("ad_id"),
            AD_TYPE = key("ad_type"), EVENT_TYPE = key("event_type"), EVENT_TIME = key("event_time"),
            IP_ADDRESS = key("ip_address");

    private static byte[] key(String k) {
        return k.getBytes(StandardCharsets.US_ASCII);
    }

    @Override
    public AdEvent deserialize(long tupleId, byte[] b, int off, int len) {
        AdEvent e = new AdEvent();
        e.id = tupleId;
        Cursor c = new Cursor(b, off, off + len);
        c.skipSpace();
        c.expect('{');
        c.skipSpace();
        if (c.peek() == '}') {
            c.pos++;
        } else {
            while (true) {
                c.skipSpace();
                c.expect('"');
                int ks = c.pos;
                c.skipString();
                int ke = c.pos - 1; // the key's bytes (escapes in keys: compared as written)
                c.skipSpace();
                c.expect(':');
                c.skipSpace();
                if (is(b, ks, ke, USER_ID)) e.userId = c.value();
                else if (is(b, ks, ke, PAGE_ID)) e.pageId = c.value();
                else if (is(b, ks, ke, AD_ID)) e.adId = c.value();
                else if (is(b, ks, ke, AD_TYPE)) e.adType = c.value();
                else if (is(b, ks, ke, EVENT_TYPE)) e.eventType = c.value();
                else if (is(b, ks, ke, IP_ADDRESS)) e.ipAddress = c.value();
                else if (is(b, ks, ke, EVENT_TIME)) e.eventTime = c.longValue();
                else c.value();
                c.skipSpace();
                int t = c.next();
                if (t == '}') break;
                if (t != ',') throw c.error("',' or '}'");
            }
        }
        c.skipSpace();
        if (c.pos != c.end) throw c.error("the end of the object");
        return e;
    }

    private static boolean is(byte[] b, int from, int to, byte[] key) {
        if (to - from != key.length) return false;
        for (int i = 0; i < key.length; i++) {
            if (b[from + i] != key[i]) return false;
        }
        return true;
    }

    /** A position in the payload. */
    private static final class Cursor {
        final byte[] b;
        final int start, end;
        int pos;

        Cursor(byte[] b, int start, int end) {
            this.b = b;
            this.start = start;
            this.end = end;
            this.pos = start;
        }

        int peek() {
            return pos < end ? b[pos] & 0xff : -1;
        }

        int next() {
            if (pos >= end) throw error("more");
            return b[pos++] & 0xff;
        }

        void expect(char ch) {
            if (next() != ch) {
                pos--;
                throw error("'" + ch + "'");
            }
        }

        void skipSpace() {
            while (pos < end && (b[pos] == ' ' || b[pos] == '\t' || b[pos] == '\n' || b[pos] == '\r')) pos++;
        }

        /** After an opening quote: to just after the closing one. */
        void skipString() {
            while (true) {
                int ch = next();
                if (ch == '"') return;
                if (ch == '\\') next();
                else if (ch < 0x20) throw error("no control character in a string");
            }
        }

        /** A value: a string's text, a number's or literal's text, or null. */
        String value() {
            int ch = peek();
            if (ch == '"') {
                pos++;
                int s = pos;
                boolean escaped = false;
                while (true) {
                    int x = next();
                    if (x == '"') break;
                    if (x == '\\') {
                        escaped = true;
                        next();
                    } else if (x < 0x20) {
                        throw error("no control character in a string");
                    }
                }
                return escaped ? unescape(s, pos - 1) : new String(b, s, pos - 1 - s, StandardCharsets.UTF_8);
            }
            int s = pos;
            while (pos < end && b[pos] != ',' && b[pos] != '}' && b[pos] != ' ' && b[pos] != '\t' && b[pos] != '\n'
                    && b[pos] != '\r') {
                if (b[pos] == '{' || b[pos] == '[' || b[pos] == '"') throw error("a flat value");
                pos++;
            }
            if (pos == s) throw error("a value");
            String v = new String(b, s, pos - s, StandardCharsets.US_ASCII);
            if (v.equals("null")) return null;
            if (!v.equals("true") && !v.equals("false") && !isNumber(v)) throw error("a value, not " + v);
            return v;
        }

        /** A number, or a string of digits (the synthetic events write event_time as a string). */
        long longValue() {
            boolean quoted = peek() == '"';
            if (quoted) pos++;
            long v = 0;
            int s = pos;
            boolean neg = !quoted && peek() == '-';
            if (neg) pos++;
            int digits = 0;
            while (pos < end && b[pos] >= '0' && b[pos] <= '9') {
                v = Math.addExact(Math.multiplyExact(v, 10), b[pos++] - '0');
                digits++;
            }
            if (digits == 0) {
                pos = s;
                throw error("an integer");
            }
            if (quoted) expect('"');
            return neg ? -v : v;
        }

        private static boolean isNumber(String v) {
            try {
                Double.parseDouble(v);
                return !v.isEmpty() && (Character.isDigit(v.charAt(0)) || v.charAt(0) == '-');
            } catch (NumberFormatException e) {
                return false;
            }
        }

        private String unescape(int s, int e) {
            StringBuilder out = new StringBuilder(e - s);
            java.io.ByteArrayOutputStream raw = new java.io.ByteArrayOutputStream();
            for (int i = s; i < e; i++) {
                byte x = b[i];
                if (x != '\\') {
                    raw.write(x);
                    continue;
                }
                flush(raw, out);
                char esc = (char) b[++i];
                switch (esc) {
                    case '"', '\\', '/' -> out.append(esc);
                    case 'b' -> out.append('\b');
                    case 'f' -> out.append('\f');
                    case 'n' -> out.append('\n');
                    case 'r' -> out.append('\r');
                    case 't' -> out.append('\t');
                    case 'u' -> {
                        if (i + 4 >= e) throw error("four hex digits after \\u");
                        out.append((char) Integer.parseInt(new String(b, i + 1, 4, StandardCharsets.US_ASCII), 16));
                        i += 4;
                    }
                    default -> throw error("a JSON escape, not \\" + esc);
                }
            }
            flush(raw, out);
            return out.toString();
        }

        private static void flush(java.io.ByteArrayOutputStream raw, StringBuilder out) {
            if (raw.size() > 0) {
                out.append(raw.toString(StandardCharsets.UTF_8));
                raw.reset();
            }
        }

        IllegalArgumentException error(String want) {
            return new IllegalArgumentException("ad event JSON: want " + want + " at byte " + (pos - start) + " of "
                    + (end - start));
        }
    }
}
